"""The GPU's own state through NVML: the one module that imports ``pynvml``.

On a GPU the biggest source of a wrong number is the GPU itself: a hot card, a hardware
slowdown, clocks held low, another tenant. NVML (the library nvidia-smi itself reads, through
the official binding ``nvidia-ml-py``, imported as ``pynvml``) answers in microseconds, in this
process: no ``nvidia-smi`` child whose CPU time would land in a timed window.

- :func:`load` gives pynvml, initialised, also to name the job's GPU: the GPUs and their MIG
  instances by UUID (:func:`.gpu_processes.list_gpus`, asked by :func:`.conditions.gpu_target`;
  ``nvidia-smi -L`` only without NVML).
- :func:`open_device` finds the job's GPU (a :class:`~.gpu_processes.GpuTarget`) and returns a
  :class:`Device`, or None where ``pynvml`` is not installed, the driver does not answer, or the
  job runs on a CPU: everything here is best effort and absent-safe.
- A :class:`Device` gives one :class:`Reading` at a time (SM and memory clocks, power,
  temperature, the clock-event reasons), the energy counter (mJ since the driver loaded), the
  compute processes and their SM utilisation, and its identity (driver, name, MIG, the power
  limits, the SM clock's maximum).
- :func:`summarize` turns a window's readings and the counter at its edges into the window's GPU
  state (:data:`GPU_STATE_KEYS`), pure arithmetic that the tests drive with recorded streams.
  Throttling (heat, a hardware slowdown, a power brake) is interference; running at the power
  limit (the software power cap) is the GPU's state under full load, recorded and shown as such
  (:func:`at_power_limit`), and a limit set below the default is a hardware setting
  (:func:`lowered_power_limit`).

Under MIG, clocks, power and energy exist only for the whole GPU (the parent): they are read
there and said to be the whole GPU's, so a job's joules are not attributed to its instance.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from nettebench.records.gpu_processes import GpuProcess, GpuTarget

# Clock-event reasons that mean the GPU ran slower than it could for heat, a hardware slowdown
# or a power brake (NVML's nvmlClocksEventReason* bits): a window with any of them is throttled.
THROTTLE_REASONS = {
    0x8: "hardware slowdown",
    0x20: "thermal slowdown (software)",
    0x40: "thermal slowdown (hardware)",
    0x80: "power brake (hardware)",
}
# The software power cap: the GPU holds its clocks so that its power stays at the enforced
# limit. Under full load a datacenter GPU runs there by design (a measured RTX 3090 run named it
# in 161-168 of its 162-168 busy readings, with no thermal event), so it is the GPU's state, said
# apart (:data:`GPU_STATE_KEYS`), never interference.
POWER_CAP = 0x4
IDLE = 0x1
# ... the reasons that are not throttling (idle, clocks set by the application, the power
# limit, sync boost, display).
OTHER_REASONS = {
    IDLE: "idle",
    0x2: "application clocks",
    POWER_CAP: "power cap",
    0x10: "sync boost",
    0x100: "display clocks",
}
# A window is throttled when at least this share of its readings name a throttle reason (one
# reading in a window of two is enough: a short window has no more).
THROTTLED_READINGS_SHARE = 0.05
# A window ran at its power limit when the power cap is named by more than this share of its
# busy readings (those not naming idle).
AT_POWER_LIMIT_SHARE = 0.05
NVML_CLOCK_SM = 1
NVML_CLOCK_MEM = 2

ENERGY_COUNTER = "NVML energy counter"
ENERGY_FROM_POWER = "NVML power readings (trapezoid)"


@dataclass(frozen=True)
class Reading:
    """One instant of the GPU's state; None where NVML does not support the quantity."""

    unix: float  # time.time()
    sm_mhz: float | None = None
    mem_mhz: float | None = None
    power_w: float | None = None
    temp_c: float | None = None
    reasons: int | None = None  # the clock-event bitmask


_MODULE: Any = None  # pynvml once initialised, False when it cannot be


def load() -> Any:
    """``pynvml``, initialised; None when it is not installed or the driver does not answer.

    Imported here, lazily: a CPU job, the report and the workflow's parse never load it."""
    global _MODULE
    if _MODULE is None:
        try:
            import pynvml

            pynvml.nvmlInit()
            _MODULE = pynvml
        except Exception:  # ImportError, NVMLError (no driver, no library): not visible
            _MODULE = False
    return _MODULE or None


def driver_version() -> str | None:
    """The NVIDIA driver's version as NVML reports it; None without NVML."""
    module = load()
    if module is None:
        return None
    try:
        return _text(module.nvmlSystemGetDriverVersion())
    except Exception:
        return None


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class Device:
    """The job's GPU as NVML sees it; every method returns None for what it cannot read."""

    def __init__(self, nvml: Any, handle: Any, target: GpuTarget, parent: Any = None) -> None:
        self.nvml = nvml
        self.handle = handle  # the job's GPU, or its MIG instance
        self.parent = parent  # the MIG instance's whole GPU (None: not MIG)
        self.target = target
        self.whole = parent if parent is not None else handle  # clocks, power, energy live here

    def _ask(self, name: str, *args: Any) -> Any:
        function = getattr(self.nvml, name, None)
        if function is None:
            return None
        try:
            return function(*args)
        except Exception:  # NVMLError_NotSupported and kin: not readable on this GPU
            return None

    def reading(self) -> Reading:
        reasons = self._ask("nvmlDeviceGetCurrentClocksEventReasons", self.whole)
        if reasons is None:  # drivers before the rename
            reasons = self._ask("nvmlDeviceGetCurrentClocksThrottleReasons", self.whole)
        power = self._ask("nvmlDeviceGetPowerUsage", self.whole)
        return Reading(
            unix=time.time(),
            sm_mhz=self._ask("nvmlDeviceGetClockInfo", self.whole, NVML_CLOCK_SM),
            mem_mhz=self._ask("nvmlDeviceGetClockInfo", self.whole, NVML_CLOCK_MEM),
            power_w=None if power is None else power / 1000,  # mW
            temp_c=self._ask("nvmlDeviceGetTemperature", self.whole, 0),  # NVML_TEMPERATURE_GPU
            reasons=None if reasons is None else int(reasons),
        )

    def energy_mj(self) -> int | None:
        """The energy counter (mJ since the driver loaded; Volta and later), None without one."""
        value = self._ask("nvmlDeviceGetTotalEnergyConsumption", self.whole)
        return None if value is None else int(value)

    def processes(self) -> list[GpuProcess] | None:
        """Compute processes on the job's GPU (its instance's UUID), and under MIG those the
        whole GPU lists beyond them (the parent's UUID), as nvidia-smi named them."""
        own = self._ask("nvmlDeviceGetComputeRunningProcesses", self.handle)
        if own is None:
            return None
        found = [GpuProcess(p.pid, self.target.uuid, _mib(p)) for p in own]
        if self.parent is not None:
            pids = {p.pid for p in found}
            parent_uuid = self.target.parent_uuid or ""
            for p in self._ask("nvmlDeviceGetComputeRunningProcesses", self.parent) or []:
                if p.pid not in pids:
                    found.append(GpuProcess(p.pid, parent_uuid, _mib(p)))
        return found

    def utilisation(self, since_unix: float) -> dict[int, float] | None:
        """pid -> highest SM utilisation (%) NVML sampled since ``since_unix``; a process with
        no sample ran no kernel (NVML answers NOT_FOUND when none did): 0. None: unreadable."""
        try:
            samples = self.nvml.nvmlDeviceGetProcessUtilization(
                self.handle, int(max(since_unix, 0) * 1e6)
            )
        except Exception as error:
            if getattr(error, "value", None) == getattr(self.nvml, "NVML_ERROR_NOT_FOUND", 6):
                return {}
            return None
        found: dict[int, float] = {}
        for sample in samples or []:
            found[sample.pid] = max(found.get(sample.pid, 0.0), float(sample.smUtil))
        return found

    def identity(self) -> dict[str, Any]:
        """The driver, the device, MIG, the power limits (W) the window ran under (the enforced
        one and the card's default) and the SM clock's maximum (MHz)."""
        limit = self._ask("nvmlDeviceGetPowerManagementLimit", self.whole)
        default = self._ask("nvmlDeviceGetPowerManagementDefaultLimit", self.whole)
        driver = self._ask("nvmlSystemGetDriverVersion")
        name = self._ask("nvmlDeviceGetName", self.whole)
        return {
            "driver": None if driver is None else _text(driver),
            "name": None if name is None else _text(name),
            "uuid": self.target.uuid,
            "mig": self.parent is not None,
            "mig_parent_uuid": self.target.parent_uuid,
            "power_limit_w": None if limit is None else limit / 1000,
            "power_default_limit_w": None if default is None else default / 1000,
            "sm_clock_max_mhz": self._ask("nvmlDeviceGetMaxClockInfo", self.whole, NVML_CLOCK_SM),
        }


def at_power_limit(cap_share: Any) -> bool:
    """Whether a window ran at its power limit: the power cap named by more than
    :data:`AT_POWER_LIMIT_SHARE` of its busy readings (``gpu_power_cap_share``)."""
    try:
        return float(cap_share) > AT_POWER_LIMIT_SHARE
    except (TypeError, ValueError):  # None: no reasons read
        return False


def lowered_power_limit(identity: dict[str, Any] | None) -> float | None:
    """The enforced power limit (W) where it is set below the card's default: a hardware
    setting (``nvidia-smi -pl``, a site's policy) that a result measured under it depends on;
    None at the default, above it, or where either limit is unreadable."""
    limit = (identity or {}).get("power_limit_w")
    default = (identity or {}).get("power_default_limit_w")
    if limit is None or default is None or limit >= default:
        return None
    return limit


def _mib(process: Any) -> float | None:
    used = getattr(process, "usedGpuMemory", None)
    return None if used is None else used / 2**20


def open_device(target: GpuTarget | None) -> Device | None:
    """The NVML view of ``target``; None without a GPU, without pynvml or a driver."""
    if target is None:
        return None
    nvml = load()
    if nvml is None:
        return None
    bare = target.uuid.removeprefix("GPU-").removeprefix("MIG-")
    handle = None
    for uuid in dict.fromkeys((target.uuid, f"GPU-{bare}", f"MIG-{bare}")):
        try:  # without nvidia-smi -L, a MIG instance's UUID is known only by its bare hex
            handle = nvml.nvmlDeviceGetHandleByUUID(uuid)
            break
        except Exception:
            continue
    if handle is None:
        return None
    parent = None
    if target.parent_uuid:
        try:
            parent = nvml.nvmlDeviceGetDeviceHandleFromMigDeviceHandle(handle)
        except Exception:
            try:
                parent = nvml.nvmlDeviceGetHandleByUUID(target.parent_uuid)
            except Exception:
                parent = None
    return Device(nvml, handle, target, parent)


class Sampler:
    """Readings of a device every ``sample_s`` while any window is open, and at each window's
    edges; windows may nest (a run and its epochs): each takes the readings of its own span."""

    def __init__(self, device: Any, sample_s: float) -> None:
        self.device = device
        self.identity = device.identity()
        self.sample_s = sample_s
        self.readings: list[Reading] = []  # while any window is open
        self._open = 0
        self._lock = threading.Lock()
        self._stop: threading.Event | None = None

    def read(self) -> int:
        """One reading appended; its index."""
        reading = self.device.reading()
        with self._lock:
            self.readings.append(reading)
            return len(self.readings) - 1

    def _run(self, stop: threading.Event) -> None:
        while not stop.wait(self.sample_s):
            self.read()

    def open(self) -> tuple[int, int | None]:
        """A window opens: (its first reading's index, the energy counter)."""
        energy = self.device.energy_mj()
        first = self.read()
        self._open += 1
        if self._stop is None:
            self._stop = threading.Event()
            threading.Thread(target=self._run, args=(self._stop,), daemon=True).start()
        return first, energy

    def close(self, first: int, start_mj: int | None) -> dict[str, Any]:
        """The window opened at ``first`` closes: its GPU state (:func:`summarize`)."""
        end_mj = self.device.energy_mj()
        last = self.read()
        with self._lock:
            readings = self.readings[first : last + 1]
        self._open -= 1
        if self._open <= 0 and self._stop is not None:
            self._stop.set()
            self._stop = None
            with self._lock:
                self.readings = []
        return summarize(readings, start_mj, end_mj, self.identity)


# ------------------------------------------------------------------------- a window's summary

# Keys :func:`summarize` adds to a window's conditions (records.conditions.CONDITION_KEYS).
GPU_STATE_KEYS = (
    "gpu_sm_clock_min_mhz",
    "gpu_sm_clock_median_mhz",
    "gpu_mem_clock_min_mhz",
    "gpu_mem_clock_median_mhz",
    "gpu_power_mean_w",
    "gpu_temp_max_c",
    "gpu_energy_j",  # the window's energy (None: not measured), the whole GPU's under MIG
    "gpu_energy_source",  # ENERGY_COUNTER, ENERGY_FROM_POWER, or why there is none
    "gpu_clock_events",  # every clock-event reason named by a reading of the window
    "gpu_throttled",  # bool: THROTTLE_REASONS in more than THROTTLED_READINGS_SHARE of readings
    "gpu_throttle_reasons",  # the throttle reasons seen, with the share of readings naming each
    # The power limit, the GPU's state (never interference), over the busy readings (those not
    # naming idle; all readings where NVML reads no reasons):
    "gpu_power_cap_share",  # the share naming the power cap (None: no reasons read)
    "gpu_power_of_limit",  # their mean power / the enforced limit
    "gpu_power_limit_w",  # the enforced limit (W)
    "gpu_power_default_limit_w",  # the card's default limit (W): above the enforced, lowered
    "gpu_sm_clock_of_max",  # their median SM clock / the SM clock's maximum
    "gpu_device",  # Device.identity(): driver, name, MIG, power limits
    "gpu_readings",  # every reading of the window: [unix, sm, mem, W, °C, reasons]
)


def _values(readings: Sequence[Reading], name: str) -> list[float]:
    return [getattr(r, name) for r in readings if getattr(r, name) is not None]


def reason_names(mask: int) -> list[str]:
    """The names of a clock-event bitmask's reasons (unknown bits as hex)."""
    known = {**THROTTLE_REASONS, **OTHER_REASONS}
    names = [name for bit, name in sorted(known.items()) if mask & bit]
    rest = mask & ~sum(known)
    return names + ([f"0x{rest:x}"] if rest else [])


def energy_j(
    readings: Sequence[Reading], start_mj: int | None, end_mj: int | None
) -> tuple[float | None, str]:
    """The window's joules and where they come from.

    The counter's difference when both edges read it and it did not run backwards (it counts
    from the driver's load: backwards means it wrapped or the driver reloaded, and the window's
    energy is then unknown from it); else the trapezoid of the power readings over their times
    when there are at least two; else None with the reason."""
    if start_mj is not None and end_mj is not None:
        if end_mj >= start_mj:
            return (end_mj - start_mj) / 1000, ENERGY_COUNTER
        why = "the energy counter went backwards (wrapped or reset)"
    else:
        why = "no energy counter on this GPU"
    timed = [(r.unix, r.power_w) for r in readings if r.power_w is not None]
    if len(timed) >= 2:
        joules = sum(
            (t1 - t0) * (p0 + p1) / 2 for (t0, p0), (t1, p1) in zip(timed, timed[1:], strict=False)
        )
        return joules, f"{ENERGY_FROM_POWER}: {why}"
    return None, f"not measured: {why}, and fewer than two power readings"


def summarize(
    readings: Sequence[Reading],
    start_mj: int | None,
    end_mj: int | None,
    identity: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A window's GPU state (:data:`GPU_STATE_KEYS`) from its readings (in time order) and the
    energy counter at its edges."""
    sm, mem = _values(readings, "sm_mhz"), _values(readings, "mem_mhz")
    power, temp = _values(readings, "power_w"), _values(readings, "temp_c")
    masks = [r.reasons for r in readings if r.reasons is not None]
    seen = 0
    for mask in masks:
        seen |= mask
    throttle_counts = {
        name: sum(bool(mask & bit) for mask in masks) for bit, name in THROTTLE_REASONS.items()
    }
    throttled_readings = sum(any(mask & bit for bit in THROTTLE_REASONS) for mask in masks)
    joules, source = energy_j(readings, start_mj, end_mj)
    if identity and identity.get("mig") and joules is not None:
        source += " (MIG: the whole GPU's, shared with its other instances)"
    known = identity or {}
    limit, top = known.get("power_limit_w"), known.get("sm_clock_max_mhz")
    busy = [r for r in readings if r.reasons is None or not r.reasons & IDLE]
    busy_masks = [r.reasons for r in busy if r.reasons is not None]
    busy_power, busy_sm = _values(busy, "power_w"), _values(busy, "sm_mhz")
    return {
        "gpu_sm_clock_min_mhz": min(sm, default=None),
        "gpu_sm_clock_median_mhz": statistics.median(sm) if sm else None,
        "gpu_mem_clock_min_mhz": min(mem, default=None),
        "gpu_mem_clock_median_mhz": statistics.median(mem) if mem else None,
        "gpu_power_mean_w": statistics.fmean(power) if power else None,
        "gpu_temp_max_c": max(temp, default=None),
        "gpu_energy_j": joules,
        "gpu_energy_source": source,
        "gpu_clock_events": reason_names(seen),
        "gpu_throttled": (
            None if not masks else throttled_readings / len(masks) > THROTTLED_READINGS_SHARE
        ),
        "gpu_throttle_reasons": {
            name: count / len(masks) for name, count in throttle_counts.items() if count
        },
        "gpu_power_cap_share": (
            sum(bool(mask & POWER_CAP) for mask in busy_masks) / len(busy_masks)
            if busy_masks
            else None
        ),
        "gpu_power_of_limit": statistics.fmean(busy_power) / limit
        if busy_power and limit
        else None,
        "gpu_power_limit_w": limit,
        "gpu_power_default_limit_w": known.get("power_default_limit_w"),
        "gpu_sm_clock_of_max": statistics.median(busy_sm) / top if busy_sm and top else None,
        "gpu_device": identity,
        "gpu_readings": [list(asdict(r).values()) for r in readings],
    }
