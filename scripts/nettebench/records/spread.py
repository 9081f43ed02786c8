"""The spread of a timing: quantiles of per-step samples with their intervals, and when a
run is too noisy to quote as one number.

A timing is a distribution before it is a number. The trainer keeps every steady step's time
(``step_ms`` in epochs.csv) and summarises them here; the report, the inference bench and the
comparisons read the same functions, so a figure and its interval are computed one way.

- **Interval of a quantile** (:func:`quantile_interval`): the distribution-free order-statistic
  interval (the number of samples below the true q-quantile is Binomial(n, q), so a pair of
  order statistics x_(j) <= x_(k) brackets it with probability at least the confidence). Exact,
  deterministic (no bootstrap resampling to seed) and valid for any distribution of step times,
  including the long right tail a shared machine gives them. It assumes independent steps;
  comparisons therefore use block means (:func:`block_rates`), which tolerate correlated noise.
- **Unstable** (:data:`UNSTABLE_CV`): standard deviation at least a tenth of the mean, pyperf's
  rule for its own "the benchmark seems unstable" warning.

Standard library only: the trainer, the inference bench and the aggregation all import it.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

CONFIDENCE = 0.95
UNSTABLE_CV = 0.10  # pyperf: "the standard deviation is greater than 10% of the mean"
BLOCKS = 10  # consecutive blocks of steps a cell's comparisons use (batch means)
INTERVAL_NAME = "order-statistic (binomial) 95 % interval of the median"


@dataclass(frozen=True)
class Spread:
    """What the samples of one timing say: a quantile, its interval, and their spread."""

    n: int
    q: float
    value: float | None  # the sample q-quantile (linear interpolation between order statistics)
    low: float | None  # interval of the true q-quantile; None when n is too small for it
    high: float | None
    mean: float | None
    sd: float | None  # sample standard deviation (n - 1); None for n < 2
    cv: float | None  # sd / mean; None for n < 2 or a zero mean

    @property
    def unstable(self) -> bool:
        """pyperf's rule: the standard deviation is at least a tenth of the mean."""
        return self.cv is not None and self.cv >= UNSTABLE_CV


def finite(values: Iterable[Any]) -> list[float]:
    """The finite numbers among ``values`` (None, text, booleans and infinities dropped)."""
    found = []
    for value in values:
        if isinstance(value, bool) or value is None:
            continue
        try:
            number = float(value)
        except (TypeError, ValueError):
            continue
        if math.isfinite(number):
            found.append(number)
    return found


def sample_quantile(ordered: Sequence[float], q: float) -> float:
    """The q-quantile of sorted samples, interpolating between neighbours (numpy's default,
    ``statistics.quantiles(method="inclusive")``): the median of an even count is the mean of
    the middle two."""
    position = q * (len(ordered) - 1)
    below = math.floor(position)
    above = min(below + 1, len(ordered) - 1)
    return ordered[below] + (ordered[above] - ordered[below]) * (position - below)


def _binomial_cdf(n: int, q: float) -> list[float]:
    """[P(B <= i) for i in 0..n], B ~ Binomial(n, q), each term in log space (no overflow)."""
    log_q, log_1q, log_n = math.log(q), math.log1p(-q), math.lgamma(n + 1)
    total, found = 0.0, []
    for i in range(n + 1):
        total += math.exp(
            log_n - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * log_q + (n - i) * log_1q
        )
        found.append(min(total, 1.0))
    return found


# Above this many samples the binomial's normal approximation gives the ranks (to within one).
EXACT_RANKS_UP_TO = 5000


def order_statistic_ranks(n: int, q: float, confidence: float) -> tuple[int, int] | None:
    """1-based ranks (j, k) with P(x_(j) <= true q-quantile <= x_(k)) >= ``confidence``, as
    nearly symmetric as the binomial allows; None when even (1, n) does not reach it.

    The count B of samples below the true quantile is Binomial(n, q), and the interval holds it
    when j <= B <= k - 1: j is the largest rank with P(B <= j - 1) <= (1 - confidence) / 2, k the
    smallest with P(B <= k - 1) >= 1 - (1 - confidence) / 2."""
    if n < 1 or not 0 < q < 1:
        return None
    tail = (1 - confidence) / 2
    if n > EXACT_RANKS_UP_TO:
        z = statistics.NormalDist().inv_cdf(1 - tail)
        centre, width = n * q, z * math.sqrt(n * q * (1 - q))
        j, k = math.floor(centre - width), math.ceil(centre + width) + 1
        return (j, k) if j >= 1 and k <= n else None
    cdf = _binomial_cdf(n, q)
    j = 0
    while j < n and cdf[j] <= tail:
        j += 1
    k = n
    while k > 1 and cdf[k - 2] >= 1 - tail:
        k -= 1
    if j < 1 or j > k or cdf[k - 1] - cdf[j - 1] < confidence:
        return None
    return j, k


def quantile_interval(
    values: Iterable[Any], q: float = 0.5, confidence: float = CONFIDENCE
) -> Spread:
    """The q-quantile of the finite ``values`` with its order-statistic interval (None bounds
    when n is too small: a 95 % interval of the median needs 6 samples) and their spread."""
    xs = sorted(finite(values))
    n = len(xs)
    if n == 0:
        return Spread(0, q, None, None, None, None, None, None)
    mean = sum(xs) / n
    sd = math.sqrt(sum((x - mean) ** 2 for x in xs) / (n - 1)) if n > 1 else None
    cv = sd / abs(mean) if sd is not None and mean else None
    ranks = order_statistic_ranks(n, q, confidence)
    low, high = (xs[ranks[0] - 1], xs[ranks[1] - 1]) if ranks else (None, None)
    return Spread(n, q, sample_quantile(xs, q), low, high, mean, sd, cv)


def median_interval(values: Iterable[Any], confidence: float = CONFIDENCE) -> Spread:
    """:func:`quantile_interval` of the median."""
    return quantile_interval(values, 0.5, confidence)


def summary(values: Iterable[Any], quantiles: Sequence[float] = ()) -> dict[str, Any]:
    """One timing's samples as a record's dict: ``n``, ``median`` with ``median_low`` /
    ``median_high`` (the exact order-statistic 95 % interval, None when n is too small: the
    median needs 6 samples), ``mean``, ``std``, ``cv``, ``unstable`` (:data:`UNSTABLE_CV`), and
    for each q in ``quantiles`` ``p<100 q>`` with its interval (p99 needs 348 samples).

    The inference bench's per-batch and per-query samples are summarised here, by the same
    intervals as the trainer's step times."""
    xs = finite(values)
    median = median_interval(xs)
    if median.n == 0:
        return {"n": 0, "median": None, "unstable": None}
    found: dict[str, Any] = {
        "n": median.n,
        "median": median.value,
        "median_low": median.low,
        "median_high": median.high,
        "mean": median.mean,
        "std": median.sd if median.sd is not None else 0.0,
        "cv": median.cv,
        "unstable": median.unstable,
    }
    for q in quantiles:
        name = f"p{round(100 * q)}"
        found[name], found[f"{name}_low"], found[f"{name}_high"] = _bounds(xs, q)
    return found


def _bounds(values: Sequence[float], q: float) -> tuple[float | None, float | None, float | None]:
    found = quantile_interval(values, q)
    return found.value, found.low, found.high


def scaled(found: dict[str, Any], factor: float) -> dict[str, Any]:
    """The same :func:`summary` in other units (seconds -> ms); ``n``, ``cv`` and ``unstable``
    stay."""
    keep = ("n", "cv", "unstable")
    return {
        key: value if key in keep or value is None else value * factor
        for key, value in found.items()
    }


def rates(seconds: Sequence[float], images: Sequence[int]) -> list[float]:
    """Per-step img/s (a step's images over its seconds), steps without time dropped."""
    return [i / s for s, i in zip(seconds, images, strict=True) if s > 0]


def block_rates(
    seconds: Sequence[float], images: Sequence[int], blocks: int = BLOCKS
) -> list[float]:
    """img/s of ``blocks`` consecutive, near-equal runs of steps (images over seconds of each
    run: batch means). Noise on a shared machine comes in bursts that span several steps, so
    single steps are not independent samples; means of long runs of steps nearly are, which is
    what a comparison's interval needs. Fewer steps than blocks: one block per step."""
    n = len(seconds)
    count = min(blocks, n)
    found = []
    for b in range(count):
        part = slice(b * n // count, (b + 1) * n // count)
        total = sum(seconds[part])
        if total > 0:
            found.append(sum(images[part]) / total)
    return found


def step_ms_text(seconds: Iterable[float]) -> str:
    """Step times as epochs.csv's ``step_ms`` column: milliseconds, space-separated."""
    return " ".join(f"{1000 * s:.3f}" for s in seconds)


def parse_step_ms(text: Any) -> list[float]:
    """``step_ms`` back as seconds (an empty list for a missing or empty column)."""
    if not isinstance(text, str):
        return []
    return [float(part) / 1000 for part in text.split()]
