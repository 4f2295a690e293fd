"""`icl golden` regenerates tests/golden/ through `icl reproduce`'s lock and staging, so a killed or
failed run leaves the committed goldens as they were; nbval fails on a golden whose checked cell
has no stored output; a killed run leaves no kernel connection file (it holds the kernel's key)
outside its staging folder."""
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest
from conftest import ROOT

import icl.running.reproduce as rep
from icl.running.cli import main

NAME = "02_easy_nonlinear"  # the cheapest notebook at the ci profile


@pytest.fixture
def golden(clone) -> Path:
    """The committed golden copy of NAME, in the clone."""
    path = clone / "tests" / "golden" / f"{NAME}.ipynb"
    path.parent.mkdir(parents=True)
    shutil.copy(ROOT / "tests" / "golden" / path.name, path)
    return path


def test_a_failed_golden_run_leaves_the_golden_as_it_was(golden, capsys, monkeypatch):
    before = golden.read_bytes()
    monkeypatch.setattr(rep, "run_notebook", lambda root, name, params, env: {
        "status": "failed", "ename": "RuntimeError", "error": "RuntimeError: the kernel died", "seconds": 3.0,
        "runs_trained": None, "log": f"outputs/ci/.staging/{name}.log"})
    assert main(["golden", "--only", NAME]) == 1
    assert "the kernel died" in capsys.readouterr().err
    assert golden.read_bytes() == before


def test_golden_waits_for_no_one_a_reproduction_of_ci_holds_the_lock(golden, capsys, monkeypatch):
    """golden wrote straight into outputs/ci/<name>: beside `reproduce --profile ci` the published
    folder ended with one run's results.json and the other's notebook."""
    before = golden.read_bytes()
    monkeypatch.setattr(rep, "run_notebook", lambda *a: pytest.fail("a notebook started"))
    (golden.parents[2] / "outputs" / "ci").mkdir()
    held = rep.hold_lock(golden.parents[2], "ci")
    try:
        assert main(["golden", "--only", NAME]) == 2
    finally:
        held.close()
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "another icl run into this folder is running" in err, err
    assert golden.read_bytes() == before


def test_a_kernel_left_by_a_killed_run_leaves_its_connection_file_in_staging_and_the_next_run_removes_it(
        tmp_path, monkeypatch):
    seen = {}

    def execute(root, name, params, out, connection):
        seen.update(connection=connection, leftover=connection.exists())
        raise RuntimeError("stop here")

    monkeypatch.setattr(rep, "execute", execute)
    monkeypatch.setenv("ICL_OUTPUT_ROOT", str(tmp_path))
    params = {"output_dir": str(tmp_path / "ci" / NAME), "profile": "ci"}
    where = rep.staging_paths(tmp_path, params, NAME)
    where["connection"].parent.mkdir(parents=True)
    where["connection"].write_text("{}")  # what a kill -9 left
    rep.run_notebook(str(tmp_path), NAME, params, {})
    assert seen == {"connection": where["connection"], "leftover": False}
    assert where["connection"].parent == tmp_path / "ci" / ".staging"


@pytest.mark.slow
def test_kill_9_of_golden_leaves_the_golden_byte_identical_and_no_connection_file(golden):
    """A kill -9 after 18 s left tests/golden/02_easy_nonlinear.ipynb half-run (its checked cell
    without output), and the kernel's connection file in /tmp."""
    clone = golden.parents[2]
    before = golden.read_bytes()
    tmp = clone.parent / "tmp"  # the run's /tmp: what it leaves there is seen here
    tmp.mkdir()
    log = open(clone / "golden.log", "w")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TMPDIR": str(tmp)}
    proc = subprocess.Popen([sys.executable, "-m", "icl", "golden", "--only", NAME], cwd=clone, stdout=log,
                            stderr=log, env=env)
    staged = clone / "outputs" / "ci" / ".staging" / NAME / f"{NAME}.ipynb"
    registry = clone / "outputs" / "ci" / ".staging" / ".processes"
    try:
        deadline = time.monotonic() + 180
        while not (staged.exists() and "kernel" in (registry.read_text() if registry.exists() else "")):
            assert proc.poll() is None and time.monotonic() < deadline, (clone / "golden.log").read_text()
            time.sleep(0.2)
        time.sleep(2)  # part-way through its cells
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    time.sleep(1)  # the kernel dies with it (icl.running.processes)
    assert golden.read_bytes() == before
    assert not list(tmp.rglob("*.json")), sorted(p.name for p in tmp.rglob("*"))
    assert not (clone / "outputs" / "ci" / NAME).exists()  # nothing published


@pytest.mark.slow
def test_nbval_fails_on_a_golden_whose_checked_cell_has_no_output(tmp_path):
    """nbval skips the comparison of a cell its reference never ran: 13 passed on a half-run golden."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("x = 1", execution_count=1),
                nbformat.v4.new_code_cell("# NBVAL_CHECK_OUTPUT\nprint(x)")]  # never ran: no output
    nbformat.write(nb, tmp_path / "half_run.ipynb")
    shutil.copy(ROOT / "tests" / "golden" / "conftest.py", tmp_path)  # what `make test`'s nbval loads
    r = subprocess.run([sys.executable, "-m", "pytest", "--nbval-lax", "--nbval-current-env", "-p", "no:cacheprovider",
                        "half_run.ipynb", "-q"], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert r.returncode != 0, r.stdout
    assert "has no stored output" in r.stdout
