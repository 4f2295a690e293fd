"""Where icl may write, and which folders it may replace.

`icl reproduce` replaces a notebook's output folder whole when its run completes (so that a
killed run leaves the previous outputs intact). A folder that is replaced whole must never be one
the user made. So:

- every folder icl writes outputs into carries a marker file, MARKER, written when icl creates
  it, that names what the folder is for: one notebook's outputs at one profile, or the root of a
  run (`--outputs DIR`: notebook folders beside REPORT.md, claims.json and timings.json);
- icl removes a folder only when the marker is there (or the folder is empty), and replaces one
  only when its marker names the same notebook and profile: never a run root, so that a
  mistyped `-p output_dir` (a run root for its notebook's folder) is refused, not obeyed;
- the marker of a completed run lists the files it wrote (`record_written`); a rerun replaces
  those, and carries every other file in the folder (a user's notes, a copied result) over into
  the new one (`foreign`), or stops in one line where a new output would take its name;
- an output folder never lies inside another notebook's output folder, whose next run would
  replace it;
- an output folder must lie strictly inside the repository's `outputs/`, or inside a folder the
  user names explicitly in the environment variable ICL_OUTPUT_ROOT (several separated by ':').

Anything else is a ConfigError, raised before any work starts, that names the value.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from ..core.config import ConfigError

MARKER = ".icl-output"
OUTPUT_ROOT_ENV = "ICL_OUTPUT_ROOT"
MARKER_TEXT = "Written by icl: this folder holds outputs that `icl reproduce` may replace whole.\n"
RUN_ROOT = "(run root)"  # what a run root's marker names instead of a notebook
WROTE = "wrote: "  # a marker's line for each file the run that made the folder wrote


def repo_root(start: Path | None = None) -> Path:
    """The folder holding pyproject.toml and icl/: upwards from the working directory, else the
    checkout this package was installed from (editable install), e.g. for a notebook copy in /tmp."""
    here = (start or Path.cwd()).resolve()
    package_home = Path(__file__).resolve().parents[2]
    for p in (here, *here.parents, package_home):
        if (p / "pyproject.toml").exists() and (p / "icl").is_dir():
            return p
    raise FileNotFoundError(f"no repository root (pyproject.toml + icl/) above {here}")


def shown(path: Path, root: Path) -> str:
    """A path as a message shows it: relative to the repository where it lies inside it, else whole
    (an output root named in $ICL_OUTPUT_ROOT may lie anywhere)."""
    path = Path(path).resolve()
    return str(path.relative_to(root.resolve())) if path.is_relative_to(root.resolve()) else str(path)


def output_roots(root: Path) -> list[Path]:
    """The folders output folders may lie in: the repository's outputs/ and ICL_OUTPUT_ROOT's."""
    extra = [Path(p).expanduser().resolve() for p in os.environ.get(OUTPUT_ROOT_ENV, "").split(os.pathsep) if p]
    return [(root / "outputs").resolve(), *extra]


def is_own(folder: Path) -> bool:
    """Whether icl may replace or remove `folder`: it carries the marker, or it is empty."""
    return (folder / MARKER).is_file() or not any(folder.iterdir())


def check_output_dir(root: Path, value: str, key: str = "output_dir", notebook: str | None = None,
                     profile: str | None = None) -> Path:
    """The resolved folder `value` (relative to the repository root) names, if icl may write into it;
    else a ConfigError that names the value and what is allowed. With `notebook`, the folder must be
    new, empty, or made for that notebook (or, as `RUN_ROOT`, for a run root); with `profile` too,
    at that profile, as for a folder that `icl reproduce` replaces whole."""
    path = (root / value).resolve()  # follows links: a link out of outputs/ is outside it
    roots = output_roots(root)
    if not any(r in path.parents for r in roots):
        raise ConfigError(f"{key}: {value!r} is not allowed; an output folder must lie inside "
                          f"{os.path.relpath(roots[0], Path.cwd())}/ (or inside a folder named in ${OUTPUT_ROOT_ENV})")
    if path.exists() and not path.is_dir():
        raise ConfigError(f"{key}: {value!r} is a file, not a folder")
    inside = next((p for p in path.parents if p.is_dir() and (marked_for(p) or ("",))[0] not in ("", RUN_ROOT)), None)
    if inside is not None:
        raise ConfigError(f"{key}: {value!r} lies inside icl's folder for {purpose(*marked_for(inside))} "
                          f"({os.path.relpath(inside, Path.cwd())}), which that notebook's next run replaces; give a "
                          "folder beside it")
    if path.is_dir() and not is_own(path):
        raise ConfigError(f"{key}: {value!r} holds files that icl did not write (no {MARKER} marker), and icl "
                          "replaces its output folder whole; give a new folder or one that icl made")
    made_for = marked_for(path) if path.is_dir() and any(path.iterdir()) else None
    if notebook and made_for and not fits(made_for, path.name, notebook, profile):
        hint = f"e.g. {value.rstrip('/')}/{notebook}" if RUN_ROOT == made_for[0] != notebook else "a new folder"
        raise ConfigError(f"{key}: {value!r} is icl's folder for {purpose(*made_for)} (it holds {contents(path)}), "
                          f"not for {purpose(notebook, profile)}; nothing was changed; give {hint}")
    return path


def purpose(notebook: str, profile: str | None) -> str:
    what = "a run root" if notebook == RUN_ROOT else f"notebook {notebook}"
    return what + (f" at the {profile} profile" if profile else "")


def marked_for(folder: Path) -> tuple[str, str] | None:
    """(notebook, profile) that the folder's marker names; ("", "") for a marker that names none
    (written before markers named them, or unreadable); None without a marker."""
    if not (folder / MARKER).is_file():
        return None
    lines = dict(line.split(": ", 1) for line in (folder / MARKER).read_text(errors="replace").splitlines()
                 if line.startswith(("notebook: ", "profile: ")))
    return lines.get("notebook", ""), lines.get("profile", "")


def fits(made_for: tuple[str, str], name: str, notebook: str, profile: str | None) -> bool:
    """Whether a folder named `name` whose marker names `made_for` may take `notebook`'s outputs at
    `profile` (None: any profile, as a notebook run outside `icl reproduce` writes into it in place).
    A marker that names nothing is taken at its folder's name (a run root: anything)."""
    if made_for == ("", ""):
        return notebook in (name, RUN_ROOT) or profile is None
    return made_for[0] == notebook and profile in (None, made_for[1])


def record_written(folder: Path) -> None:
    """Name in `folder`'s marker every file and folder in it: what this run of icl wrote."""
    marker = folder / MARKER
    kept = [line for line in marker.read_text().splitlines() if not line.startswith(WROTE)]
    names = sorted(p.name for p in folder.iterdir() if p.name != MARKER)
    marker.write_text("\n".join(kept + [WROTE + n for n in names]) + "\n")


def foreign(final: Path, stage: Path) -> list[str]:
    """The names in `final` that icl did not write: not in its marker's list, or, for a marker from
    before markers listed them, not among the outputs of the run staged in `stage`."""
    lines = (final / MARKER).read_text(errors="replace").splitlines() if (final / MARKER).is_file() else []
    ours = {line[len(WROTE):] for line in lines if line.startswith(WROTE)}
    if not ours:
        ours = {p.name for p in stage.iterdir()}
    return sorted(p.name for p in final.iterdir() if p.name != MARKER and p.name not in ours)


def contents(folder: Path, most: int = 4) -> str:
    """The first few names in `folder`, folders with a trailing /, and how many more."""
    names = sorted(p.name + ("/" if p.is_dir() else "") for p in folder.iterdir() if p.name != MARKER)
    more = f" and {len(names) - most} more" if len(names) > most else ""
    return ", ".join(names[:most]) + more if names else "nothing"


def make_own(folder: Path, notebook: str = "", profile: str = "") -> Path:
    """Create `folder` (and its parents) with the marker that lets icl replace it later, naming the
    notebook (or RUN_ROOT) and profile it is for."""
    folder.mkdir(parents=True, exist_ok=True)
    marker = folder / MARKER
    if not marker.exists():
        marker.write_text(MARKER_TEXT + (f"notebook: {notebook}\nprofile: {profile}\n" if notebook else ""))
    return folder


def remove_own(folder: Path) -> None:
    """Remove `folder` if it exists and icl made it; a ConfigError (nothing removed) otherwise."""
    if not folder.exists() and not folder.is_symlink():
        return
    if folder.is_symlink() or not folder.is_dir() or not is_own(folder):
        raise ConfigError(f"{folder} is in the way and icl did not make it (no {MARKER} marker); "
                          "move it away and run again")
    shutil.rmtree(folder)


def check_writable(folder: Path, key: str, value, advice: str) -> None:
    """ConfigError unless a file can be created in `folder` or, where it does not exist yet, in the
    nearest folder above it that does (where it would be made): checked before any work, so that no
    result is lost to a folder that cannot take it."""
    probe = next(p for p in (folder, *folder.parents) if p.exists())
    if not probe.is_dir():
        raise ConfigError(f"{key}: {value} cannot be written; {probe} is not a folder")
    try:
        fd, tmp = tempfile.mkstemp(dir=probe, prefix=".tmp-probe-")
        os.close(fd)
        os.unlink(tmp)
    except OSError as err:
        raise ConfigError(f"{key}: {value} is not writable (in {probe}: {err.strerror}); {advice}") from None
