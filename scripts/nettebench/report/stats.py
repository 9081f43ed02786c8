"""Statistics over processes: mean and 95 % confidence interval, whether two cells differ, and
how many of a table's verdicts may be stated at once.

Each seed of a cell is a training run, a process of its own: the seeds are the cell's
replicates, and tables print their mean ± the half-width of its 95 % Student-t interval.

Two cells compare by the ratio of their processes' steady rates, Welch's t on the logarithms
(:func:`ratio_interval`): the spread that decides is the one between processes, never the steps
of one process, which are far more alike than two processes of the same cell. Welch's and not
Student's: two machines or library versions need not have the same run-to-run spread. Not a
rank test (Mann-Whitney, as airspeed velocity uses): with the 2-3 processes a training study
affords, none can reach p < 0.05 (two a side give p >= 1/3). The verdicts of one table are a
family, corrected by Holm's method (:func:`holm`), so a table of identical cells states any
difference at most 5 % of the time, however many rows it has.

The t distribution and Welch's test are SciPy's; SciPy is the report's dependency, never a
job's (the jobs' own intervals, :mod:`nettebench.records.spread`, are standard library).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import scipy.stats

from nettebench.records.spread import finite

CONFIDENCE = 0.95
ALPHA = 0.05  # two-sided level of the comparisons
LEVEL = f"{100 * CONFIDENCE:.0f} %"  # the intervals' level, as the tables print it
NOT_SUPPORTED_MARK = "(ns)"  # the processes do not support a difference (after Holm)
UNTESTED_MARK = "(n=1)"  # one process on a side: no test possible

NOT_SUPPORTED_NOTE = f"{NOT_SUPPORTED_MARK}: not supported after Holm's correction over the table"
UNTESTED_NOTE = f"{UNTESTED_MARK}: one process a side, untested"
FORMULAS = "Formulas: docs/honest-numbers.md (Statistics)."
COMPARISON_NOTE = f"{NOT_SUPPORTED_NOTE}; {UNTESTED_NOTE}. {FORMULAS}"


@dataclass(frozen=True)
class Summary:
    """What the seeds of one cell say about one value."""

    n: int
    mean: float | None
    sd: float | None  # sample standard deviation (n - 1), None for n < 2
    half_width: float | None  # of the 95 % confidence interval of the mean, None for n < 2

    @property
    def low(self) -> float | None:
        return None if self.half_width is None else self.mean - self.half_width

    @property
    def high(self) -> float | None:
        return None if self.half_width is None else self.mean + self.half_width


def summarize(values: Iterable[Any]) -> Summary:
    """Mean, sd and CI half-width (``t(0.975, n-1) * sd / sqrt(n)``) of the finite ``values``."""
    xs = finite(values)
    n = len(xs)
    if n == 0:
        return Summary(0, None, None, None)
    mean = sum(xs) / n
    if n < 2:
        return Summary(n, mean, None, None)
    sd = math.sqrt(sum((x - mean) ** 2 for x in xs) / (n - 1))
    return Summary(n, mean, sd, t_quantile(1 - (1 - CONFIDENCE) / 2, n - 1) * sd / math.sqrt(n))


def t_quantile(p: float, df: float) -> float:
    """The ``p`` quantile of Student's t: ``t_quantile(0.975, 4)`` is 2.776."""
    return float(scipy.stats.t.ppf(p, df))


@dataclass(frozen=True)
class Ratio:
    """How many times ``a`` is ``b`` (rates: above 1, a is faster), with its interval.

    ``supported`` is True when the interval excludes 1, False when it includes it, None when a
    side has fewer than two samples, or neither side any spread (no interval)."""

    ratio: float | None
    low: float | None
    high: float | None
    df: float | None
    p: float | None
    supported: bool | None


def ratio_interval(a: Iterable[Any], b: Iterable[Any], confidence: float = CONFIDENCE) -> Ratio:
    """``a / b`` for two sets of positive samples of a rate (img/s, higher is faster), with
    Welch's interval: Welch's t on the logarithms gives the interval of the difference of mean
    logs, whose exponential is the ratio of geometric means. Logarithms because a ratio is what
    is compared and timings spread multiplicatively; Welch because the two cells need not
    vary alike. For a quantity where lower is better (seconds, latency) pass ``(b, a)``."""
    xs = [math.log(x) for x in finite(a) if x > 0]
    ys = [math.log(y) for y in finite(b) if y > 0]
    if not xs or not ys:
        return Ratio(None, None, None, None, None, None)
    ratio = math.exp(sum(xs) / len(xs) - sum(ys) / len(ys))
    if len(xs) < 2 or len(ys) < 2 or len({*xs}) == len({*ys}) == 1:
        return Ratio(ratio, None, None, None, None, None)  # neither side spreads: nothing to test
    with warnings.catch_warnings():  # a side without spread is exact for Welch, not "unreliable"
        warnings.simplefilter("ignore", RuntimeWarning)
        test = scipy.stats.ttest_ind(xs, ys, equal_var=False)  # Welch's, Satterthwaite's df
    low, high = (math.exp(bound) for bound in test.confidence_interval(confidence))
    return Ratio(ratio, low, high, float(test.df), float(test.pvalue), not low <= 1 <= high)


def with_ci(summary: Summary, fmt: Callable[[Any], str]) -> str:
    """``54.7 ± 1.2`` (mean ± 95 % CI half-width, both in ``fmt``), or ``54.7`` for one seed."""
    if summary.mean is None:
        return ""
    if summary.half_width is None:
        return fmt(summary.mean)
    return f"{fmt(summary.mean)} ± {fmt(summary.half_width)}"


def holm(ps: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the order of ``ps``: sorted ascending, the i-th
    smallest (from 0) is multiplied by ``m - i`` and the running maximum kept (capped at 1).
    Rejecting where the adjusted p is below ALPHA keeps the chance of any false rejection in
    the family at ALPHA, whatever the dependence between the tests (Holm 1979)."""
    m = len(ps)
    order = sorted(range(m), key=lambda i: ps[i])
    adjusted = [1.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * ps[i]))
        adjusted[i] = running
    return adjusted
