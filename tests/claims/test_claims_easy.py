"""The verdict rules of the easy-task notebooks (icl.claims.easy: C1, C6a, C2) on small synthetic
tables whose answers are known, and the estimates they read (icl.analysis.estimates, icl.analysis.modes)."""
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from icl.analysis import estimates, modes
from icl.analysis.estimates import estimate_columns
from icl.analysis.intervals import Estimate
from icl.claims import PLATEAU, at_plateau
from icl.claims import easy as rules

NAN = (math.nan, math.nan)


def est(lo, value, hi, n=2):
    return Estimate(value, (lo, hi), (lo, hi), n)


def row(**numbers) -> dict:
    """A table row: each Estimate flattened into estimate columns, other values as they are."""
    out = {"n_seeds": 2}
    for k, v in numbers.items():
        out.update(estimate_columns(k, v) if isinstance(v, Estimate) else {k: v})
    return out


def exponents(*rows) -> pd.DataFrame:
    return pd.DataFrame([row(**r) for r in rows])


# --- C1 --------------------------------------------------------------------------------


GOOD = dict(r2=est(0.97, 0.98, 0.99), alpha=est(1.1, 1.2, 1.3))
INSIDE = {"repeated": [est(0.9, 0.95, 1.0), est(0.6, 0.7, 0.8)], "free": [est(1.0, 1.05, 1.1), est(3.0, 5.0, 7.0)]}


def test_c1_holds_when_every_interval_is_on_the_right_side():
    table = exponents(GOOD, {**GOOD, "alpha": est(1.35, 1.4, 1.45)})
    checks = rules.c1(table, {"x minus y": est(-0.3, -0.2, -0.15)}, {"x": INSIDE, "y": INSIDE})
    assert checks == {"power law": True, "between references": True, "depends on spectrum": True}
    assert rules.status("C1", checks) == "reproduced"


def test_c1_core_fails_when_the_trained_loss_lies_above_the_repeated_update_curve():
    """C1's core can fail: a perfect power law whose exponents differ across spectra, but whose loss
    lies wholly above the repeated-update reference at one depth, is not reproduced."""
    above_rep = {**INSIDE, "repeated": [est(0.9, 0.95, 1.0), est(1.2, 1.5, 1.8)]}
    checks = rules.c1(exponents(GOOD), {"x minus y": est(-0.3, -0.2, -0.15)}, {"x": INSIDE, "y": above_rep})
    assert checks == {"power law": True, "between references": False, "depends on spectrum": True}
    assert rules.status("C1", checks) == "not reproduced"


def test_c1_is_inconclusive_where_intervals_straddle_and_for_want_of_budget():
    straddles = {**INSIDE, "repeated": [est(0.95, 1.05, 1.15)]}
    checks = rules.c1(exponents(GOOD), {"x minus y": est(0.0, 0.15, 0.3)}, {"x": straddles})
    assert checks == {"power law": True, "between references": None, "depends on spectrum": None}
    status = rules.status("C1", checks)
    assert status == "inconclusive" and status.range == ("not reproduced", "partly reproduced")
    above_rep = {**INSIDE, "repeated": [est(9.0, 10.7, 12.0)]}  # far above, but the deep runs were still falling
    unconverged = pd.DataFrame({"converged": [True, False]})
    checks = {**rules.c1(exponents(GOOD), {"x minus y": est(0.5, 0.6, 0.7)}, {"x": above_rep}),
              PLATEAU: at_plateau(unconverged)}
    status = rules.status("C1", checks)
    assert checks["between references"] is False and status == "inconclusive" and status.budget
    checks[PLATEAU] = at_plateau(pd.DataFrame({"converged": [True, True]}))
    assert rules.status("C1", checks) == "not reproduced"  # at their plateau, the same numbers decide


def test_c1_without_spectra_or_pairs_fails():
    assert rules.c1(exponents(), {}, {}) == {"power law": False, "between references": False, "depends on spectrum": False}


def test_between_and_differs():
    assert rules.between(est(1.1, 1.2, 1.3), 1.0, 1.5) is True
    assert rules.between(est(1.6, 1.7, 1.8), 1.0, 1.5) is False
    assert rules.between(est(1.1, 1.2, 1.3), 1.5, 1.0) is False  # an empty band
    assert rules.differs(est(0.15, 0.2, 0.3)) is True and rules.differs(est(-0.3, -0.2, -0.15)) is True
    assert rules.differs(est(0.05, 0.1, 0.3)) is None  # straddles the gap of 0.1
    assert rules.differs(est(0.01, 0.03, 0.05)) is False  # nonzero, yet too small to call a dependence
    assert rules.differs(Estimate.point(0.0)) is False
    assert rules.differs(Estimate(0.2, NAN, NAN, 1)) is True  # one seed: the value decides


# --- C6a -------------------------------------------------------------------------------


def mode_numbers(order_1, order_deep, strongest, weakest) -> dict:
    return {"learning order L=1": order_1, "learning order L=32": order_deep,
            f"strongest mode by depth {rules.FEW_LAYERS}": strongest, f"weakest mode by depth {rules.FEW_LAYERS}": weakest}


def test_c6a_reads_the_order_at_every_depth_and_the_modes_by_depth_four():
    good = mode_numbers(est(0.6, 0.7, 0.8), est(0.8, 0.9, 1.0), est(0.01, 0.02, 0.03), est(0.5, 0.6, 0.7))
    assert rules.c6a(good, 0.1) == {"strong modes first (training)": True, "weak modes need depth": True}
    bad_order = {**good, "learning order L=1": est(-0.4, -0.3, -0.2)}
    assert rules.status("C6a", rules.c6a(bad_order, 0.1)) == "not reproduced"  # the core fails
    open_order = {**good, "learning order L=1": est(0.3, 0.5, 0.7)}
    status = rules.status("C6a", rules.c6a(open_order, 0.1))
    assert status == "inconclusive" and status.range == ("not reproduced", "reproduced")
    weak_learned = {**good, f"weakest mode by depth {rules.FEW_LAYERS}": est(0.02, 0.03, 0.04)}
    assert rules.c6a(weak_learned, 0.1)["weak modes need depth"] is False


def test_mode_estimates_take_the_lowest_seed_mean_up_to_few_layers():
    per_seed = pd.DataFrame({"order L=1": [0.6, 0.8], "order L=8": [0.9, 1.0],
                             "strongest L=1": [0.5, 0.3], "strongest L=4": [0.05, 0.07], "strongest L=8": [0.001, 0.001],
                             "weakest L=1": [0.9, 0.9], "weakest L=4": [0.8, 0.6], "weakest L=8": [0.01, 0.01]},
                            index=pd.Index([0, 1], name="seed"))
    numbers = estimates.mode_estimates(per_seed, [1, 8], few_layers=4)
    assert numbers["learning order L=1"].value == pytest.approx(0.7)
    assert numbers["strongest mode by depth 4"].value == pytest.approx(0.06)  # depth 8 is beyond 4
    assert numbers["weakest mode by depth 4"].value == pytest.approx(0.7)
    half = stats.t.ppf(0.975, 1) * 0.1  # two seeds 0.2 apart: a jackknife error of 0.1, Student's t with 1 dof
    assert numbers["weakest mode by depth 4"].ci95 == pytest.approx((0.7 - half, 0.7 + half))


def test_learning_table_reads_every_seed(monkeypatch):
    """Two modes whose normalised curves fall to (first, last) at the end of training."""
    steps = np.array([0, 10, 20])
    curve = lambda first, last: {"_norm": np.array([[1.0, 1.0], [0.5 + first / 2, 0.9], [first, last]])}
    monkeypatch.setattr(modes, "normalised_mode_curves", lambda r: (steps, r["_norm"]))
    table = modes.learning_table({(1, 0): curve(0.1, 0.8), (1, 1): curve(0.2, 0.7), (4, 0): curve(0.01, 0.5),
                                  (4, 1): curve(0.02, 0.4)}, shown=[1])
    assert list(table.index) == [0, 1]
    assert table["strongest L=4"].tolist() == [0.01, 0.02] and table["weakest L=1"].tolist() == [0.8, 0.7]
    assert "order L=4" not in table and table["order L=1"].notna().all()


# --- C2 --------------------------------------------------------------------------------


def c2_table(**overrides) -> pd.DataFrame:
    good = dict(R_1=est(0.001, 0.002, 0.003), deeper_over_one=est(0.8, 0.95, 1.1), target_mass=est(0.95, 0.97, 0.99),
                norm_growth=est(2.5, 3.0, 3.5))
    return pd.DataFrame([row(**good), row(**{**good, **overrides})])


def test_c2_holds_for_a_focused_one_layer_solution():
    checks = rules.c2(c2_table())
    assert checks == {"near zero": True, "no depth gain": True, "focusing": True, "norm growth": True}
    assert rules.status("C2", checks) == "reproduced"


def test_c2_fails_or_is_open_case_by_case():
    assert rules.c2(c2_table(R_1=est(0.05, 0.06, 0.07)))["near zero"] is False
    assert rules.status("C2", rules.c2(c2_table(R_1=est(0.05, 0.06, 0.07)))) == "not reproduced"  # the core fails
    assert rules.c2(c2_table(deeper_over_one=est(0.1, 0.2, 0.3)))["no depth gain"] is False
    open_mass = rules.c2(c2_table(target_mass=est(0.85, 0.9, 0.95)))
    assert open_mass["focusing"] is None
    assert rules.status("C2", open_mass) == "partly reproduced"  # a secondary that does not hold
    open_core = rules.c2(c2_table(R_1=est(0.005, 0.01, 0.015)))
    assert rules.status("C2", open_core) == "inconclusive"
    one_seed = pd.DataFrame([row(R_1=Estimate(0.002, NAN, NAN, 1), deeper_over_one=Estimate(1.0, NAN, NAN, 1),
                                 target_mass=Estimate(0.97, NAN, NAN, 1), norm_growth=Estimate(3.0, NAN, NAN, 1))])
    assert rules.status("C2", rules.c2(one_seed)) == "reproduced"  # one seed: the values decide


def sweep(curve, seeds=(0, 1), depths=(1, 2, 4, 8), jitter=0.0, **columns) -> pd.DataFrame:
    return pd.DataFrame([{"depth": L, "seed": s, "input_exponent": 0.0, "task_exponent": 0.0,
                          "loss": curve(L) * (1 + jitter * (s - 0.5)), **{k: f(L) for k, f in columns.items()}}
                         for s in seeds for L in depths])


def test_one_layer_gain_is_the_best_deeper_improvement():
    numbers = estimates.one_layer_gain(sweep(lambda L: {1: 0.010, 2: 0.008, 4: 0.009, 8: 0.012}[L]))
    assert numbers["R_1"].value == pytest.approx(0.010) and numbers["deeper_over_one"].value == pytest.approx(0.8)
    assert estimates.one_layer_gain(sweep(lambda L: 0.01, depths=(1,)))["deeper_over_one"].value == 1.0


def test_power_law_quality_and_exponent_differences():
    steep, shallow = sweep(lambda L: L ** -1.0, jitter=0.02), sweep(lambda L: L ** -0.5, jitter=0.02)
    assert estimates.fit_quality(steep, L0=0.0)["r2"].value == pytest.approx(1.0)
    diff = estimates.exponent_differences({"steep": steep, "shallow": shallow}, L0=0.0)
    assert list(diff) == ["steep minus shallow"]
    assert diff["steep minus shallow"].value == pytest.approx(0.5, abs=1e-6)
    assert rules.differs(diff["steep minus shallow"]) is True


def test_per_sweep_and_column_means_give_estimate_columns():
    frame = pd.DataFrame({"input_exponent": [0.0, 0.0, 1.0, 1.0], "task_exponent": 0.0, "seed": [0, 1, 0, 1],
                          "target_mass": [0.9, 1.0, 0.5, 0.7]})
    table = estimates.per_sweep(frame, ["input_exponent", "task_exponent"], estimates.column_means, columns=["target_mass"])
    assert table.target_mass.tolist() == pytest.approx([0.95, 0.6]) and table.n_seeds.tolist() == [2, 2]
    half = stats.t.ppf(0.975, 1) * 0.1  # two seeds 0.2 apart
    assert estimates.estimate(table.iloc[1], "target_mass").ci95 == pytest.approx((0.6 - half, 0.6 + half))
