"""The exponent rule gives the known answer on curves whose exponent is known (icl.claims.calibration,
docs/statistics.md): the check a verdict reads can say reproduced, can say not reproduced, and
abstains only where the data cannot tell."""
import numpy as np
import pandas as pd
import pytest

from icl.claims import calibration, difficult

QUICK = (1, 2, 3, 4, 6, 8, 12, 16, 32, 64)


def exact(alpha: float, shape="k=4", seeds=5, depths=QUICK) -> pd.DataFrame:
    return calibration.sweep(calibration.SHAPES[shape], alpha, depths, seeds, 0.0, 0.0, np.random.default_rng(0))


@pytest.mark.parametrize("shape", ["k=4", "k=8", "k=12"])
def test_an_exact_inverse_depth_tail_is_reproduced_and_an_exact_half_power_is_not(shape):
    k = calibration.SHAPES[shape].key_dim
    one = difficult.judge(exact(1.0, shape), 16, k)
    assert one["status"] == "reproduced" and one["primary"] == "tail L >= m"
    assert one["alpha"]["value"] == pytest.approx(1.0, abs=1e-6)
    half = difficult.judge(exact(0.5, shape), 16, k)
    assert half["status"] == "not reproduced" and half["alpha"]["value"] == pytest.approx(0.5, abs=1e-6)


@pytest.mark.slow  # more than a second
def test_at_the_measured_noise_the_rule_says_the_true_answer_and_its_intervals_cover():
    shape = calibration.SHAPES["k=8"]
    t = calibration.study(shape, QUICK, 5, seed_noise=0.0066, eval_noise=0.018, draws=20, alphas=(0.5, 1.0))
    half, one = t.set_index("alpha").loc[0.5], t.set_index("alpha").loc[1.0]
    assert half["not reproduced"] >= 0.9 and one["reproduced"] >= 0.9
    assert (t.coverage >= 0.8).all()  # 95 % over 200 draws in the committed study; 20 draws are rough


def test_a_flat_curve_fails_whatever_its_fit_and_one_seed_abstains():
    flat = exact(1.0).assign(loss=0.2)
    assert difficult.judge(flat, 16, 4)["status"] == "not reproduced"
    one_seed = difficult.judge(exact(1.0, seeds=1), 16, 4)
    assert one_seed["status"] == "inconclusive" and one_seed["problem"] == "one seed: no interval"


def test_a_tail_too_short_to_fit_is_not_identified():
    out = difficult.judge(exact(1.0, shape="k=4", depths=(1, 2, 3, 4, 8, 16)), 16, 4)  # tail 4, 8, 16: 3 depths
    assert out["status"] == "inconclusive" and out["alpha"] is None
    assert out["problem"].startswith("fewer than 4 depths")


@pytest.mark.parametrize("shape", ["k=4", "k=8", "k=12"])
def test_an_exponential_approach_with_no_power_law_in_it_is_never_reproduced(shape):
    k = calibration.SHAPES[shape].key_dim
    exact_exp = calibration.sweep(calibration.SHAPES[shape], None, QUICK, 5, 0.0, 0.0, np.random.default_rng(0),
                                  family="exponential")
    out = difficult.judge(exact_exp, 16, k)
    assert out["status"] == "not reproduced" and out["shape_reading"].startswith("not a power law")
    noisy = calibration.study(calibration.SHAPES[shape], QUICK, 5, 0.0066, 0.018, draws=5, family="exponential")
    assert noisy["reproduced"].iloc[0] == 0


def test_a_verdict_that_flips_when_the_fit_starts_later_is_inconclusive():
    from icl.claims import near_one

    row = {"alpha_primary": 1.0, "alpha_primary_lo95": 0.95, "alpha_primary_hi95": 1.05, "n_seeds": 5,
           "primary_problem": "", "alpha_window": 0.5, "alpha_window_lo95": 0.45, "alpha_window_hi95": 0.55,
           "window_problem": "", "gain_exponential": -50.0, "gain_log_corrected": -50.0}
    assert near_one(row, 0.25) is None
    assert near_one({**row, "alpha_window": 1.0, "alpha_window_lo95": 0.9, "alpha_window_hi95": 1.1}, 0.25) is True
    assert near_one({**row, "window_problem": "fewer than 4 depths from L = 8"}, 0.25) is True
    assert near_one({**row, "gain_exponential": 11.0}, 0.25) is False  # the core can fail on its shape alone


@pytest.mark.slow  # about ten seconds
def test_a_smooth_knee_rarely_reads_the_opposite_of_its_asymptotic_exponent():
    for alpha in (0.5, 1.0):
        t = calibration.study(calibration.SHAPES["k=4"], QUICK, 5, 0.0066, 0.018, draws=10, alphas=(alpha,),
                              family="smooth knee")
        wrong = calibration.truth("smooth knee", alpha, difficult.ALPHA_TOL)[1]
        assert t[wrong].iloc[0] <= 0.1
