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


def test_t_tends_to_the_normal_and_p_inverts_the_quantile():
    assert stats.t_quantile(0.975, 10_000) == pytest.approx(1.960, abs=1e-3)
    for df in (1, 2.5, 7):
        assert stats.t_two_sided_p(stats.t_quantile(0.975, df), df) == pytest.approx(0.05)
    assert stats.t_two_sided_p(0.0, 3) == pytest.approx(1.0)


def test_incomplete_beta_closed_forms():
    for x in (0.1, 0.5, 0.9):
        assert stats.incomplete_beta(1, 1, x) == pytest.approx(x)
        assert stats.incomplete_beta(3, 1, x) == pytest.approx(x**3)
        assert stats.incomplete_beta(1, 2, x) == pytest.approx(1 - (1 - x) ** 2)


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
    # t = -2.191, Welch-Satterthwaite df = 6 (equal variances and sizes), p = 0.0710
    result = stats.welch([1, 2, 3, 4], [3, 4, 5, 6])
    assert result.p == pytest.approx(0.0710, abs=1e-4)
    assert result.supported is False
    # unequal spreads: df from Welch-Satterthwaite, not n1 + n2 - 2
    far = stats.welch([10.0, 10.2, 9.9], [12.0, 14.5, 13.1, 12.4])
    assert far.p < 0.05 and far.supported is True


def test_comparison_marks():
    assert stats.comparison_mark([100.0, 101.0, 99.0], [50.0, 51.0, 49.5]) == ""
    assert stats.comparison_mark([100.0, 110.0], [104.0, 96.0]) == f" {stats.NOT_SUPPORTED_MARK}"
    assert stats.comparison_mark([100.0], [50.0, 51.0]) == f" {stats.UNTESTED_MARK}"
    # no spread on either side: equal is not a difference, anything else is exact
    assert stats.welch([5.0, 5.0], [5.0, 5.0]).supported is False
    assert stats.welch([5.0, 5.0], [6.0, 6.0]).supported is True
