"""The rule that turns a claim's checks into reproduced / partly / not reproduced."""
import pytest

from icl.claims import verdict


def test_all_checks_hold_is_reproduced_and_none_is_not():
    assert verdict({"a": True, "b": True}) == "reproduced"
    assert verdict({"a": False, "b": False}) == "not reproduced"
    assert verdict({"a": True, "b": False}) == "partly reproduced"


def test_a_needed_check_that_fails_means_not_reproduced():
    assert verdict({"falls": False, "alpha near 1": True}, "falls") == "not reproduced"
    assert verdict({"falls": True, "alpha near 1": False}, "falls") == "partly reproduced"


def test_plus_one_asks_for_a_second_check_beyond_the_needed_one():
    checks = {"power law": True, "between": False, "depends": False}
    assert verdict(checks, "power law") == "partly reproduced"
    assert verdict(checks, "power law", plus_one=True) == "not reproduced"
    assert verdict({**checks, "depends": True}, "power law", plus_one=True) == "partly reproduced"


def test_an_unknown_needed_check_is_an_error():
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
    from types import SimpleNamespace

    from icl.claims import claim_by_regime

    s = SimpleNamespace(claims=[])
    regimes = {"key_dim 4": {"status": "partly reproduced", "measured": {"alpha": 0.70001}},
               "key_dim 16": {"status": "not reproduced", "measured": {"alpha": 0.0}}}
    row = claim_by_regime(s, "C4", "text", regimes, "fig.png", "rule")
    assert row["status"] == "partly reproduced" and s.claims == [row]
    assert row["measured"] == {"holds (at least partly) in": ["key_dim 4"], "reproduced in": []}
    assert row["regimes"]["key_dim 4"] == {"status": "partly reproduced", "measured": {"alpha": 0.7}}
    assert row["criterion"].startswith("rule; judged in every regime")
