"""icl.running.claim_report: a check in words, with the numbers it reads, and one label style."""
from icl.claims import label
from icl.running.claim_report import check_text


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


def test_a_row_of_the_claims_table_reads_on_its_own(tmp_path):
    """Issue 57: the claim named in words, each rank's status beside the claim's (C4 read 'inconclusive'
    while the answer called 1/L rejected), the deciding numbers whole with what the core check asks of
    them, and no cell cut with '…'."""
    from icl.running.claim_report import compact_table, core_criterion

    def est(v):
        return {"value": v, "ci95": [v - 0.05, v + 0.05], "n_seeds": 5}

    alphas = {f"(a, b) = ({a}, {b})": est(0.5 + a / 10 + b / 100) for a in range(3) for b in range(3)}
    ranks = {"key_dim 4": {"status": "not reproduced", "measured": {"alpha (primary model)": alphas, "R_deepest / R_1": alphas,
                                                                     "inverse-depth decay": False}},
             "key_dim 12": {"status": "inconclusive", "measured": {"alpha (primary model)": alphas, "R_deepest / R_1": alphas,
                                                                   "inverse-depth decay": None}}}
    record = {"id": "C4", "claim": "Softmax keeps improving with depth.", "status": "inconclusive", "core": "inverse-depth decay",
              "criterion": "core: R_deepest / R_1 < 0.9 and |alpha - 1| <= 0.25 for the primary model (one power law over every "
                           "depth if p >= 0.05, else the tail L >= m, m = lcm(d, k) / k); secondary: L0 < 0.7",
              "measured": {}, "regimes": ranks, "figure": "f.png"}
    row = compact_table([record], tmp_path, tmp_path, tmp_path).splitlines()[2]
    assert "…" not in row and row.startswith("| C4: softmax, top-2: loss \\~ 1/L | inconclusive (k=4 not, k=12 inconclusive) | k=12: ")
    assert "alpha (primary model) 0.5 to 0.72 (9 values)" in row  # the undecided rank's numbers decide an inconclusive claim
    assert core_criterion(record) == "R_deepest / R_1 < 0.9 and |alpha - 1| <= 0.25 for the primary model"
    assert core_criterion({"criterion": "core: the largest |R(L, h) / R(L h, 1) - 1| is below 0.1 (in the shared stream)"}) == \
        "the largest |R(L, h) / R(L h, 1) - 1| is below 0.1"
