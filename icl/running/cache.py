"""The run cache: one JSON file per run, written atomically (temporary file, fsync, rename).

The key is a hash of
- the run's full config,
- what the source files that determine a result compute (`source_files`: train.py and every icl
  module it imports, directly or not: config, tasks, models, decomposition, ...; `syntax`: their
  syntax trees without docstrings, and the C kernels' bytes), hashed once when this module is
  imported, so that any changed statement recomputes and an edited comment or docstring does not,
- the torch version and the device type the run trains on (CPU and GPU numbers differ in the last
  digits): `auto` resolved, so that `auto` on a CPU machine and `cpu` share their entries.

An entry is used only if it parses, carries its own key, passes its checksum, holds exactly the
requested config and has result fields of the expected types (`core.results`: e.g. a finite
float `final_loss`; other fields for a run recorded as diverged, which a sweep reports and
does not train again unless `retry_diverged`). Anything else is reported in one line on standard
error and recomputed, never used.

A run trained alone and the same run trained inside a batched group (other depths or learning
rates in the same pass) can differ in the last float digit (float32 sums in another order, e.g.
0.8777371 vs 0.8777372), yet they share one key: the cache holds whichever was trained first.
A sweep retrains a half-cached group whole, so an interrupted sweep resumes to the numbers an
uninterrupted one gives.

Files are written 0644 and folders 0755, so a cache shared by a cluster's users is readable by
all of them.
"""
from __future__ import annotations

import ast
import hashlib
import json
import os
import sys
from pathlib import Path

from .. import __version__
from ..core.config import RunConfig
from ..core.results import field_problem
from .files import NotAnEntry, json_bytes, read_regular, write_atomic
from .paths import check_writable

DEFAULT_ROOT = Path("outputs/runs")
PACKAGE = Path(__file__).resolve().parents[1]  # icl/
# The modules whose code decides what a run computes; source_files() adds what they import.
SOURCE_ROOTS = ("core.train", "core.config", "core.tasks", "core.models", "core.decomposition")
FILE_MODE, DIR_MODE = 0o644, 0o755
MAX_ENTRY_BYTES = 64 * 2**20  # the least an entry may have; the largest results hold a few MB (entry_limit)
# Environment variable naming a file that store() appends each new entry's key to (one a line):
# `icl reproduce` counts the runs a notebook trained from it, even when notebooks run in parallel.
STORE_LOG = "ICL_CACHE_STORE_LOG"


def source_files(package: Path = PACKAGE, roots=SOURCE_ROOTS) -> list[Path]:
    """The modules named in `roots` (dotted, below `package`: "core.train") and, transitively,
    every icl module they import."""
    seen: dict[str, Path] = {}
    todo = list(roots)
    while todo:
        name = todo.pop()
        path = package.joinpath(*name.split(".")).with_suffix(".py")
        if name in seen or not path.exists():
            continue
        seen[name] = path
        folder = name.split(".")[:-1]
        for node in ast.walk(ast.parse(path.read_bytes())):
            if isinstance(node, ast.ImportFrom) and node.level >= 1:  # from .x import y, from ..core import x
                base = folder[: len(folder) - (node.level - 1)]
                if node.module:
                    todo.append(".".join(base + node.module.split(".")))
                else:  # an imported name is a module or, skipped above, an attribute such as __version__
                    todo += [".".join(base + [a.name]) for a in node.names]
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("icl."):
                todo.append(node.module.split(".", 1)[1])
    native = [p for n, p in seen.items() if n.endswith("native")]
    kernels = sorted((native[0].parent / "kernels").glob("*.[ch]")) if native else []  # the C that native compiles
    return sorted(seen.values(), key=lambda p: p.name) + kernels


def syntax(path: Path) -> bytes:
    """What a source file computes: a Python file's syntax tree without its docstrings (comments and
    layout are not in the tree), so that editing prose retrains nothing; a C file's bytes."""
    if path.suffix != ".py":
        return path.read_bytes()
    tree = ast.parse(path.read_bytes())
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and body and \
                isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
            node.body = body[1:] or [ast.Pass()]
    return ast.dump(tree).encode()


def source_hash(package: Path = PACKAGE, roots=SOURCE_ROOTS) -> str:
    """sha256 over the names and `syntax` of source_files()."""
    h = hashlib.sha256()
    for path in source_files(package, roots):
        data = syntax(path)
        h.update(f"{path.name}\0{len(data)}\0".encode())
        h.update(data)
    return h.hexdigest()


SOURCE_HASH = source_hash()  # once, at import: the code this process trains with


def same_config(stored: dict, cfg: RunConfig) -> bool:
    """Whether a stored config is cfg's, its device aside: the key holds the device type the run
    trained on (run_key), so a run asked for as `auto` and stored as `cpu`, or back, is the same."""
    return isinstance(stored, dict) and {**stored, "device": None} == {**cfg.to_dict(), "device": None}


def _digest(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def run_key(cfg: RunConfig) -> str:
    import torch

    from ..core.accel.native import in_use  # heavy: loads torch; the cache alone loads no library
    from ..core.train import resolve_device  # the device type is part of the key: CPU and GPU numbers differ

    device = resolve_device(cfg.device)
    # The config with its device as resolved: `auto` on a CPU machine is the same run as `cpu`.
    key = {"config": {**cfg.to_dict(), "device": device.type}, "version": __version__, "source": SOURCE_HASH,
           "torch": torch.__version__, "device": device.type}
    kernels = in_use(cfg, device)
    if kernels:  # the C kernels (and their builds) and the torch path agree to float rounding, not bit for bit
        key["kernels"] = kernels
    return _digest(key)


def result_problem(result, cfg: RunConfig) -> str | None:
    """Why `result` is not a run of `cfg` as train.py writes it, finished or diverged (None if it is)."""
    problem = field_problem(result)
    if problem is None and not same_config(result["config"], cfg):
        return "its result is for another config"
    return problem


def entry_limit(cfg: RunConfig) -> int:
    """The most bytes an entry of `cfg` may have: ten times the JSON bound of its result
    (icl.running.files.json_bytes, written with indents; an entry has none), and at least MAX_ENTRY_BYTES."""
    return max(MAX_ENTRY_BYTES, 10 * json_bytes([cfg]))


class RunCache:
    def __init__(self, root: str | os.PathLike = DEFAULT_ROOT, retry_diverged: bool = False):
        self.root = Path(root)
        self.retry_diverged = retry_diverged  # serve diverged records as missing: they train again

    def path(self, cfg: RunConfig) -> Path:
        key = run_key(cfg)
        return self.root / key[:2] / f"{key}.json"

    def load(self, cfg: RunConfig, path: Path | None = None) -> dict | None:
        """The stored result of `cfg` (at `path`, where the caller has it already), or None."""
        path = path or self.path(cfg)
        problem = None
        try:
            entry = json.loads(self.read_text(path, entry_limit(cfg)))
            if entry["key"] != path.stem:
                problem = "it is stored under another key"
            elif entry["checksum"] != _digest(entry["result"]):
                problem = "its checksum does not match its result"
            elif not same_config(entry.get("config"), cfg):
                problem = "it was stored for another config"
            else:
                problem = result_problem(entry["result"], cfg)
        except FileNotFoundError:
            return None
        except NotAnEntry as err:
            problem = str(err)
        except Exception as err:  # noqa: BLE001 (a damaged entry can fail any way: RecursionError when deeply nested)
            problem = f"it does not parse ({type(err).__name__})"
        if problem:
            print(f"icl: cache entry {path} is corrupt or foreign ({problem}); recomputing it", file=sys.stderr)
            return None
        if self.retry_diverged and entry["result"].get("diverged"):
            return None
        return entry["result"]

    def store(self, cfg: RunConfig, result: dict, path: Path | None = None) -> Path:
        path = path or self.path(cfg)
        self.write(path, {"key": path.stem, "checksum": _digest(result), "config": cfg.to_dict(), "result": result})
        log = os.environ.get(STORE_LOG)
        if log:
            with open(log, "a") as f:
                f.write(path.stem + "\n")
        return path

    def read_text(self, path: Path, limit: int = MAX_ENTRY_BYTES) -> str:
        return read_regular(path, limit)

    def write(self, path: Path, entry: dict) -> None:
        """Write `entry` as JSON to `path` atomically (temporary file, fsync, rename), 0644."""
        for slot in (path.parent, path):  # a shard's slot, then the entry's: a link or a pipe there (read as corrupt)
            if slot.is_symlink() or (slot.exists() and not slot.is_file() and not slot.is_dir()):
                slot.unlink()  # is replaced, never written through (a shard linked outside got new entries there)
        self._mkdirs(path.parent)
        write_atomic(path, json.dumps(entry), FILE_MODE)  # readers see the old file or the whole new one

    def _mkdirs(self, folder: Path) -> None:
        missing = [p for p in (folder, *folder.parents) if not p.exists()]
        folder.mkdir(parents=True, exist_ok=True)
        for p in missing:
            try:
                os.chmod(p, DIR_MODE)
            except OSError:  # made by someone else meanwhile
                pass

    def memo(self, kind: str, key: dict, compute, sources) -> dict:
        """A derived value (e.g. a bound) under self.root/derived/kind/ (one level deeper than run
        entries, so it is never counted as a run), keyed by `key` and the source hash of the modules
        `sources` (and what they import); computed and written when missing or unreadable."""
        full = {"kind": kind, "key": key, "source": source_hash(roots=tuple(sources))}
        path = self.root / "derived" / kind / f"{_digest(full)}.json"
        try:
            entry = json.loads(self.read_text(path))
            if entry["key"] == full and entry["checksum"] == _digest(entry["value"]):
                return entry["value"]
        except Exception:  # noqa: BLE001 (as `get`: whatever is wrong with it, the value is computed again)
            pass
        # The value as JSON gives it back (int dict keys become strings, and sort differently), so
        # that its checksum is the one a later read computes.
        value = json.loads(json.dumps(compute()))
        try:
            self.write(path, {"key": full, "checksum": _digest(value), "value": value})
        except OSError as err:  # a full disk: the value is here, and a later call computes it again
            print(f"icl: warning: {path} could not be written ({err.strerror}); the value is used without it",
                  file=sys.stderr)
        return value

    def check_writable(self, folders=()) -> None:
        """ConfigError unless new entries can be written to the cache and to each of `folders`
        (the shard folders a sweep will store into: one made read-only, or another user's in a
        shared cache, fails only there). Checked before training, so that no training is lost."""
        for folder in [self.root, *sorted(set(folders))]:
            check_writable(folder, "cache", self.root, "give a writable folder with --cache")


class MemoryCache(RunCache):
    """A run cache in this process's memory, for notebooks run with `cache_dir: null` (the ci
    profile, nbval, golden copies): entries are checked as on disk, and nothing is left behind on
    disk, even by a killed kernel."""

    def __init__(self):
        super().__init__("<memory>")
        self.files: dict[Path, str] = {}

    def read_text(self, path: Path, limit: int = 0) -> str:
        if path not in self.files:
            raise FileNotFoundError(path)
        return self.files[path]

    def write(self, path: Path, entry: dict) -> None:
        self.files[path] = json.dumps(entry)

    def check_writable(self, folders=()) -> None:
        pass
