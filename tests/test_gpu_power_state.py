"""A GPU at its power limit is the GPU's state, not interference; the job's GPU is named by NVML.

Issue 56, items 1 and 9 (second bullet), on a CPU. NVML is played back: a fake ``pynvml``
answers the calls the package makes (values in NVML's units: mW, MHz), and recorded streams of
readings go through :func:`nettebench.records.nvml.summarize`, the verdict and the report's own
aggregation, as a GPU job's would. The expected numbers are computed here from the raw rows
(numpy), never by the module's arithmetic.

- A quiet H200 window at its 700 W limit (the power cap in every busy reading, power within
  3 % of the limit, steady clocks) gets no ``‡``, its comparison states its verdict, and the
  timing-conditions table shows it at its limit (``¤``), explained once.
- A window with a hardware slowdown gets ``‡`` and no verdict; its reason names the slowdown
  only, never the power cap.
- A limit set below the default is hardware: in the restore key and in the machines table.
- The job's GPU (index, UUID, MIG parent) comes from NVML's listing, under
  ``CUDA_VISIBLE_DEVICES`` too; ``nvidia-smi -L`` runs only where NVML is absent.
"""

from __future__ import annotations

import json
import os
import stat
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import record_factory as F
import torch

from nettebench.datasets.synthetic import generate
from nettebench.records import conditions as C
from nettebench.records import gpu_processes, nvml
from nettebench.report import caveats
from nettebench.report.aggregate import aggregate
from nettebench.report.compare import NO_VERDICT_MARK
from nettebench.training import finished, validity
from nettebench.vocabulary.cell import CellSpec

# An H200 as NVML reports it (nvidia-smi -q: 700 W default and enforced, 1980 MHz max SM clock)
LIMIT_MW, MAX_SM_MHZ = 700_000, 1980
GPU0 = "GPU-41255406-c9af-f94b-4ebf-9d57ad1853da"
GPU1 = "GPU-e86cb44c-6756-fd30-cd4a-1e6da3caf9b0"
MIG_A = "MIG-a65afc88-50b5-5ccf-b0a8-f93b3247ae9e"
MIG_B = "MIG-c7384736-a75d-5afc-978f-d2f1294409fd"
IDLE, CAP, HW_SLOWDOWN = 0x1, 0x4, 0x8


class NvmlError(Exception):
    """pynvml's NVMLError: the failure's code in ``value``."""

    def __init__(self, value: int) -> None:
        super().__init__(value)
        self.value = value


def fake_pynvml(*, limit_mw=LIMIT_MW, default_mw=LIMIT_MW, answers=True):
    """pynvml as a driver answers it on a two-GPU host: GPU 0 whole, GPU 1 split by MIG into
    two instances (of 7 slots; an empty slot answers NOT_FOUND). ``answers=False``: a host
    where the library loads but the driver does not answer (every call raises)."""

    def count():
        if not answers:
            raise NvmlError(9)  # NVML_ERROR_DRIVER_NOT_LOADED
        return 2

    def mig_mode(handle):
        if handle == 0:
            raise NvmlError(3)  # NVML_ERROR_NOT_SUPPORTED: no MIG on this GPU
        return [1, 1]  # NVML_DEVICE_MIG_ENABLE, current and pending

    def mig_handle(handle, slot):
        if slot > 1:
            raise NvmlError(6)  # NVML_ERROR_NOT_FOUND: an empty slot
        return ("mig", slot)

    uuids = {0: GPU0, 1: GPU1, ("mig", 0): MIG_A, ("mig", 1): MIG_B}
    return SimpleNamespace(
        nvmlDeviceGetCount=count,
        nvmlDeviceGetHandleByIndex=lambda index: index,
        nvmlDeviceGetUUID=lambda handle: uuids[handle],
        nvmlDeviceGetMigMode=mig_mode,
        nvmlDeviceGetMaxMigDeviceCount=lambda handle: 7,
        nvmlDeviceGetMigDeviceHandleByIndex=mig_handle,
        nvmlDeviceGetHandleByUUID=lambda uuid: {v: k for k, v in uuids.items()}[uuid],
        nvmlDeviceGetPowerManagementLimit=lambda handle: limit_mw,
        nvmlDeviceGetPowerManagementDefaultLimit=lambda handle: default_mw,
        nvmlDeviceGetMaxClockInfo=lambda handle, clock: {1: MAX_SM_MHZ, 2: 2619}[clock],
        nvmlSystemGetDriverVersion=lambda: b"580.95.05",
        nvmlDeviceGetName=lambda handle: "NVIDIA H200",
    )


def identity(**limits) -> dict:
    """The window's identity as the probe's sampler reads it once (nvml.Device.identity)."""
    return nvml.Device(fake_pynvml(**limits), 0, C.GpuTarget(GPU0, 0)).identity()


def at_the_limit_rows(slowdown_at=(), limit_w=700.0) -> list[list[float]]:
    """A training window on an H200 at its limit, as NVML readings every 0.1 s:
    ``[unix, SM MHz, memory MHz, W, °C, reasons]``. The first edge reading is idle (the
    kernels not yet queued); the 40 busy ones name the power cap, draw 12 W below to 2.5 W
    above the limit (688-702.5 W at 700 W: within 3 %, briefly above it, as a limit is held on
    average) at 1740-1770 MHz (lower under a lowered limit). ``slowdown_at``: busy readings
    that also name a hardware slowdown."""
    rows = [[1_790_000_000.0, 345, 2619, 92.0, 41, IDLE]]
    for i in range(40):
        reasons = CAP | (HW_SLOWDOWN if i in slowdown_at else 0)
        watts = limit_w + (-12.0, -5.5, -1.0, 2.5)[i % 4]
        mhz = (1755, 1740, 1770, 1755)[i % 4] - (700 - limit_w)
        rows.append([1_790_000_000.1 + i / 10, mhz, 2619, watts, 62 + i % 3, reasons])
    return rows


def window(rows, ident) -> dict:
    """A cell's epochs window: quiet CPUs (record_factory's), the GPU state summarized from
    ``rows`` (the energy counter at its edges: 4.1 GJ since the driver loaded, +2.8 kJ), and
    the verdict taken over both, as the probe does."""
    readings = [nvml.Reading(*row) for row in rows]
    state = nvml.summarize(readings, 4_100_000_000, 4_102_800_000, ident)  # mJ
    found = {**F.window(), **{k: state[k] for k in nvml.GPU_STATE_KEYS}}
    found.update(C.verdict(found))
    return found


STEADY = [2400.0, 2500.0, 2600.0]  # three processes' steady img/s (resnet18 O0 on an H200)


def cells(root, conditions, precisions=("O0", "bf16"), rates=STEADY, **more):
    """Three processes (seeds) of each precision, bf16 1.6x faster, all timed in
    ``conditions``."""
    factor = {"O0": 1.0, "bf16": 1.6}
    return [
        F.make_cell(root, precision=p, seed=seed, train_img_s=factor[p] * rate,
                    conditions=conditions, **more)
        for p in precisions for seed, rate in enumerate(rates)
    ]  # fmt: skip


def mean_seconds(precision: str) -> float:
    """The mean over the three seeds of a cell's seconds for all epochs (record_factory's)."""
    return float(np.mean([F.time_for("resnet18", precision, s, F.STUDY_EPOCHS) for s in (0, 1, 2)]))


def time_row(table: str) -> str:
    """The time table's first resnet18 row (seconds by precision)."""
    return next(line for line in table.splitlines() if line.startswith("| resnet18 |"))


# ------------------------------------------------------------------- (a) quiet, at the limit


def test_a_quiet_window_at_its_power_limit_is_no_interference_and_says_its_state():
    rows = np.array(at_the_limit_rows(), dtype=float)
    found = window(at_the_limit_rows(), identity())
    busy = rows[(rows[:, 5].astype(int) & IDLE) == 0]
    assert len(busy) == 40 and (busy[:, 5].astype(int) & CAP).all()
    mean_w = busy[:, 3].mean()
    assert abs(mean_w / 700 - 1) <= 0.03  # the window: within 3 % of the limit
    assert found["gpu_power_cap_share"] == 1.0
    assert found["gpu_power_of_limit"] == pytest.approx(mean_w / 700)
    assert found["gpu_sm_clock_of_max"] == pytest.approx(np.median(busy[:, 1]) / MAX_SM_MHZ)
    assert (found["gpu_power_limit_w"], found["gpu_power_default_limit_w"]) == (700.0, 700.0)
    assert found["gpu_device"]["sm_clock_max_mhz"] == MAX_SM_MHZ
    assert found["gpu_clock_events"] == ["idle", "power cap"]  # named, not a throttle reason
    assert found["gpu_throttled"] is False and found["gpu_throttle_reasons"] == {}
    assert found["interference"] is False and found["interference_reasons"] == []


def test_a_quiet_window_at_its_power_limit_gets_no_mark_and_states_its_verdict(tmp_path):
    """Through the report: no ‡ on its seconds, its comparison states a verdict, and the
    timing-conditions table shows the state with its own mark, explained once."""
    rows = np.array(at_the_limit_rows(), dtype=float)
    busy = rows[1:]
    written = aggregate(cells(tmp_path, window(at_the_limit_rows(), identity())), tmp_path / "t")
    runs = pd.read_csv(written["runs"])
    assert not runs["interference"].any()
    assert (runs["gpu_power_cap_share"] == 1.0).all() and runs["gpu_power_limit_w"].eq(700).all()
    assert runs["gpu_power_limit_lowered_w"].isna().all()  # at its default: no setup of its own
    time_table = written["time_by_model_precision"].read_text()
    assert caveats.INTERFERENCE_MARK not in time_table
    assert time_row(time_table).startswith(f"| resnet18 | {mean_seconds('O0'):.1f} ± ")
    comparisons = written["comparisons"].read_text()
    row = next(line for line in comparisons.splitlines() if "| bf16 / O0, " in line)
    assert "| 1.60x |" in row and row.endswith("| yes |"), row  # a verdict, and supported
    assert NO_VERDICT_MARK not in comparisons
    conditions = written["timing_conditions"].read_text()
    state = (
        f"{caveats.POWER_LIMIT_MARK} power cap in 100 % of busy readings, "
        f"{100 * busy[:, 3].mean() / 700:.0f} % of 700 W, "
        f"SM clock {100 * np.median(busy[:, 1]) / MAX_SM_MHZ:.0f} % of max"
    )
    windows = [line for line in conditions.splitlines() if "| epochs |" in line]
    assert len(windows) == 6 and all(f"| {state} | quiet |" in line for line in windows), windows
    assert conditions.count(caveats.POWER_LIMIT_NOTE) == 1
    assert "0 of 6 measured timed windows ran under interference" in conditions
    assert "6 ran at their GPU's power limit" in conditions


def test_the_rtx_3090_runs_share_at_the_cap_is_a_state():
    """The issue's measured RTX 3090 run: the power cap in 161 of 162 busy readings and no
    thermal event. It is at its limit, and not throttled."""
    rows = [[0.0, 210, 405, 31.0, 40, IDLE]]
    rows += [[0.1 * (i + 1), 1695, 9751, 349.0, 66, CAP if i else 0] for i in range(162)]
    found = window(rows, identity(limit_mw=350_000, default_mw=350_000))
    assert found["gpu_power_cap_share"] == pytest.approx(161 / 162)
    assert nvml.at_power_limit(found["gpu_power_cap_share"])
    assert found["gpu_throttled"] is False and found["interference"] is False


# ------------------------------------------------------------------- (b) a hardware slowdown


def test_a_window_with_a_hardware_slowdown_gets_the_mark_and_no_verdict(tmp_path):
    slowed = (5, 6, 20, 33)  # 4 of its 41 readings: 9.8 %, over the 5 % bound
    rows = np.array(at_the_limit_rows(slowed), dtype=float)
    masks = rows[:, 5].astype(int)
    share = ((masks & HW_SLOWDOWN) != 0).mean()
    found = window(at_the_limit_rows(slowed), identity())
    assert found["gpu_throttled"] is True and found["interference"] is True
    assert found["gpu_throttle_reasons"] == {"hardware slowdown": pytest.approx(share)}
    reason = f"the GPU throttled (hardware slowdown in {100 * share:.0f}% of readings)"
    assert found["interference_reasons"] == [reason]  # the slowdown, never the power cap
    assert found["gpu_power_cap_share"] == 1.0  # the state is still said
    quiet = window(at_the_limit_rows(), identity())
    paths = cells(tmp_path / "o0", found, precisions=("O0",))
    paths += cells(tmp_path / "bf16", quiet, precisions=("bf16",))
    written = aggregate(paths, tmp_path / "t")
    runs = pd.read_csv(written["runs"]).set_index(["precision", "seed"])
    assert runs.loc["O0", "interference"].all() and not runs.loc["bf16", "interference"].any()
    assert (runs.loc["O0", "interference_reasons"] == reason).all()
    row = time_row(written["time_by_model_precision"].read_text())
    _, o0, bf16 = (cell.strip() for cell in row.strip("|").split("|"))
    assert o0.startswith(f"{mean_seconds('O0'):.1f} ± ") and o0.endswith(caveats.INTERFERENCE_MARK)
    assert caveats.INTERFERENCE_MARK not in bf16
    row = next(
        line for line in written["comparisons"].read_text().splitlines() if "| bf16 / O0, " in line
    )
    assert "| no verdict: O0's epochs (seed 0), O0's epochs (seed 1)" in row, row
    speedup = time_row(written["time_by_model_precision"].read_text().split("## Speed-up")[1])
    assert speedup.endswith(f" {NO_VERDICT_MARK} |"), speedup
    conditions = written["timing_conditions"].read_text()
    disturbed = [
        line for line in conditions.splitlines() if f"| {caveats.INTERFERENCE_MARK} " in line
    ]
    assert len(disturbed) == 3 and all(reason in line for line in disturbed)
    assert all(f"| {caveats.POWER_LIMIT_MARK} power cap" in line for line in disturbed)


# ----------------------------------------------------- a lowered limit is a hardware setting


def test_a_lowered_limit_is_its_own_setup_in_the_machines_table(tmp_path):
    rows = np.array(at_the_limit_rows(limit_w=500.0), dtype=float)
    lowered = window(at_the_limit_rows(limit_w=500.0), identity(limit_mw=500_000))
    assert (lowered["gpu_power_limit_w"], lowered["gpu_power_default_limit_w"]) == (500.0, 700.0)
    assert lowered["gpu_power_of_limit"] == pytest.approx(rows[1:, 3].mean() / 500)
    paths = cells(tmp_path / "default", window(at_the_limit_rows(), identity()), ("O0",))
    paths += cells(tmp_path / "lowered", lowered, ("O0",), rates=[0.8 * r for r in STEADY])
    written = aggregate(paths, tmp_path / "t")
    runs = pd.read_csv(written["runs"])
    lowered_rows = runs[runs["path"].str.contains("/lowered/")]
    assert lowered_rows["gpu_power_limit_lowered_w"].eq(500).all()
    assert runs.loc[~runs.index.isin(lowered_rows.index), "gpu_power_limit_lowered_w"].isna().all()
    assert runs["setup_id"].nunique() == 2  # never averaged as seeds of one setup
    machines = written["time_by_machine"].read_text()
    header = next(line for line in machines.splitlines() if line.startswith("| setup |"))
    assert "GPU power limit, lowered (W)" in header
    setups = [line for line in machines.splitlines() if "| 3 |" in line]  # 3 matrix cells each
    assert sorted(line.count("| 500 |") for line in setups) == [0, 1], setups
    assert "power limit (W) 500" in machines and "power limit (W) default" in machines
    conditions = written["timing_conditions"].read_text()
    of_limit = f"{100 * rows[1:, 3].mean() / 500:.0f} % of 500 W (lowered from 700 W)"
    assert conditions.count(of_limit) == 3


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    root = tmp_path_factory.mktemp("power-data")
    generate(root, name="pow", size=40, train_images=20, val_images=10, seed=1)
    return root / "dataset.json"


def test_a_result_under_a_lowered_limit_is_not_restored_for_the_default(
    dataset, tmp_path, monkeypatch
):
    """The CUDA branch on a CPU (a CPU twin): torch names an H200 by its UUID, NVML is the fake
    driver. At the default limit the key is what it was without NVML; lowered, it differs, and
    the restore refuses, naming it."""
    h200 = SimpleNamespace(
        name="NVIDIA H200", major=9, minor=0, total_memory=143771 * 2**20, uuid=GPU0[4:]
    )
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device: h200)
    monkeypatch.setattr(torch.backends.cudnn, "version", lambda: 91002)
    cell = CellSpec(dataset="pow", model="squeezenet1_1", batch_size=20, epochs=1, image_size=32)
    gpu = torch.device("cuda", 0)

    def key(module):
        monkeypatch.setattr(nvml, "load", lambda: module)
        return validity.key(cell, device=gpu, data=dataset, options={"kind": "matrix"})

    default = key(fake_pynvml())
    assert "power_limit_w" not in default["hardware"]
    no_nvml = key(None)  # no limit read: the key a record had before limits were keyed
    assert {k: v for k, v in default["hardware"].items() if k != "driver"} == {
        k: v for k, v in no_nvml["hardware"].items() if k != "driver"
    }
    lowered = key(fake_pynvml(limit_mw=500_000))
    assert lowered["hardware"]["power_limit_w"] == 500.0
    said = validity.first_difference(default, lowered)
    assert said == "hardware: power_limit_w null -> 500.0"
    texts = {"metrics.json": json.dumps({"status": "ok"}), "epochs.csv": "epoch\n"}
    finished.write(tmp_path / "cell", lowered, texts)
    restored, why = finished.restore(tmp_path / "cell", default)
    assert not restored and "power_limit_w 500.0 -> null" in why
    assert finished.restore(tmp_path / "cell", lowered)[0]  # the same limit: restored
    raised = key(fake_pynvml(limit_mw=700_000, default_mw=600_000))  # above the default
    assert "power_limit_w" not in raised["hardware"]


# ------------------------------------------------------ item 9: the job's GPU, named by NVML


def nvidia_smi(folder, listing: str | None):
    """An ``nvidia-smi`` on PATH that leaves a mark when run: ``-L`` prints ``listing``; None
    answers as on a host without a driver (exit 9)."""
    folder.mkdir(exist_ok=True)
    tool = folder / "nvidia-smi"
    body = f"cat <<'EOF'\n{listing}EOF\n" if listing is not None else "exit 9\n"
    tool.write_text(f'#!/bin/sh\ntouch "{folder}/ran"\n{body}')
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    return folder / "ran"


SMI_LIST = f"""GPU 0: NVIDIA H200 (UUID: {GPU0})
GPU 1: NVIDIA H200 (UUID: {GPU1})
  MIG 3g.71gb     Device  0: (UUID: {MIG_A})
  MIG 3g.71gb     Device  1: (UUID: {MIG_B})
"""


@pytest.fixture
def path_tools(tmp_path, monkeypatch):
    tools = tmp_path / "bin"
    monkeypatch.setenv("PATH", f"{tools}{os.pathsep}{os.environ['PATH']}")
    return tools


def test_nvml_lists_the_gpus_and_their_mig_instances():
    listed = gpu_processes.list_gpus(fake_pynvml())
    assert [(g.index, g.uuid, g.migs) for g in listed] == [
        (0, GPU0, ()),
        (1, GPU1, (MIG_A, MIG_B)),
    ]
    assert gpu_processes.list_gpus(fake_pynvml(answers=False)) is None


def test_the_jobs_gpu_comes_from_nvml_and_nvidia_smi_is_not_run(path_tools):
    ran = nvidia_smi(path_tools, SMI_LIST.replace("GPU 0:", "GPU 7:"))  # told apart if used
    module = fake_pynvml()
    assert C.find_gpu(GPU0[4:], module) == C.GpuTarget(GPU0, 0)
    assert C.find_gpu(GPU1, module) == C.GpuTarget(GPU1, 1)
    # torch names a MIG instance by its bare hex; NVML's listing gives its GPU, index and UUID
    assert C.find_gpu(MIG_B[4:], module) == C.GpuTarget(MIG_B, 1, parent_uuid=GPU1)
    assert not ran.exists()


def test_under_cuda_visible_devices_the_gpu_is_nvmls_index_not_cudas(path_tools, monkeypatch):
    """CUDA_VISIBLE_DEVICES=1: torch's cuda:0 is NVML's GPU 1. The match is by UUID, so the
    target is GPU 1 (its processes, clocks and power), found without nvidia-smi."""
    ran = nvidia_smi(path_tools, None)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    monkeypatch.setattr(
        torch.cuda, "get_device_properties", lambda device: SimpleNamespace(uuid=GPU1[4:])
    )
    monkeypatch.setattr(nvml, "load", fake_pynvml)
    assert C.gpu_target(torch.device("cuda", 0)) == C.GpuTarget(GPU1, 1)
    assert nvml.open_device(C.gpu_target(torch.device("cuda", 0))).handle == 1
    assert not ran.exists()
    assert C.gpu_target(torch.device("cpu")) is None


@pytest.mark.parametrize("module", [None, "no driver"])
def test_without_nvml_the_gpu_comes_from_nvidia_smi(path_tools, monkeypatch, module):
    """pynvml absent (load() is None), or loaded with a driver that does not answer:
    ``nvidia-smi -L`` names the GPU, MIG included."""
    ran = nvidia_smi(path_tools, SMI_LIST)
    fake = None if module is None else fake_pynvml(answers=False)
    monkeypatch.setattr(nvml, "load", lambda: fake)
    assert C.find_gpu(MIG_A[4:]) == C.GpuTarget(MIG_A, 1, parent_uuid=GPU1)
    assert ran.exists()
    ran.unlink()
    assert C.find_gpu(GPU0[4:]) == C.GpuTarget(GPU0, 0)
    assert ran.exists()
