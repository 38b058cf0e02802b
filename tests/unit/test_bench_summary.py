"""The bench's figures are medians of interleaved pairs with their spread (bench/README.md "Method"): one sample
no longer decides PASS or FAIL, and every pair's raw numbers stay in bench/results/latest.json."""

from __future__ import annotations

import pytest

from bench.summary import in_turns, pair_ratios, spread


def test_spread_reports_median_min_max_and_count() -> None:
    # Given the GetTask ratios of five interleaved pairs, one of them an outlier
    samples = [1.42, 1.14, 1.78, 1.55, 1.60]

    # When they are summarized
    found = spread(samples)

    # Then the figure is their median, and the table can print how far they spread
    assert found == {"median": 1.55, "min": 1.14, "max": 1.78, "n": 5}


def test_spread_of_an_even_count_is_the_middle_pair_mean() -> None:
    # Given four pairs' p99s (ms)
    # When summarized
    found = spread([10.0, 30.0, 20.0, 40.0])

    # Then the median lies between the middle two
    assert found["median"] == 25.0
    assert (found["min"], found["max"]) == (10.0, 40.0)


def test_pair_ratios_divide_each_pair_by_its_own_partner() -> None:
    # Given ours and the reference's req/s, measured in the same minute pair by pair, the machine slowing down
    ours = [6000.0, 5000.0, 4000.0]
    reference = [4000.0, 2500.0, 4000.0]

    # When the ratio is taken pair by pair
    ratios = pair_ratios(ours, reference)

    # Then each pair is compared with its own partner, not with a pooled median of the other side
    assert ratios == [1.5, 2.0, 1.0]
    assert spread(ratios)["median"] == 1.5


def test_an_empty_sample_is_refused() -> None:
    # Given no sample at all (a figure whose every run failed)
    # When summarized, Then it says so rather than printing a zero
    with pytest.raises(ValueError, match="no sample"):
        spread([])


def test_the_sides_of_each_pair_take_turns_running_first() -> None:
    # Given ours and the reference, measured in four pairs
    # When the bench asks each pair's order
    orders = [in_turns(pair, ("ours", "reference")) for pair in range(4)]

    # Then each side runs first in every other pair (A B, B A, ...): a machine drifting through the run favors neither
    assert orders == [["ours", "reference"], ["reference", "ours"], ["ours", "reference"], ["reference", "ours"]]
