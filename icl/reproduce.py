"""`python -m icl reproduce` runs every notebook with papermill at a profile's parameters and
gathers the claim verdicts into REPORT.md; `python -m icl golden` writes the ci-profile copies
in tests/golden/ that nbval compares against."""
from __future__ import annotations

import json
import os
import re
import sys
import time
from pathlib import Path

from .config import ConfigError
from .sweep import read_yaml

NOTEBOOKS = ("01_easy_linear", "02_easy_nonlinear", "03_difficult", "04_generalized", "05_fitting_appendix")
PROFILES = ("ci", "quick", "paper")


def profile_root(profile: str) -> str:
    """Where a profile's outputs go: the committed quick results at the top of outputs/."""
    return "outputs" if profile == "quick" else f"outputs/{profile}"


def notebook_parameters(root: Path, profile: str, name: str, device: str | None) -> dict:
    import papermill

    params = read_yaml(root / "params" / profile / f"{name}.yaml")
    declared = papermill.inspect_notebook(str(root / "notebooks" / f"{name}.ipynb"))
    if device and "device" in declared:  # notebooks that train nothing take no device
        params["device"] = device
    return params


def execute(root: Path, name: str, params: dict, out: Path, progress: bool = False) -> float:
    import papermill

    out.parent.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    papermill.execute_notebook(str(root / "notebooks" / f"{name}.ipynb"), str(out), parameters=params,
                               kernel_name="python3", cwd=str(root / "notebooks"), progress_bar=progress)
    seconds = time.perf_counter() - start
    relative_paths(out, root)
    return seconds


def relative_paths(notebook: Path, root: Path) -> None:
    """papermill records the absolute input and output paths; a committed notebook should not
    carry the layout of the machine that ran it, so they become relative to the repository."""
    import nbformat

    nb = nbformat.read(notebook, as_version=4)
    meta = nb.metadata.get("papermill", {})
    for key in ("input_path", "output_path"):
        if meta.get(key) and Path(meta[key]).is_absolute():
            meta[key] = os.path.relpath(meta[key], root)
    nbformat.write(nb, notebook)


def add_arguments(p) -> None:
    p.add_argument("--profile", default="quick", help=f"one of {', '.join(PROFILES)} (default: quick)")
    p.add_argument("--device", default="auto", help="auto, cpu or cuda (default: auto)")
    p.add_argument("--only", nargs="+", metavar="NAME", help="run only these notebooks (e.g. 03_difficult)")


def run(args) -> int:
    if args.profile not in PROFILES:
        raise ConfigError(f"profile: unknown value {args.profile!r}; allowed: {', '.join(PROFILES)}")
    names = args.only or NOTEBOOKS
    bad = [n for n in names if n not in NOTEBOOKS]
    if bad:
        raise ConfigError(f"only: unknown notebook {bad[0]!r}; allowed: {', '.join(NOTEBOOKS)}")
    from .notebook import repo_root  # pandas and matplotlib load only when a notebook runs

    root = repo_root()
    base = root / profile_root(args.profile)
    times = {}
    for i, name in enumerate(names, 1):
        params = notebook_parameters(root, args.profile, name, args.device)
        out = root / params["output_dir"] / f"{name}.ipynb"
        print(f"[{i}/{len(names)}] {name} ({args.profile}) ...", file=sys.stderr, flush=True)
        cached = cache_entries(root, params)
        # a per-cell progress bar on a terminal; logs (CI, nohup) get only the start and end lines
        seconds = round(execute(root, name, params, out, progress=sys.stderr.isatty()), 1)
        times[name] = {"seconds": seconds, "runs_trained": None if cached is None else cache_entries(root, params) - cached}
        trained = "no run cache" if cached is None else f"{times[name]['runs_trained']} runs trained"
        print(f"[{i}/{len(names)}] {name} done in {seconds:.0f} s ({trained}) -> {out.relative_to(root)}",
              file=sys.stderr, flush=True)
    timing = base / "timings.json"
    old = json.loads(timing.read_text()) if timing.exists() else {}
    timing.write_text(json.dumps({**old, **times}, indent=1))
    report = write_report(root, args.profile)
    print(f"total {sum(t['seconds'] for t in times.values()):.0f} s; report: {report.relative_to(root)}", file=sys.stderr)
    return 0


def cache_entries(root: Path, params: dict) -> int | None:
    """How many runs the notebook's run cache holds (None without a cache): the difference before
    and after a notebook says how many it trained rather than read."""
    cache = params.get("cache_dir")
    if not cache:
        return None
    return sum(1 for f in (root / cache).glob("*/*.json") if not f.name.startswith("."))  # not .tmp-* files


def write_report(root: Path, profile: str) -> Path:
    """REPORT.md and claims.json: one row per claim, from every notebook's results.json."""
    base = root / profile_root(profile)
    rows = []
    for name in NOTEBOOKS:
        path = root / profile_root(profile) / name / "results.json"
        if path.exists():
            rows += [{**c, "notebook": name} for c in json.loads(path.read_text())["claims"]]
    rows.sort(key=claim_order)
    (base / "claims.json").write_text(json.dumps(rows, indent=1))
    import pandas as pd

    from .notebook import markdown_table

    table = pd.DataFrame([{"id": c["id"], "claim": c["claim"], "status": c["status"],
                           "measured": "; ".join(f"{k} = {_short(v)}" for k, v in c["measured"].items()),
                           "figure": figure_link(root, profile, c["figure"])}
                          for c in rows])
    times = json.loads((base / "timings.json").read_text()) if (base / "timings.json").exists() else {}
    text = (f"# Reproduction report ({profile} profile)\n\n"
            "Each row is one claim of the paper in our words, the numbers our runs measured, and the verdict "
            "under the criterion written in the notebook before the numbers were computed.\n\n"
            + (markdown_table(table) if rows else "No results yet: run `make reproduce`.\n")
            + "\n" + "".join(f"- `{c['id']}` criterion: {c['criterion']}\n" for c in rows)
            + timing_line(times))
    (base / "REPORT.md").write_text(text)
    return base / "REPORT.md"


def timing_line(times: dict) -> str:
    """Wall time of each notebook in its last run, with how many runs it trained (the rest were
    read from the run cache, which is what makes a second run fast)."""
    if not times:
        return ""
    def part(name, t):
        if not isinstance(t, dict):  # written before the count existed
            return f"{name} {t:.0f} s"
        trained = "no run cache" if t["runs_trained"] is None else f"{t['runs_trained']} runs trained"
        return f"{name} {t['seconds']:.0f} s ({trained})"

    parts = [part(name, t) for name, t in sorted(times.items())]
    return "\nWall time of each notebook's last run: " + ", ".join(parts) + ".\n"


def figure_link(root: Path, profile: str, figure: str) -> str:
    """A Markdown link relative to the report; a figure that is not on disk is said to be missing."""
    name = Path(figure).name
    if not (root / figure).exists():
        return f"{name} (missing: rerun its notebook)"
    return f"[{name}]({Path(figure).relative_to(profile_root(profile))})"


def claim_order(c: dict) -> tuple:
    """C1 < C2 < ... < C6a < C6b < ... < C10: by number, then by the letter after it."""
    m = re.fullmatch(r"C(\d+)(\w*)", c["id"])
    return (int(m.group(1)), m.group(2)) if m else (10**6, c["id"])


def _short(v) -> str:
    if isinstance(v, float):
        return f"{v:.3g}"
    if isinstance(v, list):
        return "[" + ", ".join(_short(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k}: {_short(x)}" for k, x in v.items()) + "}"
    return str(v)


def add_arguments_golden(p) -> None:
    p.add_argument("--only", nargs="+", metavar="NAME", help="regenerate only these notebooks")


def run_golden(args) -> int:
    from .notebook import repo_root  # pandas and matplotlib load only when a notebook runs

    root = repo_root()
    for name in args.only or NOTEBOOKS:
        params = notebook_parameters(root, "ci", name, None)
        out = root / "tests" / "golden" / f"{name}.ipynb"
        seconds = execute(root, name, params, out)
        print(f"{name}: golden copy written in {seconds:.0f} s", file=sys.stderr, flush=True)
    return 0
