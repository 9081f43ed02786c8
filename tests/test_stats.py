"""Statistics over seeds: the t distribution against published tables, the CI, Welch's test."""

from __future__ import annotations

import math
import statistics

import pytest

from nettebench.report import stats

# Two-sided 95 % critical values of Student's t, from any statistics textbook's t table.
T_TABLE_975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 10: 2.228, 30: 2.042}


@pytest.mark.parametrize(("df", "expected"), sorted(T_TABLE_975.items()))
def test_t_quantiles_match_the_published_table(df, expected):
    assert stats.t_quantile(0.975, df) == pytest.approx(expected, abs=5e-4)


def test_t_tends_to_the_normal():
    assert stats.t_quantile(0.975, 10_000) == pytest.approx(1.960, abs=1e-3)


def test_summary_is_mean_and_t_interval():
    values = [54.0, 55.5, 57.0]
    summary = stats.summarize(values)
    sd = statistics.stdev(values)
    assert (summary.n, summary.mean, summary.sd) == (3, pytest.approx(55.5), pytest.approx(sd))
    assert summary.half_width == pytest.approx(4.303 * sd / math.sqrt(3), rel=1e-4)
    assert summary.low < 55.5 < summary.high
    one = stats.summarize([10.0, None, float("nan"), "x"])  # missing values are not seeds
    assert (one.n, one.mean, one.half_width) == (1, 10.0, None)
    assert stats.summarize([]).mean is None


def test_text_of_a_cell():
    assert stats.with_ci(stats.summarize([1.0, 3.0]), "{:.1f}".format) == "2.0 ± 12.7"
    assert stats.with_ci(stats.summarize([2.0]), "{:.1f}".format) == "2.0"
    assert stats.with_ci(stats.summarize([]), "{:.1f}".format) == ""


def test_welch_against_a_worked_example():
    # t = -2.191, Welch-Satterthwaite df = 6 (equal variances and sizes), p = 0.0710; the
    # ratio's test runs on the logarithms, so the samples are given as their exponentials
    result = stats.ratio_interval(
        [math.exp(x) for x in (1, 2, 3, 4)], [math.exp(x) for x in (3, 4, 5, 6)]
    )
    assert result.p == pytest.approx(0.0710, abs=1e-4) and result.df == pytest.approx(6.0)
    assert result.supported is False
    # unequal spreads: df from Welch-Satterthwaite, not n1 + n2 - 2
    far = stats.ratio_interval(
        [math.exp(x) for x in (10.0, 10.2, 9.9)], [math.exp(x) for x in (12.0, 14.5, 13.1, 12.4)]
    )
    assert far.p < 0.05 and far.supported is True


# Wikipedia, "Welch's t-test", Examples: the third pair (unequal sizes and variances), for
# which it gives Welch t = -2.22, df = 24.5, p = 0.036 (Student's t-test: df 28, p 0.128).
WIKI_A = [19.8, 20.4, 19.6, 17.8, 18.5, 18.9, 18.3, 18.9, 19.5, 22.0]
WIKI_B = [28.2, 26.6, 20.1, 23.3, 25.2, 22.1, 17.7, 27.6, 20.6, 13.7]
WIKI_B += [23.2, 17.5, 20.6, 18.0, 23.9, 21.6, 24.3, 20.4, 23.9, 13.3]


def test_a_side_without_spread_adds_nothing_to_welchs_df():
    """Welch-Satterthwaite's df with one side constant is the other side's n - 1."""
    flat, spread = [math.e] * 5, [math.exp(x) for x in (1, 2, 3, 4, 5, 6, 7, 8, 9)]
    assert stats.ratio_interval(flat, spread).df == pytest.approx(8.0)
    assert stats.ratio_interval(spread[:5], [math.e] * 9).df == pytest.approx(4.0)


def test_ratio_interval_is_welchs_interval_on_the_logs():
    a = [math.exp(x) for x in WIKI_B]  # logs are the published samples: the interval is theirs
    b = [math.exp(x) for x in WIKI_A]
    found = stats.ratio_interval(a, b)
    sa, sb = stats.summarize(WIKI_B), stats.summarize(WIKI_A)
    se = math.sqrt(sa.sd**2 / sa.n + sb.sd**2 / sb.n)
    half = stats.t_quantile(0.975, 24.5246) * se
    diff = sa.mean - sb.mean
    assert found.ratio == pytest.approx(math.exp(diff))
    assert (found.low, found.high) == pytest.approx((math.exp(diff - half), math.exp(diff + half)))
    assert found.df == pytest.approx(24.52, abs=0.01) and found.p == pytest.approx(0.0355, abs=5e-4)
    assert found.supported is True  # the interval excludes 1: p < 0.05 says the same


def test_ratio_interval_verdicts():
    fast, slow = [110, 112, 108, 111, 109], [100, 101, 99, 100, 100]
    assert stats.ratio_interval(fast, slow).supported is True
    assert stats.ratio_interval(slow, fast).ratio == pytest.approx(1 / 1.1, rel=1e-3)
    noisy = [90, 130, 105, 120, 95]
    found = stats.ratio_interval(noisy, slow)
    assert found.low < 1 < found.high and found.supported is False
    one = stats.ratio_interval([100.0], slow)
    assert one.ratio == pytest.approx(1.0, rel=0.01) and one.low is None and one.supported is None
    assert stats.ratio_interval([], slow).ratio is None
    flat = stats.ratio_interval([2.0, 2.0], [1.0, 1.0])  # no spread: untested
    assert (flat.ratio, flat.low, flat.supported) == (2.0, None, None)


def test_ratio_interval_drops_non_positive_samples_and_tests_nothing_without_spread():
    """Identical values on both sides (copied or faked records) carry no spread between
    processes: the ratio stands, untested, never "supported at p = 0"."""
    found = stats.ratio_interval([0.0, -1.0, 2.0, 2.0], [1.0, 1.0])
    assert found.ratio == pytest.approx(2.0) and (found.p, found.supported) == (None, None)
    same = stats.ratio_interval([3.0, 3.0], [3.0, 3.0])
    assert (same.ratio, same.p, same.supported, same.low) == (1.0, None, None, None)
    assert stats.ratio_interval([0.0], [1.0]).ratio is None
