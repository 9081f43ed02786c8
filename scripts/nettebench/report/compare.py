"""Comparisons in the tables: how many times faster one cell is than another, whether the
processes support that it is faster at all, and how many such verdicts a table states at once.

A speed-up is the ratio of two cells' steady training rates, one value per process (seed),
with Welch's interval between processes (:func:`nettebench.report.stats.ratio_interval`, whose
module says why between processes); records without a steady rate (older records) are compared
by their seconds for the epochs. The verdicts of one table (or of the front page) are a
:class:`Family`, corrected together (:func:`nettebench.report.stats.holm`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from nettebench.report import caveats as C
from nettebench.report import format as T
from nettebench.report import rerun, stats
from nettebench.report.grids import Grid, matrix_groups, row_keys
from nettebench.vocabulary.record_keys import STATUS_OK

BASELINE_PRECISION = "O0"
# The value one process contributes to a comparison: its steady training rate (the median of
# its steady steps' img/s, summary.train_img_s), which leaves out validation, warm-up and each
# epoch's loader start-up; a process without one is compared by its seconds for the epochs.
RATE = "train_img_s"


def seconds(cells: pd.DataFrame) -> list[float]:
    """The per-seed seconds for the epochs of the finished cells among ``cells``."""
    # the column's finished rows, not the finished rows of every column of a wide frame
    return stats.finite(cells["time_for_epochs_s"][cells["status"] == STATUS_OK])


def formula_note(reference: str, other: str) -> str:
    """What a speed-up cell shows and how to read its marks, in a caption's few words."""
    return (
        f"Speed-up of {other} over {reference}: the ratio of steady training rates over the "
        f"processes (seeds), `[L-H]` its {stats.LEVEL} Welch interval between processes. "
        f"{stats.COMPARISON_NOTE}"
    )


def interval_text(low: float, high: float) -> str:
    """``1.04-1.16``: an interval's ends with two decimals, or as many more (up to 6) as it
    takes for the printed ends to sit on the side of 1 the verdict was taken on (from the exact
    ends): an interval from 1.003 excludes 1, and printed ``1.00`` it would read as holding
    1; one from 0.997 to 1.2 holds 1 and prints as such at any precision."""
    for digits in range(2, 7):
        ends = (round(low, digits), round(high, digits))
        if (ends[0] <= 1 <= ends[1]) == (low <= 1 <= high):
            break
    return f"{low:.{digits}f}-{high:.{digits}f}"


def process_ratio(
    reference: pd.DataFrame, other: pd.DataFrame
) -> tuple[stats.Ratio, int, int] | None:
    """Other's rate over the reference's (above 1: other is faster) and the processes a side;
    None when a side has nothing finished. Steady rates where every finished process of both
    sides has one, else the seconds for the epochs (the reference's over other's)."""
    a, b = (  # the rate column alone: not every column of a wide frame
        cells.loc[cells["status"] == STATUS_OK, [c for c in (RATE,) if c in cells]]
        for cells in (reference, other)
    )
    if not len(a) or not len(b):
        return None
    if RATE in a and RATE in b:
        rates_a, rates_b = stats.finite(a[RATE]), stats.finite(b[RATE])
        if len(rates_a) == len(a) and len(rates_b) == len(b):
            return stats.ratio_interval(rates_b, rates_a), len(rates_a), len(rates_b)
    base, found = seconds(reference), seconds(other)
    if not base or not found:
        return None
    return stats.ratio_interval(base, found), len(base), len(found)


class Family:
    """The verdicts one table (or the front page) states, corrected together: a verdict is
    supported only where Holm's correction over the family's tested comparisons keeps its p
    below :data:`stats.ALPHA`. Members are added while the table is built and read when it is
    rendered, so every member sees the whole family."""

    def __init__(self) -> None:
        self.members: list[Speedup] = []
        self._adjusted: dict[int, float] | None = None  # id(member) -> Holm's p, once complete

    def add(self, found: Speedup | None) -> Speedup | None:
        if found is not None:
            found.family = self
            self.members.append(found)
            self._adjusted = None  # the family grew: correct again when next read
        return found

    @property
    def size(self) -> int:
        """How many comparisons of the family were tested (the m of Holm's correction)."""
        return sum(m.tested for m in self.members)

    def corrected(self, member: Speedup) -> float:
        """``member``'s p after Holm's correction over the family (computed once per family)."""
        if self._adjusted is None:
            tested = [m for m in self.members if m.tested]
            adjusted = stats.holm([m.p for m in tested])
            self._adjusted = {id(m): q for m, q in zip(tested, adjusted, strict=True)}
        return self._adjusted[id(member)]

    def note(self) -> str:
        """The caption's sentence on the family: its size, the method, the processes a side."""
        counts = sorted({n for m in self.members for n in m.n})
        n = "-".join(dict.fromkeys(str(c) for c in (counts[:1] + counts[-1:])))
        if not self.size:
            return f"Nothing tested (n={n} processes a side)." if n else ""
        return f"Holm's correction over the {self.size} tested; n={n} processes a side."


def render(rows: Iterable[Sequence[Any]]) -> list[list[str]]:
    """A table's rows with every cell whose verdict waits on its family (a :class:`Speedup`, or
    anything else with a ``text()``) written out, once the family is complete."""
    return [[c.text() if hasattr(c, "text") else c for c in row] for row in rows]


@dataclass(eq=False)
class Speedup:
    """One comparison as every output states it (table cell, figure bar, sentence), ``ratio``
    above 1 where other is faster. Its verdict is read through its :class:`Family` (Holm), so
    it is only final once the table is complete."""

    ratio: float
    low: float | None
    high: float | None
    p: float | None
    n: tuple[int, int]
    disturbed: Disturbed | None = None
    approx: bool = False
    family: Family | None = field(default=None, repr=False)

    @property
    def tested(self) -> bool:
        """Tested and stated: a process-level p exists and no side was disturbed."""
        return self.p is not None and self.disturbed is None

    @property
    def p_corrected(self) -> float | None:
        """The p after Holm's correction over the family (the raw p without a family)."""
        if not self.tested:
            return None
        return self.p if self.family is None else self.family.corrected(self)

    @property
    def supported(self) -> bool | None:
        """True / False where tested (after Holm), None where untested or withheld."""
        corrected = self.p_corrected
        return None if corrected is None else corrected < stats.ALPHA

    @property
    def mark(self) -> str:
        if self.disturbed is not None:
            return NO_VERDICT_MARK
        if self.p is None:
            return stats.UNTESTED_MARK
        return "" if self.supported else stats.NOT_SUPPORTED_MARK

    def text(self) -> str:
        interval = "" if self.low is None else f" [{interval_text(self.low, self.high)}]"
        text = f"{self.ratio:.2f}x{interval}" + (f" {self.mark}" if self.mark else "")
        return T.APPROX_MARK + text if self.approx else text

    def how(self) -> str:
        """How it was tested, in words (the comparisons table, the front page)."""
        n_a, n_b = self.n
        if self.p is None:
            if min(self.n) == 1:
                return f"n={n_a} and {n_b} processes: one process a side, not tested"
            return f"n={n_a} and {n_b} processes: no spread to test"
        text = (
            f"{stats.LEVEL} interval {interval_text(self.low, self.high)}x between {n_a} and {n_b} "
            f"processes, Welch's p = {self.p:.2g}"
        )
        if self.tested and self.family is not None and self.family.size > 1:
            text += f", Holm-corrected {self.p_corrected:.2g} over {self.family.size}"
        return text


def speedup(
    reference: pd.DataFrame,
    other: pd.DataFrame,
    *,
    names: tuple[str, str] = ("the reference", "the other"),
    family: Family | None = None,
    approx: bool = False,
    withheld: list[Disturbed] | None = None,
) -> Speedup | None:
    """THE speed-up of ``other`` over ``reference``, the one definition the tables, the figures
    and the front page use, added to ``family``; its verdict withheld where
    :func:`quiet_evidence` finds a side disturbed (``names`` name the sides in the reason, which
    is appended to ``withheld``, for :func:`no_verdict_note`). ``approx``: a table cell's ``~``."""
    found = process_ratio(reference, other)
    if found is None or found[0].ratio is None:
        return None
    ratio, n_a, n_b = found
    disturbed = quiet_evidence({names[0]: reference, names[1]: other})
    if disturbed is not None and withheld is not None:
        withheld.append(disturbed)
    result = Speedup(ratio.ratio, ratio.low, ratio.high, ratio.p, (n_a, n_b), disturbed, approx)
    return result if family is None else family.add(result)


# ------------------------------------------------- the rule: a verdict needs quiet evidence

NO_VERDICT_MARK = f"{C.INTERFERENCE_MARK} (no verdict)"


@dataclass(frozen=True)
class Disturbed:
    """Why a comparison states no verdict: which sides' timings ran under interference (``what``,
    e.g. ``pil's epochs (seed 0)``), and the cell directories to measure again."""

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
    needs quiet evidence", says why): None when every finished seed of every side was timed
    quietly, its epochs and its compute ceiling alike (a window never measured, in older
    records, counts as quiet); else which sides were disturbed, and the cells to rerun."""
    parts, paths = [], []
    for name, cells in sides.items():
        # only the columns read here: a row of the whole wide frame costs more than the rule
        wanted = [c for c in (*rerun.DISTURBED_COLUMNS, "seed", "path") if c in cells]
        ok = cells.loc[cells["status"] == STATUS_OK, wanted]
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
    """The footnote under a table with :data:`NO_VERDICT_MARK`: what was disturbed, named
    briefly (each window's reasons are in the timing conditions table), and the line that
    measures those cells again: written out for a few, else the command that prints it."""
    paths = list(dict.fromkeys(p for found in withheld for p in found.paths))
    whats = [part for found in withheld for part in found.what.split(", ")]
    again = (
        f"`{rerun.command(paths)}`"
        if len(paths) <= C.NAMED_CELLS
        else f"`{rerun.PRINT_COMMAND}` prints the line ({len(paths)} cells)"
    )
    return (
        f"{NO_VERDICT_MARK}: a side of the comparison, or its compute ceiling, was timed under "
        "interference, so the ratio may be the load's rather than the difference compared, and "
        f"no verdict is stated whatever its interval says ({C.named_cells(whats)}). Rerun "
        f"exactly those cells for a clean table: {again}."
    )


def speedup_approx(base: pd.DataFrame, seeds: pd.DataFrame) -> bool:
    """Whether a speed-up is marked ``~``: a side was extrapolated and both sides finished."""
    both = bool(seconds(base) and seconds(seeds))
    return both and any(map(T.as_bool, pd.concat([base, seeds])["extrapolated"]))


def speedup_grids(runs: pd.DataFrame) -> tuple[list[Grid], Family]:
    """Each precision's time speed-up over the baseline (same model, setup and parameters), as
    model x precision grids like the time table's, their verdicts one family."""
    baseline = BASELINE_PRECISION
    grids, family = [], Family()
    for title, table in matrix_groups(runs):
        precisions = [p for p in T.sort_precisions(table["precision"]) if p != baseline]
        if baseline not in set(table["precision"]) or not precisions:
            continue
        labels = T.row_labels(table, row_keys(runs))
        grid = Grid(title=title, header=["model", *precisions], rows=[])
        withheld: list[Disturbed] = []
        for label in labels.unique():
            base = table[(labels == label) & (table["precision"] == baseline)]
            row = [label]
            for precision in precisions:
                seeds = table[(labels == label) & (table["precision"] == precision)]
                approx = speedup_approx(base, seeds)
                names = (f"{label} {baseline}", f"{label} {precision}")
                found = speedup(
                    base, seeds, names=names, family=family, approx=approx, withheld=withheld
                )
                if found is None:
                    row.append(T.outcome_cell(list(seeds["status"]), None, str))
                    grid.not_ok |= row[-1] in T.OUTCOME_TEXT.values()
                else:
                    grid.seed_counts += found.n
                    row.append(found)
                grid.approx |= approx
            grid.rows.append(row)
        grid.extra_notes = [no_verdict_note(withheld)] if withheld else None
        grids.append(grid)
    for grid in grids:  # the family is complete: every verdict can be stated
        grid.rows = render(grid.rows)
    return grids, family
