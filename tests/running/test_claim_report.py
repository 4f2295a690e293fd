"""icl.running.claim_report: which check a claim's row names as the one that decided it, and one label style."""
from icl.running.claim_report import check_text, deciding, label


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


def test_a_check_is_shown_in_words_with_the_numbers_it_reads():
    numbers = [("(a, b) = (0, 0)", "alpha", {"value": 0.72, "ci95": [0.71, 0.73], "n_seeds": 5}),
               ("(a, b) = (1, 0)", "alpha", {"value": 1.04, "ci95": [1.02, 1.05], "n_seeds": 5})]
    assert check_text("alpha near 1", False, numbers) == "✗ alpha near 1: alpha 0.72 [0.71, 0.73] to 1.04 [1.02, 1.05] (2 values)"
    assert check_text("depth 1 better at p1", None) == "inconclusive: depth 1 better at p1"


def test_every_cell_label_takes_one_style():
    assert label("d16 P64 k4") == label("d=16, P=64, key_dim=4") == "d=16, P=64, k=4"
    assert label("key_dim 12") == "k=12"
    assert label("shared_stream, top-2, (0, 1)") == "shared stream, top-2, (a, b) = (0, 1)"


def test_an_exponent_left_unread_is_said_so_in_what_a_check_reads():
    from icl.running.claim_report import reads

    est = {"value": 0.72, "ci68": [0.6, 0.9], "ci95": [0.46, 1.09], "n_seeds": 5}
    numbers = [("k=4", "alpha (primary model)", est), ("k=8", "alpha (primary model)", "not identified (tail L >= m: floor at its bound)")]
    text = reads("inverse-depth decay", numbers)
    assert text.startswith("alpha (primary model) 0.72 [0.46, 1.09]; not identified in 1")
    only = reads("inverse-depth decay", numbers[1:])
    assert only == "alpha (primary model) not identified in 1"
