"""The C kernels' cache (icl.core.accel.native): a failed build is remembered only for the compiler and flags
that failed, the slow path is said once with its reason and cost, and an empty ICL_KERNEL_CACHE
is the default folder. Every cache lives in tmp_path."""
import ctypes
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

from icl.core.accel import native

FALSE = "/bin/false"  # a compiler that runs and fails


@pytest.fixture
def own_cache(tmp_path, monkeypatch):
    """library() on a kernel cache of this test's own, forgotten again afterwards."""
    monkeypatch.setattr(native, "BUILD", tmp_path / "kernels")
    monkeypatch.setattr(native, "_SAID", [], raising=False)
    native.library.cache_clear()
    yield tmp_path / "kernels"
    monkeypatch.undo()
    native.library.cache_clear()


@pytest.mark.slow
@pytest.mark.skipif(not Path(FALSE).exists(), reason=f"no {FALSE} here")
def test_a_broken_compiler_does_not_switch_the_kernels_off_for_a_working_one(own_cache, monkeypatch):
    """One run with CC=/bin/false left markers that kept every later run, with a working cc, on the
    torch path (5.7 s against 2.0 s for one training run), without a word."""
    monkeypatch.setenv("CC", FALSE)
    assert native.library("sampling") is None
    monkeypatch.delenv("CC")
    native.library.cache_clear()
    assert isinstance(native.library("sampling"), ctypes.CDLL)
    monkeypatch.setenv("CC", FALSE)  # the broken compiler again: still none (its markers), whatever the others built
    native.library.cache_clear()
    assert native.library("sampling") is None and list(own_cache.glob("sampling-*.failed"))


def in_a_fresh_process(code: str, env: dict, cwd: Path) -> subprocess.CompletedProcess:
    env = {**{k: v for k, v in os.environ.items() if k not in ("CC", "ICL_NATIVE")}, **env,
           "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env, cwd=cwd)


TRAIN = ("from icl.core.config import RunConfig; from icl.core.train import train_group; "
         "train_group([RunConfig(depth=L, dim=8, context_length=16, steps=3, batch_size=8, eval_contexts=16, "
         "eval_points=1, device='cpu') for L in (1, 2)], progress=False)")


@pytest.mark.slow
@pytest.mark.parametrize("compiler", [FALSE, None], ids=["broken", "none"])
def test_the_slow_path_is_said_once_in_one_line_with_its_reason_and_cost(tmp_path, compiler):
    if compiler == FALSE and not Path(FALSE).exists():
        pytest.skip(f"no {FALSE} here")
    env = {"ICL_KERNEL_CACHE": str(tmp_path / "kernels")}
    if compiler:
        env["CC"] = compiler
    else:  # no compiler anywhere on PATH
        (tmp_path / "bin").mkdir()
        env["PATH"] = str(tmp_path / "bin")
    done = in_a_fresh_process(TRAIN, env, tmp_path)
    assert done.returncode == 0, done.stderr
    said = [line for line in done.stderr.splitlines() if "kernels off" in line]
    assert len(said) == 1, done.stderr  # several kernels (sampling, normal, softmax_ensemble) fell back
    reason = FALSE if compiler else "no C compiler"
    assert reason in said[0] and f"about {native.SLOWER} slower" in said[0], said[0]


@pytest.mark.slow
def test_an_empty_kernel_cache_setting_means_the_default_folder(tmp_path):
    """ICL_KERNEL_CACHE= (set, empty) compiled into the current folder, could not load the bare file
    name it made, and left the .so files there."""
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    done = in_a_fresh_process("from icl.core.accel import native; print(native.library('sampling') is not None)",
                              {"ICL_KERNEL_CACHE": "", "HOME": str(home)}, work)
    assert done.stdout.strip() == "True", done.stderr
    assert list(work.iterdir()) == []
    assert list((home / ".cache" / "icl" / "kernels").glob("sampling-*.so"))
