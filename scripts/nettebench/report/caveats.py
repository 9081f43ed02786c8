"""What a reader must know before trusting a number: interference, impossible figures, emulation.

Three caveats, decided from the records alone, written as columns of ``runs.csv`` and turned
into marks in the tables (by :mod:`nettebench.report.grids`) and the report: **interference**
(``‡``, :mod:`nettebench.records.conditions`), **impossible** (``✗``, a cell faster than its own
compute ceiling beyond both their spreads: :func:`ceiling_verdict`) and **emulated** precision
(bf16 on a CPU without native bf16 arithmetic, in the column header). Beside them, a state
that is no caveat: a GPU **at its power limit** (``¤``, :data:`POWER_LIMIT_NOTE`). What each
means for a reader: docs/honest-numbers.md. Helpers on plain dictionaries, so the tests can
feed them records directly.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from nettebench.records.conditions import (
    GPU_OTHER_UTIL_LIMIT,
    OTHER_CPU_SHARE_LIMIT,
    STEAL_SHARE_LIMIT,
    THROTTLED_SHARE_LIMIT,
)
from nettebench.records.nvml import AT_POWER_LIMIT_SHARE, lowered_power_limit
from nettebench.records.spread import UNSTABLE_CV, finite
from nettebench.report import format as T
from nettebench.vocabulary.precision import PRECISIONS, emulated_reason

INTERFERENCE_MARK = "‡"  # suffix: timed under interference
IMPOSSIBLE_MARK = "✗"  # in place of a figure that cannot be true as measured
UNSTABLE_MARK = "§"  # suffix: the cell's steps spread by UNSTABLE_CV of their mean or more
WITHIN_NOISE_MARK = "≈"  # suffix: above its ceiling, but within both their spreads
POWER_LIMIT_MARK = "¤"  # the GPU ran at its power limit: its state, not interference
EMULATED_LABEL = "(emulated)"  # after a precision's name in a column header


# The trainer's anomaly text for a first epoch faster than the later ones, as records made
# before ``summary.epoch_variation`` wrote into ``summary.anomalies``: variation, not impossible
# (runs.csv's ``epoch_variation`` comes from the summary; such an old record leaves it empty).
_OLD_VARIATION_START = "first epoch "


def number(value: Any) -> float | None:
    """A finite float, or None (missing, text, a boolean, infinite)."""
    found = finite([value])
    return found[0] if found else None


def _reasons(found: Mapping[str, Any] | None) -> str | None:
    reasons = list((found or {}).get("interference_reasons") or [])
    return "; ".join(reasons) or None


def ceiling_fast_end(ceiling: Mapping[str, Any] | None) -> float | None:
    """img/s of the ceiling's fastest tenth of steps (batch / p10 step time), the most a cell
    can reach within the ceiling's own noise; None without an ok ceiling."""
    if not ceiling or ceiling.get("status") != "ok":
        return None
    p10 = number(ceiling.get("step_ms_p10"))
    batch = number(ceiling.get("batch_size"))
    if not p10 or not batch:
        return number(ceiling.get("img_s"))
    return batch / (p10 / 1000)


def caveat_columns(record: Mapping[str, Any], ceiling: Mapping[str, Any] | None) -> dict[str, Any]:
    """The :data:`CAVEAT_COLUMNS` of one cell (its metrics.json record and its ceiling.json)."""
    found = record.get("conditions")  # absent in records made before conditions were measured
    summary = record.get("summary") or {}
    ceiling_found = (ceiling or {}).get("conditions")
    device = (record.get("device") or {}).get("type")
    env = record.get("environment") or {}
    row: dict[str, Any] = {
        # the cell's epochs ran under interference (None: not measured), and why ("; "-joined)
        "interference": None if found is None else bool(found.get("interference")),
        "interference_reasons": _reasons(found),
        "other_cpu_share": (found or {}).get("other_cpu_share"),  # of the job's CPUs
        "steal_share": (found or {}).get("steal_share"),  # the hypervisor's share
        "gpu_other_util": (found or {}).get("gpu_other_util"),  # another process's top SM %
        # Unix times of the epochs' window, to find overlapping jobs
        "timed_from": (found or {}).get("started_at"),
        "timed_to": (found or {}).get("ended_at"),
        # "cell job" (same process, right after the epochs) or "standalone"
        "ceiling_context": (ceiling or {}).get("context"),
        "ceiling_interference": None
        if ceiling_found is None
        else bool(ceiling_found.get("interference")),
        "ceiling_interference_reasons": _reasons(ceiling_found),
        "ceiling_other_cpu_share": (ceiling_found or {}).get("other_cpu_share"),
        "ceiling_timed_from": (ceiling_found or {}).get("started_at"),
        "ceiling_timed_to": (ceiling_found or {}).get("ended_at"),
        "ceiling_fast_img_s": None,  # batch / p10 step time: the ceiling's fast end (its noise)
        "above_ceiling": None,  # train_img_s_low > ceiling_fast_img_s (beyond both spreads)
        "ceiling_exceeded": None,  # above the ceiling's median img/s, within both spreads
        "implausible": None,  # every figure of this cell that cannot be true, and why
        "precision_emulated": None,  # why the precision ran emulated
        # the GPU's power state over the epochs (never a caveat; None: a CPU, or no NVML)
        **power_state(found),
        **{f"ceiling_{k}": v for k, v in power_state(ceiling_found).items() if k in _CEILING_STATE},
    }
    anomalies = [str(text) for text in summary.get("anomalies") or []]
    reasons = [text for text in anomalies if not text.startswith(_OLD_VARIATION_START)]
    disturbed = bool(row["interference"]) or bool(row["ceiling_interference"])
    row.update(ceiling_verdict(record, summary, ceiling, disturbed=disturbed))
    if row["above_ceiling"]:
        reasons.append(row.pop("_reason"))
    row.pop("_reason", None)
    row["implausible"] = "; ".join(reasons) or None
    precision = (record.get("cell") or {}).get("precision")
    if precision in PRECISIONS and device:
        row["precision_emulated"] = emulated_reason(precision, device, env.get("bf16_native"))
    return row


_CEILING_STATE = ("gpu_power_cap_share", "gpu_power_of_limit", "gpu_sm_clock_of_max")


def power_state(found: Mapping[str, Any] | None) -> dict[str, Any]:
    """A window's GPU power columns (``gpu_power_*``, ``gpu_sm_clock_of_max``) from its
    conditions; the limits from ``gpu_device`` where a record has only that."""
    found = found or {}
    device = found.get("gpu_device") or {}
    limit = found.get("gpu_power_limit_w", device.get("power_limit_w"))
    default = found.get("gpu_power_default_limit_w", device.get("power_default_limit_w"))
    return {
        # of the busy readings: the share at the power cap, their mean power over the enforced
        # limit, their median SM clock over its maximum
        "gpu_power_cap_share": found.get("gpu_power_cap_share"),
        "gpu_power_of_limit": found.get("gpu_power_of_limit"),
        "gpu_sm_clock_of_max": found.get("gpu_sm_clock_of_max"),
        "gpu_power_limit_w": limit,  # the limits (W)
        "gpu_power_default_limit_w": default,
        # the enforced limit where below the default: a setup column (the machines table)
        "gpu_power_limit_lowered_w": lowered_power_limit(
            {"power_limit_w": limit, "power_default_limit_w": default}
        ),
    }


def ceiling_verdict(
    record: Mapping[str, Any],
    summary: Mapping[str, Any],
    ceiling: Mapping[str, Any] | None,
    *,
    disturbed: bool = False,
) -> dict[str, Any]:
    """``ceiling_fast_img_s``, ``above_ceiling`` and ``ceiling_exceeded`` of one ok cell.

    Beyond both spreads: the slow end of the cell's interval (its median itself when it has
    none: fewer than 6 steady steps) above the ceiling's fast end. Said in words, its figure
    kept: a median above the ceiling's median within both spreads; one beyond them when the
    cell or its ceiling was ``disturbed`` (the load changed between the two windows); and one
    on a CPU, whose ceiling is an estimate (its steps share the cores with nothing, where the
    cell's share them with its loader's workers: a quiet CPU cell was seen above it)."""
    fast = ceiling_fast_end(ceiling)
    train = number(summary.get("train_img_s"))
    if record.get("status") != "ok" or fast is None or train is None:
        return {}
    low = number(summary.get("train_img_s_low"))
    slow_end = train if low is None else min(low, train)
    middle = number(ceiling.get("img_s")) or fast
    beyond = slow_end > fast
    estimate = (record.get("device") or {}).get("type") == "cpu"
    found: dict[str, Any] = {
        "ceiling_fast_img_s": fast,
        "above_ceiling": beyond and not disturbed and not estimate,
    }
    spread = "" if low is None else f" (its interval from {low:,.0f})"
    if beyond and estimate and not disturbed:
        found["ceiling_exceeded"] = (
            f"trained at {train:,.0f} img/s{spread}, above its CPU ceiling ({middle:,.0f} img/s, "
            f"fast end {fast:,.0f}): on a CPU the ceiling is an estimate (its steps run without "
            "the loader's workers beside them), so the share is not a bound and nothing is withheld"
        )
    elif beyond and disturbed:
        found["ceiling_exceeded"] = (
            f"trained at {train:,.0f} img/s{spread}, above its ceiling ({middle:,.0f} img/s, "
            f"fast end {fast:,.0f}), but the cell or its ceiling was timed under interference: "
            "the load changed between the two, so the share is noise, not an impossibility"
        )
    elif beyond:
        found["_reason"] = (
            f"trained at {train:,.0f} img/s{spread}, above its own compute ceiling "
            f"({middle:,.0f} img/s, {fast:,.0f} at the fast end of its noise): the two were not "
            "measured in comparable conditions"
        )
    elif train > middle:
        found["ceiling_exceeded"] = (
            f"trained at {train:,.0f} img/s{spread}, above its ceiling's median {middle:,.0f} "
            f"but within both spreads (the ceiling's fast end is {fast:,.0f}): noise, the share "
            "is over 100 % by no more than the two vary"
        )
    return found


# ----------------------------------------------------------------------- marks in the tables


def text_of(value: Any) -> str | None:
    """A runs.csv value as text, stripped; None where it is missing or blank."""
    return None if T.is_missing(value) else (str(value).strip() or None)


# Which flags a table's value depends on: its own cell's, its ceiling's, or both (a share).
SUBJECTS = {
    "cell": ("interference",),
    "ceiling": ("ceiling_interference",),
    "share": ("interference", "ceiling_interference"),
}


def cell_caveat(seeds: Sequence[Mapping[str, Any]], subject: str) -> tuple[bool, str]:
    """For one table cell (its finished seeds as rows of runs.csv): whether the figure must
    be withheld as impossible (a share above its ceiling), and the mark to append (``‡`` when
    any seed's timing, or its ceiling's, ran under interference)."""
    impossible = subject == "share" and any(T.as_bool(s.get("above_ceiling")) for s in seeds)
    disturbed = any(T.as_bool(s.get(column)) for s in seeds for column in SUBJECTS[subject])
    return impossible, INTERFERENCE_MARK if disturbed else ""


def exceeded(seeds: Sequence[Mapping[str, Any]]) -> bool:
    """Whether any seed trained above its ceiling's median within both spreads."""
    return any(text_of(s.get("ceiling_exceeded")) for s in seeds)


WITHIN_NOISE_NOTE = (
    f"{WITHIN_NOISE_MARK} above 100 % within the noise: the cell's img/s is above its ceiling's "
    "median but its interval reaches below the ceiling's fast end (the rate of its fastest "
    "tenth of steps), so the two differ by no more than they vary (`ceiling_exceeded` in "
    "runs.csv); not a pipeline faster than no pipeline."
)


def own_interval(ok: Any, columns: tuple[str, str]) -> tuple[float, float] | None:
    """A one-seed cell's own interval (its ``columns``, low and high), when it has one: that of
    the first row of ``ok`` (a frame of the cell's finished seeds)."""
    first = {c: ok[c].iloc[0] for c in columns if c in ok and len(ok)}
    return seed_interval(first, columns)


def seed_interval(seed: Mapping[str, Any], columns: tuple[str, str]) -> tuple[float, float] | None:
    """A seed's own interval (its ``columns``, low and high, as a row of runs.csv), when it has
    both ends."""
    low, high = (number(seed.get(c)) for c in columns)
    return None if low is None or high is None else (low, high)


def unstable_reasons(seeds: Sequence[Mapping[str, Any]]) -> list[str]:
    """The ``unstable`` texts of a table cell's finished seeds (seed-prefixed when several)."""
    texts = [(s.get("seed"), text_of(s.get("unstable"))) for s in seeds]
    texts = [(seed, text) for seed, text in texts if text]
    if len(seeds) == 1:
        return [text for _, text in texts]
    return [f"seed {seed}: {text}" for seed, text in texts]


# What makes a cell's steps unstable (records.spread decides it), in words.
UNSTABLE_RULE = f"standard deviation {100 * UNSTABLE_CV:.0f} % of the mean or more (pyperf's rule)"
NAMED_CELLS = 3  # a note names this many cells, then counts the rest (their rows say the rest)


def named_cells(names: Sequence[str]) -> str:
    """``resnet18 O0, resnet18 O1 and 4 more``: a note's brief list of the cells it is about, so
    a note stays short however many cells a study has (each one's reasons are in its row of
    the timing-conditions table)."""
    unique = list(dict.fromkeys(names))
    shown, rest = unique[:NAMED_CELLS], len(unique) - NAMED_CELLS
    if rest > 0:
        return f"{', '.join(shown)} and {rest} more"
    return " and ".join([", ".join(shown[:-1]), shown[-1]] if len(shown) > 1 else shown)


def unstable_note(cells: Sequence[str]) -> str:
    """The footnote of :data:`UNSTABLE_MARK`, naming the marked ``cells`` briefly."""
    return (
        f"{UNSTABLE_MARK} unstable: the cell's steady steps have a {UNSTABLE_RULE}, so one "
        f"number describes them poorly; its interval still holds: {named_cells(cells)} "
        "(each one's spread and cause: the timing conditions table)."
    )


def emulated_header(precision: str, seeds: Sequence[Mapping[str, Any]]) -> str:
    """A column's header: ``bf16 (emulated)`` when any finished cell below ran it emulated."""
    if any(text_of(s.get("precision_emulated")) for s in seeds):
        return f"{precision} {EMULATED_LABEL}"
    return precision


# What made a window disturbed (records.conditions decides it from these constants), in words.
INTERFERENCE_RULE = (
    f"other processes took over {100 * OTHER_CPU_SHARE_LIMIT:.0f} % of the job's CPUs, the "
    f"hypervisor stole over {100 * STEAL_SHARE_LIMIT:.0f} % of their time, the cgroup was "
    f"throttled over {100 * THROTTLED_SHARE_LIMIT:.0f} % of the window, another process used "
    f"the GPU (over {GPU_OTHER_UTIL_LIMIT:.0f} % SM), or the GPU slowed (heat, hardware "
    "slowdown, power brake)"
)


def interference_note(subject: str) -> str:
    what = {
        "cell": "the cell's epochs",
        "ceiling": "the ceiling's timed steps",
        "share": "the cell's epochs or its ceiling's timed steps",
    }[subject]
    effect = (
        "either side may be slowed and the share be too low or too high"
        if subject == "share"
        else "the number may be slower than the machine is on its own"
    )
    return (
        f"{INTERFERENCE_MARK} timed under interference while {what} ran: {INTERFERENCE_RULE}; "
        f"so {effect} (each window's reasons: `interference_reasons` in runs.csv, and the "
        "timing conditions table)."
    )


POWER_LIMIT_NOTE = (
    f"{POWER_LIMIT_MARK} at its power limit: NVML named the software power cap in more than "
    f"{100 * AT_POWER_LIMIT_SHARE:.0f} % of the window's busy readings, so the GPU held its "
    "clocks to stay at its enforced power limit, as a GPU under full load does by design. It is "
    f"the GPU's state, not interference: no {INTERFERENCE_MARK}, and no verdict is withheld "
    f"for it (heat, a hardware slowdown or a power brake are {INTERFERENCE_MARK}). A limit set "
    "below the card's default is a hardware setting: the machines table names it, and a result "
    "measured under it is never restored for the default limit."
)


IMPOSSIBLE_NOTE = (
    f"{IMPOSSIBLE_MARK} not shown: the cell trained faster than its own compute ceiling beyond "
    "both their spreads (the slow end of the cell's interval above the rate of the ceiling's "
    "fastest tenth of steps), with neither timed under interference, which cannot be true of "
    "two measurements made alike; the reason is in `implausible` in runs.csv."
)


def emulated_note(rows: Sequence[Mapping[str, Any]]) -> str:
    """The footnote under a table with an emulated column, naming the CPU and its capability."""

    def describe(row: Mapping[str, Any]) -> str:
        text = (
            f"{text_of(row.get('env_cpu_model')) or 'unknown CPU'}, torch CPU capability "
            f"{text_of(row.get('env_cpu_capability')) or 'unknown'}"
        )
        limits = text_of(row.get("env_cpu_isa_limits"))
        return f"{text}, capped by {limits}" if limits else text

    cpus = sorted({describe(r) for r in rows if text_of(r.get("precision_emulated"))})
    return (
        f"{EMULATED_LABEL}: no native bf16 arithmetic on this CPU ({'; '.join(cpus)}): torch "
        "converts bf16 to fp32 and back in software, so the column measures that emulation, not "
        "what bf16 does on hardware that has it (avx512_bf16, AMX, or a GPU)."
    )


def reasons_of(value: Any) -> list[str]:
    """A reasons column back as a list (written "; "-joined, or as a JSON list by older code)."""
    text = text_of(value)
    if not text:
        return []
    if text.startswith("["):
        try:
            return [str(item) for item in json.loads(text)]
        except ValueError:
            pass
    return [part.strip() for part in text.split("; ") if part.strip()]


# The columns runs.csv gets, after the ceiling's (report.frames.runs.CEILING_COLUMNS): those
# caveat_columns writes, in its order (one definition: the function's own keys).
CAVEAT_COLUMNS = tuple(caveat_columns({}, None))
