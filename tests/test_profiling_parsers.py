"""The summary tables and what each backend's output is read from: torch.profiler's Chrome
trace (Kineto), ``nsys stats`` CSV reports in their real column layout, nvprof's CSV summary."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nettebench.profiling import nsys_backend, nvprof_backend
from nettebench.profiling.categories import CATEGORIES
from nettebench.profiling.summaries import category_rows, collect, timing_rows
from nettebench.profiling.trace import read_events, self_times, summarise

FIXTURES = Path(__file__).parent / "fixtures"
NSYS = FIXTURES / "nsys"
CONV = "sm80_xmma_fprop_implicit_gemm_f16f16_f16f32_f32_nhwckrsc_nhwc_tilesize256x64x32"
ADD = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>"


def test_timing_rows_have_nvprofs_columns_and_shares_that_add_up():
    rows = timing_rows(
        collect([("a", 10.0), ("b", 30.0), ("a", 20.0), ("c", 40.0)]).values(),
        with_category=True,
    )
    assert [r["name"] for r in rows] == ["c", "a", "b"]  # largest total first
    a = rows[1]
    assert (a["calls"], a["total_ms"], a["avg_us"], a["min_us"], a["max_us"]) == (
        2,
        0.03,
        15.0,
        10.0,
        20.0,
    )
    assert sum(r["share_pct"] for r in rows) == pytest.approx(100)
    assert a["share_pct"] == pytest.approx(30)


def test_category_rows_list_every_category_and_divide_by_steps():
    stats = collect([(CONV, 600.0), (ADD, 200.0), (ADD, 200.0)])
    kernels = timing_rows(stats.values(), with_category=True)
    rows = category_rows(kernels, source="gpu_kernels", time_column="total_ms", steps=4)
    assert [r["category"] for r in rows] == list(CATEGORIES)
    by = {r["category"]: r for r in rows}
    assert by["convolution"]["total_ms"] == pytest.approx(0.6)
    assert by["convolution"]["ms_per_step"] == pytest.approx(0.15)
    assert by["elementwise"]["calls"] == 2
    assert by["GEMM"]["total_ms"] == 0
    assert sum(r["share_pct"] for r in rows) == pytest.approx(100)


def _kineto_trace(old_names: bool) -> dict:
    """A two-step GPU trace in Kineto's Chrome format (the old or the new category names)."""
    cat = {
        "kernel": "Kernel" if old_names else "kernel",
        "runtime": "Runtime" if old_names else "cuda_runtime",
        "memcpy": "Memcpy" if old_names else "gpu_memcpy",
        "op": "Operator" if old_names else "cpu_op",
    }
    events = []
    for step in range(2):
        t = 1000.0 * step
        events += [
            {"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step + 1}",
             "pid": 1, "tid": 1, "ts": t, "dur": 900.0},
            {"ph": "X", "cat": cat["op"], "name": "aten::conv2d", "pid": 1, "tid": 1,
             "ts": t + 10, "dur": 300.0},
            {"ph": "X", "cat": cat["op"], "name": "aten::convolution", "pid": 1, "tid": 1,
             "ts": t + 20, "dur": 250.0},
            {"ph": "X", "cat": cat["runtime"], "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
             "ts": t + 30, "dur": 8.0},
            {"ph": "X", "cat": cat["op"], "name": "aten::add_", "pid": 1, "tid": 1,
             "ts": t + 400, "dur": 50.0},
            {"ph": "X", "cat": cat["runtime"], "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
             "ts": t + 410, "dur": 6.0},
            {"ph": "X", "cat": cat["kernel"], "name": CONV, "pid": 0, "tid": "stream 7",
             "ts": t + 40, "dur": 500.0},
            {"ph": "X", "cat": cat["kernel"], "name": ADD, "pid": 0, "tid": "stream 7",
             "ts": t + 560, "dur": 20.0},
            {"ph": "X", "cat": cat["memcpy"], "name": "Memcpy HtoD (Pageable -> Device)",
             "pid": 0, "tid": "stream 7", "ts": t + 600, "dur": 30.0},
            {"ph": "X", "cat": "gpu_user_annotation", "name": "ProfilerStep#1", "pid": 0,
             "tid": "stream 7", "ts": t, "dur": 700.0},
            {"ph": "X", "cat": "python_function", "name": "train.py(12): step", "pid": 1,
             "tid": 1, "ts": t, "dur": 900.0},
            {"ph": "s", "cat": "ac2g", "name": "launch", "id": step, "pid": 1, "tid": 1, "ts": t},
        ]  # fmt: skip
    return {"traceEvents": events}


@pytest.mark.parametrize("old_names", [False, True], ids=["kineto", "kineto-legacy"])
def test_trace_summary_counts_steps_and_splits_gpu_api_cpu(old_names):
    summary = summarise(_kineto_trace(old_names))
    assert summary.steps_profiled == 2
    assert summary.steps_span_ms == pytest.approx(1.8)
    kernels = {r["name"]: r for r in summary.tables.kernels}
    assert kernels[CONV]["calls"] == 2 and kernels[CONV]["total_ms"] == pytest.approx(1.0)
    assert kernels["Memcpy HtoD (Pageable -> Device)"]["category"] == "copies"
    assert summary.totals["gpu_time_ms"] == pytest.approx(2 * 0.55)  # no gpu_user_annotation
    api = {r["name"]: r for r in summary.tables.api}
    assert api["cudaLaunchKernel"]["calls"] == 4
    assert api["cudaLaunchKernel"]["min_us"] == 6.0 and api["cudaLaunchKernel"]["max_us"] == 8.0
    ops = {r["name"]: r for r in summary.tables.cpu_ops}
    # self time = own duration minus direct children (conv2d 300 - convolution 250)
    assert ops["aten::conv2d"]["self_ms"] == pytest.approx(2 * 0.05)
    assert ops["aten::convolution"]["self_ms"] == pytest.approx(2 * 0.25)
    assert ops["ProfilerStep*"]["calls"] == 2
    assert ops["ProfilerStep*"]["self_ms"] == pytest.approx(2 * (900 - 300 - 50) / 1000)
    # all self time on the step thread is the steps' time: nothing counted twice or lost
    assert summary.totals["step_thread_self_ms"] == pytest.approx(summary.steps_span_ms)
    assert summary.category_source == "gpu_kernels"
    by = {r["category"]: r for r in summary.categories}
    assert by["convolution"]["ms_per_step"] == pytest.approx(0.5)


def test_self_time_clips_a_child_that_outlasts_its_parent():
    events = read_events(
        {
            "traceEvents": [
                {"ph": "X", "cat": "cpu_op", "name": "p", "pid": 1, "tid": 1, "ts": 0, "dur": 10},
                {"ph": "X", "cat": "cpu_op", "name": "c", "pid": 1, "tid": 1, "ts": 8, "dur": 5},
            ]
        }
    )
    times = {event.name: self_us for event, self_us in self_times(events)}
    assert times == {"p": 8.0, "c": 5.0}


def _reports(folder: Path) -> dict[str, str]:
    return {
        report: (folder / f"stats_{report}.csv").read_text()
        for report in nsys_backend.REPORTS
        if (folder / f"stats_{report}.csv").exists()
    }


def test_nsys_stats_reports_become_the_tables():
    tables = nsys_backend.tables_from_stats(_reports(NSYS))
    kernels = {r["name"]: r for r in tables.kernels}
    conv = kernels[next(n for n in kernels if n.startswith("sm80_xmma_fprop"))]
    assert (conv["calls"], conv["total_ms"], conv["min_us"], conv["max_us"]) == (200, 4.8, 20, 30)
    assert conv["avg_us"] == pytest.approx(24.0)
    assert conv["category"] == "convolution"
    # memory operations join the kernels, as in nvprof's GPU summary
    assert kernels["[CUDA memcpy Host-to-Device]"]["category"] == "copies"
    assert kernels["[CUDA memset]"]["calls"] == 35
    assert sum(r["total_ms"] for r in tables.kernels) == pytest.approx(4.8 + 2 + 1.5 + 1 + 0.7)
    assert sum(r["share_pct"] for r in tables.kernels) == pytest.approx(100)
    assert tables.kernels[0]["name"] == conv["name"]
    api = {r["name"]: r for r in tables.api}
    assert api["cudaLaunchKernel"]["calls"] == 1620
    assert api["cudaLaunchKernel"]["total_ms"] == pytest.approx(7.0)
    ops = {r["name"]: r for r in tables.cpu_ops}
    # emit_nvtx's per-call ranges merge into one operator; step ranges into ProfilerStep*
    assert ops["aten::conv2d"]["calls"] == 2
    assert ops["aten::conv2d"]["total_ms"] == pytest.approx(7.2)
    assert ops["ProfilerStep*"]["calls"] == 2
    assert ops["aten::conv2d"]["self_ms"] is None  # NVTX knows no self time


def test_nsys_stats_reader_skips_preamble_and_reads_the_legacy_layout():
    text = (
        "Processing [report.sqlite] with [cuda_gpu_kern_sum.py]...\n\n"
        + (NSYS / "legacy_gpukernsum.csv").read_text()
    )
    stats = nsys_backend.summary_stats(nsys_backend.read_stats_csv(text))
    sgemm = stats["volta_sgemm_128x32_nt"]
    assert (sgemm.calls, sgemm.total_us, sgemm.min_us, sgemm.max_us) == (50, 1000, 10, 30)
    assert nsys_backend.read_stats_csv("") == []


def test_nsys_gpu_trace_becomes_a_chrome_trace():
    trace = nsys_backend.trace_from_gpu_trace((NSYS / "stats_cuda_gpu_trace.csv").read_text())
    json.dumps(trace)  # serialisable
    events = trace["traceEvents"]
    assert [e["ts"] for e in events] == [0.0, 50.0, 80.0]
    assert events[1]["dur"] == 24.0 and events[1]["tid"] == "stream 7"
    categories = {r["category"] for r in summarise(trace).tables.kernels}
    assert categories == {"copies", "convolution", "normalisation"}


def test_nvprof_summary_reads_both_tables_and_their_units():
    tables = nvprof_backend.tables_from_summary((FIXTURES / "nvprof_summary.csv").read_text())
    kernels = {r["name"]: r for r in tables.kernels}
    scudnn = kernels["volta_scudnn_128x64_relu_interior_nn_v1"]
    # Time in ms, Avg/Min in us, Max in ms (the units row)
    assert scudnn["total_ms"] == pytest.approx(120)
    assert (scudnn["min_us"], scudnn["max_us"]) == (pytest.approx(500), pytest.approx(900))
    assert scudnn["category"] == "convolution"
    assert kernels["[CUDA memcpy HtoD]"]["category"] == "copies"
    assert {r["name"] for r in tables.api} == {"cudaLaunchKernel", "cudaMemcpyAsync"}
    assert tables.cpu_ops == []
    with pytest.raises(ValueError, match="no nvprof summary"):
        nvprof_backend.read_summary("==1== Profiling result:\nnothing here\n")
