"""icl: in-context learning with linear and softmax attention, for reproducing
"Emergent Inverse-Depth Scaling From Nonlinearity In Attention" (arXiv:2610.11063).

The package in four layers, each importing only those before it (tests/test_architecture.py):

- `icl.core`: tasks, models, training: the same code on CPU and GPU;
- `icl.analysis`: theory, bounds, baselines, fits, statistics, tables and figures;
- `icl.claims`: the paper's claims and ours, each with the check that decides it;
- `icl.running`: the run cache, sweeps, `icl reproduce`, plans, the command line and REPORT.md.

The names below are what the notebooks import from `icl` itself (`from icl import bounds, notebook
as nb`; a notebook's claims module comes from `icl.claims`), and what a script trains with
(`RunConfig`, `train`, `run_sweep`, `RunCache`). Each is loaded on first use, so that `import icl`
stays cheap (the command line's `--help`).
"""
import importlib

# Bump when a change alters what training computes: it is part of every run-cache key.
__version__ = "0.1.0"

# name -> the module it is (a string) or (module, attribute)
PUBLIC = {
    # what trains, and on what
    "RunConfig": ("icl.core.config", "RunConfig"),
    "ConfigError": ("icl.core.config", "ConfigError"),
    "field_names": ("icl.core.config", "field_names"),
    "held_out": ("icl.core.tasks", "held_out"),
    "train": ("icl.core.train", "train"),
    "subspaces": "icl.core.subspaces",
    # the science the notebooks read, as modules
    "theory": "icl.analysis.theory",
    "bounds": "icl.analysis.bounds",
    "baselines": "icl.analysis.baselines",
    "modes": "icl.analysis.modes",
    "fit": "icl.analysis.fit",
    "intervals": "icl.analysis.intervals",
    "estimates": "icl.analysis.estimates",
    "exponents": "icl.analysis.exponents",
    "tables": "icl.analysis.tables",
    "runs_of": ("icl.analysis.tables", "runs_of"),
    "regimes": "icl.analysis.regimes",
    "heads_loops": "icl.analysis.heads_loops",
    "grids": "icl.analysis.grids",
    "plots": "icl.analysis.plots",
    # verdicts
    "claims": "icl.claims",
    "claim": ("icl.claims", "claim"),
    "claim_by_regime": ("icl.claims", "claim_by_regime"),
    "show_claims": ("icl.claims", "show_claims"),
    # a notebook's parameters, runs and outputs
    "notebook": "icl.running.notebook",
    "run_sweep": ("icl.running.sweep", "run_sweep"),
    "RunCache": ("icl.running.cache", "RunCache"),
}
__all__ = sorted(PUBLIC)


def __getattr__(name: str):
    if name not in PUBLIC:
        raise AttributeError(f"module 'icl' has no attribute {name!r}")
    target = PUBLIC[name]
    if isinstance(target, str):
        return importlib.import_module(target)
    return getattr(importlib.import_module(target[0]), target[1])


def __dir__() -> list[str]:
    return sorted({*globals(), *PUBLIC})
