"""`python -m icl golden`: the ci-profile copies of the notebooks in tests/golden/ that nbval
re-executes and compares with (their `# NBVAL_CHECK_OUTPUT` cells). They run as `icl reproduce
--profile ci` runs them, under its lock, staged and published into outputs/ci/<name>/ only when
complete (icl.running.staging); each executed notebook then replaces its golden copy with one rename, so a
killed or failed run leaves the committed goldens as they were. Run twice on one machine it writes
the same bytes: what changes between executions of unchanged code (timestamps, durations,
papermill's cell ids, absolute paths) is dropped (`reproduce.execute`)."""
from __future__ import annotations

import sys

from .files import write_atomic
from .parameters import chosen, profile_root
from .paths import repo_root
from .reproduce import run_all


def add_arguments(p) -> None:
    p.add_argument("--only", nargs="+", metavar="NAME", help="regenerate only these notebooks")


def run(args) -> int:
    root = repo_root()
    say = lambda line: print(line, file=sys.stderr, flush=True)
    results = run_all(root, "ci", chosen(args.only), None, log=say)
    for name, r in results.items():
        if r["status"] == "ok":
            golden = root / "tests" / "golden" / f"{name}.ipynb"
            write_atomic(golden, (root / profile_root("ci") / name / f"{name}.ipynb").read_text())
            say(f"{name}: golden copy written in {r['seconds']:.0f} s")
        else:
            say(f"icl: error: {name}: {r['error']}; its golden copy was left as it was")
    return 0 if all(r["status"] == "ok" for r in results.values()) else 1
