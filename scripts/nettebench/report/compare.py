"""Comparisons in the tables: how many times faster one cell is than another, and whether the
seeds support that it is faster at all (:mod:`nettebench.report.stats`).

A speed-up is the ratio of mean seconds over seeds, ``reference / other`` (above 1: the other
cell is faster); it carries ``(ns)`` when Welch's t-test on the per-seed seconds does not
support a difference. With a single seed on a side the seeds cannot be tested, but the cell's
own steady steps can: the speed-up is then the ratio of the two cells' steady training rates
with its 95 % interval (:func:`nettebench.report.stats.ratio_interval` on their block rates,
``summary.train_block_img_s``), written ``Rx [L-H]``, and ``(ns)`` when the interval holds 1.
Only records without step times still print ``(n=1)``. Used by the time table (each precision
against O0), the machines table (each setup against the first), the version table (each
version against the first) and the report's front page (each loader against the first).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from nettebench.report import caveats as C
from nettebench.report import format as T
from nettebench.report import rerun, stats
from nettebench.report.grids import (
    APPROX_NOTE,
    GROUP_KEYS,
    LEGEND,
    Grid,
    device_title,
    groups,
    row_keys,
)
from nettebench.report.setups import SETUP_COLUMNS, title_suffix
from nettebench.vocabulary.record_keys import STATUS_OK

BASELINE_PRECISION = "O0"


def seconds(cells: pd.DataFrame, value: str = "time_for_epochs_s") -> list[float]:
    """The per-seed values of the finished cells among ``cells``."""
    # the column's finished rows, not the finished rows of every column of a wide frame
    return stats.finite(cells[value][cells["status"] == STATUS_OK])


def block_rates(value: Any) -> list[float]:
    """A cell's ``train_block_img_s`` as numbers (a list in a fresh frame, JSON in runs.csv)."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return []
    return stats.finite(value) if isinstance(value, list | tuple) else []


def single_blocks(cells: pd.DataFrame) -> list[float] | None:
    """The block rates of the one finished seed among ``cells``; None unless exactly one."""
    finished = cells["status"] == STATUS_OK
    if finished.sum() != 1 or "train_block_img_s" not in cells:
        return None
    return block_rates(cells["train_block_img_s"][finished].iloc[0]) or None


# Where every formula behind a table's numbers is written out once; captions point to it.
FORMULAS = "docs/honest-numbers.md (Statistics)"


def formula_note(reference: str, other: str) -> str:
    """What a speed-up cell shows and how to read its marks, in a caption's few words: its two
    forms (:func:`cells_speedup_text`) named, their formulas in ``docs/honest-numbers.md``."""
    return (
        f"Speed-up: how many times faster {other} is than {reference}; `Rx [L-H]`: the ratio of "
        "the two cells' steady training rates with its 95 % Welch interval (one seed a side); "
        "`Rx`: the ratio of mean seconds (several seeds). "
        f"{stats.COMPARISON_NOTE}"
    )


def interval_text(low: float, high: float) -> str:
    """``1.04-1.16``: an interval's ends with two decimals, or as many more (up to 6) as it
    takes for the printed ends to sit on the side of 1 the verdict was taken on (from the exact
    ends): an interval from 1.003 is supported, and printed ``1.00`` it would read as holding
    1; one from 0.997 to 1.2 holds 1 and prints as such at any precision."""
    for digits in range(2, 7):
        ends = (round(low, digits), round(high, digits))
        if (ends[0] <= 1 <= ends[1]) == (low <= 1 <= high):
            break
    return f"{low:.{digits}f}-{high:.{digits}f}"


def ratio_text(found: stats.Ratio) -> str:
    """``1.10x [1.04-1.16]`` or ``0.98x [0.91-1.05] (ns)`` (just ``1.10x`` without an
    interval)."""
    if found.ratio is None:
        return ""
    if found.low is None:
        return f"{found.ratio:.2f}x {stats.UNTESTED_MARK}"
    text = f"{found.ratio:.2f}x [{interval_text(found.low, found.high)}]"
    return text if found.supported else f"{text} {stats.NOT_SUPPORTED_MARK}"


# What makes two cells' compute ceilings the same measurement (their ratio should be 1): the
# step the ceiling times (model, precision, batch, image size, memory format, compile, processes)
# on the same machine and software (the setup: device, driver, CUDA, cuDNN, torch, CPU capability;
# the libraries that build the step). Only what the ceiling ignores may differ (the loader, its
# workers, a Pillow version): a comparison of setups or versions changes the ceiling itself, so
# the ceilings' ratio there is the result, not drift between two jobs.
SAME_CEILING = (
    "model",
    "precision",
    "batch_size",
    "image_size",
    "channels_last",
    "compile",
    "processes",
    "device_type",
    *SETUP_COLUMNS,
    "setup_id",
    "env_torchvision",
    "env_apex",
    "torchvision",
    "apex",
)


def ceiling_drift(reference: pd.DataFrame, other: pd.DataFrame) -> float | None:
    """|log| of the ratio of two single-seed cells' compute ceilings when both measured the
    same thing (every :data:`SAME_CEILING` column alike: a loader comparison), so any difference
    between them is the machine drifting between the two jobs; else None (a comparison of
    precisions, setups or library versions, whose ceilings differ by what is compared)."""
    a, b = (cells[cells["status"] == STATUS_OK] for cells in (reference, other))
    if len(a) != 1 or len(b) != 1 or "ceiling_img_s" not in a:
        return None
    if any(str(a[k].iloc[0]) != str(b[k].iloc[0]) for k in SAME_CEILING if k in a):
        return None
    ceilings = pd.to_numeric(pd.concat([a["ceiling_img_s"], b["ceiling_img_s"]]), errors="coerce")
    if ceilings.isna().any() or (ceilings <= 0).any():
        return None
    return abs(math.log(ceilings.iloc[0] / ceilings.iloc[1]))


def cells_speedup(reference: pd.DataFrame, other: pd.DataFrame) -> stats.Ratio | None:
    """The within-cell comparison of two single-seed cells (other's steady rate over the
    reference's: above 1, other is faster); None when a side has several seeds or no steps.

    The steps' interval says what the noise within the two jobs allows; between the jobs the
    machine itself may drift (another tenant, the clock). Where both cells measured the same
    compute ceiling in their own jobs, the ceilings' disagreement is that drift, and the
    interval is widened by it on both sides (``stats.widen``)."""
    base, found = single_blocks(reference), single_blocks(other)
    if base is None or found is None:
        return None
    result = stats.ratio_interval(found, base)
    drift = ceiling_drift(reference, other)
    return result if drift is None else stats.widen(result, drift)


@dataclass(frozen=True)
class Speedup:
    """One comparison as every output states it (table cell, figure bar, its mark): ``ratio``
    (above 1: other is faster), its interval where there is one, the mark (``""`` supported,
    ``(ns)``, ``(n=1)``, or :data:`NO_VERDICT_MARK`) and, when a side was disturbed, why."""

    ratio: float
    low: float | None
    high: float | None
    mark: str
    disturbed: Disturbed | None = None

    def text(self, *, approx: bool = False) -> str:
        interval = "" if self.low is None else f" [{interval_text(self.low, self.high)}]"
        text = f"{self.ratio:.2f}x{interval}" + (f" {self.mark}" if self.mark else "")
        return T.APPROX_MARK + text if approx else text


def speedup(
    reference: pd.DataFrame,
    other: pd.DataFrame,
    value: str = "time_for_epochs_s",
    *,
    names: tuple[str, str] = ("the reference", "the other"),
) -> Speedup | None:
    """THE speed-up of ``other`` over ``reference`` (groups of seeds), the one definition the
    tables, the figures and the front page use: the within-cell ratio of steady rates and its
    interval where a side has one seed (:func:`cells_speedup`), else mean ``value`` of the
    reference over that of other with Welch's test on the seeds. Its verdict is withheld
    (:data:`NO_VERDICT_MARK`) where :func:`quiet_evidence` finds a side disturbed (``names``
    name the sides in the reason). None when a side has nothing finished."""
    within = cells_speedup(reference, other)
    if within is not None and within.ratio is not None:
        ratio, low, high = within.ratio, within.low, within.high
        if low is None:
            mark = stats.UNTESTED_MARK
        else:
            mark = "" if within.supported else stats.NOT_SUPPORTED_MARK
    else:
        base, found = seconds(reference, value), seconds(other, value)
        if not base or not found:
            return None
        ratio = (sum(base) / len(base)) / (sum(found) / len(found))
        low = high = None
        mark = stats.comparison_mark(base, found).strip()
    disturbed = quiet_evidence({names[0]: reference, names[1]: other})
    if disturbed is not None:
        mark = NO_VERDICT_MARK
    return Speedup(ratio, low, high, mark, disturbed)


def cells_speedup_text(
    reference: pd.DataFrame,
    other: pd.DataFrame,
    value: str = "time_for_epochs_s",
    *,
    approx: bool = False,
    names: tuple[str, str] = ("the reference", "the other"),
    withheld: list[Disturbed] | None = None,
) -> str:
    """:func:`speedup` as a table cell's text (``~`` first when ``approx``); a withheld verdict's
    reason is appended to ``withheld``, for the table's footnote (:func:`no_verdict_note`)."""
    found = speedup(reference, other, value, names=names)
    if found is None:
        return ""
    if found.disturbed is not None and withheld is not None:
        withheld.append(found.disturbed)
    return found.text(approx=approx)


# ------------------------------------------------- the rule: a verdict needs quiet evidence

NO_VERDICT_MARK = f"{C.INTERFERENCE_MARK} (no verdict)"


@dataclass(frozen=True)
class Disturbed:
    """Why a comparison states no verdict: which of its sides' timings ran under interference
    (``what``, e.g. ``pil's epochs (seed 0)``), and the cell directories to measure again."""

    what: str
    paths: tuple[str, ...]

    @property
    def rerun(self) -> str:
        """The line that measures exactly the disturbed cells again (report.rerun)."""
        return rerun.command(self.paths)

    def text(self) -> str:
        return f"{self.what} timed under interference; rerun: `{self.rerun}`"


def quiet_evidence(sides: Mapping[str, pd.DataFrame]) -> Disturbed | None:
    """THE rule for every comparison the report states (docs/honest-numbers.md, "A verdict
    needs quiet evidence"): None when every finished seed of every side was timed quietly, its
    epochs and its compute ceiling alike; else what was disturbed. A comparison with a disturbed
    side is never supported, whatever its interval says: the load on one side, not the
    difference compared, can make the ratio (a cell slowed 100x by another process), and the
    ceiling is part of the evidence where its drift widens the interval (``ceiling_drift``).
    A window whose conditions were never measured (older records) counts as quiet: the caveats
    line says those records carry none. Which sides, and the rerun command, are said."""
    parts, paths = [], []
    for name, cells in sides.items():
        ok = cells[cells["status"] == STATUS_OK]
        several = len(ok) > 1
        for _, row in ok.iterrows():
            found = rerun.disturbed_parts(row)
            if found:
                seed = f" (seed {T.fmt_value(row.get('seed'))})" if several else ""
                parts.append(f"{name}'s {' and '.join(found)}{seed}")
                paths.append(str(row.get("path")))
    if not parts:
        return None
    return Disturbed(what=", ".join(parts), paths=tuple(dict.fromkeys(paths)))


def no_verdict_note(withheld: Sequence[Disturbed]) -> str:
    """The footnote under a table with :data:`NO_VERDICT_MARK`: what was disturbed, and the one
    line that measures exactly those cells again."""
    paths = [p for found in withheld for p in found.paths]
    whats = "; ".join(dict.fromkeys(found.what for found in withheld))
    return (
        f"{NO_VERDICT_MARK}: a side of the comparison, or its compute ceiling, was timed under "
        "interference, so the ratio may be the load's rather than the difference compared, and "
        f"no verdict is stated whatever its interval says ({whats}). Rerun exactly those cells "
        f"for a clean table: `{rerun.command(paths)}`."
    )


def speedup_text(reference: Iterable[Any], other: Iterable[Any], *, approx: bool = False) -> str:
    """``1.8x``, ``1.02x (ns)`` or ``1.8x (n=1)``: mean reference / mean other, and its mark."""
    reference, other = stats.finite(reference), stats.finite(other)
    if not reference or not other:
        return ""
    ratio = (sum(reference) / len(reference)) / (sum(other) / len(other))
    text = f"{ratio:.2f}x" + stats.comparison_mark(reference, other)
    return T.APPROX_MARK + text if approx else text


def speedup_approx(base: pd.DataFrame, seeds: pd.DataFrame, value: str) -> bool:
    """Whether a speed-up is marked ``~``: a side was extrapolated and both sides finished."""
    both = bool(seconds(base, value) and seconds(seeds, value))
    return both and any(map(T.as_bool, pd.concat([base, seeds])["extrapolated"]))


def speedup_grids(
    runs: pd.DataFrame, value: str = "time_for_epochs_s", baseline: str = BASELINE_PRECISION
) -> list[Grid]:
    """Each precision's speed-up over ``baseline`` (same model, setup and parameters), as
    model x precision tables like the time table's; none where no baseline cell finished."""
    matrix = runs[runs["kind"] == "matrix"]
    grids = []
    for (dataset, epochs, _, _), table in groups(matrix, GROUP_KEYS):
        precisions = [p for p in T.sort_precisions(table["precision"]) if p != baseline]
        if baseline not in set(table["precision"]) or not precisions:
            continue
        labels = T.row_labels(table, row_keys(runs))
        rows, counts, approx, not_ok = [], [], False, False
        withheld: list[Disturbed] = []
        for label in labels.unique():
            base = table[(labels == label) & (table["precision"] == baseline)]
            reference = seconds(base, value)
            row = [label]
            for precision in precisions:
                seeds = table[(labels == label) & (table["precision"] == precision)]
                values = seconds(seeds, value)
                extrapolated = speedup_approx(base, seeds, value)
                text = cells_speedup_text(
                    base,
                    seeds,
                    value,
                    approx=extrapolated,
                    names=(f"{label} {baseline}", f"{label} {precision}"),
                    withheld=withheld,
                )
                if not text:
                    text = T.outcome_cell(list(seeds["status"]), None, str)
                    not_ok |= text in T.OUTCOME_TEXT.values()
                else:
                    counts += [len(reference), len(values)]
                approx |= extrapolated
                row.append(text)
            rows.append(row)
        title = (
            f"{dataset}, {T.fmt_value(epochs)} epochs, {device_title(table)}"
            f"{title_suffix(table, matrix)}"
        )
        grids.append(
            Grid(
                title=title,
                header=["model", *precisions],
                rows=rows,
                seed_counts=counts,
                approx=approx,
                partial=False,
                not_ok=not_ok,
                extra_notes=[no_verdict_note(withheld)] if withheld else None,
            )
        )
    return grids


@dataclass
class Marks:
    """The marks a side-by-side table (versions, machines) set, for its footnotes."""

    approx: bool = False
    not_ok: bool = False
    interference: bool = False
    unstable: list[str] | None = None
    withheld: list[Disturbed] | None = None

    def notes(self) -> list[str]:
        notes = [APPROX_NOTE] if self.approx else []
        notes += [LEGEND] if self.not_ok else []
        notes += [C.interference_note("cell")] if self.interference else []
        notes += [C.unstable_note(self.unstable)] if self.unstable else []
        return notes + ([no_verdict_note(self.withheld)] if self.withheld else [])


def seconds_cell(seeds: pd.DataFrame, label: str, marks: Marks) -> str:
    """A side-by-side table's cell of seconds (mean ± CI over its finished seeds) with every
    mark the README defines that applies to it: ``~`` extrapolated, ``†`` partial, ``‡`` timed
    under interference, ``§`` unstable steps; OOM / n/a where nothing finished. ``marks``
    collects what the footnotes must explain (``label`` names the cell there)."""
    ok = seeds[seeds["status"] == STATUS_OK]
    summary = stats.summarize(ok["time_for_epochs_s"])
    text = T.outcome_cell(
        list(seeds["status"]),
        summary.mean,
        lambda _mean, s=summary: stats.with_ci(s, T.fmt_seconds),
        approx=any(map(T.as_bool, ok["extrapolated"])),
    )
    marks.approx |= text.startswith(T.APPROX_MARK)
    marks.not_ok |= text in T.OUTCOME_TEXT.values()
    if not len(ok) or summary.mean is None:
        return text
    records = ok.to_dict("records")
    _, mark = C.cell_caveat(records, "cell")
    marks.interference |= bool(mark)
    why = C.unstable_reasons(records) if "unstable" in ok else []
    if why:
        marks.unstable = [*(marks.unstable or []), *(f"{label}: {w}" for w in why)]
    return text + mark + (C.UNSTABLE_MARK if why else "")
