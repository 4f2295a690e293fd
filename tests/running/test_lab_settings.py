"""`make install` writes JupyterLab's settings into the environment (so a plain `jupyter lab` opens .py
notebooks as notebooks), and a notebook saved from Lab into notebooks/ keeps no outputs. No Jupyter
server is started: the server's contents manager, jupytext's, is driven directly."""
from __future__ import annotations

import copy
import json
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import jupytext
import nbformat
import pytest
from conftest import ROOT
from jupyter_server.serverapp import ServerApp
from traitlets.config.loader import JSONFileConfigLoader

from icl.running import lab

NAME = "01_easy_linear"


def install_settings(venv: Path) -> None:
    """Run the lab-settings line of `make -n install` for a fresh venv, with this interpreter."""
    recipe = subprocess.run(["make", "-n", "install", f"VENV={venv}"], cwd=ROOT, capture_output=True, text=True,
                            check=True).stdout.splitlines()
    steps = [shlex.split(line) for line in recipe if "-m icl.running.lab" in line]
    assert len(steps) == 1, "make install writes no JupyterLab settings:\n" + "\n".join(recipe)
    assert steps[0][0] == f"{venv}/bin/python", steps[0]
    subprocess.run([sys.executable, *steps[0][1:]], cwd=ROOT, check=True, capture_output=True)


def server_config(venv: Path):
    """The configuration a Jupyter server of the environment at venv reads from its own folder
    (<venv>/etc/jupyter; its jupyter_server_config.d/ holds extension switches only)."""
    name = ServerApp().config_file_name + ".json"
    return JSONFileConfigLoader(name, str(venv / "etc" / "jupyter")).load_config()


def with_outputs(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """A copy of nb as a kernel leaves it: every code cell run, with a count and an output."""
    nb = copy.deepcopy(nb)
    for i, cell in enumerate(c for c in nb.cells if c.cell_type == "code"):
        cell.execution_count = i + 1
        cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=f"ran {i}\n")]
    nb.metadata["language_info"] = {"name": "python"}
    return nb


def run_traces(nb) -> list[str]:
    """What a kernel's run left in nb: the code cells with outputs or a count, and metadata keys."""
    ran = [f"cell {i}" for i, c in enumerate(nb["cells"])
           if c["cell_type"] == "code" and (c.get("outputs") or c.get("execution_count") is not None)]
    return ran + sorted(set(nb["metadata"]) & set(lab.RUN_METADATA))


@pytest.mark.slow
def test_make_install_makes_python_files_open_as_notebooks(tmp_path):
    venv = tmp_path / "venv"
    install_settings(venv)
    overrides = json.loads((venv / "etc/jupyter/labconfig/default_setting_overrides.json").read_text())
    assert overrides["@jupyterlab/docmanager-extension:plugin"]["defaultViewers"]["python"] == "Jupytext Notebook"
    assert overrides["@jupyterlab/apputils-extension:notification"] == {"fetchNews": "false", "checkForUpdates": False}
    assert server_config(venv).ContentsManager.pre_save_hook == "icl.running.lab.pre_save_hook"


def test_strip_outputs_leaves_the_cells_and_nothing_a_run_added():
    nb = nbformat.read(ROOT / "notebooks" / f"{NAME}.ipynb", 4)
    ran = with_outputs(nb)
    assert run_traces(ran)  # the copy does carry outputs
    assert lab.strip_outputs(ran) == nb


@pytest.mark.parametrize("py", sorted((ROOT / "notebooks").glob("*.py")), ids=lambda p: p.stem)
def test_committed_paired_notebooks_hold_nothing_a_run_adds(py):
    assert run_traces(nbformat.read(py.with_suffix(".ipynb"), 4)) == [], f"strip {py.stem}.ipynb: run `make sync`"


@pytest.mark.slow
def test_saving_from_lab_keeps_outputs_out_of_notebooks_only(tmp_path, monkeypatch):
    """What Lab does on save of a .py opened as a notebook, through the environment's server config."""
    (tmp_path / "notebooks").mkdir()
    for suffix in (".py", ".ipynb"):
        shutil.copy(ROOT / "notebooks" / f"{NAME}{suffix}", tmp_path / "notebooks")
    monkeypatch.setattr(lab, "NOTEBOOKS", tmp_path / "notebooks")
    venv = tmp_path / "venv"
    install_settings(venv)
    contents = jupytext.TextFileContentsManager(config=server_config(venv), root_dir=str(tmp_path))

    opened = contents.get(f"notebooks/{NAME}.py", type="notebook")
    ran = with_outputs(nbformat.from_dict(opened["content"]))
    ran.cells[-1].source += "\n# edited in Lab"
    contents.save({"type": "notebook", "content": ran}, f"notebooks/{NAME}.py")
    saved = nbformat.read(tmp_path / "notebooks" / f"{NAME}.ipynb", 4)
    assert saved.cells[-1].source.endswith("# edited in Lab"), "the pair was not saved"
    assert "# edited in Lab" in (tmp_path / "notebooks" / f"{NAME}.py").read_text()
    assert run_traces(saved) == []

    # An executed copy saved elsewhere (e.g. under outputs/) keeps what the run made.
    (tmp_path / "outputs").mkdir()
    contents.save({"type": "notebook", "content": with_outputs(ran)}, f"outputs/{NAME}.ipynb")
    assert run_traces(nbformat.read(tmp_path / "outputs" / f"{NAME}.ipynb", 4))
