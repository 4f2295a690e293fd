"""The run cache: one JSON file per run, keyed by a hash of its full config and the training
code's version, written atomically (temporary file, fsync, rename). An entry that does not parse,
belongs to another key or fails its checksum is reported and recomputed, never used."""
from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile
from pathlib import Path

from . import __version__
from .config import RunConfig

DEFAULT_ROOT = Path("outputs/runs")


def _digest(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def run_key(cfg: RunConfig) -> str:
    from .train import resolve_device  # the device type is part of the key: CPU and GPU numbers differ

    return _digest({"config": cfg.to_dict(), "version": __version__, "device": resolve_device(cfg.device).type})


class RunCache:
    def __init__(self, root: str | os.PathLike = DEFAULT_ROOT):
        self.root = Path(root)

    def path(self, cfg: RunConfig) -> Path:
        key = run_key(cfg)
        return self.root / key[:2] / f"{key}.json"

    def load(self, cfg: RunConfig) -> dict | None:
        path = self.path(cfg)
        if not path.exists():
            return None
        try:
            entry = json.loads(path.read_text())
            ok = entry["key"] == path.stem and entry["checksum"] == _digest(entry["result"])
        except (ValueError, KeyError, TypeError):
            ok = False
        if not ok:
            print(f"icl: cache entry {path} is corrupt; recomputing it", file=sys.stderr)
            return None
        return entry["result"]

    def store(self, cfg: RunConfig, result: dict) -> Path:
        path = self.path(cfg)
        _write_atomic(path, {"key": path.stem, "checksum": _digest(result), "result": result})
        return path


def _write_atomic(path: Path, entry: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(entry, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)  # atomic: readers see the old file or the whole new one
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def source_digest(names) -> str:
    """sha256 over the bytes of these icl/ source files: part of a cached value's key, so that a
    change to the code that computes it recomputes it."""
    here = Path(__file__).resolve().parent
    return _digest({name: hashlib.sha256((here / name).read_bytes()).hexdigest() for name in sorted(names)})


def memo(cache: RunCache, kind: str, key: dict, compute, sources) -> dict:
    """A derived value (e.g. a bound) under cache.root/derived/kind/ (one level deeper than run
    entries, so it is never counted as a run), keyed by `key` and the digest of `sources`;
    computed and written atomically when missing or unreadable."""
    full = {"kind": kind, "key": key, "sources": source_digest(sources)}
    path = cache.root / "derived" / kind / f"{_digest(full)}.json"
    try:
        entry = json.loads(path.read_text())
        if entry["key"] == full and entry["checksum"] == _digest(entry["value"]):
            return entry["value"]
    except (OSError, ValueError, KeyError, TypeError):
        pass
    value = compute()
    _write_atomic(path, {"key": full, "checksum": _digest(value), "value": value})
    return value
