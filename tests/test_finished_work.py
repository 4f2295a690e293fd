"""No finished run is lost (issue 18): a shard folder of the cache that cannot be written is refused
before training, a store that fails after training still hands the results back (--json), and
notebooks without a cache leave no temporary folders behind. Every test works in its own tmp_path."""
import errno
import json
import os
import tempfile
from pathlib import Path

import pytest

from conftest import TINY
from icl import notebook as nb
from icl.cache import RunCache
from icl.cli import main
from icl.sweep import expand

pytestmark = pytest.mark.usefixtures("one_thread")

SWEEP = "".join(f"{k}: {v}\n" for k, v in {**TINY, "model": "softmax"}.items())


def sweep_file(tmp_path: Path, extra: str) -> Path:
    path = tmp_path / "sweep.yaml"
    path.write_text(SWEEP + extra)
    return path


def one_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


def read_only(monkeypatch, folder: Path) -> None:
    """`folder` refuses new files, as a read-only folder does for a user who is not root."""
    folder.chmod(0o555)
    real = tempfile.mkstemp

    def mkstemp(*args, dir=None, **kwargs):
        if dir is not None and Path(dir) == folder:
            raise PermissionError(errno.EACCES, "Permission denied")
        return real(*args, dir=dir, **kwargs)

    monkeypatch.setattr(tempfile, "mkstemp", mkstemp)


def test_an_unwritable_shard_folder_is_refused_before_training(tmp_path, capsys, monkeypatch):
    """Was a PermissionError traceback after training, with --json not written and the runs lost."""
    import icl.sweep

    params = sweep_file(tmp_path, "depths: [1, 2]\n")
    cache = RunCache(tmp_path / "runs")
    shard = cache.path(expand(icl.sweep.read_yaml(params))[1]).parent
    shard.mkdir(parents=True)
    read_only(monkeypatch, shard)
    monkeypatch.setattr(icl.sweep, "train_group", lambda *a, **k: pytest.fail("training started"))
    try:
        assert main(["sweep", str(params), "--cache", str(cache.root), "--json", str(tmp_path / "r.json"),
                     "--no-progress"]) == 2
    finally:
        shard.chmod(0o755)
    err = one_line(capsys)
    assert "cache" in err and "not writable" in err and str(shard) in err, err


def test_a_store_that_fails_after_training_still_writes_the_json(tmp_path, capsys, monkeypatch):
    def full(self, path, entry):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(RunCache, "write", full)
    out = tmp_path / "r.json"
    assert main(["sweep", str(sweep_file(tmp_path, "depths: [1, 2]\n")), "--cache", str(tmp_path / "runs"),
                 "--json", str(out), "--no-progress"]) == 0
    runs = json.loads(out.read_text())["runs"]
    assert [r["config"]["depth"] for r in runs] == [1, 2]
    warning = [line for line in capsys.readouterr().err.splitlines() if "warning" in line]
    assert len(warning) == 1 and "2 finished run(s)" in warning[0] and "No space left" in warning[0], warning


def test_notebook_runs_without_a_cache_leave_no_temporary_folder(tmp_path, monkeypatch):
    """`cache_dir: null` (ci profile, nbval, golden) made a /tmp/icl-runs-* folder per call and left it."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where mkdtemp would make them
    monkeypatch.setenv("ICL_OUTPUT_ROOT", str(tmp_path))
    declared = {"output_dir": str(tmp_path / "out"), "cache_dir": None, "threads": 0, "progress": False}
    nb.end_of_parameters(declared)
    s = nb.parameters(dict(declared))
    cfgs = expand({**TINY, "model": "softmax", "depths": [1, 2]})
    first, again = s.run(cfgs), s.run(cfgs)
    assert [r["final_loss"] for r in first] == [r["final_loss"] for r in again]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # no icl-runs-* beside it


def test_the_memory_cache_checks_entries_as_the_disk_cache_does():
    from conftest import tiny_config
    from icl.cache import MemoryCache
    from icl.train import train

    cache, cfg = MemoryCache(), tiny_config()
    assert cache.load(cfg) is None
    result = train(cfg, progress=False)
    cache.store(cfg, result)
    assert cache.load(cfg) == json.loads(json.dumps(result))
    path = cache.path(cfg)
    cache.files[path] = cache.files[path].replace('"final_loss": ', '"final_loss": 1', 1)
    assert cache.load(cfg) is None  # checksum mismatch: recomputed, never used
    assert not os.path.exists(str(cache.root))
