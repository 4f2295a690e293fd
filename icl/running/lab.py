"""JupyterLab's settings for this repository, written into the environment (not the user's home) by
`make install`, so that a plain `.venv/bin/jupyter lab` behaves as `make lab` does:

- a `.py` notebook opens as a notebook on double-click: jupytext's viewer is the default for Python
  files (jupytext's own `jupytext-config set-default-viewer python`, through its library);
- no "get notified about official Jupyter news?" pop-up;
- each notebook is listed once in notebooks/: its `.py` (which opens as a notebook); the paired
  `.ipynb` is left out of the folder's listing (`NotebooksOnce`), though it stays on disk and opens
  by its path;
- outputs are never saved into `notebooks/*.ipynb`. Each is paired with its `.py` (the source of
  truth) by jupytext, which writes the `.ipynb` side as Lab holds it, outputs included; jupytext
  has no option to leave them out. The Jupyter server's pre-save hook, `pre_save_hook` below, strips
  them from every notebook saved into that folder before it is written. The executed copies
  elsewhere (`outputs/`, `tests/golden/`) keep theirs. A hook and not a git clean filter: a filter
  would hide the outputs from git while leaving them in the file that papermill, the tests and
  `jupytext --sync` read, and it needs registering in every clone.

    python -m icl.running.lab VENV     # what `make install` runs
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from jupytext import AsyncTextFileContentsManager  # the server's; installed with JupyterLab

# The folder whose notebooks are sources, never results (the checkout icl is installed from).
NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
# What running a kernel adds to the notebook's metadata (besides each code cell's outputs and count).
RUN_METADATA = ("language_info", "widgets")
HOOK = "icl.running.lab.pre_save_hook"  # by name: the server imports it
MANAGER = "icl.running.lab.NotebooksOnce"  # likewise
NEWS_OFF = {"fetchNews": "false", "checkForUpdates": False}


def strip_outputs(nb: dict) -> dict:
    """The notebook (an nbformat 4 dict, changed in place) without outputs, execution counts or
    the kernel metadata a run adds."""
    for cell in nb.get("cells", []):
        if cell.get("cell_type") == "code":
            cell["outputs"], cell["execution_count"] = [], None
    for key in RUN_METADATA:
        nb.get("metadata", {}).pop(key, None)
    return nb


def pre_save_hook(model: dict, path: str, contents_manager, **kwargs) -> None:
    """The Jupyter server calls this before writing any file; it strips a notebook saved into
    NOTEBOOKS (path is relative to the server's root folder)."""
    if model.get("type") != "notebook" or not path.endswith(".ipynb"):
        return
    if Path(contents_manager.root_dir, path.strip("/")).resolve().parent == NOTEBOOKS:
        strip_outputs(model["content"])


def _listed_once(model: dict) -> dict:
    """A listing of NOTEBOOKS (a contents model, changed in place) without each .ipynb whose .py is there."""
    names = {item["name"] for item in model["content"]}
    model["content"] = [item for item in model["content"]
                        if not (item["name"].endswith(".ipynb") and item["name"][:-6] + ".py" in names)]
    return model


class NotebooksOnce(AsyncTextFileContentsManager):
    """jupytext's contents manager (it pairs .py and .ipynb) listing each notebook of NOTEBOOKS once."""

    async def get(self, path, content=True, type=None, format=None, **kwargs):
        model = await super().get(path, content=content, type=type, format=format, **kwargs)
        if model["type"] == "directory" and content and Path(self.root_dir, path.strip("/")).resolve() == NOTEBOOKS:
            _listed_once(model)
        return model


def write_settings(venv: Path) -> list[Path]:
    """Write the lab's settings and the server's hook into the environment at venv; the files."""
    from jupytext_config.labconfig import LabConfig

    etc = Path(venv) / "etc" / "jupyter"
    lab = LabConfig(settings_file=etc / "labconfig" / "default_setting_overrides.json").read()
    lab.set_default_viewer("python")
    lab.config["@jupyterlab/apputils-extension:notification"] = NEWS_OFF
    lab.write()
    # Read by every Jupyter server of this environment (the server reads its jupyter_server_config.d/
    # folder for extensions only, so the hook goes in the main file, beside what is there).
    server = etc / "jupyter_server_config.json"
    config = json.loads(server.read_text()) if server.exists() else {}
    config.setdefault("ContentsManager", {})["pre_save_hook"] = HOOK
    config.setdefault("ServerApp", {})["contents_manager_class"] = MANAGER
    server.write_text(json.dumps(config, indent=2) + "\n")
    return [lab.settings_file, server]


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m icl.running.lab VENV")
    for written in write_settings(Path(sys.argv[1])):
        print(f"wrote {written}")
