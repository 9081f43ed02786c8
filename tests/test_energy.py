"""Energy (nettebench.records.energy, report.tables.energy, report.figures.energy): RAPL read
from a powercap tree laid out as Linux lays it out, joules per image from recorded counters,
and "not measured" (never 0) where no counter exists.

Expected numbers come from the raw counter values written here (microjoules, millijoules) and
the record's own img/s, not from the module's formulas.
"""

from __future__ import annotations

import math

import pandas as pd
import pytest
import record_factory as F
from nvml_replay import Replay, stream

from nettebench.records import conditions as C
from nettebench.records import energy as E
from nettebench.report.aggregate import aggregate
from nettebench.report.figures.energy import energy_panels, plot_energy
from nettebench.report.tables.energy import NOT_MEASURED

RANGE_UJ = 262_143_328_850  # a package's max_energy_range_uj as Intel machines report it


def _powercap(root, energies: dict[str, int]) -> None:
    """``intel-rapl:N`` package domains with their counters, and a core subdomain (ignored)."""
    for index, (name, value) in enumerate(energies.items()):
        domain = root / f"intel-rapl:{index}"
        domain.mkdir(exist_ok=True)
        (domain / "name").write_text(f"{name}\n")
        (domain / "energy_uj").write_text(f"{value}\n")
        (domain / "max_energy_range_uj").write_text(f"{RANGE_UJ}\n")
    core = root / "intel-rapl:0:0"
    core.mkdir(exist_ok=True)
    (core / "name").write_text("core\n")
    (core / "energy_uj").write_text("999999999\n")
    (core / "max_energy_range_uj").write_text(f"{RANGE_UJ}\n")


def test_rapl_sums_the_packages_undoes_a_wrap_and_ignores_subdomains(tmp_path):
    _powercap(tmp_path, {"package-0": 5_000_000, "package-1": RANGE_UJ - 1_000_000})
    meter = E.RaplMeter(str(tmp_path), clock=iter([0.0, 1.0, 2.0]).__next__)
    start = meter.read()
    # package 0 used 40 J; package 1 wrapped: 1 J to the top, then 2.5 J past zero
    _powercap(tmp_path, {"package-0": 45_000_000, "package-1": 2_500_000})
    end = meter.read()
    joules, source = meter.window(start, end)
    assert joules == pytest.approx(40.0 + 3.5)
    assert source == E.RAPL_SOURCE


def test_a_gap_that_may_hold_two_wraps_is_not_measured(tmp_path):
    _powercap(tmp_path, {"package-0": 0})
    meter = E.RaplMeter(str(tmp_path), clock=iter([0.0, 0.0, 10_000.0]).__next__)
    start = meter.read()
    _powercap(tmp_path, {"package-0": 1_000_000})
    joules, source = meter.window(start, meter.read())
    assert joules is None and source.startswith("not measured")


def test_without_powercap_the_probe_says_not_measured_never_zero(tmp_path):
    probe = C.Probe(powercap=str(tmp_path / "absent"))
    found = probe.stop(probe.start())
    assert found["cpu_energy_j"] is None
    assert found["cpu_energy_source"] == E.NO_RAPL


def test_the_probe_reads_rapl_at_each_edge(tmp_path):
    _powercap(tmp_path, {"package-0": 1_000_000})
    probe = C.Probe(powercap=str(tmp_path))
    started = probe.start()
    _powercap(tmp_path, {"package-0": 13_500_000})
    found = probe.stop(started)
    assert found["cpu_energy_j"] == pytest.approx(12.5)
    assert found["cpu_energy_source"] == E.RAPL_SOURCE


def _gpu_conditions(name: str, wall_s: float, img_s: float = 1000.0) -> dict:
    """A quiet CPU window whose GPU state is a recorded stream's, with ``wall_s``, all of it
    steady training steps at ``img_s`` (one span: the stream's energy, ``img_s x wall_s``
    images)."""
    readings, energy, identity = stream(name)
    probe = C.Probe(
        gpu=C.GpuTarget("GPU-aaaa", 0),
        device=Replay(readings, energy, identity=identity),
        sample_s=3600,
    )
    started = probe.start()
    for _ in readings[2:]:  # the sampling thread's readings between the edges: all the stream
        probe.sampler.read()
    state = probe.stop(started)
    found = {**F.window(wall_s=wall_s), **{k: state[k] for k in C.nvml.GPU_STATE_KEYS}}
    found.update(C.verdict(found))
    span = {"epoch": 1, "steps": [5, 100], "seconds": wall_s, "images": img_s * wall_s,
            "energy_j": state["gpu_energy_j"], "source": state["gpu_energy_source"]}  # fmt: skip
    found.update(E.steady_totals([span]))
    return found


def test_joules_per_image_from_the_counter_with_the_img_s_interval(tmp_path):
    """530 J (the quiet stream's counter: 4,000,530,000 - 4,000,000,000 mJ) over 10 s of
    steady steps is 53 W; their 10,000 images at 1,000 img/s [900-1,100] cost 0.053 J/img
    [0.0482-0.0589]."""
    path = F.make_cell(
        tmp_path,
        precision="O1",
        train_img_s=1000.0,
        conditions=_gpu_conditions("quiet", 10.0),
        summary_extra={"train_img_s_low": 900.0, "train_img_s_high": 1100.0},
    )
    written = aggregate([path], tmp_path / "tables")
    row = pd.read_csv(written["runs"]).iloc[0]
    watts = (4_000_530_000 - 4_000_000_000) / 1000 / 10.0
    assert row["energy_j"] == pytest.approx(530.0)
    assert row["power_w"] == pytest.approx(watts)
    assert row["j_per_img"] == pytest.approx(watts / 1000)
    assert (row["j_per_img_low"], row["j_per_img_high"]) == (
        pytest.approx(watts / 1100),
        pytest.approx(watts / 900),
    )
    assert row["img_s_per_w"] == pytest.approx(1000 / watts)
    table = written["energy"].read_text()
    assert f"{watts / 1000:.3g} [{watts / 1100:.3g}-{watts / 900:.3g}]" in table
    assert "NVML energy counter" in table
    front = written["headline"].read_text()
    sentence = f"Energy: resnet18 on {F.GPU_NAME}: O1 {watts / 1000:.3g} J per trained image"
    assert sentence in front


def test_energy_from_power_readings_has_no_interval(tmp_path):
    path = F.make_cell(
        tmp_path,
        train_img_s=1000.0,
        conditions=_gpu_conditions("unsupported", 10.0),
        summary_extra={"train_img_s_low": 900.0, "train_img_s_high": 1100.0},
    )
    row = pd.read_csv(aggregate([path], tmp_path / "tables")["runs"]).iloc[0]
    assert row["energy_source"].startswith("NVML power readings")
    assert not math.isnan(row["j_per_img"])
    assert math.isnan(row["j_per_img_low"]) and math.isnan(row["j_per_img_high"])


def test_a_cpu_study_without_a_counter_says_not_measured_and_writes_no_zero(tmp_path):
    window = {**F.window(), "cpu_energy_j": None, "cpu_energy_source": E.NO_RAPL}
    span = {"epoch": 1, "steps": [1, 8], "seconds": 1.0, "images": 42, "energy_j": None,
            "source": E.NO_RAPL}  # fmt: skip
    window.update(E.steady_totals([span, span]))
    paths = [
        F.make_cell(tmp_path, precision=p, device_type="cpu", conditions=window)
        for p in ("fp32", "bf16")
    ]
    written = aggregate(paths, tmp_path / "tables")
    runs = pd.read_csv(written["runs"])
    for column in E.ENERGY_COLUMNS[2:]:
        assert runs[column].isna().all(), column
    assert (runs["energy_source"] == E.NO_RAPL).all()
    table = written["energy"].read_text()
    assert table.count(f"| {NOT_MEASURED} ") >= 4  # two precisions, two grids
    assert "| 0 " not in table and "0.000" not in table
    assert "Energy:" not in written["headline"].read_text()  # no sentence without energy
    figure = plot_energy(runs)
    texts = [t.get_text() for ax in figure.axes for t in ax.texts]
    assert any("not measured" in t for t in texts)


def test_the_figure_draws_the_tables_values_and_marks_a_throttled_cell(tmp_path):
    quiet, throttled = _gpu_conditions("quiet", 10.0, 500.0), _gpu_conditions("throttled", 10.0)
    paths = [
        F.make_cell(tmp_path, precision="O0", train_img_s=500.0, conditions=quiet),
        F.make_cell(tmp_path, precision="O1", train_img_s=1000.0, conditions=throttled),
    ]
    written = aggregate(paths, tmp_path / "tables")
    runs = pd.read_csv(written["runs"])
    ((title, bars, _),) = energy_panels(runs)
    # the panel is titled as its table section: dataset, epochs and device in words
    sections = [
        line[4:] for line in written["energy"].read_text().splitlines() if line[:4] == "### "
    ]
    assert title == sections[0] and "epochs" in title
    by_label = {bar["label"].split()[-1]: bar for bar in bars}
    assert by_label["O0"]["mean"] == pytest.approx(530 / 10 / 500)
    assert by_label["O1"]["mean"] == pytest.approx(695 / 10 / 1000)
    assert by_label["O1"]["mark"] == "‡" and by_label["O0"]["mark"] == ""
    drawn = plot_energy(runs)
    assert any(t.get_text() == "‡" for t in drawn.axes[0].texts)


def test_each_inference_phase_has_its_own_window_and_energy(tmp_path):
    """A real inference cell on this CPU: offline, pipeline and SingleStream each in a window
    of its own, in order, inside the cell's; with no RAPL here their energy is not measured."""
    from nettebench.datasets.synthetic import generate
    from nettebench.inference import cli, measure
    from nettebench.study.inference_cells import InferenceSpec

    generate(tmp_path, name="tiny", size=40, train_images=8, val_images=12, num_classes=3,
             jobs=1, progress=False)  # fmt: skip
    spec = InferenceSpec("tiny", model="resnet18", batch_size=1, image_size=32, workers=0,
                         device="cpu")  # fmt: skip
    budget = measure.Budget(warmup=1, max_seconds=1.0, latency_queries=5, offline_batches=3)
    record = cli.measure_cell(spec, tmp_path / "dataset.json", budget=budget, threads=1)
    assert record["status"] == "ok", record["message"]
    whole = record["conditions"]
    edges = [whole["started_at"]]
    for phase in ("offline", "pipeline", "single_stream"):
        window = record[phase]["conditions"]
        assert window["started_at"] >= edges[-1] and window["ended_at"] <= whole["ended_at"]
        edges.append(window["ended_at"])
        found = record[phase]["energy"]
        if E.read_rapl() is None:  # this machine: no /sys/class/powercap
            assert found["energy_j"] is None and found["j_per_img"] is None
            assert found["energy_source"] == E.NO_RAPL
    from nettebench.report.frames.inference import cells_frame
    from nettebench.report.tables.inference import inference_markdown

    table = inference_markdown(cells_frame([(str(tmp_path / "inference.json"), record)])).markdown()
    row = next(line for line in table.splitlines() if line.startswith("| resnet18"))
    header = next(line for line in table.splitlines() if line.startswith("| Model"))
    column = [c.strip() for c in header.split("|")].index("J/img on device")
    expected = NOT_MEASURED if record["offline"]["energy"]["j_per_img"] is None else None
    assert [c.strip() for c in row.split("|")][column] == (
        expected or f"{record['offline']['energy']['j_per_img']:.3g}"
    )


def test_inference_energy_per_image_from_a_phases_counter():
    """The quiet stream's 530 J over a 10 s Offline window at 2,000 img/s [1,900-2,100];
    SingleStream at a 4 ms median latency is 250 queries a second."""
    window = _gpu_conditions("quiet", 10.0)
    offline = E.phase_energy(window, {"img_s": 2000.0, "img_s_low": 1900.0,
                                      "img_s_high": 2100.0}, "cuda")  # fmt: skip
    watts = (4_000_530_000 - 4_000_000_000) / 1000 / 10.0
    assert offline["j_per_img"] == pytest.approx(watts / 2000)
    assert offline["j_per_img_low"] == pytest.approx(watts / 2100)
    stream = E.phase_energy(window, {"latency_ms": {"median": 4.0}}, "cuda")
    assert stream["j_per_img"] == pytest.approx(watts * 0.004)
    assert stream["j_per_img_low"] is None  # a latency median's interval is not an img/s one
