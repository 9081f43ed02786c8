"""The GPU's own state through NVML (nettebench.records.nvml), on a CPU.

Recorded streams (``tests/fixtures/nvml``: a quiet window, one held at its power cap, a counter
that went backwards, a GPU without one, a MIG instance) drive the window's summary and the
probe; the expected numbers are computed here from the fixtures' raw rows (numpy), not by the
module's own arithmetic. pynvml is not installed here: the module must do without it.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import numpy as np
import pytest
from nvml_replay import FIXTURES, Replay, stream

from nettebench.records import conditions as C
from nettebench.records import nvml

TARGET = C.GpuTarget("GPU-aaaa", 0)


def _raw(name: str) -> dict:
    return json.loads((FIXTURES / f"{name}.json").read_text())


def _window(name: str) -> dict:
    """The fixture's stream through a probe: its first reading at start, its last at stop,
    the rest from the sampler (here: played in order by ``read`` between the edges)."""
    readings, energy, identity = stream(name)
    replay = Replay(readings=readings, energy=energy, identity=identity)
    probe = C.Probe(gpu=TARGET, device=replay, sample_s=3600)
    started = probe.start()
    for _ in readings[1:-1]:
        probe.sampler.read()  # what the sampling thread does every GPU_SAMPLE_S
    return probe.stop(started)


def test_a_quiet_window_has_its_clocks_power_temperature_and_counter_energy():
    raw = _raw("quiet")
    rows = np.array(raw["readings"], dtype=float)
    found = _window("quiet")
    assert found["gpu_sm_clock_min_mhz"] == rows[:, 1].min()
    assert found["gpu_sm_clock_median_mhz"] == np.median(rows[:, 1])
    assert found["gpu_mem_clock_median_mhz"] == np.median(rows[:, 2])
    assert found["gpu_power_mean_w"] == pytest.approx(rows[:, 3].mean())
    assert found["gpu_temp_max_c"] == rows[:, 4].max()
    start, end = raw["energy_mj"]
    assert found["gpu_energy_j"] == pytest.approx((end - start) / 1000)  # 530 J
    assert found["gpu_energy_source"] == nvml.ENERGY_COUNTER
    assert found["gpu_throttled"] is False and found["gpu_clock_events"] == []
    assert found["gpu_device"]["name"] == "NVIDIA H200"
    # every reading of the window is in the record, in order, with its time
    assert found["gpu_readings"] == raw["readings"]
    gpu_reasons = [r for r in found["interference_reasons"] if "GPU" in r]
    assert gpu_reasons == []


def test_a_window_with_a_hardware_thermal_event_is_throttled_its_power_cap_is_state():
    raw = _raw("throttled")
    masks = [row[5] for row in raw["readings"]]
    found = _window("throttled")
    assert found["gpu_throttled"] is True and found["interference"] is True
    power_cap = sum(bool(m & 0x4) for m in masks) / len(masks)  # 6 of 11 name the power cap
    hot = sum(bool(m & 0x40) for m in masks) / len(masks)  # 1 of 11: hardware thermal
    assert found["gpu_throttle_reasons"] == {"thermal slowdown (hardware)": pytest.approx(hot)}
    assert found["gpu_power_cap_share"] == pytest.approx(power_cap)  # no idle reading: all busy
    assert found["gpu_clock_events"] == ["power cap", "thermal slowdown (hardware)"]
    assert found["gpu_sm_clock_min_mhz"] == min(row[1] for row in raw["readings"])
    reason = next(r for r in found["interference_reasons"] if "GPU throttled" in r)
    assert (
        reason == f"the GPU throttled (thermal slowdown (hardware) in {100 * hot:.0f}% of readings)"
    )
    # the per-epoch columns carry the verdict too (the epochs' ‡)
    assert C.epoch_columns(found)["interference"] is True


def test_idle_and_sync_boost_are_clock_events_but_not_throttling():
    reading = nvml.Reading(unix=0.0, sm_mhz=1980, reasons=0x1 | 0x10)
    found = nvml.summarize([reading, reading], 0, 1000)
    assert found["gpu_throttled"] is False
    assert found["gpu_clock_events"] == ["idle", "sync boost"]
    one_in_twenty_one = [reading] * 20 + [nvml.Reading(unix=0.0, reasons=0x8)]
    # 1 of 21 readings (4.8 %) is at most the share allowed; 1 of 19 (5.3 %) is over it
    assert nvml.summarize(one_in_twenty_one, 0, 1)["gpu_throttled"] is False
    assert nvml.summarize(one_in_twenty_one[2:], 0, 1)["gpu_throttled"] is True


@pytest.mark.parametrize("name", ["wrapped", "unsupported"])
def test_without_a_usable_counter_the_power_readings_give_the_energy(name):
    raw = _raw(name)
    rows = np.array(raw["readings"], dtype=float)
    found = _window(name)
    expected = np.trapezoid(rows[:, 3], rows[:, 0])
    assert found["gpu_energy_j"] == pytest.approx(expected)
    assert found["gpu_energy_source"].startswith(nvml.ENERGY_FROM_POWER)
    why = "went backwards" if name == "wrapped" else "no energy counter"
    assert why in found["gpu_energy_source"]


def test_no_counter_and_one_reading_is_not_measured_never_zero():
    found = nvml.summarize([nvml.Reading(unix=1.0, power_w=300.0)], None, None)
    assert found["gpu_energy_j"] is None
    assert found["gpu_energy_source"].startswith("not measured")
    assert nvml.summarize([], None, None)["gpu_power_mean_w"] is None


def test_under_mig_the_energy_is_said_to_be_the_whole_gpus():
    raw = _raw("mig")
    found = _window("mig")
    start, end = raw["energy_mj"]
    assert found["gpu_energy_j"] == pytest.approx((end - start) / 1000)
    assert "MIG: the whole GPU's" in found["gpu_energy_source"]
    assert found["gpu_device"]["mig"] is True


def test_the_sampler_reads_between_the_edges_and_stops_with_the_last_window():
    """Real time: the probe's thread reads every sample_s while a window is open; nested
    windows (the run and its epochs) each get the readings of their own span."""
    replay = Replay(energy=[0, 1000, 2000, 3000])

    def now():
        return nvml.Reading(unix=time.time(), power_w=100.0)

    replay.reading = now
    probe = C.Probe(gpu=TARGET, device=replay, sample_s=0.01)
    run = probe.start()
    epoch = probe.start()
    deadline = time.monotonic() + 30  # a loaded machine may run the thread late, not never
    while len(probe.sampler.readings) < 4 and time.monotonic() < deadline:
        time.sleep(0.01)
    inner = probe.stop(epoch)
    outer = probe.stop(run)
    assert len(inner["gpu_readings"]) >= 3  # its start edge, the samples, its stop edge
    assert len(outer["gpu_readings"]) > len(inner["gpu_readings"])
    times = [row[0] for row in outer["gpu_readings"]]
    assert times == sorted(times)
    assert probe.sampler._stop is None and probe.sampler.readings == []  # stopped, none held


def test_nvml_is_imported_only_by_its_module():
    """The one module that imports pynvml; without it installed, it loads as None."""
    root = os.path.join(os.path.dirname(__file__), "..", "scripts", "nettebench")
    importers = []
    for folder, _, names in os.walk(root):
        for name in names:
            if name.endswith(".py"):
                text = Path(folder, name).read_text(encoding="utf-8")
                if "import pynvml" in text or "from pynvml" in text:
                    importers.append(name)
    assert importers == ["nvml.py"]
    assert nvml.load() is None and nvml.open_device(TARGET) is None


def test_a_throttled_cell_carries_the_interference_mark_in_the_tables(tmp_path):
    """A cell whose CPUs were quiet but whose GPU slowed for heat: ‡ on its number, and its
    reason in runs.csv; the same cell with the quiet stream's GPU state: no GPU reason."""
    import pandas as pd
    import record_factory as F

    from nettebench.report import caveats
    from nettebench.report.aggregate import aggregate

    def cell(stream_name: str, precision: str):
        state = {key: _window(stream_name)[key] for key in nvml.GPU_STATE_KEYS}
        found = {**F.window(), **state}
        found.update(C.verdict(found))
        return F.make_cell(tmp_path, precision=precision, conditions=found)

    paths = [cell("throttled", "O1"), cell("quiet", "O0")]
    written = aggregate(paths, tmp_path / "tables")
    runs = pd.read_csv(written["runs"]).set_index("precision")
    assert "the GPU throttled (thermal slowdown" in runs.loc["O1", "interference_reasons"]
    assert not runs.loc["O0", "interference"]
    time_table = written["time_by_model_precision"].read_text()
    seconds = F.time_for("resnet18", "O1", 0, F.STUDY_EPOCHS)
    assert f"{seconds:.1f}{caveats.INTERFERENCE_MARK}" in time_table
    quiet = F.time_for("resnet18", "O0", 0, F.STUDY_EPOCHS)
    assert f"| {quiet:.1f} |" in time_table


class _NvmlError(Exception):
    def __init__(self, value: int) -> None:
        super().__init__(value)
        self.value = value


def _fake_pynvml(**overrides):
    """pynvml's calls as a driver answers them (values in NVML's units: mW, MHz, mJ, bytes),
    for the Device class; ``overrides`` replace single calls."""
    from types import SimpleNamespace

    def process(pid: int, used_bytes: int):
        return SimpleNamespace(pid=pid, usedGpuMemory=used_bytes)

    calls = {
        "NVML_ERROR_NOT_FOUND": 6,
        "nvmlDeviceGetClockInfo": lambda handle, kind: {1: 1755, 2: 2619}[kind],
        "nvmlDeviceGetPowerUsage": lambda handle: 612_345,
        "nvmlDeviceGetTemperature": lambda handle, sensor: 71,
        "nvmlDeviceGetCurrentClocksEventReasons": lambda handle: 0x4,
        "nvmlDeviceGetTotalEnergyConsumption": lambda handle: 123_456_789,
        "nvmlDeviceGetComputeRunningProcesses": lambda handle: {
            "own": [process(os.getpid(), 2**30), process(5151, 3 * 2**30)],
            "parent": [process(os.getpid(), 2**30), process(6161, 2**29)],
        }[handle],
        "nvmlDeviceGetProcessUtilization": lambda handle, since: [
            SimpleNamespace(pid=5151, smUtil=35, timeStamp=since + 1),
            SimpleNamespace(pid=5151, smUtil=55, timeStamp=since + 2),
        ],
        "nvmlDeviceGetPowerManagementLimit": lambda handle: 500_000,
        "nvmlDeviceGetPowerManagementDefaultLimit": lambda handle: 700_000,
        "nvmlDeviceGetMaxClockInfo": lambda handle, clock: {1: 1980, 2: 2619}[clock],
        "nvmlSystemGetDriverVersion": lambda: b"580.95.05",
        "nvmlDeviceGetName": lambda handle: "NVIDIA H200",
    }
    calls.update(overrides)
    return SimpleNamespace(**calls)


def test_the_device_reads_nvmls_units_and_asks_the_whole_gpu_under_mig():
    """Clocks, power (mW -> W), temperature and reasons come from the whole GPU (the parent
    under MIG); processes from the instance, the parent's others under its UUID; memory in MiB."""
    asked = []
    fake = _fake_pynvml(nvmlDeviceGetPowerUsage=lambda handle: asked.append(handle) or 612_345)
    target = C.GpuTarget("MIG-bbbb", 0, parent_uuid="GPU-pppp")
    device = nvml.Device(fake, "own", target, parent="parent")
    reading = device.reading()
    assert (reading.sm_mhz, reading.mem_mhz, reading.temp_c, reading.reasons) == (1755, 2619, 71, 4)
    assert reading.power_w == pytest.approx(612.345) and asked == ["parent"]
    assert device.energy_mj() == 123_456_789
    listed = {(p.pid, p.gpu_uuid, p.used_mib) for p in device.processes()}
    assert listed == {
        (os.getpid(), "MIG-bbbb", 1024.0),
        (5151, "MIG-bbbb", 3072.0),
        (6161, "GPU-pppp", 512.0),
    }
    assert device.utilisation(time.time()) == {5151: 55.0}
    identity = device.identity()
    assert identity["driver"] == "580.95.05" and identity["mig"] is True
    assert (identity["power_limit_w"], identity["power_default_limit_w"]) == (500.0, 700.0)
    assert identity["sm_clock_max_mhz"] == 1980  # NVML_CLOCK_SM's maximum, of the whole GPU


def test_unsupported_calls_read_none_and_no_samples_mean_no_kernels_ran():
    def unsupported(*args):
        raise _NvmlError(3)  # NVML_ERROR_NOT_SUPPORTED

    def no_samples(*args):
        raise _NvmlError(6)  # NVML_ERROR_NOT_FOUND: no process ran a kernel since then

    fake = _fake_pynvml(
        nvmlDeviceGetTotalEnergyConsumption=unsupported,
        nvmlDeviceGetCurrentClocksEventReasons=unsupported,
        nvmlDeviceGetCurrentClocksThrottleReasons=lambda handle: 0x40,  # an older driver's name
        nvmlDeviceGetProcessUtilization=no_samples,
    )
    device = nvml.Device(fake, "own", TARGET)
    assert device.energy_mj() is None
    assert device.reading().reasons == 0x40
    assert device.utilisation(0.0) == {}
    probe = C.Probe(gpu=TARGET, device=device, sample_s=3600)
    found = probe.stop(probe.start(gpu=True), gpu=True)
    # 5151 is listed on the job's GPU but ran no kernel: counted, at 0 % SM, not interference
    assert found["gpu_other_processes"] == 1 and found["gpu_other_util"] == 0.0
    assert found["gpu_other_memory_mib"] == 3072.0
    assert found["gpu_throttled"] is True  # hardware thermal slowdown in both edge readings
    fake.nvmlDeviceGetProcessUtilization = unsupported
    assert device.utilisation(0.0) is None
