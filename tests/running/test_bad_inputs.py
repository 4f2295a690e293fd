"""Hostile and mistyped inputs (issue 30): each is answered in one line with exit status 2, in under
five seconds and bounded memory, before anything trains, leaving no file behind in the temporary
folder or the working directory. Every test works inside its own tmp_path."""
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from conftest import ROOT, TINY, tiny_config

import icl.core.train
from icl.core.config import ConfigError, RunConfig, coerce
from icl.core.expansion import expand
from icl.running.cache import RunCache
from icl.running.cli import main
from icl.running.sweep import read_yaml

pytestmark = pytest.mark.usefixtures("one_thread")

FLAGS = [f"--{k.replace('_', '-')}={v}" for k, v in TINY.items()] + ["--no-progress"]
SWEEP = "".join(f"{k}: {v}\n" for k, v in {**TINY, "model": "softmax"}.items())


@pytest.fixture
def scratch(tmp_path, monkeypatch):
    """An empty working directory and an empty temporary folder, both checked to stay empty."""
    work, tmp = tmp_path / "work", tmp_path / "tmp"
    work.mkdir(), tmp.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    yield tmp_path
    assert not list(work.iterdir()) and not list(tmp.iterdir()), "files were left behind"


@pytest.fixture
def no_training(monkeypatch):
    fail = lambda *a, **k: pytest.fail("training started before the input was checked")  # noqa: E731
    monkeypatch.setattr(icl.core.train, "train", fail)
    monkeypatch.setattr(sys.modules["icl.running.sweep"], "train_finite", fail)


@pytest.fixture
def deadline():
    """Fail, not hang, where the code before the fix blocked forever (a named pipe)."""
    def expired(*_):
        raise TimeoutError("still waiting after 10 s")

    old = signal.signal(signal.SIGALRM, expired)
    signal.alarm(10)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


def refused(capsys, argv, *words) -> str:
    """main(argv) exits 2 in under 5 s with one line on standard error holding each of `words`."""
    start = time.perf_counter()
    assert main(argv) == 2
    seconds = time.perf_counter() - start
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert all(w in err for w in words), (words, err)
    assert seconds < 5, seconds
    return err


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


# --- values that reach a traceback -------------------------------------------------------------

def test_negative_threads_are_refused(capsys, scratch):
    """`-p threads -3` passed the truthiness check and reached torch.set_num_threads: a traceback."""
    refused(capsys, ["reproduce", "--profile", "ci", "--only", "01_easy_linear", "-p", "threads", "-3"],
            "threads", "-3", "from 0")


def test_a_key_dim_that_cannot_tile_dim_is_refused(capsys, scratch, no_training):
    """Was a ValueError traceback from icl.core.subspaces once training began."""
    refused(capsys, ["train", *FLAGS, "--dim=16", "--key-dim=6", "--subspace=tiled"], "subspace", "key_dim 6", "dim 16")
    assert RunConfig(dim=16, key_dim=12, subspace="tiled").key_dim == 12  # d - k divides d: allowed


@pytest.mark.parametrize("value", ['"abc"', "0", "-5", "true"])
def test_submitit_counts_are_checked_before_any_job(capsys, scratch, no_training, monkeypatch, value):
    """timeout_min "abc" or 0 went to submitit, which failed later in a traceback (or killed the job at once)."""
    import icl.running.cluster

    monkeypatch.setenv("ICL_SUBMITIT", f'{{"timeout_min": {value}}}')
    monkeypatch.setattr(icl.running.cluster, "make_executor", lambda *a: pytest.fail("a job was submitted"))
    params = write(scratch / "s.yaml", SWEEP)
    refused(capsys, ["sweep", str(params), "--cache", str(scratch / "c"), "--executor", "submitit-local"],
            "timeout_min", "integer >= 1")


@pytest.fixture
def read_only_checkout(clone):
    """The clone (conftest) mounted read-only over itself; as root only."""
    if os.geteuid() != 0:
        pytest.skip("a read-only bind mount needs root (and root ignores file modes)")
    if subprocess.run(["mount", "--bind", str(clone), str(clone)], capture_output=True).returncode:
        pytest.skip("mount --bind is not permitted here")
    try:
        subprocess.run(["mount", "-o", "remount,bind,ro", str(clone), str(clone)], check=True, capture_output=True)
        yield clone
    finally:
        subprocess.run(["umount", str(clone)], check=True)


@pytest.mark.slow
@pytest.mark.parametrize("extra", [[], ["--outputs", "outputs/v"]], ids=["lock", "outputs"])
def test_a_read_only_checkout_is_one_line(capsys, read_only_checkout, extra):
    """hold_lock and make_own raised tracebacks (Read-only file system)."""
    refused(capsys, ["reproduce", "--profile", "ci", "--only", "01_easy_linear", *extra], "Read-only file system")


# --- cache entries that are not files ------------------------------------------------------------

def test_a_cache_entry_linked_to_dev_zero_is_not_read(tmp_path, capsys):
    """A link to /dev/zero read until MemoryError."""
    cache, cfg = RunCache(tmp_path), tiny_config()
    path = cache.path(cfg)
    path.parent.mkdir(parents=True)
    path.symlink_to("/dev/zero")
    start = time.perf_counter()
    assert cache.load(cfg) is None
    assert time.perf_counter() - start < 5
    err = capsys.readouterr().err
    assert "not a regular file" in err and len(err.strip().splitlines()) == 1


def test_a_cache_entry_that_is_a_named_pipe_does_not_hang(tmp_path, capsys, deadline):
    """A named pipe waited forever for a writer."""
    cache, cfg = RunCache(tmp_path), tiny_config()
    path = cache.path(cfg)
    path.parent.mkdir(parents=True)
    os.mkfifo(path)
    assert cache.load(cfg) is None
    assert "not a regular file" in capsys.readouterr().err


def test_an_oversized_cache_entry_is_not_read(tmp_path, capsys):
    cache, cfg = RunCache(tmp_path), tiny_config()
    path = cache.path(cfg)
    path.parent.mkdir(parents=True)
    with open(path, "wb") as f:
        f.truncate(2**40)  # sparse: a terabyte that takes no disk
    assert cache.load(cfg) is None
    assert "larger than" in capsys.readouterr().err


# --- paths that would write where they must not ---------------------------------------------------

def test_an_empty_cache_path_is_refused(capsys, scratch, no_training):
    """`--cache ""` is Path(""), the working directory: the sweep filled it with key folders."""
    params = write(scratch / "s.yaml", SWEEP)
    refused(capsys, ["sweep", str(params), "--cache", ""], "--cache", "empty")
    refused(capsys, ["train", *FLAGS, "--cache", ""], "--cache", "empty")


def test_json_onto_the_sweep_file_is_refused(capsys, scratch, no_training):
    """The results overwrote the sweep file that described them."""
    params = write(scratch / "s.yaml", SWEEP)
    refused(capsys, ["sweep", str(params), "--cache", str(scratch / "c"), "--json", str(params)], "--json", "parameter file")
    os.link(params, scratch / "hard.yaml")
    refused(capsys, ["sweep", str(params), "--cache", str(scratch / "c"), "--json", str(scratch / "hard.yaml")], "--json")
    assert params.read_text() == SWEEP


# --- YAML that means something else than it says -------------------------------------------------

def test_a_key_given_twice_is_refused_naming_it(capsys, scratch, no_training):
    """YAML keeps the last of two values silently."""
    params = write(scratch / "s.yaml", SWEEP + "dim: 8\n")
    refused(capsys, ["sweep", str(params), "--cache", str(scratch / "c")], "'dim'", "twice", "line 10")
    merged = write(scratch / "m.yaml", "base: &b {depth: 1}\n")  # a merge key may be overridden on purpose
    assert read_yaml(merged) == {"base": {"depth": 1}}


@pytest.mark.parametrize("value", ['"1_0"', "'1_0'"])
def test_underscores_in_a_numeric_string_are_refused(capsys, scratch, no_training, value):
    """Python's int("1_0") is 10: a typo passed as another depth."""
    params = write(scratch / "s.yaml", SWEEP + f"depth: {value}\n")
    refused(capsys, ["sweep", str(params), "--cache", str(scratch / "c")], "depth", "'1_0'", "not an integer")
    refused(capsys, ["train", *FLAGS, "--depth=1_0"], "depth", "'1_0'")
    refused(capsys, ["train", *FLAGS, "--learning-rate=1_0.5"], "learning_rate", "not a number")


def test_minus_zero_is_the_same_run_as_zero(tmp_path):
    """An exponent of -0.0 made a second cache entry for the same run."""
    cache = RunCache(tmp_path)
    zero = tiny_config(input_exponent=0.0, task_exponent=1.0)
    assert cache.path(tiny_config(input_exponent=-0.0, task_exponent=1.0)) == cache.path(zero)
    params = write(tmp_path / "s.yaml", SWEEP + "spectra: [[-0.0, 1.0]]\n")
    [cfg] = expand(read_yaml(params))
    assert cache.path(cfg) == cache.path(zero) and json.dumps(cfg.to_dict()) == json.dumps(zero.to_dict())


def test_the_key_of_an_ordinary_config_is_what_it_was():
    """The -0.0 normalisation touches only configs that held -0.0: the config part of every other
    key is as before (its digest, recorded before the change)."""
    from icl.running.cache import _digest

    assert _digest(RunConfig().to_dict()) == "cbe7076f255724e5c4833766239becf192550bcb3e7640a2f1788d483a738200"
    assert _digest(tiny_config(input_exponent=1, task_exponent=0.5).to_dict()) == (
        "fd30f13fb4f5b8f24560b62f96a7ffeb50ca8a2cd52623cf5a25ef87830b700f")


# --- error messages show a bounded excerpt of a bad value ----------------------------------------

@pytest.mark.slow  # more than a second
def test_error_messages_show_an_excerpt_of_a_long_value(tmp_path):
    from icl.analysis.grids import check_axis

    long = "x" * 100_000
    with pytest.raises(ConfigError) as err:
        coerce("depth", long)
    assert len(str(err.value)) < 200 and "100,000 characters" in str(err.value)
    params = write(tmp_path / "s.yaml", SWEEP + "spectra: [" + ", ".join(["[1, 2, 3]"] * 10_000) + "]\n")
    with pytest.raises(ConfigError) as err:
        expand(read_yaml(params))
    assert len(str(err.value)) < 400 and "10,000 items" in str(err.value)
    with pytest.raises(ConfigError) as err:
        check_axis("depths", [0] * 50_000)
    assert len(str(err.value)) < 300 and "50,000 items" in str(err.value)
    with pytest.raises(ConfigError) as err:
        coerce("model", 10**5000)  # repr refuses an int of more than 4300 digits
    assert "5,001 digits" in str(err.value)


# The "billion laughs": levels of nine aliases each; twelve, in about 700 bytes, expand to 9^13 values.
def laughs(levels: int = 12) -> str:
    lines = ["  - &a0 [1, 1, 1, 1, 1, 1, 1, 1, 1]"]
    lines += [f"  - &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, levels + 1)]
    return "\n".join(lines) + "\n"


PROBE = """
import json, sys, time, tracemalloc
import icl.running.notebook, icl.running.sweep
from icl.running.cli import build_parser, main
build_parser()  # imports every command's module: their import is not what is measured
tracemalloc.start()
start = time.perf_counter()
status = main(sys.argv[1:])
print(json.dumps({"status": status, "seconds": time.perf_counter() - start,
                  "peak": tracemalloc.get_traced_memory()[1]}))
"""


def refused_in_a_process(tmp_path, argv, *words) -> dict:
    """As `refused`, in a process of its own (before the fix, these ran until memory ran out):
    one line, exit 2, under 5 s and 50 MB of Python memory, nothing left in its temporary folder."""
    (tmp_path / "tmp").mkdir()
    env = {**os.environ, "TMPDIR": str(tmp_path / "tmp"), "HOME": str(tmp_path), "OMP_NUM_THREADS": "1"}
    try:
        done = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, timeout=60,
                              cwd=ROOT, env=env)
    except subprocess.TimeoutExpired:
        pytest.fail("still running after 60 s")
    err = done.stderr.strip()
    assert len(err.splitlines()) == 1 and all(w in err for w in words), err
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["status"] == 2 and report["seconds"] < 5 and report["peak"] < 50e6, report
    assert not list((tmp_path / "tmp").iterdir())
    return report


@pytest.mark.slow
def test_a_yaml_bomb_sweep_file_is_refused_before_it_expands(tmp_path):
    """A 506-byte file made a 157 MB error line; a 701-byte one grew past 1.47 GB in 90 s."""
    params = write(tmp_path / "bomb.yaml", "model: softmax\nspectra:\n" + laughs())
    assert 650 <= params.stat().st_size <= 750
    refused_in_a_process(tmp_path, ["sweep", str(params), "--cache", str(tmp_path / "c")], "bomb.yaml", "aliases are expanded", "100,000")


@pytest.mark.slow
def test_a_yaml_bomb_given_with_p_is_refused_before_it_expands(tmp_path):
    """`reproduce -p spectra '<326 characters>'` grew without bound."""
    value = "[" + ", ".join(line.strip()[2:] for line in laughs(7).splitlines()) + "]"
    assert len(value) < 400
    refused_in_a_process(tmp_path, ["reproduce", "--profile", "ci", "--only", "01_easy_linear", "-p", "spectra", value],
                         "-p spectra", "aliases")
