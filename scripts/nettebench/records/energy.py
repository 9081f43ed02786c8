"""Energy: the CPU packages' RAPL counters, and joules per image from a window's energy.

The study asked whether mixed precision pays on Tensor Cores; the honest answer also says what
it costs in joules. A GPU's energy comes from NVML's counter (:mod:`.nvml`); a CPU's from RAPL,
the package energy counters Linux exposes under ``/sys/class/powercap`` (``intel-rapl:N``
with ``name`` ``package-N``, on Intel and on AMD since Zen through the same interface), where
they are readable: many kernels make ``energy_uj`` readable by root only, and a VM or container
often has no powercap folder at all. Where no counter exists the energy is None and says
"not measured", never 0.

RAPL counts the whole package (every process on it, idle cores included), in microjoules, and
wraps at ``max_energy_range_uj`` (about 262 kJ: under nine minutes at 500 W). :class:`RaplMeter`
reads it at every window edge (each epoch's) and undoes one wrap per gap; a gap long enough to
hold two is not measured, and nor is any window around it.

:func:`energy_columns` turns a cell's record into its ``runs.csv`` energy columns: the power is
the window's energy over its wall time (the epochs' window: training and validation), joules per
image that power over the steady steps' img/s, img/s/W their inverse; the interval is the img/s
interval's, given where the energy came from a counter (NVML's mJ or RAPL's µJ over a window of
seconds: under 0.1 % of it), and none where the energy came from power readings 0.1 s apart.
Only the standard library: the trainer's probe and the report use it.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

POWERCAP = "/sys/class/powercap"
RAPL_SOURCE = "RAPL package counter (the whole package: every process on it)"
NO_RAPL = f"not measured: no RAPL package counter readable under {POWERCAP}"
# A gap between two RAPL reads longer than this share of one wrap period at MAX_PACKAGE_W may
# hold more than one wrap: not measured.
_WRAP_SAFETY = 0.5
MAX_PACKAGE_W = 500.0


def read_rapl(root: str = POWERCAP) -> dict[str, tuple[int, int]] | None:
    """Package domain -> (energy_uj, max_energy_range_uj); None where none is readable."""
    found = {}
    try:
        domains = sorted(Path(root).iterdir())
    except OSError:
        return None
    for domain in domains:
        try:
            if not (domain / "name").read_text().strip().startswith("package"):
                continue
            energy = int((domain / "energy_uj").read_text())
            limit = int((domain / "max_energy_range_uj").read_text())
        except (OSError, ValueError):
            continue
        found[domain.name] = (energy, limit)
    return found or None


def rapl_joules(
    start: Mapping[str, tuple[int, int]] | None,
    end: Mapping[str, tuple[int, int]] | None,
    wall_s: float,
    max_package_w: float = MAX_PACKAGE_W,
) -> tuple[float | None, str]:
    """The packages' joules between two :func:`read_rapl` readings and their source.

    A counter lower at the end wrapped once (``end + range - start``); a gap so long that a
    package at ``max_package_w`` could wrap it twice is refused."""
    if not start or not end or set(start) != set(end):
        return None, NO_RAPL
    total = 0
    for name, (first, limit) in start.items():
        last = end[name][0]
        if limit <= 0:
            return None, NO_RAPL
        if wall_s * max_package_w * 1e6 > _WRAP_SAFETY * limit:
            return None, f"not measured: the RAPL counter may have wrapped twice ({name})"
        total += last - first if last >= first else last + limit - first
    return total / 1e6, RAPL_SOURCE


class RaplMeter:
    """The packages' energy as a running total, read at every window edge (a run's and each of
    its epochs'), each gap's wrap undone: windows nest and take the total's difference."""

    def __init__(self, root: str = POWERCAP, clock=None) -> None:
        import time

        self.root = root
        self.clock = clock or time.monotonic
        self.last = read_rapl(root)
        self.at = self.clock()
        self.total_j = 0.0
        self.lost = 0  # gaps that could not be measured (several wraps possible)
        self.why = NO_RAPL if self.last is None else RAPL_SOURCE

    def read(self) -> tuple[float, int] | None:
        """(the running total in J, lost gaps so far); None without RAPL."""
        if self.last is None:
            return None
        now, at = read_rapl(self.root), self.clock()
        joules, why = rapl_joules(self.last, now, at - self.at)
        if joules is None:
            self.lost += 1
            self.why = why
        else:
            self.total_j += joules
        if now is not None:
            self.last, self.at = now, at
        return self.total_j, self.lost

    def window(self, start: tuple[float, int] | None, end: tuple[float, int] | None):
        """(joules, source) between two :meth:`read` results."""
        if start is None or end is None:
            return None, NO_RAPL
        if end[1] != start[1]:
            return None, self.why
        return end[0] - start[0], RAPL_SOURCE


# Columns energy_columns() adds to runs.csv, in order.
ENERGY_COLUMNS = (
    "energy_j",  # the epochs' window: the GPU's (NVML) on a GPU, the CPU packages' (RAPL) on a CPU
    "energy_source",  # where it came from, or "not measured: why"
    "power_w",  # energy_j / the window's wall_s
    "j_per_img",  # power_w / train_img_s
    "j_per_img_low",
    "j_per_img_high",
    "img_s_per_w",  # train_img_s / power_w
    "img_s_per_w_low",
    "img_s_per_w_high",
)


def window_energy(conditions: Mapping[str, Any] | None, device_type: str | None) -> tuple:
    """(joules, source, counter?) of a window: the GPU's on a GPU, the packages' on a CPU."""
    found = conditions or {}
    if device_type == "cuda":
        source = found.get("gpu_energy_source") or "not measured: no NVML energy in the record"
        return found.get("gpu_energy_j"), source, source.startswith("NVML energy counter")
    source = found.get("cpu_energy_source") or NO_RAPL
    return found.get("cpu_energy_j"), source, source == RAPL_SOURCE


def per_image(
    joules: float | None,
    wall_s: float | None,
    img_s: float | None,
    img_s_low: float | None = None,
    img_s_high: float | None = None,
    *,
    interval: bool = True,
) -> dict[str, float | None]:
    """Power, J/img and img/s/W (with their intervals where ``interval``) of one window."""
    found: dict[str, float | None] = dict.fromkeys(ENERGY_COLUMNS[2:])
    if joules is None or not wall_s or wall_s <= 0 or joules <= 0:
        return found
    power = joules / wall_s
    found["power_w"] = power
    if not img_s or img_s <= 0:
        return found
    found["j_per_img"] = power / img_s
    found["img_s_per_w"] = img_s / power
    if interval and img_s_low and img_s_high and img_s_low > 0:
        found["j_per_img_low"] = power / img_s_high  # the faster end costs less per image
        found["j_per_img_high"] = power / img_s_low
        found["img_s_per_w_low"] = img_s_low / power
        found["img_s_per_w_high"] = img_s_high / power
    return found


def energy_columns(record: Mapping[str, Any]) -> dict[str, Any]:
    """A cell's :data:`ENERGY_COLUMNS` from its metrics.json record (its epochs' window)."""
    conditions = record.get("conditions")
    device = (record.get("device") or {}).get("type")
    joules, source, counter = window_energy(conditions, device)
    if joules is not None and joules <= 0:  # a counter that did not move measured nothing
        joules, source = None, f"not measured: {source} did not advance"
    summary = record.get("summary") or {}
    found = {"energy_j": joules, "energy_source": source}
    found.update(
        per_image(
            joules,
            (conditions or {}).get("wall_s"),
            summary.get("train_img_s"),
            summary.get("train_img_s_low"),
            summary.get("train_img_s_high"),
            interval=counter,
        )
    )
    return found


def phase_energy(
    conditions: Mapping[str, Any], result: Mapping[str, Any], device_type: str
) -> dict[str, Any]:
    """An inference phase's energy per image (``result``: measure.offline's, pipeline's or
    single_stream's): its window's power over its img/s (SingleStream: one image per median
    latency), with the img/s interval where the energy came from a counter."""
    joules, source, counter = window_energy(conditions, device_type)
    if joules is not None and joules <= 0:
        joules, source = None, f"not measured: {source} did not advance"
    img_s, low, high = result.get("img_s"), result.get("img_s_low"), result.get("img_s_high")
    latency = (result.get("latency_ms") or {}).get("median")
    if img_s is None and latency:
        img_s = 1000 / latency
    found = {"energy_j": joules, "energy_source": source}
    found.update(per_image(joules, conditions.get("wall_s"), img_s, low, high, interval=counter))
    return found
