"""What adding a claim or a notebook touches (docs/architecture.md, "Adding a model", "Adding a
claim", "Adding a notebook"): each section lists its files, and the number a test holds; the tests
here add a claim and a notebook in those files only and see them reach the report and the plan.
(Adding a model: tests/core/test_registry.py.)"""
import ast
import json
import re

from conftest import ROOT

import icl.claims as claims_module
from icl.analysis import grids
from icl.analysis.grids import Parameters
from icl.analysis.intervals import Estimate
from icl.claims import Rules, below
from icl.running.parameters import NEEDS, NOTEBOOKS
from icl.running.reproduce import write_report

# The package and notebook files each addition touches (a test beside it is always one more).
TOUCHES = {"Adding a model": 3, "Adding a claim": 3, "Adding a notebook": 1}


def section(title: str) -> str:
    page = (ROOT / "docs" / "architecture.md").read_text()
    return page.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]


def test_each_section_lists_the_files_it_says_it_touches():
    for title, n in TOUCHES.items():
        text = section(title)
        listed = re.findall(r"^\d+\. `([^`]+)`", text, re.M)
        assert len(listed) == n, (title, listed)
        assert f"touches {['', 'one', 'two', 'three'][n]} " in text, title
        for path in listed:  # each exists, or names the pattern of one that does (notebooks/NN_name.py)
            pattern = re.sub(r"NN_name|<[^>]+>", "*", path)
            assert list(ROOT.glob(pattern)), path


def test_a_claim_added_in_its_module_its_reads_and_its_notebook_reaches_the_report(tmp_path, monkeypatch):
    """A made-up claim R99, stated the way every claims module states its own (`Rules`), its check's
    numbers named in `claims.READS`, recorded the way a notebook records one: REPORT.md shows its
    row, its status, its check and the number that check reads."""
    rules = Rules({"R99": "Depth halves the loss."}, {"R99": "core: R_deepest / R_1 below 0.5"},
                  {"R99": "halves"})  # 1. its claims module
    monkeypatch.setitem(claims_module.READS, "halves", ["R_deepest / R_1"])  # 2. claims/__init__.py
    s = Parameters({})  # 3. its notebook: the numbers, the checks, the record
    ratio = Estimate(0.42, (0.41, 0.43), (0.40, 0.44), 3)
    rules.record(s, "R99", {"halves": below(ratio, 0.5)}, {"R_deepest / R_1": ratio}, "depth.png")
    folder = tmp_path / "outputs" / "ci" / "09_made_up"
    folder.mkdir(parents=True)
    (folder / "results.json").write_text(json.dumps({"claims": s.claims}))
    monkeypatch.setattr("icl.running.report.NOTEBOOKS", (*NOTEBOOKS, "09_made_up"))
    text = write_report(tmp_path, "ci").read_text()
    row = next(line for line in text.splitlines() if line.startswith("| R99"))
    assert "| reproduced |" in row and "R_deepest / R_1 0.42 [0.4, 0.44]" in row, row  # what the check read
    assert "✓ halves" in text


def runs_something(name: str) -> bool:
    """Whether a notebook trains: its code calls `s.run(...)`."""
    tree = ast.parse((ROOT / "notebooks" / f"{name}.py").read_text())
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "run"
               and isinstance(n.func.value, ast.Name) and n.func.value.id == "s" for n in ast.walk(tree))


def test_the_notebooks_are_the_files_in_notebooks_and_each_that_trains_is_planned():
    """NOTEBOOKS is read from notebooks/ (no list to edit); a notebook that trains and has no entry in
    grids.RUNS would be planned at zero, so it fails here; NEEDS and TRAINED_WITH name notebooks."""
    assert NOTEBOOKS == tuple(sorted(p.stem for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.py")))
    assert {n for n in NOTEBOOKS if runs_something(n)} == set(grids.RUNS)
    for name, needs in NEEDS.items():
        assert name in NOTEBOOKS and set(needs) <= set(NOTEBOOKS)
    assert set(grids.TRAINED_WITH) <= set(grids.RUNS) and set(grids.TRAINED_WITH.values()) <= set(NOTEBOOKS)
