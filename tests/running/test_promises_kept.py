"""The weak cases of issue 56, each one line (exit status 2, no traceback) or right: `icl judge` in
bounded memory, the guard's estimates, and the streams `--json` writes to. Every test works inside
its own tmp_path."""
import os
import resource
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import ROOT

from icl.running.cli import main

pytestmark = pytest.mark.usefixtures("one_thread")


def one_line(capsys, argv, code=2) -> str:
    got = main(argv)
    err = capsys.readouterr().err.strip()
    assert got == code and len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


def curves(path, seeds: int, depths=(1, 2, 4, 8, 16, 32, 64)):
    rng = np.random.default_rng(0)
    rows = [f"{L},{s},{(0.1 + 1 / L) * np.exp(0.1 * rng.standard_normal()):.6f}" for s in range(seeds) for L in depths]
    path.write_text("depth,seed,loss\n" + "\n".join(rows) + "\n")
    return str(path)


@pytest.mark.slow
def test_judge_answers_200000_rows_within_a_minute_in_4_gb(tmp_path):
    """Was killed by the kernel at 23 GB after 210 s (a MemoryError traceback under a 4 GB limit)."""
    path = curves(tmp_path / "c.csv", 28_571)
    limit = lambda: resource.setrlimit(resource.RLIMIT_AS, (4_000_000 * 1024,) * 2)  # noqa: E731  ulimit -v 4000000
    out = subprocess.run([sys.executable, "-m", "icl", "judge", path, "--dim", "4", "--key-dim", "2"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60, preexec_fn=limit,
                         env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert out.returncode == 0 and "28571 seeds" in out.stdout, out.stderr[-2000:]


def test_judge_refuses_a_file_too_large_for_memory_in_one_line(tmp_path, capsys, monkeypatch):
    import icl.running.judge

    monkeypatch.setattr(icl.running.judge, "ROW_BYTES", 2**50)
    err = one_line(capsys, ["judge", curves(tmp_path / "c.csv", 3), "--dim", "4", "--key-dim", "2"])
    assert "memory: judging the 21 rows" in err and "fewer rows" in err


@pytest.mark.parametrize("depth", ["99999999999999999999", "9223372036854775808"])
def test_a_huge_depth_is_one_line_naming_its_row(tmp_path, capsys, depth):
    """Was a RuntimeWarning and a garbled depth (-9223372036854775808), or a 58-line traceback."""
    path = tmp_path / "c.csv"
    path.write_text(f"depth,seed,loss\n1,0,1.0\n2,0,0.5\n{depth},0,0.2\n4,0,0.3\n")
    err = one_line(capsys, ["judge", str(path), "--dim", "4", "--key-dim", "2"])
    assert "row 4" in err and "-9223372036854775808" not in err


SMALL = ["bound", "--dim", "4", "--context-length", "8", "--eval-contexts", "64", "--fit-contexts", "64", "--depths", "1"]


def test_bound_prints_its_estimate_before_the_sets_start(capsys, monkeypatch):
    """`bound --eval-sets` printed no estimate when it started (it was told only on a refusal)."""
    import icl.analysis.bounds

    def spread(*a, **k):
        assert "icl: 200,000 evaluation sets of 64 contexts on this machine: about" in capsys.readouterr().err
        raise KeyboardInterrupt  # started: stop here
    monkeypatch.setattr(icl.analysis.bounds, "held_out_spread", spread)
    assert main([*SMALL, "--eval-sets", "200000"]) == 130


@pytest.mark.slow
def test_the_eval_set_estimate_is_within_2x_of_the_sets_it_prices():
    """Was the first set alone, cold: 3-18x apart between runs of one command."""
    import time

    from icl.analysis.bounds import held_out_spread
    from icl.core.config import RunConfig
    from icl.running.timing import eval_set_seconds

    cfg = RunConfig.from_dict({"dim": 4, "context_length": 8, "eval_contexts": 64}, "bound")
    each = eval_set_seconds(cfg, 64)
    start = time.perf_counter()
    held_out_spread(cfg, 100, 64)
    assert 0.5 < each / ((time.perf_counter() - start) / 100) < 2


def test_deep_bounds_say_so_before_they_start(capsys, monkeypatch):
    """`bound --depths 1 ... 2000` was silent for 2-120 s."""
    import icl.analysis.bounds

    monkeypatch.setattr(icl.analysis.bounds, "bounds", lambda *a: (_ for _ in ()).throw(KeyboardInterrupt))
    assert main([*SMALL[:-1], "1", "2000"]) == 130
    assert "depths up to 2000: this may take minutes" in capsys.readouterr().err


def test_reproduce_prints_a_notebooks_estimate_when_it_starts(monkeypatch):
    """`reproduce` printed none when it started a long notebook (paper 02: 7.3 h by --plan)."""
    import icl.running.reproduce as rep

    name = next(iter(rep.NOTEBOOKS))
    monkeypatch.setattr(rep.plan, "check_work", lambda root, profile, names, *a: {n: 7.3 * 3600 for n in names})
    monkeypatch.setattr(rep, "run_notebook", quick_notebook)
    lines = []
    rep.run_all(ROOT, "ci", [name], "cpu", 1, log=lines.append)
    assert any("started: about 7.3 h of training left" in line for line in lines), lines


def quick_notebook(root, name, params, env):  # stands in for run_notebook in the worker
    return {"status": "ok", "seconds": 0.0, "runs_trained": 0}


# --- one line or right -------------------------------------------------------------------------


def killed_notebook(root, name, params, env):  # a worker killed by kill -9 (or the kernel's OOM killer)
    from icl.running.staging import staging_paths

    key = staging_paths(Path(root), params, name)["connection"]  # its kernel's key, as jupyter_client writes it
    key.parent.mkdir(parents=True, exist_ok=True)
    key.write_text("{}")
    os.kill(os.getpid(), 9)


@pytest.mark.slow
def test_a_killed_worker_is_one_line_and_leaves_no_kernel_key(tmp_path, capsys, monkeypatch):
    """Was a 24-line BrokenProcessPool traceback, and the kernel's 0600 key left in staging."""
    import icl.running.reproduce as rep

    names = list(rep.NOTEBOOKS)[:2]
    monkeypatch.setenv("ICL_OUTPUT_ROOT", str(tmp_path))
    monkeypatch.setattr(rep, "destinations", lambda *a: ({n: {"output_dir": str(tmp_path / "out" / n)} for n in names}, None))
    monkeypatch.setattr(rep.plan, "check_work", lambda root, profile, names, *a: {n: 0.0 for n in names})
    monkeypatch.setattr(rep, "run_notebook", killed_notebook)
    assert main(["reproduce", "--profile", "ci", "--only", *names, "--jobs", "2"]) == 1
    err = capsys.readouterr().err.strip()  # the notebooks' started lines, then one line
    assert "Traceback" not in err and err.splitlines()[-1].startswith("icl: error: a worker process was killed"), err
    assert not list(tmp_path.rglob("*.kernel.json"))
    wait_for_lock(rep.repo_root() / "outputs" / "ci" / ".staging" / ".lock")


def wait_for_lock(path, seconds: float = 60.0) -> None:
    """Until the profile's lock is free: the pool's other worker, forked while the lock was held,
    keeps it until it exits, and the next test that runs the ci profile would find it taken."""
    import fcntl
    import time

    end = time.monotonic() + seconds
    while path.exists() and time.monotonic() < end:
        with open(path) as f:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                time.sleep(0.5)


def test_a_long_name_and_a_file_for_a_folder_are_one_line(tmp_path, capsys, monkeypatch):
    """Were a 26-line OSError (a 300-character --outputs) and a 21-line NotADirectoryError
    (ICL_OUTPUT_ROOT a file)."""
    import icl.running.reproduce as rep

    monkeypatch.setattr(rep, "run_all", lambda *a, **k: pytest.fail("a notebook started"))
    only = ["reproduce", "--profile", "ci", "--only", next(iter(rep.NOTEBOOKS)), "--outputs"]
    monkeypatch.setenv("ICL_OUTPUT_ROOT", str(tmp_path))
    assert "File name too long" in one_line(capsys, [*only, str(tmp_path / ("x" * 300))])
    (tmp_path / "afile").write_text("")
    monkeypatch.setenv("ICL_OUTPUT_ROOT", str(tmp_path / "afile"))
    assert "Not a directory" in one_line(capsys, [*only, str(tmp_path / "afile" / "run")])


def test_json_to_a_stream_of_this_process_is_accepted_and_never_probed_in_dev(monkeypatch):
    """/dev/fd/3 and /proc/self/fd/1 were refused by the parent-folder probe, which as root made a
    file in /dev for /dev/stdout."""
    import tempfile

    from icl.core.config import ConfigError
    from icl.running.cli import check_output_path

    monkeypatch.setattr(tempfile, "mkstemp", lambda *a, **k: pytest.fail(f"probed {k.get('dir')}"))
    read, write = os.pipe()
    try:
        for path in (f"/dev/fd/{write}", "/proc/self/fd/1", "/dev/stdout", "-"):
            check_output_path(path)
    finally:
        os.close(read), os.close(write)
    with pytest.raises(ConfigError, match="is not open"):
        check_output_path(f"/dev/fd/{write}")  # closed now


@pytest.mark.slow
@pytest.mark.parametrize("path", ["-", "/dev/stdout"])
def test_json_to_a_closed_stdout_is_refused_before_the_work(tmp_path, path):
    """`--json -` exited 0 with the result nowhere; `--json /dev/stdout` an AttributeError after the work."""
    out = subprocess.run(f"{sys.executable} -m icl judge {curves(tmp_path / 'c.csv', 3)} --dim 4 --key-dim 2 "
                         f"--json {path} >&-", shell=True, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and "is not open" in out.stderr and "Traceback" not in out.stderr, out.stderr


def test_a_reader_that_leaves_is_not_a_traceback(tmp_path, capsys, monkeypatch):
    """`train --json - | head -c 10` was an 18-line BrokenPipeError."""
    read, write = os.pipe()
    os.close(read)
    monkeypatch.setattr(sys, "stdout", os.fdopen(write, "w"))
    assert main(["judge", curves(tmp_path / "c.csv", 3), "--dim", "4", "--key-dim", "2", "--json", "-"]) == 1
    assert "Traceback" not in capsys.readouterr().err


def test_bound_exits_1_when_its_json_is_not_where_asked(tmp_path, monkeypatch):
    """bound exited 0 (train and judge exit 1)."""
    import icl.running.cli

    monkeypatch.setattr(icl.running.cli, "write", lambda *a: None)  # it went to a fallback folder
    assert main([*SMALL, "--json", str(tmp_path / "b.json")]) == 1


def test_an_exponent_without_a_dot_is_a_number_in_a_list():
    """`-p spectra '[[1e-3, 0.0]]'` was "not a list of pairs": YAML 1.1 reads 1e-3 as a string."""
    from icl.running.sweep import load_yaml

    assert load_yaml("[[1e-3, 0.0], [2E+2, 1]]", "-p spectra") == [[0.001, 0.0], [200.0, 1]]
    assert load_yaml("e3", "-p x") == "e3"


def test_a_refusal_hint_never_names_the_run_root_marker(tmp_path, monkeypatch):
    """A run root made at one profile, given at another: the hint was 'outputs/shared2/(run root)'."""
    from icl.core.config import ConfigError
    from icl.running import paths

    monkeypatch.setenv("ICL_OUTPUT_ROOT", str(tmp_path))
    paths.make_own(tmp_path / "shared2", paths.RUN_ROOT, "quick")
    (tmp_path / "shared2" / "REPORT.md").write_text("")
    with pytest.raises(ConfigError) as err:
        paths.check_output_dir(ROOT, str(tmp_path / "shared2"), "--outputs", paths.RUN_ROOT, "ci")
    assert paths.RUN_ROOT not in str(err.value).split("give")[-1]


def test_a_cache_shard_linked_outside_is_not_written_through(tmp_path):
    """New entries went into the folder the link named, outside the cache."""
    from conftest import tiny_config

    from icl.running.cache import RunCache

    cache, cfg, outside = RunCache(tmp_path / "runs"), tiny_config(), tmp_path / "outside"
    outside.mkdir()
    cache.path(cfg).parent.parent.mkdir(parents=True)
    cache.path(cfg).parent.symlink_to(outside)
    cache.store(cfg, {"final_loss": 1.0})
    assert not any(outside.iterdir()) and cache.path(cfg).is_file() and not cache.path(cfg).parent.is_symlink()
