"""What a reproduction runs: its notebooks and profiles, where a profile's outputs go, and each
notebook's parameters (the defaults of its `parameters` cell, the profile's file
params/<profile>/<name>.yaml, and overrides from the command line), checked before any kernel
starts. Plan, staging, report and reproduce all read it.
"""
from __future__ import annotations

import ast
import json
from pathlib import Path

from ..core.config import ConfigError, excerpt
from .sweep import read_yaml

# The notebooks a reproduction runs, in the order a serial run takes them (their numbers): every
# notebooks/NN_name.py, so that a notebook added there is run, planned and reported with no list to edit.
NOTEBOOKS = tuple(sorted(p.stem for p in (Path(__file__).resolve().parents[2] / "notebooks").glob("[0-9][0-9]_*.py")))
# What each notebook reads from the others' outputs: it starts only once these have finished. A
# notebook not listed can start at once. (06 trains a few runs that 03 trains too, its cells at
# (d, P) = (16, 64) with three seeds; waiting for 03 would put 06 and 07 on one long chain.)
NEEDS = {"05_fitting_appendix": ("01_easy_linear", "03_difficult", "04_generalized"),
         "07_mechanism": ("03_difficult", "06_regimes"),
         "08_heads_and_loops": ("03_difficult", "04_generalized")}  # shares their runs through the cache
# ci, quick and paper run every notebook; a slice runs only the notebooks it has a file for
# (paper_slice: C4's main sweep at the paper's (d, P) on a CPU; paper_core: the same on one GPU).
PROFILES = ("ci", "quick", "paper", "paper_slice", "paper_core")
WHOLE = ("ci", "quick", "paper")


def profile_notebooks(profile: str) -> tuple[str, ...]:
    """The notebooks a profile runs: all of them for a whole profile, else those with a file in
    params/<profile>/."""
    if profile in WHOLE:
        return NOTEBOOKS
    folder = Path(__file__).resolve().parents[2] / "params" / profile
    return tuple(n for n in NOTEBOOKS if (folder / f"{n}.yaml").exists())


def chosen(only: list[str] | None, profile: str = "quick") -> list[str]:
    """The notebooks `--only` names (all of the profile's without it), in the order they run;
    ConfigError naming one that is not a notebook."""
    names = only or profile_notebooks(profile)
    bad = [n for n in names if n not in NOTEBOOKS]
    if bad:
        raise ConfigError(f"only: unknown notebook {excerpt(bad[0])}; allowed: {', '.join(NOTEBOOKS)}")
    return [n for n in NOTEBOOKS if n in names]


def profile_root(profile: str) -> str:
    """Where a profile's outputs go: the committed quick results at the top of outputs/."""
    return "outputs" if profile == "quick" else f"outputs/{profile}"


def declared_parameters(root: Path, name: str) -> dict:
    """The notebook's parameters and their defaults, read from its `parameters` cell (every
    top-level `name = literal`; papermill.inspect_notebook misreads a cell whose last line is
    a call, as ours is)."""
    nb = json.loads((root / "notebooks" / f"{name}.ipynb").read_text())  # json: nbformat takes seconds to import
    cell = next((c for c in nb["cells"] if "parameters" in c.get("metadata", {}).get("tags", [])), None)
    source = "".join(cell["source"]) if cell is not None else ""
    declared = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                declared[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:  # not a literal: the notebook checks it itself when it runs
                declared[node.targets[0].id] = NOT_LITERAL
    return declared


NOT_LITERAL = object()


def notebook_parameters(root: Path, profile: str, name: str, device: str | None, overrides: dict | None = None,
                        threads: int | None = None) -> dict:
    """The profile's parameters of one notebook, with the device, thread count and any
    command-line overrides that the notebook declares. Its outputs go to the profile's folder
    (outputs/ for quick, outputs/<profile>/ otherwise); the notebook's own default, for a run
    outside `icl reproduce`, is a scratch folder."""
    # the notebook's defaults, what every run of the profile sets, then its profile file's values (only
    # what differs; a notebook may have none)
    declared = declared_parameters(root, name)
    own = {"profile": profile, "results_root": profile_root(profile), "progress": False}  # where declared
    file = root / "params" / profile / f"{name}.yaml"
    params = {**{k: v for k, v in declared.items() if v is not NOT_LITERAL}, "output_dir": f"{profile_root(profile)}/{name}",
              **{k: v for k, v in own.items() if k in declared},
              **(read_yaml(file, may_be_empty=True) if file.exists() else {})}
    if device and "device" in declared:  # notebooks that train nothing take no device
        params["device"] = device
    if threads and "threads" in declared:
        params["threads"] = threads
    params.update({k: v for k, v in (overrides or {}).items() if k in declared})
    return params


def settings(root: Path, name: str, params: dict):
    """The notebook's validated Settings from `params`, as its parameters cell makes them (its own
    checks, icl.running.notebook.parameters), with no output folder made."""
    from . import notebook as nb  # heavy: loads pandas and scipy; parameters alone loads neither

    declared = declared_parameters(root, name)
    nb.end_of_parameters(declared)
    return nb.parameters({**declared, **params}, make_outputs=False)


def check_parameters(root: Path, name: str, params: dict) -> None:
    """Run the notebook's own parameter checks here, before any kernel starts: a bad value is a
    ConfigError naming the notebook, the key and what is allowed."""
    if any(v is NOT_LITERAL for v in declared_parameters(root, name).values()):
        return  # the notebook checks them itself when it runs
    try:
        settings(root, name, params)
    except ConfigError as err:
        raise ConfigError(f"{name}: {err}") from None
