"""`python -m icl golden`: the ci-profile copies of the notebooks in tests/golden/ that nbval
re-executes and compares with (their `# NBVAL_CHECK_OUTPUT` cells). Run twice on one machine it
writes the same bytes: what changes between executions of unchanged code (timestamps, durations,
papermill's cell ids, absolute paths) is dropped (`reproduce.execute`)."""
from __future__ import annotations

import sys

from .reproduce import NOTEBOOKS, execute, notebook_parameters


def add_arguments(p) -> None:
    p.add_argument("--only", nargs="+", metavar="NAME", help="regenerate only these notebooks")


def run(args) -> int:
    from .paths import repo_root

    root = repo_root()
    for name in args.only or NOTEBOOKS:
        params = notebook_parameters(root, "ci", name, None)
        out = root / "tests" / "golden" / f"{name}.ipynb"
        seconds = execute(root, name, params, out)
        print(f"{name}: golden copy written in {seconds:.0f} s", file=sys.stderr, flush=True)
    return 0
