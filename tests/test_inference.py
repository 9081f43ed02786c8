"""Inference cells on the CPU: the spreads, the three phases, accuracy by precision, weights."""

from __future__ import annotations

import json
import math
import random

import pytest
import torch

from nettebench.datasets.synthetic import generate
from nettebench.inference import accuracy, cli, measure
from nettebench.inference.model import InferenceModel
from nettebench.records import spread
from nettebench.study.inference_cells import InferenceSpec
from nettebench.training import checkpoint

CPU = torch.device("cpu")


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    out = tmp_path_factory.mktemp("inference-data")
    generate(out, name="tiny", size=40, train_images=8, val_images=12, num_classes=3, jobs=1,
             progress=False)  # fmt: skip
    return out / "dataset.json"


def test_median_interval_brackets_the_median_and_p99_needs_many_samples():
    rng = random.Random(0)
    xs = [rng.gauss(10, 0.5) for _ in range(1024)]
    found = spread.summary(xs, quantiles=(0.9, 0.99))
    assert found["median_low"] < found["median"] < found["median_high"]
    assert found["p99_low"] < found["p99"] <= found["p99_high"]
    assert found["unstable"] is False  # sd 0.5 on a mean of 10: 5 %
    few = spread.summary(xs[:100], quantiles=(0.99,))
    assert few["p99"] is not None and few["p99_low"] is None  # too few for an interval
    assert spread.summary([1.0, 1.0, 2.0, 1.0])["unstable"] is True  # std >= 10 % of mean


def _fewest_samples(q: float, limit: int) -> int:
    """The fewest n for which a 95 % order-statistic interval of the q-quantile exists, by exact
    integer binomial sums (no library): B ~ Binomial(n, q) samples lie below the true quantile;
    the lower rank j is the largest with P(B <= j - 1) <= 2.5 %, the upper rank k the smallest
    with P(B <= k - 1) >= 97.5 % (else n), and (j, k) must hold P(j <= B <= k - 1) >= 95 %."""
    num, den = round(q * 100), 100  # q = num / den exactly
    for n in range(1, limit):
        scale = den**n  # P(B <= r) * den^n, an integer
        cdf, total = [], 0
        for i in range(n + 1):
            total += math.comb(n, i) * num**i * (den - num) ** (n - i)
            cdf.append(total)
        j = sum(1 for r in range(n) if 40 * cdf[r] <= scale)  # ranks with P(B <= j - 1) <= 1/40
        k = next((r + 1 for r in range(n) if 40 * cdf[r] >= 39 * scale), n)
        if j >= 1 and 20 * (cdf[k - 1] - cdf[j - 1]) >= 19 * scale:
            return n
    raise AssertionError("none below the limit")


def test_an_inference_spread_has_its_exact_interval_from_6_samples_and_p99_from_348():
    assert _fewest_samples(0.5, 20) == 6  # the normal approximation asked for 8
    assert _fewest_samples(0.99, 400) == 348  # ... and for 563
    xs = [float(x) for x in range(1, 349)]
    assert spread.summary(xs[:5])["median_low"] is None
    assert (spread.summary(xs[:6])["median_low"], spread.summary(xs[:6])["median_high"]) == (1, 6)
    assert spread.summary(xs[:347], quantiles=(0.99,))["p99_high"] is None
    p99 = spread.summary(xs, quantiles=(0.99,))
    assert p99["p99_low"] is not None and p99["p99_low"] <= p99["p99"] <= p99["p99_high"]


def test_quantile_interpolates_like_numpy():
    assert spread.sample_quantile([1.0, 2.0, 3.0, 4.0], 0.5) == 2.5
    assert spread.sample_quantile([1.0, 2.0, 3.0, 4.0], 0.9) == pytest.approx(3.7)
    assert spread.scaled({"n": 3, "median": 0.002, "unstable": False}, 1000)["median"] == 2.0


def test_a_batch_one_cell_measures_all_three_phases(data):
    spec = InferenceSpec("tiny", model="resnet18", batch_size=1, image_size=32, workers=0,
                         device="cpu")  # fmt: skip
    budget = measure.Budget(warmup=1, max_seconds=5.0, latency_queries=40, offline_batches=6)
    record = cli.measure_cell(spec, data, budget=budget, threads=1)
    assert record["status"] == "ok", record["message"]
    assert record["offline"]["batches"] == 6 and record["offline"]["img_s"] > 0
    low, high = record["offline"]["img_s_low"], record["offline"]["img_s_high"]
    assert low is not None and low <= record["offline"]["img_s"] <= high  # 6 batches: (1, 6)
    assert record["offline"]["batch_ms"]["n"] == 6
    assert record["pipeline"]["images"] == 12  # a pass of its own after the warm-up's
    assert 0 <= record["pipeline"]["data_wait_share"] < 1
    stream = record["single_stream"]
    assert stream["queries"] == 40 or (stream["capped"] and stream["queries"] >= 1)
    assert stream["latency_ms"]["median"] > 0 and "p99" in stream["latency_ms"]
    assert record["environment"]["cpu_capability"] is not None  # the same records as training
    assert record["conditions"]["wall_s"] > 0 and record["peak_mem_kind"] == "cpu_max_rss"
    assert "SingleStream" in cli.summary_line(record)


def test_a_larger_batch_has_no_single_stream_and_fp16_on_a_cpu_is_a_result(data):
    budget = measure.Budget(warmup=1, max_seconds=1.0, latency_queries=5, offline_batches=3)
    spec = InferenceSpec("tiny", model="resnet18", batch_size=4, image_size=32, workers=0)
    record = cli.measure_cell(spec, data, budget=budget, threads=1)
    assert record["single_stream"] is None and record["offline"]["batches"] == 3
    assert record["pipeline"]["images"] == 12  # a pass of its own after the warm-up's
    if torch.cuda.is_available():
        pytest.skip("fp16 runs here")
    fp16 = InferenceSpec("tiny", model="resnet18", precision="O3", image_size=32)
    refused = cli.measure_cell(fp16, data, budget=budget)
    assert refused["status"] == "unsupported" and "CUDA" in refused["message"]


def test_a_one_batch_split_is_passed_over_again_so_the_pipeline_is_timed(data):
    model = InferenceModel("resnet18", 3, "fp32", CPU, channels_last=False)
    loader = [(torch.randn(4, 3, 32, 32), torch.zeros(4, dtype=torch.int64))]
    found = measure.pipeline(model, loader, measure.Budget(max_seconds=1.0))
    assert found["passes"] == 1 and found["images"] == 4


def _accuracy_args(data, weights, out, batch_size: int, *variants: str):
    """``python -m nettebench inference accuracy``'s parsed options: resnet18 at 32 px on the
    CPU, no loader workers."""
    return cli.build_parser().parse_args(
        ["accuracy", "--data", str(data), "--weights", str(weights), "--out", str(out),
         "--model", "resnet18", "--image-size", "32", "--device", "cpu",
         "--batch-size", str(batch_size), "--workers", "0", "--variants", *variants]
    )  # fmt: skip


def test_weights_round_trip_and_fp32_matches_itself_while_bf16_reports_its_difference(
    data, tmp_path
):
    torch.manual_seed(0)
    trained = InferenceModel("resnet18", 3, "fp32", CPU, channels_last=False).model
    path = checkpoint.save_weights(tmp_path / "weights.pt", trained, "abc")
    saved = accuracy.load_weights(path)
    assert saved["cell_id"] == "abc" and all(
        v.dtype != torch.float16 for v in saved["state_dict"].values()
    )
    args = _accuracy_args(data, path, tmp_path / "a.json", 5, "fp32:0:0", "fp32:1:0", "bf16:1:0",
                          "O1:0:0")  # fmt: skip
    record = cli.accuracy_record(args)
    rows = {(r["precision"], r["channels_last"]): r for r in record["rows"]}
    assert rows[("fp32", False)]["images"] == 12
    assert rows[("fp32", True)]["top1_diff"] == pytest.approx(0, abs=1e-9)
    assert rows[("bf16", True)]["changed_share"] is not None
    if not torch.cuda.is_available():
        assert rows[("O1", False)]["status"] == "unsupported"


def test_a_cell_without_final_weights_says_why(data, tmp_path):
    path = checkpoint.save_weights(tmp_path / "weights.pt", None, "abc")
    metrics = tmp_path / "metrics.json"
    metrics.write_text(json.dumps({"status": "oom", "cell": {}, "summary": {}}))
    out = tmp_path / "accuracy.json"
    code = cli.main(
        ["accuracy", "--data", str(data), "--weights", str(path), "--out", str(out),
         "--model", "resnet18"]
    )  # fmt: skip
    record = json.loads(out.read_text())
    assert code == 0 and record["status"] == "missing" and record["rows"] == []


def test_the_trainer_writes_weights_that_say_why_when_the_cell_did_not_run(data, tmp_path):
    from nettebench.training.cli import run_cell
    from nettebench.vocabulary.cell import CellSpec

    if torch.cuda.is_available():
        pytest.skip("O3 runs here")
    cell = CellSpec("tiny", model="resnet18", precision="O3", device="cpu", epochs=1)
    weights = tmp_path / "cell" / "weights.pt"
    record = run_cell(cell, data, tmp_path / "cell", weights=weights)
    assert record["status"] == "unsupported"
    saved = accuracy.load_weights(weights)
    assert saved == {"cell_id": cell.cell_id(), "state_dict": None}


def test_a_trained_cells_final_weights_give_its_final_top1_in_fp32(data, tmp_path):
    """The same weights on the same validation split through the reference pipeline: fp32
    inference accuracy is the trainer's last-epoch top-1, whatever the batch size."""
    from nettebench.training.cli import run_cell
    from nettebench.vocabulary.cell import CellSpec

    cell = CellSpec("tiny", model="resnet18", device="cpu", epochs=1, batch_size=5, image_size=32,
                    workers=0)  # fmt: skip
    weights = tmp_path / "cell" / "weights.pt"
    trained = run_cell(cell, data, tmp_path / "cell", weights=weights)
    assert trained["status"] == "ok"
    args = _accuracy_args(data, weights, tmp_path / "a.json", 4, "fp32:0:0", "bf16:1:0")
    rows = {row["precision"]: row for row in cli.accuracy_record(args)["rows"]}
    assert rows["fp32"]["images"] == 12
    assert rows["fp32"]["top1"] == pytest.approx(trained["summary"]["final_top1"])
    assert rows["bf16"]["top1_diff"] == pytest.approx(rows["bf16"]["top1"] - rows["fp32"]["top1"])


class _Clock:
    """A perf_counter that moves only when the model classifies a batch (or a loader waits)."""

    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


class _ClockedModel:
    """A model on the CPU whose every call takes the next of ``durations`` on ``clock`` and
    records the batch shape it saw, in order."""

    device = CPU
    compiled = False

    def __init__(self, clock, durations):
        self.clock, self.durations, self.shapes = clock, iter(durations), []

    def prepare(self, images):
        return images

    def __call__(self, images):
        self.shapes.append(tuple(images.shape))
        self.clock.now += next(self.durations)
        return torch.zeros(images.shape[0], 3)


@pytest.fixture
def clock(monkeypatch):
    found = _Clock()
    monkeypatch.setattr(measure.time, "perf_counter", found)
    return found


def test_offline_is_the_median_batch_with_its_interval_from_six_batches(clock):
    timed = [0.10, 0.12, 0.13, 0.14, 0.15, 2.0]  # the mean, 0.44 s, is not the median
    model = _ClockedModel(clock, [9.0, *timed])  # one warm-up batch, then six timed
    budget = measure.Budget(warmup=1, max_seconds=100.0, offline_batches=6)
    found = measure.offline(model, 4, 8, budget)
    median = (0.13 + 0.14) / 2
    assert found["batches"] == 6 and found["img_s"] == pytest.approx(4 / median)
    assert found["img_s_low"] == pytest.approx(4 / 2.0)  # the slow end: the longest batch
    assert found["img_s_high"] == pytest.approx(4 / 0.10)
    ms = found["batch_ms"]
    assert (ms["median"], ms["median_low"], ms["median_high"]) == pytest.approx((135, 100, 2000))
    assert ms["n"] == 6 and ms["mean"] == pytest.approx(1000 * sum(timed) / 6)


def test_single_stream_reports_the_median_latency_and_its_interval(clock):
    latencies = [0.010] * 5 + [0.020] * 2 + [0.500]  # median 10 ms, mean 71 ms
    model = _ClockedModel(clock, [1.0, *latencies])
    queries = [torch.zeros(1, 3, 8, 8)]
    budget = measure.Budget(warmup=1, max_seconds=100.0, latency_queries=8)
    found = measure.single_stream(model, queries, budget)
    ms = found["latency_ms"]
    assert found["queries"] == 8 and found["capped"] is False
    assert ms["median"] == pytest.approx(10.0) and ms["median_low"] == pytest.approx(10.0)
    assert ms["median_high"] == pytest.approx(500.0)  # ranks (1, 8) of 8
    assert ms["median_low"] <= ms["median"] <= ms["median_high"]
    assert found["qps"] == pytest.approx(8 / sum(latencies))


def test_the_pipeline_is_images_over_time_and_times_no_new_batch_shape(clock):
    """10 images in batches of 4: 4, 4, 2. The short batch's shape is met before the clock
    starts (a new shape inside the timed loop would recompile or autotune there)."""
    dataset = torch.utils.data.TensorDataset(torch.randn(10, 3, 8, 8), torch.zeros(10))
    loader = torch.utils.data.DataLoader(dataset, batch_size=4)
    model = _ClockedModel(clock, [5.0, 5.0, 0.2, 0.2, 0.1])  # two warm-ups, then timed
    found = measure.pipeline(model, loader, measure.Budget(max_seconds=100.0))
    timed = model.shapes[-3:]  # a whole pass after the warm-up
    assert [s[0] for s in timed] == [4, 4, 2]
    assert set(timed) <= set(model.shapes[:-3])  # every timed shape was warmed up
    assert found["images"] == 10 and found["img_s"] == pytest.approx(10 / 0.5)
    assert found["batch_ms"]["median"] == pytest.approx(200)  # full batches only
    dropped = torch.utils.data.DataLoader(dataset, batch_size=4, drop_last=True)
    assert measure._short_batches(dropped, 4) == [] and measure._short_batches(loader, 4) == [2]
