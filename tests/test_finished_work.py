"""No finished run is lost (issue 18): a shard folder of the cache that cannot be written is refused
before training, a store that fails after training still hands the results back (--json), and
notebooks without a cache leave no temporary folders behind. Every test works in its own tmp_path."""
import errno
import json
import os
import tempfile
from pathlib import Path

import pytest

from conftest import TINY, read_only, writable_again
from icl import notebook as nb
from icl.cache import RunCache
from icl.cli import main
from icl.sweep import expand

pytestmark = pytest.mark.usefixtures("one_thread")

SWEEP = {**TINY, "model": "softmax"}


def sweep_file(tmp_path: Path, extra: str) -> Path:
    """A sweep of tiny runs, with `extra` lines (a `learning_rates` there replaces the one rate)."""
    base = {k: v for k, v in SWEEP.items() if not (k == "learning_rate" and "learning_rates" in extra)}
    path = tmp_path / "sweep.yaml"
    path.write_text("".join(f"{k}: {v}\n" for k, v in base.items()) + extra)
    return path


def one_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


def test_an_unwritable_shard_folder_is_refused_before_training(tmp_path, capsys, monkeypatch):
    """Was a PermissionError traceback after training, with --json not written and the runs lost."""
    import icl.sweep

    params = sweep_file(tmp_path, "depths: [1, 2]\n")
    cache = RunCache(tmp_path / "runs")
    shard = cache.path(expand(icl.sweep.read_yaml(params))[1]).parent
    shard.mkdir(parents=True)
    read_only(monkeypatch, shard)
    monkeypatch.setattr(icl.sweep, "train_finite", lambda *a, **k: pytest.fail("training started"))
    try:
        assert main(["sweep", str(params), "--cache", str(cache.root), "--json", str(tmp_path / "r.json"),
                     "--no-progress"]) == 2
    finally:
        writable_again(shard)
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
    cfgs = expand({**SWEEP, "depths": [1, 2]})
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


# --- one run of a sweep diverges -------------------------------------------------------------

DIVERGING = "depths: [1, 2]\nseeds: [0, 1]\nlearning_rates: [0.01, 1.0e+30]\n"  # 8 runs, 2 groups


def test_a_diverging_run_loses_none_of_the_finished_runs_of_its_sweep(tmp_path, capsys):
    """The whole sweep aborted (0 of 8 runs stored, the good ones lost), naming no learning rate."""
    out, cache = tmp_path / "r.json", tmp_path / "runs"
    assert main(["sweep", str(sweep_file(tmp_path, DIVERGING)), "--cache", str(cache), "--json", str(out),
                 "--no-progress"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    named = sorted(line for line in err if "diverged" in line and "recorded" in line)
    assert named == sorted(f"icl: training diverged (loss is NaN or inf) at step 1 for softmax depth {L}, seed {s}, "
                           "learning_rate 1e+30; recorded in the run cache (--retry-diverged trains it again)"
                           for L in (1, 2) for s in (0, 1)), err
    runs = json.loads(out.read_text())["runs"]
    assert len(runs) == 8 and len(list(cache.rglob("*.json"))) == 8  # every run stored, diverged ones as such
    finished = [r for r in runs if not r.get("diverged")]
    assert [r["config"]["learning_rate"] for r in finished] == [0.01] * 4
    assert all(r["final_loss"] < r["initial_loss"] for r in finished)
    # The same numbers as a sweep that never had the diverging rate: the group trained again without it.
    from icl.sweep import run_sweep

    alone = run_sweep(expand({**SWEEP, "depths": [1, 2], "seeds": [0, 1]}), RunCache(tmp_path / "alone"), progress=False)
    assert [r["final_loss"] for r in finished] == [r["final_loss"] for r in alone]


def test_a_rerun_trains_nothing_again_unless_asked(tmp_path, capsys, monkeypatch):
    import icl.sweep

    params, cache = sweep_file(tmp_path, DIVERGING), str(tmp_path / "runs")
    assert main(["sweep", str(params), "--cache", cache, "--no-progress"]) == 1
    real, passes = icl.sweep.train_finite, []
    monkeypatch.setattr(icl.sweep, "train_finite", lambda g, progress=True: passes.append(len(g)) or real(g, progress))
    assert main(["sweep", str(params), "--cache", cache, "--no-progress"]) == 1
    assert passes == []  # neither the finished runs nor the diverged ones
    assert main(["sweep", str(params), "--cache", cache, "--no-progress", "--retry-diverged"]) == 1
    assert passes == [4, 4]  # each group whole, as an uninterrupted sweep trains it
    assert len(list((tmp_path / "runs").rglob("*.json"))) == 8


def test_the_cache_takes_a_diverged_record_and_checks_it(tmp_path, capsys):
    from conftest import tiny_config
    from icl.train import diverged_record

    cache, cfg = RunCache(tmp_path), tiny_config(learning_rate=1e30)
    path = cache.store(cfg, diverged_record(cfg, 3))
    assert cache.load(cfg)["diverged_step"] == 3 and RunCache(tmp_path, retry_diverged=True).load(cfg) is None
    entry = json.loads(path.read_text())
    entry["result"]["diverged_step"] = "soon"
    from icl.cache import _digest

    entry["checksum"] = _digest(entry["result"])
    path.write_text(json.dumps(entry))
    assert cache.load(cfg) is None and "diverged_step" in capsys.readouterr().err


def test_a_notebook_leaves_a_diverged_run_out_and_names_it(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("ICL_OUTPUT_ROOT", str(tmp_path))
    declared = {"output_dir": str(tmp_path / "out"), "cache_dir": None, "threads": 0, "progress": False}
    nb.end_of_parameters(declared)
    s = nb.parameters(dict(declared))
    spec = {k: v for k, v in SWEEP.items() if k != "learning_rate"}
    runs = s.run(expand({**spec, "depths": [1, 2], "learning_rates": [0.01, 1e30]}))
    assert [(r["config"]["depth"], r["config"]["learning_rate"]) for r in runs] == [(1, 0.01), (2, 0.01)]
    left_out = [line for line in capsys.readouterr().err.splitlines() if line.startswith("left out:")]
    assert len(left_out) == 2 and all("learning_rate 1e+30" in line for line in left_out)
    frame = nb.losses_frame(runs)
    assert len(frame) == 2 and frame.loss.notna().all()
