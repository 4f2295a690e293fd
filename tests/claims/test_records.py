"""icl.claims.records: which check decided a claim, and a check made per cell judged as `verdict` judges it."""
from icl.claims import every, verdict
from icl.claims.records import deciding, outcome


def _record(checks: dict, status="partly reproduced", **more):
    return {"id": "C4", "status": status, "measured": {"alpha": {"(a, b) = (0, 0)": 0.7}, **checks}, **more}


def test_the_core_check_decides_where_the_record_names_one():
    record = _record({"falls": False, "alpha near 1": True}, core="alpha near 1")
    assert deciding(record)[1:3] == ("alpha near 1", True)


def test_without_a_core_the_first_failing_then_inconclusive_then_first_check_decides():
    assert deciding(_record({"falls": True, "alpha near 1": None, "floor": False}))[1] == "floor"
    assert deciding(_record({"falls": True, "alpha near 1": None}))[1] == "alpha near 1"
    assert deciding(_record({"falls": True, "alpha near 1": True}, status="reproduced"))[1] == "falls"


def test_a_claim_judged_per_rank_is_decided_in_its_first_rank_not_reproduced():
    ranks = {"key_dim 4": {"status": "reproduced", "measured": {"falls": True}},
             "key_dim 8": {"status": "not reproduced", "measured": {"falls": False}}}
    rank, name, value, _ = deciding({"id": "C4", "status": "partly reproduced", "measured": {}, "regimes": ranks})
    assert (rank, name, value) == ("k=8", "falls", False)


def test_a_check_made_per_cell_has_the_outcome_verdict_reads():
    for cells in ([True, True], [True, None], [True, False], [None, False], [None]):
        assert outcome(cells) is every(cells)
        assert verdict({"core": cells}, "core") == verdict({"core": outcome(cells)}, "core")
    assert outcome(None) is None and outcome(False) is False
