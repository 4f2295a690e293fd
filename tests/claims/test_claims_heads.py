"""Notebook 08's verdict rules (icl.claims.heads: R7, R8, R9) on made-up numbers whose answers are
known: each core check can hold and can fail, an interval across its threshold is inconclusive;
and the statistics they read (icl.analysis.heads_loops) on small synthetic sweeps."""
import numpy as np
import pandas as pd
import pytest

from icl.analysis import heads_loops as hl
from icl.analysis.grids import Parameters
from icl.analysis.intervals import Estimate
from icl.claims import heads as rules


def est(lo, value, hi, n=5):
    return Estimate(value, (lo, hi), (lo, hi), n)


def r7_rank(captured=est(0.7, 0.8, 0.9), baseline=est(0.05, 0.08, 0.1)):
    """The controlled model's secondary numbers at one head rank (its deviation is shown, not judged)."""
    return {"deviation": est(0.0, 0.01, 0.02), "captured": captured, "baseline": baseline}


def test_r7_core_reads_the_shared_stream_and_holds_fails_and_straddles():
    holds = rules.r7(est(0.02, 0.04, 0.06), {4: r7_rank()})
    assert holds[rules.CORE["R7"]] is True
    assert rules.status("R7", holds) == "reproduced"
    fails = rules.r7(est(0.2, 0.3, 0.4), {4: r7_rank()})
    assert fails[rules.CORE["R7"]] is False
    assert rules.status("R7", fails) == "not reproduced"  # the core decides, whatever else holds
    straddles = rules.r7(est(0.05, 0.09, 0.15), {4: r7_rank()})
    assert rules.status("R7", straddles) == "inconclusive"


def test_r7_a_failing_secondary_makes_it_partly():
    checks = rules.r7(est(0.02, 0.04, 0.06), {4: r7_rank(baseline=est(0.3, 0.4, 0.5))})
    assert rules.status("R7", checks) == "partly reproduced"


def test_r8_core_holds_and_fails():
    ok = rules.r8(est(0.0, 0.02, 0.05), est(0.0, 0.1, 0.2), est(0.98, 1.0, 1.02))
    assert ok[rules.CORE["R8"]] is True and rules.status("R8", ok) == "reproduced"
    deep = rules.r8(est(0.2, 0.25, 0.3), est(0.0, 0.1, 0.2), est(0.98, 1.0, 1.02))
    assert deep[rules.CORE["R8"]] is False and rules.status("R8", deep) == "not reproduced"


def test_r9_core_holds_and_fails_on_the_looped_p_by_p_models():
    kept = {"shared_stream": est(0.6, 0.7, 0.8), "context_updates": est(0.6, 0.7, 0.8)}
    holds = rules.r9(kept)
    assert holds[rules.CORE["R9"]] is True and rules.status("R9", holds) == "reproduced"
    lost = rules.r9({**kept, "context_updates": est(0.1, 0.2, 0.3)})
    assert lost[rules.CORE["R9"]] is False and rules.status("R9", lost) == "not reproduced"
    assert rules.r9({})[rules.CORE["R9"]] is False  # no model: nothing kept


def test_the_record_names_its_core_check(capsys):
    checks = rules.r8(est(0.0, 0.02, 0.05), est(0.0, 0.1, 0.2), est(0.98, 1.0, 1.02))
    row = rules.record(Parameters({}), "R8", checks, {"gain": est(0.0, 0.02, 0.05)}, "fig.png")
    assert row["core"] == rules.CORE["R8"] and row["core"] in row["measured"]
    rules.show_criteria()
    printed = capsys.readouterr().out
    assert str(rules.MATCH_TOL) in printed and f"{rules.KEEP_MIN:.0%}" in printed


def sweep(losses: dict, seeds=(0, 1, 2), noise=0.0) -> pd.DataFrame:
    """A sweep {depth: loss} at every seed, loss times (1 + noise * seed)."""
    return pd.DataFrame([{"depth": L, "seed": s, "loss": R * (1 + noise * s)}
                         for L, R in losses.items() for s in seeds])


def test_matched_deviation_reads_loss_against_heads_in_the_stack():
    single = sweep({1: 0.8, 2: 0.6, 4: 0.5, 8: 0.45})
    same = sweep({1: 0.6, 2: 0.5, 4: 0.45})  # h = 2: R(L, 2) = R(2L, 1) exactly
    e = hl.matched_deviation(single, {2: same})
    assert e.value == pytest.approx(0.0, abs=1e-12)
    worse = sweep({1: 0.72, 2: 0.5, 4: 0.45})  # 20 % above R(2, 1) at L h = 2
    assert hl.matched_deviation(single, {2: worse}).value == pytest.approx(0.2)


def test_gain_captured_and_kept_share():
    single = sweep({1: 0.8, 2: 0.6, 4: 0.4})
    assert hl.gain(single).value == pytest.approx(0.5)
    layer = sweep({1: 0.6})  # one layer of heads: half of the way from 0.8 to 0.4
    assert hl.captured(single, layer, 4).value == pytest.approx(0.5)
    looped = sweep({1: 0.8, 2: 0.7, 4: 0.6})
    assert hl.gain_ratio(looped, single).value == pytest.approx(0.25 / 0.5)
    assert hl.one_layer_ratio(layer, single).value == pytest.approx(0.75)
    flat = sweep({1: 0.8, 2: 0.8, 4: 0.85})  # an untied stack that gains nothing: no share to keep
    checks = rules.r9({"m": hl.gain_ratio(looped, flat)})
    assert checks[rules.CORE["R9"]] is None
    assert np.isfinite(hl.gain(sweep({1: 0.8, 4: 0.4}, noise=0.01)).ci95).all()


def test_rank_estimates_pair_each_head_count_with_the_one_head_sweep():
    one = sweep({1: 0.8, 2: 0.6, 4: 0.5}).assign(key_dim=2, heads=1)
    two = sweep({1: 0.6, 2: 0.5}).assign(key_dim=2, heads=2)  # d = 4: h = 2 is h k = d
    heads = pd.concat([one, two], ignore_index=True)
    baseline = {2: {"complementary_subspace": {1: 0.8, 2: 0.6, 4: 0.5}}}
    r = hl.rank_estimates(heads, 4, baseline)[2]
    assert r["deviation"].value == pytest.approx(0.0, abs=1e-12)
    assert r["captured"].value == pytest.approx((0.8 - 0.6) / (0.8 - 0.5))
    assert r["baseline"].value == pytest.approx(0.0, abs=1e-12)
    assert list(hl.matched_table(heads)["L·h"]) == [2, 4]
