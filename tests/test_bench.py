"""The compute ceiling: timed training steps on a batch already on the device, no input pipeline."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import pytest
import torch

from nettebench.benchmarks import ceiling as bench
from nettebench.training.step import TrainingStep
from nettebench.vocabulary.cell import CellSpec

TINY = dict(image_size=32, device="cpu", warmup_steps=2, steps=3, threads=1)


@pytest.fixture(autouse=True)
def keep_torch_threads():
    """``threads`` sets torch's process-wide thread count; give other tests theirs back."""
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


def test_measures_steps_on_the_cpu():
    record = bench.measure_ceiling("resnet18", "O0", 4, **TINY)
    assert list(record) == list(bench.CEILING_KEYS)
    assert record["status"] == "ok" and record["message"] is None
    assert record["img_s"] > 0
    assert record["img_s"] == pytest.approx(4 / (record["step_ms_median"] / 1000), rel=1e-9)
    assert record["step_ms_p10"] <= record["step_ms_median"] <= record["step_ms_p90"]
    assert record["steps"] == 3 and record["warmup_steps"] == 2
    assert record["peak_mem_kind"] == "cpu_max_rss" and record["peak_mem_mb"] > 0
    assert record["device"] == {"type": "cpu", "name": record["device"]["name"], "threads": 1}
    assert record["batch_size"] == record["batch_size_requested"] == 4
    cell = CellSpec(dataset="ceiling", model="resnet18", batch_size=4, image_size=32, device="cpu")
    assert record["cell"] == cell.as_dict() and record["cell_id"] == cell.cell_id()
    assert record["environment"]["torch"] == torch.__version__
    line = bench.summary_line(record)
    assert line.startswith("resnet18 O0 batch 4 on ")
    # the cell's log holds its training img/s too: this number says it is the ceiling's
    assert f": compute ceiling {record['img_s']:,.0f} img/s (no input pipeline;" in line


def test_a_mode_the_device_cannot_run_is_unsupported():
    record = bench.measure_ceiling("resnet18", "O1", 4, **TINY)
    assert record["status"] == "unsupported"
    assert "float16 training needs CUDA" in record["message"]
    assert record["img_s"] is None and record["step_ms_median"] is None
    assert "unsupported" in bench.summary_line(record)


def test_out_of_memory_is_a_result_naming_the_batch_size(monkeypatch):
    def fail(self, images, targets):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    monkeypatch.setattr(TrainingStep, "step", fail)
    record = bench.measure_ceiling("resnet18", "O0", 4, **TINY)
    assert record["status"] == "oom" and record["img_s"] is None
    assert "batch size 4" in record["message"] and "2.00 GiB" in record["message"]
    assert "e.g. 2" in record["message"]


def test_auto_batch_size_halves_until_a_step_fits(monkeypatch):
    real_step = TrainingStep.step

    def fits_64(self, images, targets):
        if images.shape[0] > 64:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 1.00 GiB")
        return real_step(self, images, targets)

    monkeypatch.setattr(TrainingStep, "step", fits_64)
    options = {**TINY, "image_size": 16, "warmup_steps": 0, "steps": 1}
    record = bench.measure_ceiling("resnet18", "O0", "auto", **options)
    assert record["status"] == "ok"
    assert record["batch_size"] == 64 and record["batch_size_requested"] == "auto"
    assert bench.summary_line(record).startswith("resnet18 O0 batch 64 on ")


def test_channels_last_reaches_the_inputs(monkeypatch):
    real_step = TrainingStep.step
    seen = []

    def spy(self, images, targets):
        seen.append(images.is_contiguous(memory_format=torch.channels_last))
        return real_step(self, images, targets)

    monkeypatch.setattr(TrainingStep, "step", spy)
    record = bench.measure_ceiling(
        "resnet18", "O0", 2, **{**TINY, "channels_last": True, "warmup_steps": 0, "steps": 1}
    )
    assert record["status"] == "ok" and record["channels_last"] is True
    assert seen == [True]


def test_pretrained_weights_are_not_fetched_for_a_ceiling(monkeypatch):
    """Weights do not change a step's speed; the cell still records that it asked for them."""
    from nettebench.training import runner  # where the ceiling's runner looks build_model up

    real_build = runner.build_model
    asked = []

    def build(name, num_classes, *, pretrained=False, **kwargs):
        asked.append(pretrained)
        return real_build(name, num_classes, pretrained=pretrained, **kwargs)

    monkeypatch.setattr(runner, "build_model", build)
    options = {**TINY, "warmup_steps": 0, "steps": 1}
    record = bench.measure_ceiling("resnet18", "O0", 2, pretrained=True, lr=0.5, **options)
    assert record["status"] == "ok" and asked == [False]
    assert record["cell"]["pretrained"] is True and record["cell"]["lr"] == 0.5


def test_percentiles_bracket_the_median():
    assert bench._percentiles([5.0]) == (5.0, 5.0)
    p10, p90 = bench._percentiles([1.0, 2.0, 3.0, 4.0, 100.0])
    assert 1.0 <= p10 <= 3.0 <= p90 <= 100.0


def test_parser_takes_the_trainers_cell_options():
    cell = CellSpec(dataset="d", model="resnet18", batch_size=4, image_size=32, epochs=3)
    args = bench.build_parser().parse_args([*cell.cli_args(), "--out", "x.json"])
    assert (args.model, args.batch_size, args.image_size, args.out) == ("resnet18", 4, 32, "x.json")
    assert (args.steps, args.warmup_steps, args.num_classes) == (30, 10, 10)
    assert args.channels_last == "auto"
    assert bench.build_parser().parse_args(["--channels-last", "true"]).channels_last


def test_cli_writes_json_from_a_cells_arguments(tmp_path):
    cell = CellSpec(dataset="d", model="resnet18", batch_size=4, image_size=32, epochs=3)
    out = tmp_path / "sub" / "ceiling.json"
    command = [
        sys.executable,
        "-m",
        "nettebench",
        "benchmarks",
        "ceiling",
        "--out",
        str(out),
        "--threads",
        "1",
    ]
    options = ["--device", "cpu", "--warmup-steps", "1", "--steps", "2"]
    done = subprocess.run(
        [*command, *cell.cli_args(), *options], capture_output=True, text=True, check=True
    )
    record = json.loads(out.read_text())
    assert list(record) == list(bench.CEILING_KEYS)
    assert record["status"] == "ok" and record["batch_size"] == 4 and record["image_size"] == 32
    assert record["device"]["threads"] == 1 and record["steps"] == 2
    assert record["cell_id"] == dataclasses.replace(cell, device="cpu").cell_id()
    line = done.stdout.strip()
    # a loaded machine adds "; timed under interference: ..." (records/conditions), rightly
    timing = line.split("; timed under interference")[0]
    assert line.startswith("resnet18 O0 batch 4 on ") and timing.endswith(" ms)")
    assert f"{record['img_s']:,.0f} img/s" in line
    assert not list(out.parent.glob(".*.tmp"))  # written atomically, nothing left behind


def test_cpu_timing_stops_at_its_time_budget_but_not_before_its_floors(monkeypatch):
    """A slow step (a big batch on a CPU) ends the timed loop early, not after 30 steps, but
    only once 10 steps are timed after 3 warm-up steps: a ceiling is compared by its p10, which
    3 steps after 1 warm-up made the median of steps still paying for first use. Fewer steps
    than the floors, asked for, are what is run."""
    monkeypatch.setattr(bench, "MAX_SECONDS", 0.0)
    record = bench.measure_ceiling("resnet18", "O0", 2, **{**TINY, "warmup_steps": 5, "steps": 30})
    assert record["status"] == "ok"
    assert (record["steps"], record["warmup_steps"]) == (10, 3)
    asked = bench.measure_ceiling("resnet18", "O0", 2, **{**TINY, "warmup_steps": 1, "steps": 4})
    assert (asked["steps"], asked["warmup_steps"]) == (4, 1)


def test_a_missing_apex_amp_is_one_line_not_a_traceback(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "apex", None)  # hides an installed apex, if any
    argv = ["--model", "resnet18", "--precision", "O1", "--amp-backend", "apex"]
    status = bench.main([*argv, "--batch-size", "2", "--image-size", "32", "--device", "cpu"])
    err = capsys.readouterr().err
    assert status == 1
    assert err.startswith("error: amp_backend: apex needs NVIDIA apex's `apex.amp`")
    assert err.count("\n") == 1 and "Traceback" not in err
