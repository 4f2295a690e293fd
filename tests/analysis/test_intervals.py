"""Jackknife intervals over seeds (icl.analysis.intervals): they cover what they say, leave a seed out
of paired sweeps together, and say when there is nothing to leave out."""
import math

import numpy as np
import pandas as pd
import pytest

from icl.analysis.intervals import Estimate, leave_one_out, over_seeds, seed_matrix


@pytest.mark.slow  # thousands of simulated experiments: 3 s each on a shared 2-core machine (issue 57)
@pytest.mark.parametrize("n", [3, 5])
def test_the_95_interval_of_a_mean_covers_the_truth_as_often_as_it_says_at_few_seeds(n):
    """Student's t with n - 1 degrees of freedom: exact for the mean of normal draws, where the
    percentile bootstrap of five seeds covered about 85 %."""
    rng = np.random.default_rng(n)
    hits = []
    for _ in range(2000):
        x = rng.normal(1.0, 0.2, size=(n, 1))
        e = over_seeds(lambda m: m.mean(), x)
        hits.append(e.ci95[0] <= 1.0 <= e.ci95[1])
        assert e.ci95[0] <= e.ci68[0] <= e.value <= e.ci68[1] <= e.ci95[1]
    assert 0.935 <= np.mean(hits) <= 0.965


def test_paired_sweeps_leave_the_same_seed_out():
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
    assert set(out) == {"mean", "max"} and out["mean"].n_seeds == 5 and out["max"].value == 9.0
    one = over_seeds(lambda m: m.mean(), x[:1])
    assert one.value == 0.5 and not one.has_interval and math.isnan(one.ci95[0])
    assert Estimate.point(2.0).to_dict() == {"value": 2.0, "ci68": [math.nan] * 2, "ci95": [math.nan] * 2, "n_seeds": 1}


def test_a_statistic_that_is_nan_without_one_seed_has_no_interval():
    x = np.array([[1.0], [2.0], [3.0]])
    e = over_seeds(lambda m: float(m.mean()) if len(m) == 3 else math.nan, x)
    assert e.value == 2.0 and not e.has_interval


def test_the_statistic_is_computed_once_per_seed_left_out_and_a_warm_up_sees_them_first():
    calls, seen = [], []
    x = np.random.default_rng(3).normal(size=(5, 3))
    e = over_seeds(lambda m: calls.append(len(m)) or float(m.mean()), x, warm=lambda subsets: seen.extend(subsets))
    assert calls == [5, 4, 4, 4, 4, 4] and len(seen) == 5 and seen[0][0].shape == (4, 3)
    assert [list(idx) for idx in leave_one_out(3)] == [[1, 2], [0, 2], [0, 1]]
    assert e == over_seeds(lambda m: float(m.mean()), x)


def test_many_seeds_leave_out_a_group_at_a_time_and_few_seeds_one_at_a_time():
    # issue 56: 28,571 seeds made 28,571 copies of the matrix; above GROUPS seeds, GROUPS samples
    from scipy import stats

    from icl.analysis.intervals import GROUPS

    x = np.random.default_rng(5).normal(size=(10_000, 2))
    calls = []
    e = over_seeds(lambda m: calls.append(len(m)) or float(m.mean()), x)
    assert len(calls) == GROUPS + 1 and set(calls[1:]) == {10_000 - 10_000 // GROUPS}
    se = x.mean(1).std(ddof=1) / np.sqrt(len(x))  # the mean's standard error, which the jackknife estimates
    half = (e.ci95[1] - e.ci95[0]) / 2 / stats.t.ppf(0.975, GROUPS - 1)
    assert 0.7 * se < half < 1.3 * se and e.n_seeds == 10_000
    groups = leave_one_out(103)
    assert len(groups) == GROUPS and sorted(np.concatenate([np.setdiff1d(np.arange(103), g) for g in groups])) == list(range(103))
    plain = [[j for j in range(GROUPS) if j != i] for i in range(GROUPS)]  # at GROUPS seeds, the plain jackknife
    assert [list(idx) for idx in leave_one_out(GROUPS)] == plain


def test_seed_matrix_keeps_the_seeds_that_have_every_depth():
    df = pd.DataFrame({"seed": [0, 0, 1, 1, 2], "depth": [1, 2, 1, 2, 1], "loss": [0.5, 0.4, 0.6, 0.3, 0.7]})
    depths, m = seed_matrix(df)
    assert depths.tolist() == [1.0, 2.0] and m.tolist() == [[0.5, 0.4], [0.6, 0.3]]
