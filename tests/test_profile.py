"""The profile command on the CPU: every file, totals that agree with the window and with
torch.profiler's own numbers, and the outcomes that are not a profile."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import stat

import pytest
import torch
from PIL import Image

from nettebench.profiling import OUTPUT_FILES
from nettebench.profiling import cli as profile_cli
from nettebench.profiling.backends import BackendUnavailable, check, unavailable_reason
from nettebench.profiling.categories import CATEGORIES
from nettebench.profiling.summaries import read_csv
from nettebench.profiling.trace import summarise

STEPS = 3
CELL = ["--dataset", "tiny", "--model", "resnet18", "--batch-size", "6", "--image-size", "32"]


@pytest.fixture(autouse=True)
def keep_torch_threads():
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def tiny_tree(tmp_path_factory):
    """A 3-class ImageFolder tree of small solid-colour JPEGs."""
    root = tmp_path_factory.mktemp("tiny")
    for split, count in (("train", 8), ("val", 4)):
        for index, colour in enumerate([(200, 30, 30), (30, 200, 30), (30, 30, 200)]):
            folder = root / split / f"class{index}"
            folder.mkdir(parents=True)
            for i in range(count):
                Image.new("RGB", (40, 36), colour).save(folder / f"{i}.JPEG")
    return root


@pytest.fixture(scope="module")
def profiled(tiny_tree, tmp_path_factory):
    """One real torch-backend profile: 2 warm-up steps, then a window of STEPS (more steps than
    an epoch of 4 batches holds, so the window crosses into the next epoch)."""
    out = tmp_path_factory.mktemp("profile")
    argv = ["--data", str(tiny_tree), "--out-dir", str(out), "--workers", "0", *CELL]
    argv += ["--warmup-steps", "2", "--steps", str(STEPS), "--threads", "1"]
    threads = torch.get_num_threads()
    assert profile_cli.main(argv) == 0
    torch.set_num_threads(threads)
    return out, json.loads((out / "profile.json").read_text())


def test_every_output_file_is_written(profiled):
    out, record = profiled
    for name in OUTPUT_FILES.values():
        assert (out / name).is_file(), name
    assert record["status"] == "ok" and record["backend"] == "torch"
    assert record["tool"]["name"] == "torch.profiler"
    assert record["device"]["type"] == "cpu"
    # what else the machine did during the warm-up and window (records.conditions)
    assert record["conditions"]["own_cpu_s"] > 0 and "interference" in record["conditions"]
    trace = json.loads(gzip.decompress((out / "trace.json.gz").read_bytes()))
    assert any(e.get("cat") == "cpu_op" for e in trace["traceEvents"])  # opens as a Chrome trace


def test_the_window_profiled_exactly_its_steps(profiled):
    out, record = profiled
    window = record["window"]
    assert window["steps"] == window["steps_profiled"] == STEPS
    assert window["warmup_steps"] == 2 and window["batch_size"] == 6
    trace = json.loads(gzip.decompress((out / "trace.json.gz").read_bytes()))
    steps = [e for e in trace["traceEvents"] if e.get("name", "").startswith("ProfilerStep#")]
    assert len(steps) == STEPS
    # the trace's step ranges and the window's own synchronised clock tell the same time
    assert window["steps_span_ms"] == pytest.approx(1000 * window["wall_s"], rel=0.05)


def test_totals_agree_with_the_window_and_the_tables(profiled):
    out, record = profiled
    totals = record["totals"]
    cpu_ops = read_csv(out / "cpu_ops.csv")
    self_ms = sum(float(row["self_ms"]) for row in cpu_ops)
    assert self_ms == pytest.approx(totals["cpu_self_ms"], rel=1e-6)
    # every millisecond of the steps is some operator's self time, none counted twice
    assert totals["step_thread_self_ms"] == pytest.approx(
        record["window"]["steps_span_ms"], rel=1e-3
    )
    assert sum(float(row["share_pct"]) for row in cpu_ops) == pytest.approx(100, rel=1e-4)
    step_row = next(row for row in cpu_ops if row["name"] == "ProfilerStep*")
    assert int(step_row["calls"]) == STEPS


def test_on_a_cpu_kernel_tables_are_empty_and_categories_come_from_operators(profiled):
    out, record = profiled
    assert read_csv(out / "kernels.csv") == [] and read_csv(out / "api.csv") == []
    assert record["category_source"] == "cpu_ops"
    assert any("no GPU kernels" in note for note in record["notes"])
    categories = read_csv(out / "categories.csv")
    assert [row["category"] for row in categories] == list(CATEGORIES)
    by = {row["category"]: float(row["total_ms"]) for row in categories}
    assert sum(by.values()) == pytest.approx(record["totals"]["cpu_self_ms"], rel=1e-4)
    assert max(by, key=by.get) == "convolution"  # a ResNet step on a CPU is mostly convolutions
    per_step = {row["category"]: float(row["ms_per_step"]) for row in categories}
    assert per_step["convolution"] == pytest.approx(by["convolution"] / STEPS, rel=1e-4)


def test_operator_self_times_match_torch_profilers_own():
    """The trace-based table against torch.profiler's key_averages on the same run."""
    from torch.profiler import ProfilerActivity, profile, schedule

    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3), torch.nn.BatchNorm2d(8), torch.nn.ReLU(), torch.nn.Flatten(),
        torch.nn.LazyLinear(4),
    )  # fmt: skip
    images, targets = torch.randn(4, 3, 16, 16), torch.randint(0, 4, (4,))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

    def step():
        loss = torch.nn.functional.cross_entropy(model(images), targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    step()
    traces = []
    with profile(
        activities=[ProfilerActivity.CPU],
        schedule=schedule(wait=0, warmup=1, active=2, repeat=1),
        on_trace_ready=lambda prof: traces.append(prof),
    ) as prof:
        for _ in range(3):
            step()
            prof.step()
    path = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"nettebench-{os.getpid()}.json")
    try:
        traces[0].export_chrome_trace(path)
        with open(path) as handle:
            summary = summarise(json.load(handle))
    finally:
        os.unlink(path)
    ours = {row["name"]: row for row in summary.tables.cpu_ops}
    theirs = {event.key: event for event in prof.key_averages()}
    for name in ("aten::convolution", "aten::native_batch_norm", "aten::addmm", "aten::add_"):
        assert name in ours, name
        assert ours[name]["calls"] == theirs[name].count
        assert ours[name]["self_ms"] == pytest.approx(
            theirs[name].self_cpu_time_total / 1000, rel=1e-3, abs=2e-3
        )
        assert ours[name]["total_ms"] == pytest.approx(
            theirs[name].cpu_time_total / 1000, rel=1e-3, abs=2e-3
        )


def test_a_precision_the_device_cannot_run_is_a_result(tiny_tree, tmp_path, capsys):
    argv = ["--data", str(tiny_tree), "--out-dir", str(tmp_path), *CELL, "--precision", "O1"]
    assert profile_cli.main([*argv, "--device", "cpu"]) == 0
    record = json.loads((tmp_path / "profile.json").read_text())
    assert record["status"] == "unsupported" and "O1" in record["message"]
    for name in OUTPUT_FILES.values():
        assert (tmp_path / name).is_file(), name
    assert read_csv(tmp_path / "kernels.csv") == []


def test_a_backend_not_on_path_fails_naming_why_and_what_can(tiny_tree, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    argv = ["--data", str(tiny_tree), "--out-dir", str(tmp_path / "out"), *CELL]
    assert profile_cli.main([*argv, "--backend", "nsys"]) == 1
    assert not (tmp_path / "out" / "profile.json").exists()  # failed before any work


def _bin_with(tmp_path, *tools):
    folder = tmp_path / "bin"
    folder.mkdir(parents=True, exist_ok=True)
    for tool in tools:
        path = folder / tool
        path.write_text("#!/bin/sh\nexit 0\n")
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return lambda name: shutil.which(name, path=str(folder))


def test_backend_reasons(tmp_path):
    which = _bin_with(tmp_path, "nsys", "nvprof")
    assert unavailable_reason("torch", device_type="cpu") is None
    assert unavailable_reason("nsys", device_type="cuda", which=which) is None
    assert "CUDA" in unavailable_reason("nsys", device_type="cpu", which=which)
    assert unavailable_reason("nvprof", device_type="cuda", capability=(7, 5), which=which) is None
    reason = unavailable_reason(
        "nvprof", device_type="cuda", capability=(9, 0), gpu_name="NVIDIA H200", which=which
    )
    assert "8.0" in reason and "NVIDIA H200" in reason and "9.0" in reason
    nothing = _bin_with(tmp_path / "other")
    assert "not on PATH" in unavailable_reason("nsys", device_type="cuda", which=nothing)


def test_check_names_the_backends_that_can_run(tmp_path):
    which = _bin_with(tmp_path, "nsys", "nvprof")
    with pytest.raises(BackendUnavailable) as error:
        check("nvprof", device_type="cuda", capability=(9, 0), which=which)
    assert "Backends that can: torch, nsys" in str(error.value)
    check("nvprof", device_type="cuda", capability=(6, 1), which=which)  # a Pascal GPU: fine
