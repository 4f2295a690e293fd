"""Shared fixtures and helpers: tiny configurations that train in a fraction of a second, and a copy
of the repository for tests that delete files or kill processes."""
import shutil
from pathlib import Path

import pytest
import simdevice
import torch

from icl.core.config import RunConfig
from icl.core.models import build
from icl.core.registry import MODELS as REGISTRY
from icl.core.tasks import make_generator, sample_batch
from icl.running import paths

# The autograd engine sizes its per-device queues once, at the first backward pass of the process:
# the simulated device (test_gpu_path) must be registered before any test trains on the CPU.
simdevice.register()

ROOT = Path(__file__).resolve().parents[1]
MODELS = tuple(REGISTRY)  # every model of icl.core.registry: a model added there is tested everywhere
ENSEMBLES = ("softmax", "shared_stream", "untied_values", "context_updates")  # models with layer_preds

# dim 6, context 12: big enough for top-k and spectra to mean something, small enough for speed.
TINY = dict(dim=6, context_length=12, batch_size=32, steps=12, eval_contexts=64, eval_points=3,
            device="cpu", learning_rate=1e-2)


# The head of a probe script run with live_memory_env(): `live_peak(run)` is the largest rise of
# the process's resident anonymous memory (not the library pages, which a busy machine may evict)
# while run() executes, sampled every millisecond. The script warms its libraries and allocator first.
PEAK_PROBE = """
import json, sys, threading, time, torch
torch.set_num_threads(1)

def anon():
    for line in open("/proc/self/status"):
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) * 1024

def live_peak(run):
    base, peak, done = anon(), [0], threading.Event()
    def watch():
        while not done.is_set():
            peak[0] = max(peak[0], anon())
            time.sleep(0.001)
    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        run()
    finally:  # a run that raises ends the probe with its traceback, not a watcher left spinning
        done.set()
        watcher.join()
    return peak[0] - base
"""


def live_memory_env() -> dict:
    """The environment of a subprocess whose peak memory is compared with an estimate: one thread,
    and glibc's mmap threshold pinned at 1 MiB. Left alone, malloc raises that threshold as large
    blocks are freed (up to 32 MiB), after which freed tensors stay in the heap and the resident size
    depends on the allocator's history: the bounds at depth 256 measured 955 MiB resident against
    263 MiB live, and 128 against 181 MiB on two machines at the default depths. Pinned, every block
    from 1 MiB up goes back when freed, so the probe measures live memory, which is what the
    estimates model (and all there is at the sizes they refuse, whose tensors are above 32 MiB)."""
    import os

    return {**os.environ, "OMP_NUM_THREADS": "1", "MALLOC_MMAP_THRESHOLD_": str(2**20)}


def tiny_config(**changes) -> RunConfig:
    """A RunConfig with tiny dimensions; keyword arguments override any field."""
    return RunConfig(**{**TINY, **changes})


@pytest.fixture(autouse=True)
def no_git_in_fast_tests(request, monkeypatch):
    """`make test-fast` starts no process: a results file's commit is asked of git only in the tests
    marked slow (one of which checks it); the others record none."""
    if request.node.get_closest_marker("slow") is None:
        monkeypatch.setattr("icl.running.files.git", lambda *args: "")


@pytest.fixture(scope="module")
def one_thread():
    """Tiny tensors gain nothing from threads, and on a busy machine idle OpenMP threads spin:
    the unit tests of the core run several times faster on one. Use with
    `pytestmark = pytest.mark.usefixtures("one_thread")`."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def tiny():
    return tiny_config


def tiny_batch(cfg: RunConfig, n: int = 8, seed: int = 0):
    return sample_batch(cfg, n, make_generator(seed, torch.device("cpu")))


def randomise(stack, seed: int = 0, scale: float = 0.5) -> None:
    """Overwrite every parameter with random values, so that no test passes only thanks to a
    symmetric initialisation (ones, identities, zeros)."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in stack.parameters():
            p.copy_(torch.randn(p.shape, generator=gen) * scale)


def built(cfg: RunConfig, depths, seed: int = 0):
    """A stack of cfg.model with the given depths and random parameters."""
    stack = build(cfg, list(depths))
    randomise(stack, seed)
    return stack


@pytest.fixture
def clone(tmp_path, monkeypatch):
    """The code of the repository in tmp_path/repo (no outputs, no .venv), as the working directory,
    with a user's own files in outputs/ and beside the repository."""
    repo = tmp_path / "repo"
    for part in ("icl", "notebooks", "params"):
        shutil.copytree(ROOT / part, repo / part, ignore=shutil.ignore_patterns("__pycache__", "*.ipynb_checkpoints"))
    shutil.copy(ROOT / "pyproject.toml", repo)
    (repo / "outputs").mkdir()
    (repo / "outputs" / "notes.txt").write_text("mine")
    (tmp_path / "precious").mkdir()
    (tmp_path / "precious" / "thesis.tex").write_text("mine")
    monkeypatch.chdir(repo)
    monkeypatch.delenv(paths.OUTPUT_ROOT_ENV, raising=False)
    return repo


def read_only(monkeypatch, folder: Path) -> None:
    """`folder` and everything below it refuse new files, wherever the clone lies and whoever runs
    the tests: by their modes for a user, and, as root (whom modes do not stop), by failing the file
    creation that every write into it goes through (tempfile.mkstemp) with EACCES, as the kernel
    would for a user."""
    import errno
    import stat
    import tempfile

    for p in [folder, *folder.rglob("*")]:
        p.chmod(p.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
    real = tempfile.mkstemp

    def mkstemp(*args, dir=None, **kwargs):
        if dir is not None and (Path(dir) == folder or folder in Path(dir).parents):
            raise PermissionError(errno.EACCES, "Permission denied")
        return real(*args, dir=dir, **kwargs)

    monkeypatch.setattr(tempfile, "mkstemp", mkstemp)


def writable_again(folder: Path) -> None:
    """Undo read_only's modes (pytest must be able to remove tmp_path)."""
    import stat

    for p in [folder, *folder.rglob("*")]:
        p.chmod(p.stat().st_mode | stat.S_IWUSR)
