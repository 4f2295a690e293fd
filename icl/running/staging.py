"""Where a run's outputs go: a profile's folder (or a smoke run's, or --outputs DIR), and, for a
notebook's run before it is complete, a staging folder beside its output folder
(`<output_dir>/../.staging/<name>/`), which replaces the output folder with two renames only when
the run completes, so a killed or failed run leaves the previous outputs whole. Only folders icl
made (icl.running.paths) are ever replaced or removed, and every destination is checked before any work."""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

from ..core.config import ConfigError
from . import paths, plan
from .files import NotAnEntry, provenance, read_regular, write_own
from .parameters import profile_root

TEXT_SUFFIXES = (".ipynb", ".json", ".md", ".csv", ".txt")  # files whose staged paths are rewritten
TIMINGS_LIMIT = 2**20  # bytes of a timings.json: a few lines per notebook
TOTAL = "total"  # the key of timings.json that holds the whole run's wall time, beside one per notebook


def staging_folder(parent: Path) -> Path:
    """`parent/.staging`, where runs stage, log and lock: refused if it is a link, which would send
    the lock, the logs and the kernels' connection files to wherever it points."""
    folder = parent / ".staging"
    if folder.is_symlink():
        raise ConfigError(f"{folder} is a symbolic link; icl stages, logs and locks only in a real folder there: "
                          "remove the link")
    return folder


def staging_paths(root: Path, params: dict, name: str) -> dict[str, Path]:
    final = (root / params["output_dir"]).resolve()
    staging = staging_folder(final.parent)
    return {"final": final, "stage": staging / name, "old": staging / f"{name}.old", "log": staging / f"{name}.log",
            "stored": staging / f"{name}.stored", "connection": staging / f"{name}.kernel.json"}


def check_destinations(root: Path, params: dict[str, dict]) -> None:
    """Before any work: every notebook's output folder may be written and replaced by icl
    (`paths.check_output_dir`: new, empty, or made for that notebook at that profile), no two
    notebooks share one, and no folder that icl did not make stands where it stages a run. A
    ConfigError names the notebook and the value."""
    finals: dict[Path, str] = {}
    for name, p in params.items():
        try:
            final = paths.check_output_dir(root, p["output_dir"], notebook=name, profile=p.get("profile", ""))
            for key in ("stage", "old"):
                where = staging_paths(root, p, name)[key]
                if where.exists() and not (where.is_dir() and paths.is_own(where)):
                    raise ConfigError(f"output_dir: {where} is in the way and icl did not make it; move it away")
        except ConfigError as err:
            raise ConfigError(f"{name}: {err}") from None
        for other_final, other in finals.items():
            if final == other_final or final in other_final.parents or other_final in final.parents:
                raise ConfigError(f"output_dir: {name} and {other} would write into the same folder "
                                  f"({os.path.relpath(final, root)}); give each notebook its own (use --only)")
        finals[final] = name


def publish(root: Path, where: dict[str, Path]) -> None:
    """Point the staged files at their final folder, then swap it in with two renames. Only a
    folder made for the same notebook and profile as the staged one (its marker) is replaced."""
    stage, final = where["stage"], where["final"]
    pairs = [(str(stage), str(final)), (os.path.relpath(stage, root), os.path.relpath(final, root))]
    for f in stage.rglob("*"):
        if f.is_file() and f.suffix in TEXT_SUFFIXES:
            text = f.read_text()
            new = text
            for a, b in pairs:
                new = new.replace(a, b)
            if new != text:
                f.write_text(new)
    paths.remove_own(where["old"])
    paths.record_written(stage)
    if final.exists():  # checked before the run; checked again here
        paths.check_output_dir(root, str(final), notebook=stage.name, profile=paths.marked_for(stage)[1])
        theirs = paths.foreign(final, stage)
        taken = [n for n in theirs if (stage / n).exists()]
        if taken:
            raise ConfigError(f"{os.path.relpath(final / taken[0], root)} was not written by icl and this run writes a file "
                              f"of that name; move it away and run again (the run is kept in {os.path.relpath(stage, root)}, "
                              "and the run cache makes a rerun quick)")
        for name in theirs:  # a user's files carry over into the new folder
            os.rename(final / name, stage / name)
        os.rename(final, where["old"])
    os.rename(stage, final)
    paths.remove_own(where["old"])


def destinations(root: Path, profile: str, names: list[str], smoke: bool = False,
                 outputs: str | None = None) -> tuple[dict | None, str]:
    """Per-notebook parameters that move a run's outputs, and the folder of its report: the
    profile's own (no parameters), a smoke run's scratch folder, or --outputs DIR (a run root:
    its marker says so, and icl never replaces it whole)."""
    if smoke and outputs:
        raise ConfigError("--outputs: a smoke run writes into outputs/smoke/PROFILE/; give one of --smoke and --outputs")
    if smoke:
        return {n: plan.smoke_overrides(profile, n) for n in names}, plan.smoke_overrides(profile, "")["results_root"]
    if outputs:
        paths.make_own(paths.check_output_dir(root, outputs, "--outputs", paths.RUN_ROOT, profile), paths.RUN_ROOT, profile)
        return {n: {"output_dir": f"{outputs}/{n}", "results_root": outputs} for n in names}, outputs
    return None, profile_root(profile)


def report_folder(root: Path, where: str, overrides: dict) -> Path | None:
    """The folder of the run's report (made if new), or None where `-p output_dir` put the notebook
    outside it: a report covers the notebooks in its folder (--outputs DIR gives a run its own)."""
    base = root / where
    if "output_dir" in overrides and (root / overrides["output_dir"]).resolve().parent != base.resolve():
        return None
    base.mkdir(parents=True, exist_ok=True)
    return base


def read_timings(path: Path) -> tuple[dict, str]:
    """(timings.json's times, '') through the one non-blocking reader, or ({}, why they cannot be
    read); ({}, '') where there is none."""
    if not path.exists():
        return {}, ""
    try:
        times = json.loads(read_regular(path, TIMINGS_LIMIT))
    except (ValueError, NotAnEntry, OSError) as err:  # not JSON, not UTF-8, not a regular file
        return {}, str(err).splitlines()[0][:80]
    if isinstance(times, dict) and all(isinstance(t, dict) and isinstance(t.get("seconds"), (int, float)) for t in times.values()):
        return times, ""
    return {}, "not a mapping of notebooks to their times"


def record_times(base: Path, times: dict, seconds: float, jobs: int) -> None:
    """timings.json: each notebook's last wall time, runs trained and status (notebooks not run this
    time keep their entries), and the whole run's wall time under TOTAL."""
    path, keep = base / "timings.json", ("seconds", "runs_trained", "status", "error", "log")
    total = {"seconds": round(seconds, 1), "jobs": jobs, "notebooks": sorted(times),
             "finished": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "provenance": provenance()}
    now = {n: {k: t[k] for k in keep if k in t} for n, t in times.items()}
    write_own(path, json.dumps({**read_timings(path)[0], **now, TOTAL: total}, indent=1))


def readable_timings(path: Path, say, aside: bool = False) -> bool:
    """timings.json is bookkeeping, committed with the quick outputs: a merge conflict or a
    truncated write in it must not cost a finished run its report, nor is it icl's to delete. One
    that cannot be read is named in one line and left as it is, or, with `aside` (a run about to
    write its own), renamed to timings.json.unreadable. Whether it could be read (or is absent)."""
    why = read_timings(path)[1]
    if why:
        kept = path.with_name(path.name + ".unreadable")
        if aside:
            os.replace(path, kept)
        say(f"icl: {os.path.relpath(path)} could not be read ({why}); "
            + (f"kept as {kept.name}, and written anew from this run" if aside else "left as it is, and the report shows no times"))
    return not why
