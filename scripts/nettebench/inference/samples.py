"""A set of timing samples as a median with its interval, percentiles, and a stability verdict.

Timings are distributions (CONVENTIONS, "Numbers carry their spread"): every measurement of an
inference cell keeps its per-batch or per-query samples and reports their median with a 95 %
distribution-free interval (order statistics: the ranks ``n q +- 1.96 sqrt(n q (1 - q))`` of the
sorted samples, the normal approximation of the binomial), and calls the samples unstable when
their standard deviation is at least :data:`UNSTABLE_CV` of their mean (pyperf's bound).

The same interval, for q = 0.99, is why SingleStream asks for about a thousand queries: below
roughly 500 samples the upper rank of p99's interval falls beyond the largest sample, and the
interval is reported as missing (``None``) instead of pretending.

Pure Python: the report imports this module without torch. (When ``report.stats`` gains its own
median helper, this one should call it.)
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from typing import Any

UNSTABLE_CV = 0.10  # std >= 10 % of the mean: unstable (pyperf)
Z_95 = 1.959964


def quantile(sorted_xs: Sequence[float], q: float) -> float:
    """The ``q`` quantile by linear interpolation between closest ranks (numpy's default)."""
    if not sorted_xs:
        raise ValueError("no samples")
    position = q * (len(sorted_xs) - 1)
    low = math.floor(position)
    high = min(low + 1, len(sorted_xs) - 1)
    return sorted_xs[low] + (sorted_xs[high] - sorted_xs[low]) * (position - low)


def quantile_interval(sorted_xs: Sequence[float], q: float) -> tuple[float, float] | None:
    """A 95 % interval of the ``q`` quantile from order statistics, or None when the samples
    are too few for its ranks to lie inside them."""
    n = len(sorted_xs)
    if n < 2:
        return None
    spread = Z_95 * math.sqrt(n * q * (1 - q))
    low_rank = math.floor(n * q - spread)  # 1-based ranks
    high_rank = math.ceil(n * q + spread) + 1
    if low_rank < 1 or high_rank > n:
        return None
    return sorted_xs[low_rank - 1], sorted_xs[high_rank - 1]


def spread(samples: Iterable[float], quantiles: Sequence[float] = ()) -> dict[str, Any]:
    """``n``, ``median`` with ``median_low``/``median_high`` (95 %), ``mean``, ``std``, ``cv``,
    ``unstable``, and for each q in ``quantiles`` ``p<100 q>`` with its interval."""
    xs = sorted(float(x) for x in samples)
    if not xs:
        return {"n": 0, "median": None, "unstable": None}
    mean = statistics.fmean(xs)
    std = statistics.stdev(xs) if len(xs) > 1 else 0.0
    interval = quantile_interval(xs, 0.5)
    found: dict[str, Any] = {
        "n": len(xs),
        "median": statistics.median(xs),
        "median_low": interval[0] if interval else None,
        "median_high": interval[1] if interval else None,
        "mean": mean,
        "std": std,
        "cv": std / mean if mean else None,
        "unstable": bool(mean and std / mean >= UNSTABLE_CV),
    }
    for q in quantiles:
        name = f"p{round(100 * q)}"
        bounds = quantile_interval(xs, q)
        found[name] = quantile(xs, q)
        found[f"{name}_low"] = bounds[0] if bounds else None
        found[f"{name}_high"] = bounds[1] if bounds else None
    return found


def scaled(summary: dict[str, Any], factor: float) -> dict[str, Any]:
    """The same summary in other units (seconds -> ms); ``n``, ``cv`` and ``unstable`` stay."""
    keep = ("n", "cv", "unstable")
    return {
        key: value if key in keep or value is None else value * factor
        for key, value in summary.items()
    }
