"""The rule that turns a claim's checks into reproduced / partly / not reproduced."""
import pytest

from icl.claims import verdict


def test_the_core_decides_whether_a_claim_is_reproduced_at_all():
    assert verdict({"core": True, "b": True}, "core") == "reproduced"
    assert verdict({"core": True, "b": False}, "core") == "partly reproduced"
    assert verdict({"core": False, "b": True}, "core") == "not reproduced"  # secondaries cannot rescue it
    assert verdict({"core": False, "b": False}, "core") == "not reproduced"


def test_a_secondary_that_is_inconclusive_leaves_the_claim_partly_reproduced():
    assert verdict({"core": True, "b": None}, "core") == "partly reproduced"


def test_a_per_cell_check_holds_when_every_cell_holds():
    assert verdict({"cells": [True, True]}, "cells") == "reproduced"
    assert verdict({"cells": [True, False]}, "cells") == "not reproduced"
    assert verdict({"cells": [True, None]}, "cells") == "inconclusive"


def test_an_unknown_core_check_is_an_error():
    with pytest.raises(KeyError, match="nope"):
        verdict({"a": True}, "nope")


def test_overall_status_of_a_claim_judged_in_several_regimes():
    from icl.claims import overall

    assert overall(["reproduced", "reproduced"]) == "reproduced"
    assert overall(["not reproduced", "not reproduced"]) == "not reproduced"
    assert overall(["reproduced", "not reproduced"]) == "partly reproduced"
    assert overall(["partly reproduced", "not reproduced"]) == "partly reproduced"
    with pytest.raises(ValueError, match="maybe"):
        overall(["reproduced", "maybe"])
    with pytest.raises(ValueError):
        overall([])


def test_a_claim_judged_by_regime_records_each_verdict_and_where_it_holds():
    from icl.analysis.grids import Parameters
    from icl.claims import claim_by_regime

    s = Parameters({})
    regimes = {"key_dim 4": {"status": "partly reproduced", "measured": {"alpha": 0.7000001}},
               "key_dim 16": {"status": "not reproduced", "measured": {"alpha": 0.0}}}
    row = claim_by_regime(s, "C4", "text", regimes, "fig.png", "rule")
    assert row["status"] == "partly reproduced" and s.claims == [row]
    assert row["measured"] == {"holds (at least partly) in": ["key_dim 4"], "reproduced in": [], "inconclusive in": []}
    assert row["regimes"]["key_dim 4"] == {"status": "partly reproduced", "measured": {"alpha": 0.7}}
    assert row["criterion"].startswith("rule; judged in every regime")


# --- checks that know their uncertainty ------------------------------------------------

def est(lo, value, hi, n=5):
    from icl.analysis.intervals import Estimate

    return Estimate(value, (lo, hi), (lo, hi), n)


def test_a_check_holds_only_when_its_whole_interval_is_on_the_right_side():
    from icl.claims import above, below, within

    assert below(est(0.1, 0.2, 0.3), 0.5) is True
    assert below(est(0.6, 0.7, 0.8), 0.5) is False
    assert below(est(0.4, 0.45, 0.6), 0.5) is None  # straddles the threshold: inconclusive
    assert above(est(0.6, 0.7, 0.8), 0.5) is True and above(est(0.4, 0.45, 0.6), 0.5) is None
    assert within(est(0.9, 1.0, 1.2), 1.0, 0.25) is True
    assert within(est(1.3, 1.4, 1.5), 1.0, 0.25) is False
    assert within(est(1.1, 1.2, 1.4), 1.0, 0.25) is None
    assert below(0.2, 0.5) is True and below(0.7, 0.5) is False  # a single number: its value decides
    assert below(est(float("nan"), 0.2, float("nan"), n=1), 0.5) is True  # one seed: no interval


def test_every_and_share_combine_cases():
    from icl.claims import every, share, some

    assert every([True, True]) is True and every([True, None]) is None and every([None, False]) is False
    assert some([False, True]) is True and some([False, None]) is None and some([False]) is False
    assert share([True, False, True, False], 0.5) is True
    assert share([True, False, None, False], 0.5) is None
    assert share([True, False, False, False], 0.5) is False


def test_an_inconclusive_core_makes_the_claim_inconclusive_with_its_range():
    s = verdict({"decay": None, "floor": True}, "decay")
    assert s == "inconclusive" and s.range == ("not reproduced", "reproduced")
    assert verdict({"a": None, "b": False}, "a").range == ("not reproduced", "partly reproduced")
    with pytest.raises(ValueError, match="True, False or None"):
        verdict({"a": 0.3}, "a")


def test_overall_carries_the_regimes_ranges():
    from icl.claims import overall

    assert overall([verdict({"a": None}, "a"), "reproduced"]).range == ("partly reproduced", "reproduced")
    assert overall([verdict({"a": None}, "a"), "not reproduced"]).range == ("not reproduced", "partly reproduced")
    with pytest.raises(ValueError, match="range"):
        overall(["inconclusive"])  # a bare string cannot say what it might be


def test_an_inconclusive_claim_records_its_range_and_estimates_as_intervals():
    from icl.analysis.grids import Parameters
    from icl.claims import claim

    s = Parameters({})
    row = claim(s, "C4", "text", verdict({"falls": None}, "falls"), {"alpha": est(0.8, 1.0, 1.3)}, "f.png", "rule",
                core="falls")
    assert row["core"] == "falls"
    assert row["status"] == "inconclusive" and row["range"] == ["not reproduced", "reproduced"]
    assert row["measured"]["alpha"] == {"value": 1.0, "ci68": [0.8, 1.3], "ci95": [0.8, 1.3], "n_seeds": 5}
