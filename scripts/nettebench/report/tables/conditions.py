"""The conditions every timed window ran in (its columns: the table's note): what else the
machine did, the GPU's power state (``¤`` at its power limit: a state, never interference), the
verdict with its reasons, and any other timed window on the same host that overlapped it (two
timed jobs at once spoil each other's numbers; this column shows whether running them one at a
time held).
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from nettebench.records.nvml import at_power_limit
from nettebench.report import caveats as C
from nettebench.report import format as T
from nettebench.report.grids import NO_CELLS_NOTE, row_keys, tell_apart

_NOTE = (
    "Every timed window: each cell's epochs and, beside a matrix cell, its compute ceiling's "
    "timed steps. *Others' CPU*: other processes' share of the job's CPUs; *steal*: the "
    "hypervisor's. *GPU power*: mean power against the enforced limit, SM clock against its "
    "maximum. *Overlapped*: another timed window on this host at the same time. Details: "
    "docs/honest-numbers.md (Timing conditions)."
)
# The marks of the verdict and unstable-steps columns, under the table.
_MARKS = (
    f"{C.INTERFERENCE_MARK} timed under interference: {C.INTERFERENCE_RULE}.",
    f"{C.UNSTABLE_MARK} unstable steps: a {C.UNSTABLE_RULE}; with its cause where the timing "
    "conditions know it.",
)
_NOT_MEASURED = "not measured (a record from before timing conditions were recorded)"


def _windows(runs: pd.DataFrame) -> list[dict[str, Any]]:
    """One dict per timed window of ``runs`` (cells' epochs and ceilings' steps)."""
    labels = T.row_labels(runs, row_keys(runs)) if len(runs) else pd.Series(dtype=object)
    names = pd.Series(
        [
            f"{labels[index]} {row['precision']}"
            + (f" ({str(row['kind']).replace('_', ' ')})" if row["kind"] != "matrix" else "")
            for index, row in runs.iterrows()
        ],
        index=runs.index,
        dtype=object,
    )
    # one row per record: two seeds, or two machines' copies, of a cell are rows of their own
    names = tell_apart(names, runs)
    found = []
    for index, row in runs.iterrows():
        found.append(_window(row, names[index], "epochs", ""))
        if not T.is_missing(row.get("ceiling_status")):
            part = f"ceiling ({row.get('ceiling_context') or 'standalone'})"
            found.append(_window(row, names[index], part, "ceiling_"))
    return found


def _window(row: pd.Series, name: str, part: str, prefix: str) -> dict[str, Any]:
    """A row's window: its epochs' (``prefix`` empty) or its ceiling's (``ceiling_``, whose
    steps have no steal, GPU-others or unstable-steps reading of their own)."""
    epochs = not prefix
    return {
        "name": name,
        "part": part,
        "host": row.get("env_host"),
        "cpus": row.get("env_cpu_affinity_count"),
        "share": row.get(f"{prefix}other_cpu_share"),
        "steal": row.get("steal_share") if epochs else None,
        "gpu": row.get("gpu_other_util") if epochs else None,
        "measured": not T.is_missing(row.get(f"{prefix}interference")),
        "flag": T.as_bool(row.get(f"{prefix}interference")),
        "reasons": C.reasons_of(row.get(f"{prefix}interference_reasons")),
        "from": row.get(f"{prefix}timed_from"),
        "to": row.get(f"{prefix}timed_to"),
        "power": _power(row, prefix),
        "unstable": C.text_of(row.get("unstable")) if epochs else None,
    }


def _power(row: pd.Series, prefix: str) -> tuple[str, bool]:
    """A window's GPU power state (``prefix``: ``ceiling_`` for its ceiling's steps) in words,
    and whether it ran at its power limit (:data:`~nettebench.report.caveats.POWER_LIMIT_MARK`);
    empty for a CPU or a window NVML did not read."""

    def value(name: str) -> float | None:
        found = row.get(name)
        return None if T.is_missing(found) else float(found)

    share, of_limit = value(f"{prefix}gpu_power_cap_share"), value(f"{prefix}gpu_power_of_limit")
    sm, limit = value(f"{prefix}gpu_sm_clock_of_max"), value("gpu_power_limit_w")
    lowered, default = value("gpu_power_limit_lowered_w"), value("gpu_power_default_limit_w")
    parts = []
    if of_limit is not None and limit is not None:
        parts.append(f"{100 * of_limit:.0f} % of {limit:.0f} W")
        if lowered is not None and default is not None:
            parts[-1] += f" (lowered from {default:.0f} W)"
    if sm is not None:
        parts.append(f"SM clock {100 * sm:.0f} % of max")
    at_limit = at_power_limit(share)
    if at_limit:
        parts.insert(0, f"{C.POWER_LIMIT_MARK} power cap in {100 * share:.0f} % of busy readings")
    return ", ".join(parts), at_limit


def overlaps(windows: list[dict[str, Any]]) -> dict[int, list[int]]:
    """For each window (by position), the other windows on the same host that overlapped it in
    time. Windows of one cell (its epochs and its ceiling) never count: they are sequential by
    construction."""
    found: dict[int, list[int]] = {}
    for i, a in enumerate(windows):
        for j, b in enumerate(windows):
            if i == j or a["name"] == b["name"] or a["host"] != b["host"]:
                continue
            times = [a["from"], a["to"], b["from"], b["to"]]
            if any(T.is_missing(t) for t in times):
                continue
            if float(a["from"]) < float(b["to"]) and float(b["from"]) < float(a["to"]):
                found.setdefault(i, []).append(j)
    return found


def wait_policies(runs: pd.DataFrame) -> str | None:
    """How the cells' OpenMP threads waited (``env_omp_wait_policy``), in one sentence: a
    spinning wait takes CPU from other processes and gives it up badly, so a reader comparing
    studies needs it. None when no record says (written before it was recorded)."""
    column = runs.get("env_omp_wait_policy", pd.Series(dtype=object))
    counts = column[~column.map(T.is_missing)].astype(str).value_counts()
    if counts.empty:
        return None
    told = ", ".join(f"{policy} ({count} of {len(runs)} cells)" for policy, count in counts.items())
    return f"OpenMP wait policy (OMP_WAIT_POLICY): {told}."


def timing_conditions_markdown(runs: pd.DataFrame) -> T.Document:
    """The timing-conditions table of every timed window, with a count of disturbed ones."""
    if runs.empty:
        return T.document("Timing conditions", _NOTE, [], empty=NO_CELLS_NOTE)
    windows = _windows(runs)
    overlapping = overlaps(windows)
    rows = []
    for i, w in enumerate(windows):
        if not w["measured"]:
            verdict = _NOT_MEASURED
        elif w["flag"]:
            verdict = f"{C.INTERFERENCE_MARK} " + "; ".join(w["reasons"])
        else:
            verdict = "quiet"
        rows.append(
            [
                w["name"],
                w["part"],
                T.fmt_value(w["cpus"]) if not T.is_missing(w["cpus"]) else "",
                T.fmt_percent(w["share"]),
                T.fmt_percent(w["steal"]),
                "" if T.is_missing(w["gpu"]) else f"{float(w['gpu']):.0f}",
                w["power"][0],
                verdict,
                f"{C.UNSTABLE_MARK} {w['unstable']}" if w["unstable"] else "",
                ", ".join(
                    f"{windows[j]['name']} {windows[j]['part']}" for j in overlapping.get(i, [])
                ),
            ]
        )
    measured = [w for w in windows if w["measured"]]
    disturbed = [w for w in measured if w["flag"]]
    summary = (
        f"{len(disturbed)} of {len(measured)} measured timed windows ran under interference; "
        f"{len(overlapping)} overlapped another timed window on the same host."
    )
    at_limit = sum(w["power"][1] for w in windows)
    if at_limit:
        summary += f" {at_limit} ran at their GPU's power limit ({C.POWER_LIMIT_MARK})."
    notes = [summary, *filter(None, [wait_policies(runs)]), *_MARKS]
    notes += [C.POWER_LIMIT_NOTE] if at_limit else []
    header = ["cell", "timed", "CPUs", "others' CPU %", "steal %", "GPU others SM %", "GPU power"]
    header += ["verdict", "unstable steps", "overlapped"]
    table = T.table(header, rows, "llrrrrllll")
    return T.document(
        "Timing conditions", _NOTE, T.section("Timed windows", table, notes=notes, level=2)
    )
