"""The headline's sweeps are named by the run's own shapes: a paper_slice run of notebook 03 is
d = 32, P = 128, and its full rank is 32, not the quick profile's 16."""
import json

from icl.claims import headline


def test_notebook_03s_sweeps_carry_the_runs_own_dim_and_context(tmp_path):
    rows = [{"key_dim": k, "input_exponent": 0.0, "task_exponent": 0.0} for k in (4, 16, 32)]
    (tmp_path / "03_difficult").mkdir()
    (tmp_path / "03_difficult" / "results.json").write_text(json.dumps(
        {"parameters": {"dim": 32, "context_length": 128}, "numbers": {"table1": rows}}))
    labels = [label for label, _ in headline._limited_sweeps(tmp_path)]
    assert labels == ["d=32, P=128, k=4, (a, b) = (0, 0)", "d=32, P=128, k=16, (a, b) = (0, 0)"]
