"""Energy: the CPU packages' RAPL counters, a span of steps' joules, and joules per image.

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

A cell's energy per image is that of its steady training steps (:data:`STEADY_SPAN`): each
epoch's span from the start of its first steady step to the end of its last step, read at those
edges by a :class:`SpanMeter` (the trainer's loop opens and closes it), so neither the warm-up,
the loader's start-up nor validation (which draws another power) is counted.
:func:`steady_totals` adds the epochs' spans up in the record's ``conditions``, and
:func:`energy_columns` turns them into the cell's ``runs.csv`` energy columns: joules per image
is the spans' joules over their images, the power their joules over their seconds, img/s/W the
inverse of J/img; the interval is the steady img/s interval's relative width (the steps'
spread), given where the energy came from a counter (NVML's mJ or RAPL's µJ over seconds: under
0.1 % of it), and none where it came from power readings 0.1 s apart.
Only the standard library: the trainer's probe and the report use it.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nettebench.records import nvml

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


# What a cell's energy per image covers; the record's conditions say it beside the joules.
STEADY_SPAN = (
    "the steady training steps of every epoch: from the start of its first step after the "
    "warm-up and the loader's start-up to the end of its last step; validation apart"
)
NO_NVML_ENERGY = "not measured: NVML not visible (nvidia-ml-py not installed or no driver)"
NOT_OPENED = "not measured: the epoch ended before its steady steps began"
NO_SPAN = (
    "not measured: the record has no steady training steps' energy (written before it was "
    "measured; its epochs' window mixes validation in)"
)


@dataclass(frozen=True)
class _Edge:
    unix: float  # the edge's time: the GPU reading's taken there, or time.time() on a CPU
    value: Any  # NVML's counter (mJ, None without one) or RaplMeter.read()'s (J, lost)


class SpanMeter:
    """The energy of one span of steps, read at its two edges.

    On a GPU, NVML's counter and a reading of the GPU's state at each edge (through the probe's
    sampler, :class:`.nvml.Sampler`); where the counter is missing or ran backwards, the
    trapezoid of the power readings between the edges (:func:`within`). On a CPU the packages'
    RAPL counter (the probe's :class:`RaplMeter`). A CUDA job without NVML is not measured (the
    packages' energy is not the GPU's).

    The trainer's loop (:func:`nettebench.training.loop.train_epoch`) calls :meth:`open` and
    :meth:`close` with the device synchronised, so the counter read at an edge holds the GPU's
    work queued before it and none after it.
    """

    def __init__(self, probe: Any, device_type: str | None) -> None:
        self.sampler = getattr(probe, "sampler", None)
        self.rapl = getattr(probe, "rapl", None) if device_type != "cuda" else None
        self.start: _Edge | None = None
        self.end: _Edge | None = None

    @property
    def one_device(self) -> bool:
        """The energy is this process's GPU's (NVML), not every process's on the packages."""
        return self.sampler is not None

    def _edge(self) -> _Edge:
        if self.sampler is not None:
            counter = self.sampler.device.energy_mj()
            index = self.sampler.read()
            return _Edge(self.sampler.readings[index].unix, counter)
        if self.rapl is not None:
            return _Edge(time.time(), self.rapl.read())
        return _Edge(time.time(), None)

    def open(self) -> None:
        """The span begins: the device has finished the work queued before it."""
        self.start, self.end = self._edge(), None

    def close(self) -> None:
        """The span ends: the device has finished its last step."""
        if self.start is not None:
            self.end = self._edge()

    def measured(self, images: float) -> dict[str, Any]:
        """The span's Unix edges, seconds, ``images`` (those its steps trained), joules and
        where they came from ("not measured: why" where none)."""
        found: dict[str, Any] = dict.fromkeys(("started_at", "ended_at", "seconds", "energy_j"))
        found.update(images=images, source=NOT_OPENED)
        if self.start is None or self.end is None:
            return found
        found.update(
            started_at=self.start.unix,
            ended_at=self.end.unix,
            seconds=self.end.unix - self.start.unix,
        )
        joules, source = self._joules(self.start, self.end)
        if joules is not None and joules <= 0:  # a counter that did not move measured nothing
            joules, source = None, f"not measured: {source} did not advance"
        found.update(energy_j=joules, source=source)
        return found

    def _joules(self, start: _Edge, end: _Edge) -> tuple[float | None, str]:
        if self.sampler is not None:
            readings = within(list(self.sampler.readings), start.unix, end.unix)
            state = nvml.summarize(readings, start.value, end.value, self.sampler.identity)
            return state["gpu_energy_j"], state["gpu_energy_source"]
        if self.rapl is not None:
            return self.rapl.window(start.value, end.value)
        return None, NO_NVML_ENERGY


def within(readings: Sequence[nvml.Reading], start: float, end: float) -> list[nvml.Reading]:
    """The power readings from ``start`` to ``end`` (Unix times) in time order, with the power
    at an edge where no reading was taken interpolated from the readings either side: their
    trapezoid is the span's energy, clipped at its edges."""
    timed = sorted((r for r in readings if r.power_w is not None), key=lambda r: r.unix)
    inside = [r for r in timed if start <= r.unix <= end]
    for edge in (start, end):
        before = [r for r in timed if r.unix < edge]
        after = [r for r in timed if r.unix > edge]
        if any(r.unix == edge for r in inside) or not before or not after:
            continue
        a, b = before[-1], after[0]
        power = a.power_w + (b.power_w - a.power_w) * (edge - a.unix) / (b.unix - a.unix)
        inside.append(nvml.Reading(unix=edge, power_w=power))
    return sorted(inside, key=lambda r: r.unix)


# Keys steady_totals() adds to a record's conditions.
STEADY_KEYS = (
    "steady_energy_span",  # STEADY_SPAN: what the energy below covers
    "steady_energy_j",  # the epochs' steady spans' joules (those measured), None: not measured
    "steady_energy_s",  # their seconds
    "steady_energy_images",  # the images their steps trained
    "steady_energy_source",  # where the joules came from, or "not measured: why"
    # each epoch's span: epoch, steps [first, end) of the epoch, Unix edges, seconds, images,
    # joules and source (SpanMeter.measured)
    "steady_energy_epochs",
)


def _measured(spans: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [s for s in spans if s.get("energy_j") is not None and s.get("images")]


def is_counter(source: str) -> bool:
    """Whether energy from ``source`` came from a counter (NVML's or RAPL's), not readings."""
    return source.startswith((nvml.ENERGY_COUNTER, RAPL_SOURCE))


def steady_totals(spans: Sequence[Mapping[str, Any] | None]) -> dict[str, Any]:
    """The record's :data:`STEADY_KEYS` from each epoch's span (:meth:`SpanMeter.measured`;
    None for an epoch that recorded none): sums over the epochs whose span was measured, and
    the source says how many of the epochs those are when not all."""
    listed = [dict(s) for s in spans if s is not None]
    found: dict[str, Any] = {"steady_energy_span": STEADY_SPAN}
    measured = _measured(listed)
    if not measured:
        reasons = [s.get("source") for s in listed if s.get("energy_j") is None]
        reasons.append(
            "not measured: no epoch's steady steps trained an image"
            if listed
            else "not measured: no epoch recorded its steady steps' energy"
        )
        found.update(dict.fromkeys(STEADY_KEYS[1:4]))
        found["steady_energy_source"] = next(r for r in reasons if r)
        found["steady_energy_epochs"] = listed
        return found
    source = "; ".join(dict.fromkeys(s["source"] for s in measured))
    if len(measured) < len(spans):
        source += f" ({len(measured)} of {len(spans)} epochs)"
    found.update(
        steady_energy_j=sum(s["energy_j"] for s in measured),
        steady_energy_s=sum(s["seconds"] or 0.0 for s in measured),
        steady_energy_images=sum(s["images"] for s in measured),
        steady_energy_source=source,
        steady_energy_epochs=listed,
    )
    return found


# Columns energy_columns() adds to runs.csv, in order.
ENERGY_COLUMNS = (
    "energy_j",  # the steady steps' energy (STEADY_SPAN): the GPU's (NVML) on a GPU, the CPU
    # packages' (RAPL) on a CPU
    "energy_source",  # where it came from, or "not measured: why"
    "energy_s",  # the steady steps' seconds (their spans' edges)
    "energy_images",  # the images the steady steps trained
    "power_w",  # energy_j / energy_s
    "j_per_img",  # energy_j / energy_images
    "j_per_img_low",  # j_per_img x the steady img/s interval's relative width
    "j_per_img_high",
    "img_s_per_w",  # energy_images / energy_j (img/s per watt = images per joule)
    "img_s_per_w_low",
    "img_s_per_w_high",
)
_PER_IMAGE = ENERGY_COLUMNS[4:]


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
    """Power, J/img and img/s/W (with their intervals where ``interval``) of one window at
    ``img_s`` (an inference phase's)."""
    found: dict[str, float | None] = dict.fromkeys(_PER_IMAGE)
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


def span_per_image(
    joules: float,
    seconds: float | None,
    images: float,
    img_s: float | None = None,
    img_s_low: float | None = None,
    img_s_high: float | None = None,
    *,
    interval: bool = True,
) -> dict[str, float | None]:
    """Power, J/img and img/s/W of the steady spans: their joules over their seconds and over
    their images; where ``interval``, J/img's interval is the steady img/s interval's relative
    width (``img_s`` its median: the faster end costs less per image)."""
    found: dict[str, float | None] = dict.fromkeys(_PER_IMAGE)
    if seconds and seconds > 0:
        found["power_w"] = joules / seconds
    each = joules / images
    found["j_per_img"] = each
    found["img_s_per_w"] = 1 / each
    if interval and img_s and img_s_low and img_s_high and img_s_low > 0:
        found["j_per_img_low"] = each * img_s / img_s_high
        found["j_per_img_high"] = each * img_s / img_s_low
        found["img_s_per_w_low"] = img_s_low / (img_s * each)
        found["img_s_per_w_high"] = img_s_high / (img_s * each)
    return found


def energy_columns(record: Mapping[str, Any]) -> dict[str, Any]:
    """A cell's :data:`ENERGY_COLUMNS` from its metrics.json record: its steady training
    steps' energy (:data:`STEADY_KEYS` in its conditions). A record without them (written
    before they were measured) is not measured: its epochs' window holds validation too."""
    conditions = record.get("conditions") or {}
    found: dict[str, Any] = dict.fromkeys(ENERGY_COLUMNS)
    if "steady_energy_source" not in conditions:
        joules, source, _ = window_energy(conditions, (record.get("device") or {}).get("type"))
        found["energy_source"] = source if joules is None else NO_SPAN
        return found
    joules, images = conditions.get("steady_energy_j"), conditions.get("steady_energy_images")
    found.update(
        energy_j=joules,
        energy_source=conditions["steady_energy_source"],
        energy_s=conditions.get("steady_energy_s"),
        energy_images=images,
    )
    if joules is None or joules <= 0 or not images:
        return found
    spans = _measured(conditions.get("steady_energy_epochs") or [])
    summary = record.get("summary") or {}
    found.update(
        span_per_image(
            joules,
            found["energy_s"],
            images,
            summary.get("train_img_s"),
            summary.get("train_img_s_low"),
            summary.get("train_img_s_high"),
            interval=bool(spans) and all(is_counter(str(s.get("source"))) for s in spans),
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
