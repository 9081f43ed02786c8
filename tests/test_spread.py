"""The spread of a timing (records/spread.py): order-statistic intervals of a quantile against
the published binomial tables, pyperf's instability rule from both sides, block rates, and the
step times' round trip through epochs.csv."""

from __future__ import annotations

import math
import random

import pytest

from nettebench.records import spread as S


@pytest.mark.parametrize(
    ("n", "ranks"),
    [
        # 95 % distribution-free confidence intervals of the median: the ranks (r, n - r + 1)
        # tabulated in Conover, Practical Nonparametric Statistics (3rd ed., 1999), Table A3,
        # and in Hollander & Wolfe; n = 5 is too small for 95 % (1/16 outside (1, 5)).
        (5, None),
        (6, (1, 6)),
        (8, (1, 8)),
        (9, (2, 8)),
        (10, (2, 9)),
        (20, (6, 15)),
        (50, (18, 33)),
        (100, (40, 61)),
    ],
)
def test_median_interval_ranks_match_the_binomial_tables(n, ranks):
    assert S.order_statistic_ranks(n, 0.5, 0.95) == ranks


def test_the_ranks_cover_at_least_the_confidence_and_the_normal_branch_agrees():
    for n in (6, 17, 120, 999):
        j, k = S.order_statistic_ranks(n, 0.5, 0.95)

        def below(r, n=n):  # P(B <= r - 1), B ~ Binomial(n, 1/2): samples below the median
            return sum(math.comb(n, i) for i in range(r)) / 2**n

        assert below(k) - below(j) >= 0.95
        # equal tails, each at most 2.5 %, and one rank narrower on a side would exceed it
        assert below(j) <= 0.025 < below(j + 1)
        assert 1 - below(k) <= 0.025 < 1 - below(k - 1)
    exact = S.order_statistic_ranks(S.EXACT_RANKS_UP_TO, 0.5, 0.95)
    approx = S.order_statistic_ranks(S.EXACT_RANKS_UP_TO + 1, 0.5, 0.95)
    assert abs(exact[0] - approx[0]) <= 1 and abs(exact[1] - approx[1]) <= 2


def test_a_tail_quantile_needs_enough_samples_for_its_interval():
    assert S.order_statistic_ranks(100, 0.99, 0.95) is None  # p99 of 100 samples: no bound
    j, k = S.order_statistic_ranks(1000, 0.99, 0.95)
    assert j < 990 < k <= 1000
    found = S.quantile_interval(range(1, 1001), 0.99)
    assert found.low == j and found.high == k and found.value == pytest.approx(990.01)


def test_median_interval_values_and_spread():
    found = S.median_interval([5, 1, 4, 2, 3, 6, 7, 8, 9, 10, "n/a", None, float("inf")])
    assert (found.n, found.value, found.low, found.high) == (10, 5.5, 2, 9)
    assert found.mean == 5.5 and found.sd == pytest.approx(math.sqrt(110 / 12))
    assert S.median_interval([3.0]).low is None and S.median_interval([]).value is None


@pytest.mark.parametrize(("cv", "unstable"), [(0.0999, False), (0.1001, True)])
def test_unstable_is_pyperfs_rule_from_both_sides(cv, unstable):
    # two samples mean 1, sd = cv: 1 -/+ cv / sqrt(2)
    half = cv / math.sqrt(2)
    found = S.median_interval([1 - half, 1 + half])
    assert found.cv == pytest.approx(cv)
    assert found.unstable is unstable


def test_a_cv_of_exactly_a_tenth_is_unstable():
    """sd 1 on a mean of 10, both exact in floating point: cv is 0.1 itself, so ``>=`` and ``>``
    part here (the parametrised case above computes 0.10000000000000003)."""
    xs = [9.0, 11.0, 9.0, 11.0, 10.0]
    found = S.median_interval(xs)
    assert found.cv == S.UNSTABLE_CV == 0.1 and found.unstable is True
    assert S.summary(xs)["unstable"] is True and S.summary(xs)["cv"] == 0.1
    calm = [9.5, 10.5, 9.5, 10.5, 10.0]  # cv 0.05 exactly
    assert S.median_interval(calm).unstable is False and S.summary(calm)["unstable"] is False


def test_block_rates_are_batch_means_of_consecutive_steps():
    seconds = [0.1] * 5 + [0.2] * 5
    assert S.block_rates(seconds, [10] * 10, blocks=2) == pytest.approx([100.0, 50.0])
    assert S.block_rates([0.1, 0.2], [10, 10]) == pytest.approx([100.0, 50.0])  # one a step
    assert len(S.block_rates([0.1] * 95, [8] * 95)) == S.BLOCKS
    assert S.rates([0.5, 0.0], [10, 10]) == [20.0]


def test_step_times_round_trip_through_epochs_csv_text():
    rng = random.Random(0)
    seconds = [rng.uniform(0.01, 2) for _ in range(20)]
    assert S.parse_step_ms(S.step_ms_text(seconds)) == pytest.approx(seconds, abs=1e-6)
    assert S.parse_step_ms(float("nan")) == [] and S.parse_step_ms("") == []


def test_a_block_rate_is_its_images_over_its_time_not_a_mean_of_step_rates():
    # one block: 10 + 30 images in 0.1 + 0.5 s is 66.7 img/s (the step rates' mean is 130)
    assert S.block_rates([0.1, 0.5], [10, 30], blocks=1) == [pytest.approx(40 / 0.6)]
    seconds, images = [0.1, 0.3, 0.2, 0.2, 0.5, 0.1], [8, 8, 8, 4, 8, 8]
    expected = [16 / 0.4, 12 / 0.4, 16 / 0.6]  # three runs of two steps each
    assert S.block_rates(seconds, images, blocks=3) == pytest.approx(expected)


def test_finite_drops_booleans_none_text_and_infinities():
    assert S.finite([True, False, None, 1.0, "x", float("inf"), "2.5", float("nan")]) == [1.0, 2.5]


def test_ranks_need_a_quantile_strictly_inside_0_1_and_a_sample():
    for q in (0.0, 1.0, 1.5, -0.1):
        assert S.order_statistic_ranks(10, q, 0.95) is None
    assert S.order_statistic_ranks(0, 0.5, 0.95) is None


def test_the_normal_ranks_above_5000_still_cover_95_percent():
    for q in (0.5, 0.99):
        n = S.EXACT_RANKS_UP_TO + 1
        j, k = S.order_statistic_ranks(n, q, 0.95)
        cdf = S._binomial_cdf(n, q)
        assert cdf[k - 1] - cdf[j - 1] >= 0.95, q
        assert cdf[j - 1] <= 0.025 and 1 - cdf[k - 1] <= 0.025, q  # each tail, as exact ranks
    assert S.order_statistic_ranks(6000, 0.0002, 0.95) is None  # a lower rank of 0 is none


def test_quantile_interval_defaults_to_the_median_and_cv_is_sd_over_the_mean():
    found = S.quantile_interval([1, 2, 3])
    assert found.q == 0.5 and found.value == 2
    assert S.median_interval([9, 10, 11]).cv == pytest.approx(0.1)
    assert S.median_interval([-9, -10, -11]).cv == pytest.approx(
        0.1
    )  # positive for a negative mean
