"""The notebooks: their three copies agree, papermill parameters are checked, and the nbval
regression can fail."""
from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import jupytext
import nbformat
import pytest
from conftest import ROOT

from icl.running.parameters import NOTEBOOKS

SOURCES = sorted((ROOT / "notebooks").glob("*.py"))


def cell_sources(nb) -> list[tuple[str, str]]:
    """(cell type, source) of every cell except the one papermill injects."""
    return [(c.cell_type, c.source.strip()) for c in nb.cells if "injected-parameters" not in c.metadata.get("tags", [])]


def test_every_paper_notebook_exists():
    assert [p.stem for p in SOURCES] == list(NOTEBOOKS)


@pytest.mark.parametrize("py", SOURCES, ids=lambda p: p.stem)
def test_py_ipynb_and_golden_hold_the_same_cells(py):
    source = cell_sources(jupytext.read(py))
    paired = py.with_suffix(".ipynb")
    assert paired.exists(), f"{paired.name} is missing: run `make sync`"
    assert cell_sources(nbformat.read(paired, 4)) == source, f"{paired.name} differs from {py.name}: run `make sync`"
    golden = ROOT / "tests" / "golden" / paired.name
    assert golden.exists(), f"tests/golden/{paired.name} is missing: run `make golden`"
    assert cell_sources(nbformat.read(golden, 4)) == source, f"tests/golden/{paired.name} differs from {py.name}: run `make golden`"


@pytest.mark.parametrize("py", SOURCES, ids=lambda p: p.stem)
def test_a_notebook_tells_the_story_and_leaves_the_logic_to_icl(py):
    """No function or class is defined in a notebook, and its claims are recorded through its rules
    module (the statement, criterion and thresholds of a claim live there, once)."""
    tree = ast.parse(py.read_text())
    defined = [n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
    assert not defined, f"{py.name} defines {defined}: they belong in icl"
    direct = [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
              and n.func.id in ("claim", "claim_by_regime")]
    assert not direct, f"{py.name} records a claim by hand at lines {direct}: use rules.record"


@pytest.mark.parametrize("py", SOURCES, ids=lambda p: p.stem)
def test_paired_notebooks_are_committed_without_outputs(py):
    nb = nbformat.read(py.with_suffix(".ipynb"), 4)
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code"), f"clear the outputs of {py.stem}.ipynb"


@pytest.mark.parametrize("py", SOURCES, ids=lambda p: p.stem)
def test_golden_copies_check_a_summary_cell(py):
    golden = nbformat.read(ROOT / "tests" / "golden" / py.with_suffix(".ipynb").name, 4)
    checked = [c for c in golden.cells if c.cell_type == "code" and "# NBVAL_CHECK_OUTPUT" in c.source]
    assert checked and all(c.outputs for c in checked), "the golden copy must carry the ci outputs of its checked cells"


def run_papermill(tmp_path, *params) -> subprocess.CompletedProcess:
    out = tmp_path / "out.ipynb"
    cmd = [sys.executable, "-m", "papermill", str(ROOT / "notebooks" / "02_easy_nonlinear.ipynb"), str(out),
           "-f", str(ROOT / "params" / "ci" / "02_easy_nonlinear.yaml"), "--cwd", str(ROOT / "notebooks"), *params]
    return subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "MPLBACKEND": "Agg"}, timeout=300)


# What a profile may set differently from a notebook's own defaults: bookkeeping, not science.
BOOKKEEPING = {"progress", "threads"}


@pytest.mark.parametrize("py", SOURCES, ids=lambda p: p.stem)
def test_committed_executed_notebooks_hold_no_machine_paths(py):
    for path in (ROOT / "tests" / "golden" / f"{py.stem}.ipynb", ROOT / "outputs" / py.stem / f"{py.stem}.ipynb"):
        if path.exists():
            meta = nbformat.read(path, 4).metadata.get("papermill", {})
            for key in ("input_path", "output_path"):
                assert not Path(meta.get(key) or "").is_absolute(), f"{path.relative_to(ROOT)}: absolute {key}"


PROFILE_FILES = sorted(p for p in (ROOT / "params").glob("*/*.yaml") if p.parent.name != "sweeps")


@pytest.mark.parametrize("path", PROFILE_FILES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_a_profile_file_holds_only_what_differs_from_the_notebooks_defaults(path):
    """One copy of each value: the notebook's parameters cell holds the defaults (the quick profile),
    a profile file what differs. Quick's sets only bookkeeping, so that plain papermill (no -f) and
    `make reproduce` run the same experiment."""
    from icl.running.parameters import declared_parameters
    from icl.running.sweep import read_yaml

    declared = declared_parameters(ROOT, path.stem)
    for key, value in read_yaml(path, may_be_empty=True).items():
        assert key in declared, f"{path.relative_to(ROOT)} sets {key!r}, which is not a parameter"
        assert value != declared[key], f"{path.relative_to(ROOT)}: {key} = {value!r} is the notebook's default; leave it out"
        assert path.parent.name != "quick" or key in BOOKKEEPING, f"{path.relative_to(ROOT)}: {key} changes the experiment"


@pytest.mark.parametrize("path", sorted((ROOT / "params").rglob("*.yaml")), ids=lambda p: str(p.relative_to(ROOT / "params")))
def test_parameter_files_set_each_key_once(path):
    """YAML keeps the last of two equal keys without a word; a repeated key is a mistake."""
    import yaml

    node = yaml.compose(path.read_text(), Loader=yaml.SafeLoader)
    keys = [k.value for k, _ in node.value] if node is not None else []
    assert len(keys) == len(set(keys)), f"{path.name}: {sorted(k for k in keys if keys.count(k) > 1)[0]!r} is set twice"


@pytest.mark.slow
def test_unknown_papermill_parameter_stops_the_notebook(tmp_path):
    r = run_papermill(tmp_path, "-p", "input_exponet", "1.3")
    assert r.returncode != 0
    assert "unknown parameter 'input_exponet'" in r.stderr + r.stdout


@pytest.mark.slow
def test_impossible_papermill_value_names_the_key(tmp_path):
    r = run_papermill(tmp_path, "-y", "depths: [0, 2]")  # -y passes YAML; -p would pass a string
    assert r.returncode != 0
    assert "depths" in r.stderr + r.stdout and "every depth must be >= 1" in r.stderr + r.stdout


@pytest.mark.slow
def test_nbval_fails_when_a_checked_number_changes(tmp_path):
    golden = nbformat.read(ROOT / "tests" / "golden" / "02_easy_nonlinear.ipynb", 4)
    cell = next(c for c in golden.cells if "# NBVAL_CHECK_OUTPUT" in c.source)
    out = cell.outputs[0]
    lines = out["text"].splitlines(keepends=True)
    # Change the first number of the summary: the regression test must notice.
    lines[0] = lines[0].split(":")[0] + ": [9.99]\n"
    out["text"] = "".join(lines)
    broken = tmp_path / "broken.ipynb"
    nbformat.write(golden, broken)
    r = subprocess.run([sys.executable, "-m", "pytest", "--nbval-lax", "--nbval-current-env", "-p", "no:cacheprovider",
                        str(broken), "-q"], capture_output=True, text=True, cwd=ROOT / "notebooks",
                       env={**os.environ, "MPLBACKEND": "Agg"}, timeout=600)
    assert r.returncode != 0, "nbval passed a notebook whose checked output was changed"
    assert "9.99" in r.stdout


@pytest.mark.slow
def test_a_bad_papermill_value_shows_as_its_one_line(tmp_path):
    """The README's recipe (plain papermill, e.g. -p top_k 1.5 for notebook 03): the cell's error is
    its one line, not a ~50-line traceback through icl's checks; papermill's own frames may stay."""
    import re

    r = run_papermill(tmp_path, "-p", "steps", "1.5")
    assert r.returncode != 0
    text = re.sub(r"\x1b\[[0-9;]*m", "", r.stderr)
    cell = [line for line in text.split('Exception encountered at "In [')[1].splitlines()[1:] if line.strip()]
    assert len(cell) == 1 and cell[0].startswith("ConfigError: steps: 1.5 is not allowed; it must be an integer"), text
