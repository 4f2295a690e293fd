"""What every notebook needs and no notebook should define: checked parameters, runs through the
cache, and outputs (figures, tables, results.json with the claim verdicts that `icl.claims`
records) in one place.

Papermill only *warns* about parameters a notebook does not declare. So the parameters cell ends
with `nb.end_of_parameters(globals())`, which records the declared names and their defaults; the
next cell calls `nb.parameters(globals())`, which stops on any name papermill injected that was
not declared, and on any value of the wrong type or an impossible run setting.
"""
from __future__ import annotations

import ast
import json
import math
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from ..analysis import tables
from ..analysis.grids import Parameters, config_from
from ..claims import round_numbers
from ..core.config import ConfigError, RunConfig, check_threads, excerpt
from ..core.suggest import did_you_mean
from ..core.train import is_diverged
from . import files, markdown, paths, processes
from .cache import MemoryCache, RunCache
from .paths import repo_root
from .sweep import diverged, run_sweep

_DECLARED: dict[str, object] = {}
_IMPORTED: dict[str, object] = {}  # parameter-like names of the namespace the parameters cell did not assign
PARAMETER_TYPES = (bool, int, float, str, list, tuple, dict, type(None))


def _parameter_like(ns: dict) -> dict:
    return {k: v for k, v in ns.items() if not k.startswith("_") and isinstance(v, PARAMETER_TYPES) and k not in ("In", "Out")}


def end_of_parameters(ns: dict) -> None:
    """Record the names and defaults the parameters cell declared. The first call of icl in every
    notebook, so it also sets up the kernel: a ConfigError shows as its one line, and a kernel of
    `icl reproduce` ends with its worker, before it writes anything (`processes.kernel_started`)."""
    _config_errors_in_one_line()
    processes.kernel_started()
    assigned = _assigned_by_this_cell(ns)
    _DECLARED.clear()
    _IMPORTED.clear()
    for k, v in _parameter_like(ns).items():
        (_DECLARED if assigned is None or k in assigned else _IMPORTED)[k] = _copy(v)


def _assigned_by_this_cell(ns: dict) -> set[str] | None:
    """The names the running cell (the parameters cell, which ends with end_of_parameters) assigns
    at its top level, where `ns` is an IPython kernel's namespace: a constant imported earlier
    (`PLATEAU`) is no parameter, and was listed among them in a bad parameter's error. None
    elsewhere (a dict of parameters handed in, as icl reproduce's checks do): all of `ns` counts."""
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    shell = get_ipython()
    cells = ns.get("In") if shell is not None and ns is shell.user_ns else None
    if not cells:
        return None
    try:
        body = ast.parse(cells[-1]).body  # In[-1]: this cell, stored before it runs
    except SyntaxError:
        return None
    if "end_of_parameters" not in cells[-1]:  # not stored (nbval runs cells without history): all of ns counts
        return None
    targets = [t for node in body if isinstance(node, (ast.Assign, ast.AnnAssign))
               for t in (node.targets if isinstance(node, ast.Assign) else [node.target])]
    return {t.id for t in targets if isinstance(t, ast.Name)}


def _copy(v):
    return json.loads(json.dumps(v)) if isinstance(v, (list, dict, tuple)) else v


FLOAT = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")  # a decimal number, as a parameter may spell one


def _check_type(key: str, value, default) -> object:
    if default is None or value is None:
        return value
    if isinstance(default, bool) and isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"  # papermill's -p reads only True and False as booleans
    if isinstance(default, bool) != isinstance(value, bool):
        raise ConfigError(f"{key}: {excerpt(value)} is not allowed; it must be a boolean like its default {default!r}")
    if isinstance(default, float) and isinstance(value, int):
        return float(value)
    if isinstance(default, float) and isinstance(value, str) and FLOAT.fullmatch(value.strip()):
        return float(value)  # YAML 1.1 reads 1e-3 (no dot) as a string, so papermill's -p hands one over
    if isinstance(default, (list, tuple)) and isinstance(value, (list, tuple)):
        return list(value)
    if type(value) is not type(default):
        kind = {"int": "an integer", "float": "a number", "str": "a string", "list": "a list", "dict": "a mapping"}
        raise ConfigError(f"{key}: {excerpt(value)} is not allowed; it must be {kind.get(type(default).__name__, type(default).__name__)} "
                          f"like its default {default!r}")
    return value


@dataclass
class Settings:
    """A notebook's validated parameters and what follows from them: its runs, through the cache,
    and its output folder. What analysis and claims read goes to them as values, `params` (an
    `icl.analysis.grids.Parameters`, built once in `parameters`), never as this object."""

    params: Parameters
    root: Path
    output_dir: Path
    cache: RunCache | None
    read: list = field(default_factory=list)  # every finished run `run` returned: training_curves.csv

    @property
    def values(self) -> dict:
        return self.params.values

    @property
    def claims(self) -> list:
        """The verdicts recorded so far (`icl.claims.claim`, into `params`)."""
        return self.params.claims

    def __getitem__(self, key):
        return self.params[key]

    def config(self, **overrides) -> RunConfig:
        """The base run config: every RunConfig field the notebook declares, then overrides."""
        return config_from(self.values, "parameters", **overrides)

    def run(self, cfgs: list[RunConfig]) -> list[dict]:
        """Train (or read from the cache) every config; groups train in one batched pass. A run that
        diverged is named on standard error and left out of the list returned. Without a
        cache_dir every call trains afresh, in a cache that lives in memory only."""
        cache = self.cache or MemoryCache()
        results = run_sweep(cfgs, cache, progress=self.values.get("progress", True))
        for line in diverged(results):  # the analyses read finished runs only
            print(f"left out: {line}", file=sys.stderr)
        finished = [r for r in results if not is_diverged(r)]
        self.read.extend(finished)
        return finished

    def path(self, name: str) -> Path:
        self.output_dir.mkdir(parents=True, exist_ok=True)
        return self.output_dir / name

    def relpath(self, path: Path) -> str:
        return os.path.relpath(path, self.root)


def parameters(ns: dict, make_outputs: bool = True) -> Settings:
    """Validate the notebook's parameters (declared + papermill-injected) and set up its output
    folder (`make_outputs=False`: only check, as `icl reproduce` does before a notebook starts)."""
    if not _DECLARED:
        raise RuntimeError("call nb.end_of_parameters(globals()) at the end of the parameters cell")
    current = _parameter_like(ns)
    # an imported constant is no parameter, unless papermill set it (-p PLATEAU 0.5): then it is unknown
    unknown = sorted(k for k in set(current) - set(_DECLARED) if k not in _IMPORTED or current[k] != _IMPORTED[k])
    if unknown:
        raise ConfigError(f"unknown parameter {excerpt(unknown[0])}; this notebook's parameters are: {', '.join(sorted(_DECLARED))}"
                          + did_you_mean(unknown[0], _DECLARED))
    params = Parameters.checked({k: _check_type(k, current[k], d) for k, d in _DECLARED.items()})
    values = params.values
    if values.get("threads") is not None:
        check_threads(values["threads"])
    if values.get("threads"):
        import torch

        torch.set_num_threads(int(values["threads"]))
    root = repo_root()
    # The default output folder (a scratch folder) is named after the notebook: it takes only that
    # notebook's outputs, at any profile, since a run here writes into it in place.
    name = Path(_DECLARED["output_dir"]).name
    out = paths.check_output_dir(root, values["output_dir"], notebook=name)  # before anything is written
    cache = RunCache(root / values["cache_dir"]) if values.get("cache_dir") else None
    settings = Settings(params, root, out, cache)  # the values, checked: analysis and claims read only these
    settings.config()  # every run setting is checked here, before anything trains
    if make_outputs:
        paths.make_own(out, name, values.get("profile", ""))
    return settings


def _config_errors_in_one_line() -> None:
    """In a kernel (papermill, JupyterLab), a ConfigError shows as its one line, like the command
    line's: its traceback (the frames of icl's checks) says nothing its message does not. Every
    other exception keeps IPython's full traceback."""
    try:
        from IPython import get_ipython
    except ImportError:
        return
    def one_line(shell, etype, value, tb, tb_offset=None):  # _showtraceback: what the kernel sends as the error
        shell._showtraceback(etype, value, shell.InteractiveTB.get_exception_only(etype, value))

    shell = get_ipython()
    if shell is not None:
        shell.set_custom_exc((ConfigError,), one_line)


# ---------------------------------------------------------------- outputs


def save_figure(s: Settings, fig, name: str, caption: str) -> str:
    """PNG (README, notebook) and PDF (print), both carrying the one-sentence caption, shown under the
    figure in a notebook (`plots.show`); the PNG's repo path."""
    import warnings  # matplotlib only where a figure is saved: importing icl.running.notebook stays light

    from ..analysis import plot_audit, plots  # heavy: loads matplotlib

    if not caption.strip():
        raise ValueError(f"figure {name}: a caption is one sentence that says what the figure shows")
    png = s.path(f"{name}.png")
    plots.save(fig, png, s.path(f"{name}.pdf"), caption)
    problems = plot_audit.figure_problems(fig)
    if problems:
        warnings.warn(f"figure {name}: " + "; ".join(problems), stacklevel=2)
    plots.show(fig, caption)
    return s.relpath(png)


def markdown_table(df: pd.DataFrame, digits: int = 3) -> str:
    """The frame as a GitHub table (`markdown.table`, the report's), numbers to `digits` significant digits."""
    fmt = lambda v: (f"{v:.{digits}g}" if isinstance(v, (float, np.floating)) and math.isfinite(v) else
                     ("" if v is None or (isinstance(v, float) and math.isnan(v)) else str(v)))
    return markdown.table(list(map(str, df.columns)), [[fmt(v) for v in r] for r in df.itertuples(index=False)])


def save_table(s: Settings, df: pd.DataFrame, name: str) -> str:
    df.to_csv(s.path(f"{name}.csv"), index=False)
    s.path(f"{name}.md").write_text(markdown_table(df))
    return s.relpath(s.path(f"{name}.csv"))


def write_results(s: Settings, numbers: dict) -> str:
    """results.json: the parameters, every fitted number and the claim verdicts; and, where the
    notebook read runs, training_curves.csv: every run's loss along training, so that a reader
    checks convergence without the run cache."""
    if s.read:
        tables.curves_frame(s.read).to_csv(s.path("training_curves.csv"), index=False, float_format="%.6g")
    payload = {"parameters": s.values, "provenance": files.provenance(s.values.get("device")),
               "numbers": round_numbers(numbers, 6), "claims": s.claims}
    path = s.path("results.json")
    files.write_atomic(path, json.dumps(payload, indent=1, default=str))  # a reader never sees half of it
    return s.relpath(path)


def fit_value(value, problem: str | None):
    """A fitted number as a checked output prints it: the number, or 'ill-conditioned' where the
    fit's conditioning rule (`icl.analysis.fit.ill_conditioned`, a table's `fit_problem`) flags it."""
    return "ill-conditioned" if problem else value


def show(numbers: dict, digits: int = 3) -> None:
    """Print numbers rounded to `digits` significant digits, one per line: the lines nbval checks.
    With ICL_CHECKED_VALUES naming a file (scripts/variants.py), each line is also appended to it
    with its numbers unrounded, so that their spread across CPUs can be measured."""
    record = os.environ.get("ICL_CHECKED_VALUES")
    for k, v in numbers.items():
        line = f"{k}: {_fmt(v, digits)}"
        print(line)
        if record:
            with open(record, "a") as f:
                f.write(json.dumps({"line": line, "values": _flat(v)}) + "\n")


def _flat(v) -> list:
    """Every number in a nesting of lists and dicts, in order (strings and booleans as they are)."""
    if isinstance(v, dict):
        return [x for item in v.values() for x in _flat(item)]
    if isinstance(v, (list, tuple)):
        return [x for item in v for x in _flat(item)]
    if isinstance(v, (float, np.floating, int, np.integer)) and not isinstance(v, bool):
        return [float(v)]
    return [str(v)]


def _fmt(v, digits):
    if isinstance(v, (float, np.floating)):
        return f"{float(v):.{digits}g}" if math.isfinite(v) else "nan"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_fmt(x, digits) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k}: {_fmt(x, digits)}" for k, x in v.items()) + "}"
    return str(v)
