"""Where a run's outputs go: a profile's folder (or a smoke run's, or --outputs DIR), and, for a
notebook's run before it is complete, a staging folder beside its output folder
(`<output_dir>/../.staging/<name>/`), which replaces the output folder with two renames only when
the run completes, so a killed or failed run leaves the previous outputs whole. Only folders icl
made (icl.paths) are ever replaced or removed, and every destination is checked before any work."""
from __future__ import annotations

import os
from pathlib import Path

from . import paths
from .config import ConfigError


def profile_root(profile: str) -> str:
    """Where a profile's outputs go: the committed quick results at the top of outputs/."""
    return "outputs" if profile == "quick" else f"outputs/{profile}"


TEXT_SUFFIXES = (".ipynb", ".json", ".md", ".csv", ".txt")  # files whose staged paths are rewritten


def staging_paths(root: Path, params: dict, name: str) -> dict[str, Path]:
    final = (root / params["output_dir"]).resolve()
    staging = final.parent / ".staging"
    return {"final": final, "stage": staging / name, "old": staging / f"{name}.old",
            "log": staging / f"{name}.log", "stored": staging / f"{name}.stored"}


def check_destinations(root: Path, params: dict[str, dict]) -> None:
    """Before any work: every notebook's output folder may be written and replaced by icl
    (`paths.check_output_dir`), no two notebooks share one, and no folder that icl did not make
    stands where it stages a run. A ConfigError names the notebook and the value."""
    finals: dict[Path, str] = {}
    for name, p in params.items():
        try:
            final = paths.check_output_dir(root, p["output_dir"])
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
    folder icl made (`paths.is_own`) is ever replaced or removed."""
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
    paths.make_own(stage)
    paths.remove_own(where["old"])
    if final.exists():
        if not (final.is_dir() and paths.is_own(final)):  # checked before the run; checked again here
            raise ConfigError(f"output_dir: {final} holds files that icl did not write; not replaced")
        os.rename(final, where["old"])
    os.rename(stage, final)
    paths.remove_own(where["old"])


def destinations(root: Path, profile: str, names: list[str], smoke: bool = False,
                 outputs: str | None = None) -> tuple[dict | None, str]:
    """Per-notebook parameters that move a run's outputs, and the folder of its report: the
    profile's own (no parameters), a smoke run's scratch folder, or --outputs DIR."""
    from . import plan

    if smoke and outputs:
        raise ConfigError("--outputs: a smoke run writes into outputs/smoke/PROFILE/; give one of --smoke and --outputs")
    if smoke:
        return {n: plan.smoke_overrides(profile, n) for n in names}, plan.smoke_overrides(profile, "")["results_root"]
    if outputs:
        paths.make_own(paths.check_output_dir(root, outputs, "--outputs"))
        return {n: {"output_dir": f"{outputs}/{n}", "results_root": outputs} for n in names}, outputs
    return None, profile_root(profile)
