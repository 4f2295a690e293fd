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

import icl.running.sweep as icl_sweep
from icl.analysis import tables
from icl.core.expansion import expand
from icl.running import notebook as nb
from icl.running.cache import RunCache
from icl.running.cli import main

pytestmark = pytest.mark.usefixtures("one_thread", "fallback_home")


@pytest.fixture
def fallback_home(tmp_path, monkeypatch):
    """The fallback folders of a result that cannot be written (icl.running.files) inside tmp_path: the
    home's (tmp_path/home) and the temporary folder's (tmp_path/tmp)."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("XDG_STATE_HOME", raising=False)
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    return tmp_path / "home" / ".local" / "state" / "icl" / "unsaved"

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
    import icl.running.sweep

    params = sweep_file(tmp_path, "depths: [1, 2]\n")
    cache = RunCache(tmp_path / "runs")
    shard = cache.path(expand(icl.running.sweep.read_yaml(params))[1]).parent
    shard.mkdir(parents=True)
    read_only(monkeypatch, shard)
    monkeypatch.setattr(icl.running.sweep, "train_finite", lambda *a, **k: pytest.fail("training started"))
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
    (tmp_path / "tmp").rmdir()
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

    from icl.core.train import train
    from icl.running.cache import MemoryCache

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
    from icl.running.sweep import run_sweep

    alone = run_sweep(expand({**SWEEP, "depths": [1, 2], "seeds": [0, 1]}), RunCache(tmp_path / "alone"), progress=False)
    assert [r["final_loss"] for r in finished] == [r["final_loss"] for r in alone]


def test_a_rerun_trains_nothing_again_unless_asked(tmp_path, capsys, monkeypatch):
    import icl.running.sweep

    params, cache = sweep_file(tmp_path, DIVERGING), str(tmp_path / "runs")
    assert main(["sweep", str(params), "--cache", cache, "--no-progress"]) == 1
    real, passes = icl.running.sweep.train_finite, []
    monkeypatch.setattr(icl.running.sweep, "train_finite", lambda g, progress=True: passes.append(len(g)) or real(g, progress))
    assert main(["sweep", str(params), "--cache", cache, "--no-progress"]) == 1
    assert passes == []  # neither the finished runs nor the diverged ones
    assert main(["sweep", str(params), "--cache", cache, "--no-progress", "--retry-diverged"]) == 1
    assert passes == [4, 4]  # each group whole, as an uninterrupted sweep trains it
    assert len(list((tmp_path / "runs").rglob("*.json"))) == 8


def test_the_cache_takes_a_diverged_record_and_checks_it(tmp_path, capsys):
    from conftest import tiny_config

    from icl.core.train import diverged_record

    cache, cfg = RunCache(tmp_path), tiny_config(learning_rate=1e30)
    path = cache.store(cfg, diverged_record(cfg, 3))
    assert cache.load(cfg)["diverged_step"] == 3 and RunCache(tmp_path, retry_diverged=True).load(cfg) is None
    entry = json.loads(path.read_text())
    entry["result"]["diverged_step"] = "soon"
    from icl.running.cache import _digest

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
    frame = tables.losses_frame(runs)
    assert len(frame) == 2 and frame.loss.notna().all()


# --- a full disk (issue 30): nothing finished is lost ------------------------------------------

@pytest.fixture
def full_disk(tmp_path):
    """A 64 KiB file system at tmp_path/full, filled up, holding an earlier r.json; as root only."""
    import subprocess

    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    full = tmp_path / "full"
    full.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(full)], capture_output=True).returncode:
        pytest.skip("mount -t tmpfs is not permitted here")
    try:
        (full / "r.json").write_text('{"earlier": "results"}')
        fd = os.open(full / "filler", os.O_WRONLY | os.O_CREAT)
        try:
            while os.write(fd, b"\0" * 4096):
                pass
        except OSError as err:
            assert err.errno == errno.ENOSPC
        finally:
            os.close(fd)
        yield full
    finally:
        subprocess.run(["umount", str(full)], check=True)


def rescued(folder: Path) -> list[Path]:
    return sorted(folder.iterdir()) if folder.is_dir() else []


@pytest.mark.slow
def test_train_json_on_a_full_disk_keeps_the_result_and_the_earlier_file(full_disk, fallback_home, capsys):
    """Was 12 s of training, then a traceback and an empty file (the earlier one truncated)."""
    flags = [f"--{k.replace('_', '-')}={v}" for k, v in SWEEP.items()] + ["--no-progress", "--yes"]
    assert main(["train", *flags, "--json", str(full_disk / "r.json")]) == 1  # the result is not where asked
    assert (full_disk / "r.json").read_text() == '{"earlier": "results"}'  # never truncated
    [saved] = rescued(fallback_home)
    assert saved.name.endswith("-r.json") and json.loads(saved.read_text())["final_loss"] > 0
    warning = [line for line in capsys.readouterr().err.splitlines() if "warning" in line]
    assert len(warning) == 1 and str(saved) in warning[0] and "No space left" in warning[0], warning


@pytest.mark.slow
def test_sweep_json_on_a_full_disk_loses_no_finished_run(full_disk, fallback_home, tmp_path, capsys):
    """Was 4 of 6 finished runs lost: the cache could not take them, then --json crashed half written."""
    params = sweep_file(tmp_path, "depths: [1, 2, 3]\nseeds: [0, 1]\n")
    cache = full_disk / "runs"
    assert main(["sweep", str(params), "--cache", str(cache), "--json", str(full_disk / "r.json"), "--yes",
                 "--no-progress"]) == 1
    assert (full_disk / "r.json").read_text() == '{"earlier": "results"}'
    saved = rescued(fallback_home)  # their time stamps may fall in two seconds: pick them by name
    [json_file] = [p for p in saved if p.name.endswith("-r.json")]
    [runs] = [p for p in saved if p.name.endswith("-runs")]
    assert len(saved) == 2
    results = json.loads(json_file.read_text())["runs"]
    spare = RunCache(runs)
    cfgs = expand(icl_sweep.read_yaml(params))
    assert len(results) == 6 and [spare.load(c) for c in cfgs] == results  # every run, in both
    warnings = [line for line in capsys.readouterr().err.splitlines() if "warning" in line]
    assert len(warnings) == 2 and str(runs) in warnings[0] and str(json_file) in warnings[1], warnings
    # A rerun with the rescued entries copied into a cache trains nothing.
    import shutil

    shutil.copytree(runs, tmp_path / "again")
    assert main(["sweep", str(params), "--cache", str(tmp_path / "again"), "--no-progress"]) == 0
    assert "to train" not in capsys.readouterr().err


@pytest.mark.slow
def test_a_json_larger_than_the_free_space_is_refused_before_training(full_disk, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(icl_sweep, "train_finite", lambda *a, **k: pytest.fail("training started"))
    params = sweep_file(tmp_path, "depths: [1, 2]\n")
    assert main(["sweep", str(params), "--cache", str(tmp_path / "runs"), "--json", str(full_disk / "r.json"),
                 "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--json" in err and "free" in err, err


def test_where_no_fallback_folder_takes_it_the_json_goes_to_standard_output(tmp_path, capsys, monkeypatch):
    from icl.running import files

    monkeypatch.setattr(files, "fallback_folders", lambda: [(tmp_path / "a_file" / "x", "nowhere")])
    (tmp_path / "a_file").write_text("")
    assert files.write_json({"final_loss": 0.5}, tmp_path / "a_file" / "r.json") is None
    out, err = capsys.readouterr()
    assert json.loads(out) == {"final_loss": 0.5} and "standard output" in err


def test_the_json_size_bound_holds_for_every_model():
    """files.json_bytes bounds what --json writes (and, ten times over, what a cache entry may hold)."""
    from conftest import MODELS, tiny_config

    from icl.core.train import train
    from icl.running.files import json_bytes

    for model in MODELS:
        cfg = tiny_config(model=model, track_modes=True, track_focus=True, depth=3)
        text = json.dumps(train(cfg, progress=False), indent=1)
        assert len(text) <= json_bytes([cfg]), (model, len(text), json_bytes([cfg]))
