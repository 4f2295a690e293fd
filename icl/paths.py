"""Where icl may write, and which folders it may replace.

`icl reproduce` replaces a notebook's output folder whole when its run completes (so that a
killed run leaves the previous outputs intact). A folder that is replaced whole must never be one
the user made. So:

- every folder icl writes outputs into carries a marker file, MARKER, written when icl creates
  it, and icl replaces or removes a folder only when the marker is there (or the folder is empty);
- an output folder must lie strictly inside the repository's `outputs/`, or inside a folder the
  user names explicitly in the environment variable ICL_OUTPUT_ROOT (several separated by ':').

Anything else is a ConfigError, raised before any work starts, that names the value.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from .config import ConfigError

MARKER = ".icl-output"
OUTPUT_ROOT_ENV = "ICL_OUTPUT_ROOT"
MARKER_TEXT = "Written by icl: this folder holds outputs that `icl reproduce` may replace whole.\n"


def repo_root(start: Path | None = None) -> Path:
    """The folder holding pyproject.toml and icl/: upwards from the working directory, else the
    checkout this package was installed from (editable install), e.g. for a notebook copy in /tmp."""
    here = (start or Path.cwd()).resolve()
    package_home = Path(__file__).resolve().parents[1]
    for p in (here, *here.parents, package_home):
        if (p / "pyproject.toml").exists() and (p / "icl").is_dir():
            return p
    raise FileNotFoundError(f"no repository root (pyproject.toml + icl/) above {here}")


def output_roots(root: Path) -> list[Path]:
    """The folders output folders may lie in: the repository's outputs/ and ICL_OUTPUT_ROOT's."""
    extra = [Path(p).expanduser().resolve() for p in os.environ.get(OUTPUT_ROOT_ENV, "").split(os.pathsep) if p]
    return [(root / "outputs").resolve(), *extra]


def is_own(folder: Path) -> bool:
    """Whether icl may replace or remove `folder`: it carries the marker, or it is empty."""
    return (folder / MARKER).is_file() or not any(folder.iterdir())


def check_output_dir(root: Path, value: str, key: str = "output_dir") -> Path:
    """The resolved folder `value` (relative to the repository root) names, if icl may write into it
    and replace it; else a ConfigError that names the value and what is allowed."""
    path = (root / value).resolve()  # follows links: a link out of outputs/ is outside it
    roots = output_roots(root)
    if not any(r in path.parents for r in roots):
        raise ConfigError(f"{key}: {value!r} is not allowed; an output folder must lie inside "
                          f"{os.path.relpath(roots[0], Path.cwd())}/ (or inside a folder named in ${OUTPUT_ROOT_ENV})")
    if path.exists() and not path.is_dir():
        raise ConfigError(f"{key}: {value!r} is a file, not a folder")
    if path.is_dir() and not is_own(path):
        raise ConfigError(f"{key}: {value!r} holds files that icl did not write (no {MARKER} marker), and icl "
                          "replaces its output folder whole; give a new folder or one that icl made")
    return path


def make_own(folder: Path) -> Path:
    """Create `folder` (and its parents) with the marker that lets icl replace it later."""
    folder.mkdir(parents=True, exist_ok=True)
    marker = folder / MARKER
    if not marker.exists():
        marker.write_text(MARKER_TEXT)
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
