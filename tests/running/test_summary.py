"""icl.claims.headline and icl.running.report: the README's and REPORT's first numbers are generated from results.json, never typed."""
import json

import pandas as pd

from icl.claims import headline
from icl.running import report


def _row(key_dim, a, b, alpha, lo, hi, **more):
    """A table1 row whose primary model's alpha is `alpha` [lo, hi]."""
    return {**dict(key_dim=key_dim, input_exponent=a, task_exponent=b, alpha_primary=alpha, alpha_primary_lo95=lo,
                   alpha_primary_hi95=hi, alpha_primary_lo68=lo, alpha_primary_hi68=hi, primary="tail L >= m",
                   primary_problem="", n_seeds=5), **more}


def _outputs(tmp_path):
    (tmp_path / "03_difficult").mkdir()
    table1 = [_row(4, 1, 1, 0.7, 0.6, 0.8), _row(8, 1, 1, 1.1, 0.9, 1.3), _row(12, 1, 1, 1.3, 1.2, 1.4)]
    (tmp_path / "03_difficult" / "results.json").write_text(json.dumps({"numbers": {"table1": table1}}))
    (tmp_path / "07_mechanism").mkdir()
    pd.DataFrame([dict(dim=16, context_length=64, key_dim=4, depth=L, trained=0.8 / L, random_subspace=0.9 / L)
                  for L in (1, 2, 4, 16, 64)]).to_csv(tmp_path / "07_mechanism" / "baselines.csv", index=False)
    return tmp_path


def test_the_answer_counts_rank_limited_sweeps_with_the_criteria_tolerance(tmp_path):
    base = _outputs(tmp_path)
    rows = json.loads((base / "03_difficult" / "results.json").read_text())["numbers"]["table1"]
    rows[1] = _row(8, 1, 1, 1.1, 0.95, 1.2)  # wholly within 1 +- 0.25
    rows[2] = _row(12, 1, 1, 1.4, 1.3, 1.5)  # wholly beyond 1.25
    rows.append(_row(16, 1, 1, 0.01, 0.0, 0.02))  # full rank: flat, not counted
    rows.append(_row(4, 0, 0, 1.0, 0.9, 1.1, primary_problem="floor at its bound"))  # not identified
    (base / "03_difficult" / "results.json").write_text(json.dumps({"numbers": {"table1": rows}}))
    text = headline.alpha_answer(base)
    assert "Over the 4 rank-limited sweeps" in text
    assert "in 1 (d=16, P=64, k=8, (a, b) = (1, 1))" in text  # 1.1 [0.95, 1.2] lies within 1 +- 0.25
    assert "outside in 1 (d=16, P=64, k=12, (a, b) = (1, 1))" in text
    assert "do not decide in 2" in text  # k=4's [0.6, 0.8] straddles 0.75; the unidentified one is not read


def test_the_c4_table_prints_each_exponent_with_its_intervals(tmp_path):
    base = _outputs(tmp_path)
    row = _row(8, 1, 1, 0.6, 0.5, 0.7, alpha_tail=0.6, alpha_tail_lo95=0.5, alpha_tail_hi95=0.7, chi2_tail=1.9,
               alpha_all=1.1, alpha_all_lo95=1.0, alpha_all_hi95=1.2, chi2_all=190.0, knee=0.5, knee_depth=2,
               alpha_floor_free=0.65, alpha_floor_free_lo95=0.55, alpha_floor_free_hi95=0.75, floor_free_problem="",
               alpha_window=0.7, alpha_window_lo95=0.6, alpha_window_hi95=0.8, window_problem="", window_start=4,
               gain_exponential=-30.0, gain_log_corrected=-20.0)
    (base / "03_difficult" / "results.json").write_text(json.dumps({"numbers": {"table1": [row]}}))
    assert ("| 8 | 2 | 5 | 0.60 [0.50, 0.70] (tail L >= m) | outside 0.25 of 1; read otherwise by alpha, all depths: holds | "
            "1.10 [1.00, 1.20] (190) | 0.60 [0.50, 0.70] (1.9) | 0.65 [0.55, 0.75] | L >= 4: 0.70 [0.60, 0.80] | 0.50 |"
            in headline.c4_table(base))
    row.update(gain_exponential=12.0)  # an exponential decisively better: the check fails on its shape
    (base / "03_difficult" / "results.json").write_text(json.dumps({"numbers": {"table1": [row]}}))
    assert "outside 0.25 of 1: not a power law" in headline.c4_table(base)


def test_the_mechanism_table_has_one_line_per_rank_and_curve(tmp_path):
    table = headline.mechanism_table(tmp_path, _outputs(tmp_path))
    assert "| 4 | trained | 0.800 | 0.400 | 0.200 | 0.050 | 0.013 |" in table
    assert "| 4 | random subspaces | 0.900 |" in table


def test_missing_results_give_no_text(tmp_path):
    assert headline.alpha_answer(tmp_path) == "" and headline.c4_table(tmp_path) == ""
    assert headline.mechanism_table(tmp_path, tmp_path) == ""


def test_the_readme_is_rewritten_only_between_its_markers(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text(f"before\n{report.BEGIN}\nold numbers\n{report.END}\nafter\n")
    assert report.update_readme(tmp_path, "new numbers")
    assert readme.read_text() == f"before\n{report.BEGIN}\nnew numbers\n{report.END}\nafter\n"
    readme.write_text("no markers here\n")
    assert not report.update_readme(tmp_path, "new numbers")
    assert readme.read_text() == "no markers here\n"


def test_a_cell_without_a_fit_prints_as_such(tmp_path):
    (tmp_path / "06_regimes").mkdir()
    row = dict(dim=16, context_length=64, key_dim=4, n_seeds=3, R_1=0.9, R_deepest=0.5, depth_max=64,
               single_bound=0.4, mixture_bound=0.3, alpha_primary=None, alpha_primary_lo95=None, alpha_primary_hi95=None)
    (tmp_path / "06_regimes" / "results.json").write_text(json.dumps({"numbers": {"regimes": [row]}}))
    assert "| 16 | 64 | 4 | 3 | 0.900 | 0.500 (64) |  | no fit | 0.400 | 0.300 |" in headline.regime_table(tmp_path)
