"""Result files that are never half written, and finished results that are never dropped: the one
writer (`write_atomic`: a temporary file beside the target, fsync, one rename, so a reader or a crash
sees the old file whole or the new one whole), the one rescue (`rescue`: where a result cannot be
written, a fallback folder that outlives a reboot, `fallback_folders`, named in one line), the one
reader of what icl reads back (`read_regular`: a regular file of bounded size, never a pipe or a
device), and the bound of what `--json` writes (`json_bytes`), checked before any training.
"""
from __future__ import annotations

import errno
import json
import os
import shutil
import stat
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from ..core.config import ConfigError
from ..core.results import result_bytes

FILE_MODE = 0o644  # readable by everyone, as a shared cache and a results folder must be
# A JSON float as `json.dumps(indent=1)` writes it in a result: up to 24 characters
# ("-1.2345678901234567e-05,"), a newline, and one space of indent per level (at most 6 levels).
JSON_FLOAT_BYTES = 32


class NotAnEntry(ValueError):
    """A file where a bookkeeping file (a cache entry, a registry, a user's curves) should be that is
    not one: its message says why."""


DISK_FULL = ("no space left on the disk: what was published before stays whole (a folder is replaced only when "
             "its run completes) and finished runs stay in the run cache; free space and rerun")
NO_SPACE = {errno.ENOSPC: "No space left on device", errno.EDQUOT: "Disk quota exceeded"}


def disk_full(error) -> bool:
    """Whether `error` (an exception, or a notebook's one-line error) is a full disk or quota."""
    if isinstance(error, OSError):
        return error.errno in NO_SPACE
    return any(text in str(error) for text in NO_SPACE.values())


def read_regular(path: Path, limit: int, errors: str = "strict") -> str:
    """The text of `path` if it is a regular file of at most `limit` bytes: the one reader of every
    file icl reads back. Anything else is not one of its files, and reading it could not end: a link
    to /dev/zero reads until memory runs out, and a named pipe waits forever for a writer (hence
    O_NONBLOCK)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise NotAnEntry("it is not a regular file")
        data = f.read(limit + 1)  # + 1: a file that grew after fstat is still caught
    if info.st_size > limit or len(data) > limit:
        raise NotAnEntry(f"it is larger than the {limit:,} bytes an entry may have")
    return data.decode(errors=errors)


def stream_fd(path) -> int | None:
    """The descriptor /dev/stdout, /dev/stderr, /dev/fd/N or /proc/self/fd/N names, else None: written through
    itself, never through the file it resolves to (a redirect's log replaced, a pipe's /proc entry unopenable)."""
    text = os.path.normpath(str(path))
    named = {"/dev/stdin": 0, "/dev/stdout": 1, "/dev/stderr": 2}
    if text in named:
        return named[text]
    for prefix in ("/dev/fd/", "/proc/self/fd/", f"/proc/{os.getpid()}/fd/"):
        if text.startswith(prefix) and text[len(prefix):].isdigit():
            return int(text[len(prefix):])
    return None


def regular_target(path) -> bool:
    """Whether writing `path` makes or replaces a regular file (not a stream, a device or a pipe)."""
    resolved = Path(os.path.realpath(path))
    return stream_fd(path) is None and (resolved.is_file() or not resolved.exists())


def write_atomic(path: str | os.PathLike, text: str, mode: int = FILE_MODE) -> None:
    """Write `text` to `path` through a temporary file beside it, fsync and rename. A link is
    followed (the file it names is replaced, not the link), and a target that is not a regular file
    (/dev/null, /dev/stdout, a named pipe, a device) is written as it is: renaming a file over it
    would replace the device itself (as root, in /dev). A pipe without a reader is an OSError, not
    a wait."""
    data = text.encode()  # before the temporary file exists: a value that cannot be encoded leaves nothing
    fd = stream_fd(path)
    if fd is not None:  # /dev/stdout and kin: this process's own stream, at its offset, whatever it is
        sys.stdout.flush(), sys.stderr.flush()
        os.write(fd, data)
        return
    path = Path(os.path.realpath(path))
    if path.exists() and not path.is_file():  # a device or a pipe, reached through a link or not
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        return
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=path.suffix)
    try:
        os.fchmod(fd, mode)  # mkstemp makes 0600
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def write_own(path: Path, text: str) -> None:
    """One of icl's own files in an output folder (a report, claims.json, timings.json): a link or a pipe
    there is refused in one line, never written through (a link to a user's file would overwrite it)."""
    path = Path(path)
    if path.is_symlink() or (path.exists() and not path.is_file()):
        what = "a link" if path.is_symlink() else "not a regular file"
        raise ConfigError(f"{path}: icl writes its own file here, and this is {what}; nothing was written "
                          "through it: move it away and run again")
    write_atomic(path, text)


def fallback_folders() -> list[tuple[Path, str]]:
    """Where a result that cannot be written where asked goes, each with why it is there."""
    state = Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state")
    return [(state / "icl" / "unsaved", "in your home, which outlives a reboot"),
            (Path(tempfile.gettempdir()) / "icl-unsaved", "in the temporary folder, as your home could not take it")]


def rescue(write: Callable[[Path], None], name: str) -> tuple[Path, str] | None:
    """Call write(destination) with a new path under each fallback folder in turn, until one works:
    (that path, why it is there); None where none could take it."""
    stamp = time.strftime("%Y%m%d-%H%M%S") + f"-{os.getpid()}"
    for folder, why in fallback_folders():
        dest = folder / f"{stamp}-{name}"
        try:
            folder.mkdir(parents=True, exist_ok=True)
            write(dest)
            return dest, why
        except OSError:
            if dest.is_dir():
                shutil.rmtree(dest, ignore_errors=True)
    return None


def write_json(obj, path: str | os.PathLike, what: str = "the result") -> Path | None:
    """`obj` as JSON at `path`, atomically; where that fails, in a fallback folder or, where none
    takes it, on standard output, said in one line on standard error. The path written (None:
    standard output)."""
    text = json.dumps(obj, indent=1)
    path = Path(path)
    try:
        write_atomic(path, text)
        return path
    except OSError as err:
        saved = rescue(lambda dest: write_atomic(dest, text), path.name)
        where = (f"it is in {saved[0]} instead ({saved[1]})" if saved else
                 "no fallback folder could take it either, so it follows on standard output")
        print(f"icl: warning: {what} could not be written to {path} ({err.strerror or err}); {where}", file=sys.stderr)
        if not saved:
            print(text, flush=True)
        return saved[0] if saved else None


def git(*args) -> str:  # what `git args` prints about the checkout icl is in ('' without git or one)
    import subprocess
    try:
        return subprocess.run(["git", *args], cwd=Path(__file__).parent, capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def provenance(device: str | None = None) -> dict:
    """What a results file records of how it was made: the commit (with "+changes" where the checkout
    differs from it), the versions of python, torch and numpy, the device and the date (UTC)."""
    import platform
    from importlib.metadata import PackageNotFoundError, version

    def of(package: str) -> str | None:
        try:
            return version(package)
        except PackageNotFoundError:
            return None

    commit = git("rev-parse", "HEAD") or None
    if commit and git("status", "--porcelain", "--untracked-files=no"):
        commit += "+changes"
    return {"commit": commit, "python": platform.python_version(), "torch": of("torch"), "numpy": of("numpy"),
            "device": device, "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


def json_bytes(cfgs) -> int:
    """A bound of the bytes of the JSON `--json` writes of the results of `cfgs` (indented)."""
    return result_bytes(cfgs, JSON_FLOAT_BYTES)


def free_bytes(path: Path) -> int:
    """Free bytes on the file system `path` is (or would be) on."""
    return shutil.disk_usage(next(p for p in (path, *path.parents) if p.exists())).free
