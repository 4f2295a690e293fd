"""Bootstrap intervals over seeds (icl.analysis.intervals): they cover what they should, resample paired
sweeps together, and say when there is nothing to resample."""
import math

import numpy as np
import pandas as pd
import pytest

from icl.analysis.intervals import Estimate, over_seeds, seed_matrix


def test_the_95_interval_of_a_mean_covers_the_truth_about_as_often_as_it_says():
    rng = np.random.default_rng(0)
    hits = []
    for _ in range(60):
        x = rng.normal(1.0, 0.2, size=(20, 1))
        e = over_seeds(lambda m: m.mean(), x, n_resamples=400)
        hits.append(e.ci95[0] <= 1.0 <= e.ci95[1])
        assert e.ci95[0] <= e.ci68[0] <= e.value <= e.ci68[1] <= e.ci95[1]
    assert 0.8 <= np.mean(hits) <= 1.0  # percentile intervals run a little narrow at n = 20


def test_paired_sweeps_are_resampled_with_the_same_seeds():
    rng = np.random.default_rng(1)
    shared = rng.normal(0, 1.0, size=(8, 1))  # what two sweeps of one seed have in common
    a, b = shared + rng.normal(0, 0.01, (8, 1)), shared + 0.5 + rng.normal(0, 0.01, (8, 1))
    diff = over_seeds(lambda x, y: (y - x).mean(), a, b)
    assert diff.ci95[1] - diff.ci95[0] < 0.05  # the shared part cancels: paired
    with pytest.raises(ValueError, match="one row per seed"):
        over_seeds(lambda x, y: 0.0, a, b[:5])


def test_a_dict_statistic_gives_an_estimate_per_key_and_one_seed_gives_no_interval():
    x = np.arange(10.0).reshape(5, 2)
    out = over_seeds(lambda m: {"mean": m.mean(), "max": m.max()}, x)
    assert set(out) == {"mean", "max"} and out["max"].ci95[1] == 9.0 and out["mean"].n_seeds == 5
    one = over_seeds(lambda m: m.mean(), x[:1])
    assert one.value == 0.5 and not one.has_interval and math.isnan(one.ci95[0])
    assert Estimate.point(2.0).to_dict() == {"value": 2.0, "ci68": [math.nan] * 2, "ci95": [math.nan] * 2, "n_seeds": 1}


def test_the_statistic_is_computed_once_per_distinct_resample():
    calls = []
    over_seeds(lambda m: calls.append(1) or float(m.sum()), np.ones((4, 1)), n_resamples=3000)
    assert len(calls) <= 1 + math.comb(4 + 4 - 1, 4)  # 35 multisets of 4 seeds, and the point value


def test_seed_matrix_keeps_the_seeds_that_have_every_depth():
    df = pd.DataFrame({"seed": [0, 0, 1, 1, 2], "depth": [1, 2, 1, 2, 1], "loss": [0.5, 0.4, 0.6, 0.3, 0.7]})
    depths, m = seed_matrix(df)
    assert depths.tolist() == [1.0, 2.0] and m.tolist() == [[0.5, 0.4], [0.6, 0.3]]


def test_a_notebooks_resample_count_is_drawn_by_every_later_interval():
    from icl.analysis import intervals
    from icl.core.config import ConfigError

    calls = []
    try:
        intervals.set_resamples(12)
        over_seeds(lambda m: calls.append(1) or float(m.sum()), np.arange(40.0).reshape(20, 2))
    finally:
        intervals.set_resamples(intervals.N_RESAMPLES)
    # the point, then at most 12 distinct resamples: memoised across both levels
    assert 1 < len(calls) <= 13
    with pytest.raises(ConfigError, match="bootstrap_resamples: 5 is not allowed"):
        intervals.set_resamples(5)


def test_a_warm_up_sees_every_distinct_resample_and_changes_no_interval():
    """`warm` gets each multiset of seeds once, in the order the statistic then sees it; an interval
    computed after it is the one computed without it."""
    from icl.analysis.intervals import distinct_resamples

    x = np.random.default_rng(3).normal(size=(5, 3))
    seen, orders = [], set()
    stat = lambda m: orders.add(tuple(m[:, 0])) or float(m.mean())
    warmed = over_seeds(stat, x, warm=lambda resamples: seen.extend(resamples))
    assert len(seen) == math.comb(9, 5) == len(distinct_resamples(5))
    assert {tuple(r[0][:, 0]) for r in seen} >= orders  # no resample in an order the warm-up did not see
    assert warmed == over_seeds(lambda m: float(m.mean()), x)
