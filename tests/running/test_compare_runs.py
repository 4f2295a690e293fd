"""scripts/compare_runs.py: two runs compared claim by claim, regimes included."""
import importlib.util
import json
from pathlib import Path

from conftest import ROOT

SCRIPT = ROOT / "scripts" / "compare_runs.py"
spec = importlib.util.spec_from_file_location("compare_runs", SCRIPT)
compare_runs = importlib.util.module_from_spec(spec)
spec.loader.exec_module(compare_runs)


def write_run(root: Path, alpha_k8: float, status_k8: str) -> Path:
    claim = {"id": "C4", "status": "partly reproduced", "measured": {"holds in": ["key_dim 4"]},
             "regimes": {"key_dim 4": {"status": "reproduced", "measured": {"alpha": {"value": 1.0, "ci95": [0.9, 1.1]}}},
                         "key_dim 8": {"status": status_k8, "measured": {"alpha": {"value": alpha_k8, "ci95": [0.5, 0.7]}}}}}
    (root / "03_difficult").mkdir(parents=True)
    (root / "03_difficult" / "results.json").write_text(json.dumps({"claims": [claim]}))
    return root


def test_a_regime_whose_verdict_flips_is_named_and_its_numbers_are_compared(tmp_path):
    first = write_run(tmp_path / "a", 0.6, "not reproduced")
    second = write_run(tmp_path / "b", 0.66, "partly reproduced")
    (row,) = compare_runs.compare(first, second)
    assert not row["same_status"] and row["flipped"] == ["key_dim 8"]
    assert row["numbers"] == 6 and row["equal"] == 5  # alpha value and two ci95 bounds per regime
    assert row["at"] == "key_dim 8/alpha/value"
    assert abs(row["max_relative_difference"] - 0.06 / 0.66) < 1e-12


def test_identical_runs_agree_everywhere(tmp_path):
    first = write_run(tmp_path / "a", 0.6, "not reproduced")
    second = write_run(tmp_path / "b", 0.6, "not reproduced")
    (row,) = compare_runs.compare(first, second)
    assert row["same_status"] and row["flipped"] == [] and row["equal"] == row["numbers"] == 6
    assert row["max_relative_difference"] == 0.0
