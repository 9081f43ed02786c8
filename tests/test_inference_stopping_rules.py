"""inference.measure's stopping rules, its GPU phase and its edge cases, on a clock the model
moves: every duration is chosen, so each phase's count, cap and rate is worked out by hand.

The GPU path runs here with CUDA's events replaced by ones that read the same clock (a CPU
twin: the events' pairing and the one synchronisation at the end are logic, not hardware).
"""

from __future__ import annotations

import pytest
import torch

from nettebench.inference import measure

CPU, GPU = torch.device("cpu"), torch.device("cuda")


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


class Model:
    """Each call takes the next of ``durations`` (the last one repeated) on ``clock``."""

    compiled = False

    def __init__(self, clock, durations, device=CPU):
        self.clock, self.durations, self.device = clock, list(durations), device
        self.calls = 0

    def prepare(self, images):
        return images

    def __call__(self, images):
        self.clock.now += self.durations[min(self.calls, len(self.durations) - 1)]
        self.calls += 1
        return torch.zeros(images.shape[0], 3)


@pytest.fixture
def clock(monkeypatch):
    found = Clock()
    monkeypatch.setattr(measure.time, "perf_counter", found)
    return found


@pytest.fixture
def synced(monkeypatch, clock):
    """Where the clock stood at each device synchronisation (none happens for real)."""
    found = []
    monkeypatch.setattr(measure, "synchronize", lambda device: found.append((device, clock.now)))
    return found


@pytest.fixture
def events(monkeypatch, clock):
    """CUDA events that record ``clock``; the list of those the host waited on."""
    waited = []

    class Event:
        def __init__(self, enable_timing=False):
            assert enable_timing
            self.at = None

        def record(self):
            self.at = clock.now

        def synchronize(self):
            waited.append(self)

        def elapsed_time(self, end):
            return (end.at - self.at) * 1000  # ms, as CUDA's

    monkeypatch.setattr(torch.cuda, "Event", Event)
    return waited


def batches(*sizes):
    return [(torch.zeros(n, 3, 4, 4), torch.zeros(n)) for n in sizes]


def test_warm_up_stops_after_a_third_of_the_cap_on_any_device(clock):
    budget = measure.Budget(warmup=10, max_seconds=6.0)
    for device in (CPU, GPU):
        model = Model(clock, [1.0], device=device)
        assert measure._warm(lambda m=model: m(torch.zeros(1)), budget) == 3  # 3 s > 2 s
    fast = Model(clock, [0.0])
    assert measure._warm(lambda: fast(torch.zeros(1)), budget) == 10


def test_cpu_batches_stop_past_the_cap_but_never_below_three(clock, synced):
    model = Model(clock, [0.5])

    def timed(max_seconds, count=10):
        budget = measure.Budget(max_seconds=max_seconds)
        return measure._cpu_times(lambda: model(torch.zeros(1)), CPU, count, budget)

    assert timed(1.5) == [0.5] * 4  # 1.5 s is not past 1.5 s; 2.0 s is
    assert timed(0.1) == [0.5] * 3  # past the cap at once, yet three batches
    assert timed(100.0, count=5) == [0.5] * 5
    # each batch's clock is read after the device finished it
    assert synced[:4] == [(CPU, 0.5), (CPU, 1.0), (CPU, 1.5), (CPU, 2.0)]


def test_gpu_batches_are_timed_by_events_waited_on_once(clock, events):
    model = Model(clock, [0.1, 0.3, 0.2])
    seconds = measure._cuda_times(lambda: model(torch.zeros(1)), 3, measure.Budget())
    assert seconds == pytest.approx([0.1, 0.3, 0.2])
    assert len(events) == 1 and events[0].at == pytest.approx(0.6)  # the last event only


def test_gpu_batches_stop_being_queued_past_the_cap_but_never_below_three(clock, events):
    model = Model(clock, [0.5])
    call = lambda: model(torch.zeros(1))  # noqa: E731
    assert measure._cuda_times(call, 10, measure.Budget(max_seconds=1.5)) == [0.5] * 4
    assert measure._cuda_times(call, 10, measure.Budget(max_seconds=0.1)) == [0.5] * 3
    assert len(events) == 2  # each run waited on its last event only


def test_offline_on_a_gpu_warms_up_within_the_cap_and_times_by_events(clock, events, synced):
    model = Model(clock, [9.0, 0.1, 0.3, 0.2], device=GPU)
    budget = measure.Budget(warmup=2, max_seconds=15.0, offline_batches=3)
    found = measure.offline(model, 8, 4, budget)
    assert model.calls == 4 and found["batches"] == 3  # one warm-up batch: 9 s > 15 s / 3
    assert found["img_s"] == pytest.approx(8 / 0.2)  # the median batch
    assert found["img_s_low"] is None and found["img_s_high"] is None  # 3 batches: no interval
    assert found["batch_ms"]["median"] == pytest.approx(200) and found["compile_s"] is None


def test_offline_times_a_compiled_models_first_call_apart(clock):
    model = Model(clock, [0.1])
    model.compiled = True
    first = []
    model.first_call_s = lambda images: first.append(tuple(images.shape)) or 12.5
    found = measure.offline(model, 2, 5, measure.Budget(warmup=0, offline_batches=3))
    assert found["compile_s"] == 12.5 and first == [(2, 3, 5, 5)]


def test_an_empty_split_has_no_rate():
    assert measure.pipeline(Model(Clock(), [1.0]), [], measure.Budget()) == {
        "img_s": None,
        "images": 0,
    }


def test_a_cpu_pipeline_stops_past_the_cap_but_never_below_three_batches(clock):
    def images(max_seconds):
        model = Model(clock, [0.5])
        return measure.pipeline(model, batches(*[4] * 11), measure.Budget(max_seconds=max_seconds))

    assert images(1.5)["images"] == 16  # 1.5 s is not past 1.5 s; the fourth batch is
    assert images(0.1)["images"] == 12  # past the cap at once, yet three batches
    whole = images(100.0)  # the warm-up's batch, then every batch of a fresh pass
    assert whole["images"] == 44 and whole["passes"] == 1 and whole["seconds"] == 5.5
    assert whole["capped"] is False and images(1.5)["capped"] is True


def test_a_gpu_pipeline_stops_past_the_cap_too(clock, synced):
    model = Model(clock, [0.5], device=GPU)
    found = measure.pipeline(model, batches(*[4] * 11), measure.Budget(max_seconds=1.5))
    assert found["images"] == 16 and found["capped"] is True and found["passes"] == 1


def test_a_short_gpu_pass_is_repeated_until_a_second_is_timed(clock, synced):
    model = Model(clock, [0.25], device=GPU)
    found = measure.pipeline(model, batches(4), measure.Budget())
    # the split's one batch warms the model; then one timed batch a pass until 1 s
    assert found["images"] == 16 and found["seconds"] == 1.0 and found["img_s"] == 16.0
    assert found["passes"] == 4 and synced == [(GPU, 0.25)]


def test_repeating_a_short_gpu_pass_stops_at_twenty(clock, synced):
    model = Model(clock, [0.001], device=GPU)
    found = measure.pipeline(model, batches(4), measure.Budget())
    assert found["passes"] == 20 and found["images"] == 4 * 20


class Waiting:
    """Batches of 4 that each take ``wait`` seconds to arrive (no dataset: no short batch)."""

    def __init__(self, clock, count, wait):
        self.clock, self.count, self.wait = clock, count, wait

    def __iter__(self):
        for images, targets in batches(*[4] * self.count):
            self.clock.now += self.wait
            yield images, targets


def test_the_pipeline_records_its_wait_for_batches_apart(clock):
    model = Model(clock, [0.3])
    found = measure.pipeline(model, Waiting(clock, 4, 0.1), measure.Budget(max_seconds=100.0))
    # four timed batches (a pass of their own after the warm-up's), each 0.1 s waited and
    # 0.3 s classified: 16 images in 1.6 s
    assert found["images"] == 16 and found["seconds"] == pytest.approx(1.6)
    assert found["img_s"] == pytest.approx(16 / (4 * (0.1 + 0.3)))
    assert found["data_wait_share"] == pytest.approx(0.25)
    assert found["batch_ms"]["median"] == pytest.approx(400) and found["batch_ms"]["n"] == 4


def test_a_pipeline_timed_at_no_time_has_no_rate(clock):
    found = measure.pipeline(Model(clock, [0.0]), batches(4, 4), measure.Budget())
    assert found["images"] == 8 and found["img_s"] is None and found["data_wait_share"] is None


def test_the_short_batch_sizes_a_loader_will_yield():
    dataset = torch.utils.data.TensorDataset(torch.zeros(8, 1))
    whole = torch.utils.data.DataLoader(dataset, batch_size=4)
    assert measure._short_batches(whole, 4) == []  # 8 = 2 x 4: no short batch
    unbatched = torch.utils.data.DataLoader(dataset, batch_size=None)
    assert measure._short_batches(unbatched, 4) == []
    listed = batches(4, 2, 3, 2, 4)
    assert measure._short_batches(listed, 4) == [2, 3]
    assert measure._short_batches(tuple(listed), 4) == [2, 3]
    assert measure._short_batches(iter(listed), 4) == []  # unknown ahead of time


def test_single_stream_on_a_cpu_is_capped_and_says_so(clock):
    model = Model(clock, [0.1])
    queries = [torch.zeros(1, 3, 4, 4)]
    budget = measure.Budget(warmup=0, max_seconds=0.25, latency_queries=8)
    found = measure.single_stream(model, queries, budget)
    assert found["queries"] == 3 and found["queries_asked"] == 8 and found["capped"] is True
    assert found["qps"] == pytest.approx(10.0)
    # the cap reached on the last query asked for: every query ran, nothing was capped
    exact = measure.Budget(warmup=0, max_seconds=0.25, latency_queries=3)
    assert measure.single_stream(Model(clock, [0.1]), queries, exact)["capped"] is False


def test_single_stream_on_a_gpu_is_capped_too(clock):
    model = Model(clock, [0.1], device=GPU)
    queries = [torch.zeros(1, 3, 4, 4)]
    budget = measure.Budget(warmup=2, max_seconds=0.25, latency_queries=8)
    found = measure.single_stream(model, queries, budget)
    # warm-up: 0.2 s > 0.25 / 3 after the first query; then 0.3 s > 0.25 s after three
    assert found["queries"] == 3 and found["capped"] is True and model.calls == 1 + 3


class Decoding(torch.utils.data.Dataset):
    """Images a loader worker takes ``seconds`` each to make; each notes, in ``log``, when its
    making began and ended (the raw records the expected rate is computed from)."""

    def __init__(self, log, count, seconds):
        self.log, self.count, self.seconds = log, count, seconds

    def __len__(self):
        return self.count

    def __getitem__(self, index):
        import time

        began = time.perf_counter()
        time.sleep(self.seconds)
        with open(self.log, "a") as handle:
            handle.write(f"{began} {time.perf_counter()}\n")
        return torch.zeros(3, 4, 4), 0


class SlowFirst:
    """A model whose first call takes ``first_s`` (cuDNN autotuning, a compile), the rest none."""

    device, compiled = CPU, False

    def __init__(self, first_s):
        self.first_s, self.calls = first_s, 0

    def prepare(self, images):
        return images

    def __call__(self, images):
        import time

        time.sleep(self.first_s if self.calls == 0 else 0)
        self.calls += 1
        return torch.zeros(images.shape[0], 3)


def test_the_pipeline_is_never_faster_than_its_one_worker_makes_images(tmp_path):
    """One loader worker makes an image in 40 ms: no pass through it reaches more than 25 img/s.
    Warming the model on the same loader's first batch let the worker make two more batches
    meanwhile, which the clock then met already waited for (about 42 img/s)."""
    import statistics

    log = tmp_path / "made.txt"
    loader = torch.utils.data.DataLoader(Decoding(log, 24, 0.04), batch_size=4, num_workers=1)
    found = measure.pipeline(SlowFirst(1.0), loader, measure.Budget(max_seconds=100.0))
    made = [tuple(map(float, line.split())) for line in log.read_text().splitlines()]
    per_image = statistics.median(end - began for began, end in made)
    assert found["images"] == 24 and found["img_s"] <= 1.02 / per_image


def test_the_budgets_defaults_are_the_workflows():
    """A caller of the library measures what a workflow cell measures by default: the section's
    run settings (study.inference_cells) and the timed batches docs/inference.md states."""
    import re
    from pathlib import Path

    from nettebench.study.inference_cells import SETTINGS

    budget = measure.Budget()
    assert budget.warmup == SETTINGS["warmup"]
    assert budget.max_seconds == SETTINGS["max_seconds"]
    assert budget.latency_queries == SETTINGS["latency_queries"]
    docs = Path(__file__).resolve().parents[1] / "docs" / "inference.md"
    stated = re.search(r"then (\d+) batches each timed", docs.read_text().replace("\n  ", " "))
    assert budget.offline_batches == int(stated.group(1))


def test_the_pipelines_batch_time_is_of_full_batches(clock):
    model = Model(clock, [1.0, 1.0, 0.2, 0.4, 0.1, 0.1])  # first, the short shape's, timed
    found = measure.pipeline(model, batches(4, 4, 4, 2), measure.Budget(max_seconds=100.0))
    assert found["images"] == 14 and found["seconds"] == pytest.approx(0.8)
    assert found["batch_ms"]["n"] == 3 and found["batch_ms"]["median"] == pytest.approx(200)


def test_a_loaders_short_last_batch_is_warmed_even_of_one_image():
    """9 images in batches of 4: the last batch holds 1 (warmed); with ``drop_last`` it never
    comes; a split smaller than one batch has only that batch (its shape is the first's)."""
    dataset = torch.utils.data.TensorDataset(torch.zeros(9, 1))
    assert measure._short_batches(torch.utils.data.DataLoader(dataset, batch_size=4), 4) == [1]
    dropped = torch.utils.data.DataLoader(dataset, batch_size=4, drop_last=True)
    assert measure._short_batches(dropped, 4) == []
    small = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.zeros(3, 1)), 4)
    assert measure._short_batches(small, 3) == []  # the first batch is 3: nothing shorter


def test_single_stream_reaching_the_cap_exactly_runs_on(clock):
    """Queries of 0.25 s (exact in binary) under a 0.5 s cap: at 0.5 s the cap is reached, not
    passed, so a third query runs; 0.75 s is past it."""
    model = Model(clock, [0.25])
    budget = measure.Budget(warmup=0, max_seconds=0.5, latency_queries=8)
    found = measure.single_stream(model, [torch.zeros(1, 3, 4, 4)], budget)
    assert found["queries"] == 3 and found["capped"] is True and model.calls == 3
