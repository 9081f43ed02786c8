"""records/spread.py's summary dict, its unit change and a large-n rank 0 (survivors of the
mutation run, notes/mutants2-spread.md). Expected values are worked by hand: for n = 10 the
95 % interval of the median is (x_(2), x_(9)) (the textbook table; coverage 97.9 %)."""

from __future__ import annotations

import math

import pytest

from nettebench.records.spread import order_statistic_ranks, quantile_interval, scaled, summary

TEN = [float(x) for x in range(1, 11)]
SD_TEN = math.sqrt(82.5 / 9)  # sum((x - 5.5)**2) over 1..10 is 82.5


def test_summary_of_nothing_finite():
    assert summary([]) == {"n": 0, "median": None, "unstable": None}
    assert summary([None, "x", float("inf")]) == {"n": 0, "median": None, "unstable": None}


def test_summary_of_one_to_ten_with_quantiles():
    found = summary(reversed(TEN), quantiles=(0.5, 0.9))
    assert found["n"] == 10
    assert found["median"] == 5.5
    assert (found["median_low"], found["median_high"]) == (2.0, 9.0)
    assert found["mean"] == 5.5
    assert found["std"] == pytest.approx(SD_TEN)
    assert found["cv"] == pytest.approx(SD_TEN / 5.5)
    assert found["unstable"] is True
    assert (found["p50"], found["p50_low"], found["p50_high"]) == (5.5, 2.0, 9.0)
    # p90 of 1..10 interpolates at position 8.1: 9.1; 10 samples give it no 95 % interval
    assert found["p90"] == pytest.approx(9.1)
    assert found["p90_low"] is None and found["p90_high"] is None


def test_scaled_keeps_counts_and_ratios_and_none():
    found = scaled(summary(TEN, quantiles=(0.9,)), 1000.0)
    assert found["n"] == 10
    assert found["cv"] == pytest.approx(SD_TEN / 5.5)
    assert found["unstable"] is True
    assert found["median"] == 5500.0 and found["median_low"] == 2000.0
    assert found["std"] == pytest.approx(1000 * SD_TEN)
    assert found["p90_low"] is None


def test_a_large_n_tail_quantile_never_takes_rank_zero():
    """n = 6000, q = 0.0008: the normal ranks' lower end, floor(4.8 - 1.96 * 2.19) = 0, is no
    rank; the interval must not wrap to the largest sample."""
    ranks = order_statistic_ranks(6000, 0.0008, 0.95)
    assert ranks is None or ranks[0] >= 1
    found = quantile_interval(range(1, 6001), 0.0008)
    assert found.low is None or found.low <= found.value <= found.high


def test_above_5000_samples_the_ranks_are_the_normal_approximations():
    """n = 6000, q = 7/6000 (7 expected below): centre 7, half-width 1.96 x sqrt(7 x 5993/6000)
    = 5.18, so j = floor(1.82) = 1 (a valid first rank) and k = ceil(12.18) + 1 = 14; the exact
    binomial would say (2, 14), within one as the module states."""
    assert order_statistic_ranks(6000, 7 / 6000, 0.95) == (1, 14)


def test_one_samples_standard_deviation_is_zero():
    found = summary([2.0])
    assert found["n"] == 1 and found["median"] == 2.0 and found["std"] == 0.0
    assert found["median_low"] is None and found["median_high"] is None
