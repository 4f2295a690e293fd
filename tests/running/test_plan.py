"""`icl reproduce --plan` prices a profile without training, `--smoke` runs every code path of it
on two steps, and the scheduler orders notebooks by the work that waits on them."""
import json

import pytest
from conftest import ROOT

from icl.running import plan
from icl.running import reproduce as rep
from icl.running.cli import main

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.mark.slow
def test_plan_lists_every_notebook_without_training(capsys, monkeypatch, tmp_path):
    import icl.core.train

    monkeypatch.setattr(icl.core.train, "train_group", lambda *a, **k: pytest.fail("the plan trained"))
    assert main(["reproduce", "--profile", "ci", "--plan"]) == 0
    err = capsys.readouterr().err
    for name in rep.NOTEBOOKS:
        assert name in err, (name, err)
    assert "05_fitting_appendix: trains nothing" in err and "total: about" in err


def test_the_plan_counts_the_notebooks_own_runs():
    params = rep.notebook_parameters(ROOT, "ci", "03_difficult", "cpu")
    runs = plan.notebook_runs(ROOT, "ci", "03_difficult", params)
    expected = len(params["key_dims"]) * len(params["spectra"]) * len(params["seeds"]) * len(params["depths"])
    assert sum(c.model == "softmax" and c.top_k == 2 and c.depth in params["depths"] and
               [c.input_exponent, c.task_exponent] in params["spectra"] for c in runs) == expected
    assert any(c.model == "linear" for c in runs) and any(c.top_k == params["wide_top_k"] for c in runs)


def test_a_plan_whose_largest_group_cannot_fit_is_refused(capsys, monkeypatch):
    import icl.core.memory

    monkeypatch.setattr(icl.core.memory, "memory_limit", lambda device: (1024, "a tiny device"))
    assert main(["reproduce", "--profile", "ci", "--plan", "--only", "03_difficult"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "03_difficult" in err and "a tiny device" in err


def test_the_notebook_with_the_longest_chain_of_waiting_work_starts_first():
    needs = {"05": ("01", "03"), "06": ("03",), "07": ("03", "06")}
    cost = {"01": 10.0, "02": 5.0, "03": 30.0, "04": 50.0, "05": 1.0, "06": 20.0, "07": 15.0}
    order = plan.critical_first(["01", "02", "03", "04", "05", "06", "07"], cost, needs)
    assert order[:2] == ["03", "04"]  # 03 + 06 + 07 = 65 waits on 03; 04 alone is 50
    assert order.index("01") < order.index("02")
    assert plan.critical_first(["a", "b"], {}, {}) == ["a", "b"]  # nothing left to train: the given order


@pytest.mark.slow
def test_smoke_runs_every_notebook_end_to_end_into_its_scratch_folder(clone):
    """A ci-profile smoke run in a copy of the repository: every notebook completes on two steps."""
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "icl", "reproduce", "--profile", "ci", "--smoke", "--jobs", "2"],
                          cwd=clone, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    base = clone / "outputs" / "smoke" / "ci"
    times = json.loads((base / "timings.json").read_text())
    total = times.pop("total")
    assert set(times) == set(rep.NOTEBOOKS) and all(t["status"] == "ok" for t in times.values())
    assert total["notebooks"] == list(rep.NOTEBOOKS) and total["seconds"] >= max(t["seconds"] for t in times.values())
    assert (base / "REPORT.md").exists() and not list((clone / "outputs" / "ci").glob("0*"))  # only its lock
    for name in rep.NOTEBOOKS:  # every notebook that trains took the smoke's two steps
        assert json.loads((base / name / "results.json").read_text())["parameters"].get("steps", 2) == 2
