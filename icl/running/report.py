"""REPORT.md and claims.json from every notebook's results.json: a table with one row per claim
first (icl.running.claim_report), then the headline numbers (icl.running.summary) and the regime story of notebook
06, one section per claim, the limits and history pages, a warning for each notebook whose last run
failed, and the last run's times. At the ci profile its first line says that its verdicts only test
the pipeline. `python -m icl report` rewrites it from the results on disk, running nothing."""
from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

from .. import claims
from ..claims import headline
from ..core.config import ConfigError
from . import claim_report, paths, summary
from .files import provenance, write_own
from .markdown import escape
from .parameters import NOTEBOOKS, PROFILES, profile_root
from .paths import repo_root
from .staging import read_timings, readable_timings

REGIMES = "06_regimes"


def regime_section(base: Path) -> str:
    """What a reader should see first: the bound, where inverse-depth decay appears, the full-rank
    result (`headline.regime_story`), the regime figure and its table (empty if notebook 06 has not run)."""
    story = headline.regime_story(base)
    if not story:
        return ""
    return "\n".join([story, figure(base, f"{REGIMES}/regime_map.png", "regime map"), headline.regime_table(base)]) + "\n"


def figure(base: Path, png: str, alt: str) -> str:
    """A figure of `base` in the report, with the caption its notebook saved in it (`plots.save`) under it."""
    from PIL import Image  # matplotlib's own dependency, loaded only here

    try:
        with Image.open(base / png) as image:
            caption = image.info.get("Description", "")
    except OSError:  # not there (yet): the link says so when it is followed
        caption = ""
    return f"![{alt}]({png})\n" + (f"\n*{escape(caption)}*\n" if caption else "")


# ---------------------------------------------------------------- the report


PIPELINE_ONLY = ("**These verdicts only test the pipeline.** The ci profile and `--smoke` runs train tiny or "
                 "few-step models; their numbers and verdicts say nothing about the paper's claims (the quick "
                 "profile's do).\n\n")


def write_report(root: Path, base: Path, profile: str, notebooks) -> Path:
    """REPORT.md and claims.json in `base` (a profile's outputs): one row per claim, from the
    results.json of each of `notebooks`, then the headline tables and one section per claim."""
    rows, unreadable = [], []
    for name in notebooks:
        data = headline.results(base, name)
        if data is not None:
            rows += [{**c, "notebook": name} for c in data.get("claims", [])]
        elif (base / name / "results.json").exists():
            unreadable.append(name)
    rows.sort(key=claims.claim_order)
    write_own(base / "claims.json", json.dumps({"provenance": provenance(), "claims": rows}, indent=1))
    times = read_times(base / "timings.json")
    pipeline_only = profile == "ci" or "smoke" in base.parts  # `--smoke` writes under outputs/smoke/PROFILE
    text = ((PIPELINE_ONLY if pipeline_only else "") + f"# Reproduction report ({profile} profile)\n\n" + claims.INTRO
            + failure_lines(times) + unreadable_lines(unreadable)
            + (the_answer(root, base) if not pipeline_only else "") + claims_at_a_glance(rows, root, base)
            + headline.alpha_answer(base)
            + section("C4's exponents (notebook 03)", headline.c4_table(base))
            + regime_section(base) + section("The mechanism (notebook 07)", headline.mechanism_table(root, base),
                                              figure(base, "07_mechanism/ablation.png", "ablation"))
            + ("## Each claim\n\n" + "\n".join(claim_report.section(c, root, base) for c in rows) if rows else "")
            + "".join(included(root / "docs" / page) for page in ("limits.md", "history.md"))
            + timing_line(times))
    write_own(base / "REPORT.md", text)
    if base.resolve() == (root / "outputs").resolve():  # the committed quick-profile outputs: the README shows them
        summary.update_readme(root, summary.readme_block(root, base, rows))
    return base / "REPORT.md"


def the_answer(root: Path, base: Path) -> str:
    """The README's answer and lead figure (written by hand, above its generated block), with its links
    made relative to the report's folder: the report opens with what the README does."""
    readme = root / "README.md"
    text = readme.read_text() if readme.is_file() else ""
    found = re.search(r"^## The answer\n(.*?)^<!-- results", text, re.S | re.M)
    if not found:
        return ""
    fix = lambda m: f"]({os.path.relpath(root / m.group(1), base)})"  # noqa: E731
    return "## The answer\n" + re.sub(r"\]\(((?:outputs|docs)/[^)]*)\)", fix, found.group(1))


def claims_at_a_glance(rows: list[dict], root: Path, base: Path) -> str:
    """The table that opens the report: one row per claim, with the check that decided it."""
    if not rows:
        return "No results yet: run `make reproduce`.\n\n"
    return ("## The claims at a glance\n\n" + claim_report.compact_table(rows, root, base, base) + "\n"
            + claims.DECIDED_BY + "\n\n")


def included(page: Path) -> str:
    """A docs/ page as a section of the report (its title one level down), or nothing if absent. The
    report lies in outputs/, beside docs/: the page's links to its neighbours get a ../docs/ prefix
    (its ../ links already fit)."""
    if not page.exists():
        return ""
    text = re.sub(r"\]\((?!\.\./|https?:|#)", "](../docs/", page.read_text())
    return "\n" + text.replace("# ", "## ", 1)


def section(title: str, body: str, after: str = "") -> str:
    """A report section, or nothing where its notebook has not run."""
    return f"## {title}\n\n{body}\n{after}\n" if body else ""


TOTAL = "total"  # the key of timings.json that holds the whole run's wall time, beside one per notebook


def timing_line(times: dict) -> str:
    """Wall time of each notebook in its last run, with how many runs it trained (the rest were
    read from the run cache, which is what makes a second run fast), or that it failed."""
    if not times:
        return ""

    def part(name, t):
        if t.get("status", "ok") != "ok":
            return f"{name} FAILED after {t['seconds']:.0f} s"
        trained = "no run cache" if t["runs_trained"] is None else f"{t['runs_trained']} runs trained"
        return f"{name} {t['seconds']:.0f} s ({trained})"

    times = dict(times)
    total = times.pop(TOTAL, None)
    parts = [part(name, t) for name, t in sorted(times.items())]
    line = "\nWall time of each notebook's last run: " + ", ".join(parts) + ".\n"
    if total:
        line += (f"The last `icl reproduce` ({len(total['notebooks'])} notebooks, --jobs {total['jobs']}) took "
                 f"{total['seconds'] / 60:.1f} min of wall time, finished {total['finished']}.\n")
    return line


def failure_lines(times: dict) -> str:
    """A warning at the top of the report for each notebook whose last run failed."""
    lines = [f"> **The last run of `{name}` failed** ({t.get('error', 'no reason recorded')}"
             + (f"; log: `{t['log']}`" if t.get("log") else "")
             + "). Its rows below, if any, come from its previous complete run.\n"
             for name, t in sorted(times.items()) if t.get("status", "ok") != "ok"]
    return "".join(lines) + ("\n" if lines else "")


def read_times(path: Path) -> dict:
    """timings.json, or nothing where it is missing or cannot be read (`staging.readable_timings` names
    such a file before a run or `icl report`): the times never cost the report."""
    return read_timings(path)[0]


def unreadable_lines(names: list[str]) -> str:
    """A warning for each notebook whose results.json cannot be read: its claims are left out."""
    lines = [f"> **`{name}/results.json` cannot be read** (a merge conflict or a cut-off copy?): its claims are "
             f"left out below; run `icl reproduce --only {name}` to write it again.\n" for name in names]
    return "".join(lines) + ("\n" if lines else "")


def record_times(base: Path, times: dict, seconds: float, jobs: int) -> None:
    """timings.json: each notebook's last wall time, runs trained and status (notebooks not run this
    time keep their entries), and the whole run's wall time under report.TOTAL."""
    path = base / "timings.json"
    old = read_times(path)
    keep = ("seconds", "runs_trained", "status", "error", "log")
    total = {"seconds": round(seconds, 1), "jobs": jobs, "notebooks": sorted(times),
             "finished": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "provenance": provenance()}
    now = {n: {k: t[k] for k in keep if k in t} for n, t in times.items()}
    write_own(path, json.dumps({**old, **now, TOTAL: total}, indent=1))


def profile_report(root: Path, profile: str, base: Path | None = None) -> Path:
    """REPORT.md and claims.json of a profile (in `base`, default its outputs folder) from its
    notebooks' results."""
    return write_report(root, base or root / profile_root(profile), profile, NOTEBOOKS)


def add_arguments(p) -> None:
    p.add_argument("--profile", default="quick", help=f"one of {', '.join(PROFILES)} (default: quick)")
    p.add_argument("--outputs", metavar="DIR", help="the folder a run wrote with --outputs DIR (default: the profile's)")


def run(args) -> int:
    """`icl report`: REPORT.md and claims.json (and, for the committed quick outputs, the README's
    results block) rewritten from the results.json files on disk; no notebook runs."""
    if args.profile not in PROFILES:
        raise ConfigError(f"profile: unknown value {args.profile!r}; allowed: {', '.join(PROFILES)}")
    root = repo_root()
    base = root / (args.outputs or profile_root(args.profile))
    if not base.is_dir():
        raise ConfigError(f"outputs: no folder {base}; run `icl reproduce --profile {args.profile}` first")
    if args.outputs:  # the rule of `icl reproduce --outputs`: a run root icl made, inside outputs/ or $ICL_OUTPUT_ROOT
        paths.check_output_dir(root, args.outputs, "--outputs", paths.RUN_ROOT)
        if (paths.marked_for(base) or ("",))[0] != paths.RUN_ROOT:
            raise ConfigError(f"--outputs: {args.outputs!r} is not a run root that `icl reproduce --outputs` made (its "
                              f"{paths.MARKER} marker says so); icl report writes REPORT.md and claims.json only there")
    readable_timings(base / "timings.json", print)
    print(paths.shown(profile_report(root, args.profile, base), root))
    return 0
