"""REPORT.md, claims.json and the README's generated block from every notebook's results.json,
through the templates of report.md.tmpl: at the ci profile a first line saying that its verdicts only
test the pipeline, a warning for each notebook whose last run failed or whose results cannot be read,
the README's answer, one row per claim and one section per claim (icl.running.claim_report), the
headline numbers and the regime story (icl.claims.headline), the limits and history pages and the last
run's times. `python -m icl report` rewrites them from the results on disk, running nothing."""
from __future__ import annotations

import json
import os
import re
from pathlib import Path

from .. import claims
from ..claims import headline
from ..core.config import ConfigError
from . import claim_report, paths
from .files import provenance, write_atomic, write_own
from .markdown import escape, fill
from .parameters import NOTEBOOKS, PROFILES, profile_root
from .paths import repo_root
from .staging import TOTAL, read_timings, readable_timings

BEGIN, END = "<!-- results: generated from outputs/ by `icl reproduce` or `icl report`; edits here are overwritten -->", "<!-- /results -->"


def write_report(root: Path, profile: str, base: Path | None = None) -> Path:
    """REPORT.md and claims.json in `base` (default the profile's outputs folder) from its notebooks'
    results.json; for the committed quick-profile outputs, the README's block too."""
    base, rows, unreadable = base or root / profile_root(profile), [], []
    for name in NOTEBOOKS:
        data = headline.results(base, name)
        if data is not None:
            rows += [{**c, "notebook": name} for c in data.get("claims", [])]
        elif (base / name / "results.json").exists():
            unreadable.append(name)
    rows.sort(key=claims.claim_order)
    write_own(base / "claims.json", json.dumps({"provenance": provenance(), "claims": rows}, indent=1))
    times = read_timings(base / "timings.json")[0]  # missing or unreadable: no times (named by readable_timings)
    pipeline_only = profile == "ci" or "smoke" in base.parts  # `--smoke` writes under outputs/smoke/PROFILE
    failed = [dict(name=n, error=t.get("error", "no reason recorded") + (f"; log: `{t['log']}`" if t.get("log") else ""))
              for n, t in sorted(times.items()) if t.get("status", "ok") != "ok"]
    story, mechanism, c4 = headline.regime_story(base), headline.mechanism_table(root, base), headline.c4_table(base)
    alpha = headline.alpha_answer(base)  # the report's and the README's, read once
    glance = claim_report.compact_table(rows, root, base, base) if rows else ""
    text = fill("report", profile=profile, intro=claims.INTRO,  # its parts in the template's order; "" leaves one out
                pipeline_only=fill("pipeline_only") if pipeline_only else "",
                failures=warnings("failed", failed),
                unreadable=warnings("unreadable", [dict(name=n) for n in unreadable]),
                answer="" if pipeline_only else the_answer(root, base),
                glance=fill("glance", table=glance, decided_by=claims.DECIDED_BY) if rows else fill("no_results"),
                alpha=alpha,
                c4=fill("c4", table=c4, slice=slice_section(root, base)) if c4 else "",
                regimes=fill("regimes", story=story, figure=figure(base, "06_regimes/regime_map.png", "regime map"),
                             table=headline.regime_table(base)) if story else "",
                mechanism=fill("mechanism", table=mechanism, figure=figure(base, "07_mechanism/ablation.png", "ablation"))
                if mechanism else "",
                claims=fill("claims", sections="\n\n".join(claim_report.section(c, root, base) for c in rows)) if rows else "",
                pages="".join(included(root / "docs" / page, base) for page in ("limits.md", "history.md")),
                times=timing_line(times))
    write_own(base / "REPORT.md", text)
    if base.resolve() == (root / "outputs").resolve():  # the committed quick-profile outputs: the README shows them
        update_readme(root, fill("readme", table=claim_report.compact_table(rows, root, base, root) + "\n" if rows else "",
                                 alpha=alpha.rstrip("\n"), c4_setting=headline.C4_SETTING, c4=c4).rstrip("\n"))
    return base / "REPORT.md"


def slice_section(root: Path, base: Path) -> str:
    """C4 at the paper's (d, P) beside the quick profile's, where outputs/paper_slice/ holds a run."""
    table = headline.c4_table(base / headline.SLICE)
    if not table:
        return ""
    params = (headline.results(base / headline.SLICE, "03_difficult") or {}).get("parameters", {})
    setting = (f"{len(params.get('seeds', []))} seeds, depths {min(params.get('depths', [0]))}-{max(params.get('depths', [0]))}, "
               f"{params.get('steps')} steps, batch {params.get('batch_size')}, isotropic spectrum")
    return fill("slice", setting=setting, report=f"{headline.SLICE}/REPORT.md", table=table,
                claims=headline.slice_comparison(base))


def warnings(block: str, each: list[dict]) -> str:
    """A template's warning for each of `each` (a notebook whose last run failed, or whose results.json
    cannot be read), then a blank line; nothing where none."""
    return "".join(fill(block, **values) for values in each) + ("\n" if each else "")


def figure(base: Path, png: str, alt: str) -> str:
    """A figure of `base` in the report, with the caption its notebook saved in it (`plots.save`) under it."""
    from PIL import Image  # matplotlib's own dependency, loaded only here

    try:
        with Image.open(base / png) as image:
            caption = image.info.get("Description", "")
    except OSError:  # not there (yet): the link says so when it is followed
        caption = ""
    return f"![{alt}]({png})\n" + (f"\n*{escape(caption)}*\n" if caption else "")


def the_answer(root: Path, base: Path) -> str:
    """The README's answer and lead figure (written by hand, above its generated block), with its links
    made relative to the report's folder: the report opens with what the README does."""
    readme = root / "README.md"
    found = re.search(r"^## The answer\n(.*?)^<!-- results", readme.read_text() if readme.is_file() else "", re.S | re.M)
    if not found:
        return ""
    fix = lambda m: f"]({os.path.relpath(root / m.group(1), base)})"  # noqa: E731
    return "## The answer\n" + re.sub(r"\]\(((?:outputs|docs)/[^)]*)\)", fix, found.group(1))


def included(page: Path, base: Path) -> str:
    """A docs/ page as a section of the report in `base` (its title one level down), or nothing if
    absent: its relative links are made relative to the report's folder (outputs/, or deeper)."""
    if not page.exists():
        return ""

    def fix(m: re.Match) -> str:
        target, hash_, anchor = m.group(1).partition("#")
        return f"]({os.path.relpath(os.path.normpath(page.parent / target), base)}{hash_}{anchor})"
    return "\n" + re.sub(r"\]\((?!https?:|#)([^)\s]+)\)", fix, page.read_text()).replace("# ", "## ", 1)


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

    total = times.get(TOTAL)
    return fill("times", notebooks=", ".join(part(n, t) for n, t in sorted(times.items()) if n != TOTAL)) + (
        fill("total", count=len(total["notebooks"]), jobs=total["jobs"], minutes=f"{total['seconds'] / 60:.1f}",
             finished=total["finished"]) if total else "")


def update_readme(root: Path, block: str) -> bool:
    """Replace what README.md holds between BEGIN and END with `block` (the README's numbers are then
    the last run's); False where it has no markers."""
    readme = root / "README.md"
    text = readme.read_text() if readme.exists() else ""
    pattern = re.compile(re.escape(BEGIN) + ".*?" + re.escape(END), re.S)
    if not pattern.search(text):
        return False
    write_atomic(readme, pattern.sub(lambda _: f"{BEGIN}\n{block}\n{END}", text))
    return True


def add_arguments(p) -> None:
    p.add_argument("--profile", default="quick", choices=PROFILES, help="the parameter set (default: quick)")
    p.add_argument("--outputs", metavar="DIR", help="the folder a run wrote with --outputs DIR (default: the profile's)")


def run(args) -> int:
    """`icl report`: REPORT.md and claims.json (and, for the committed quick outputs, the README's
    results block) rewritten from the results.json files on disk; no notebook runs."""
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
    print(paths.shown(write_report(root, args.profile, base), root))
    return 0
