"""icl.native's C kernels against the torch path of the same models (ICL_NATIVE=0): predictions,
per-layer predictors and every gradient, over shapes that exercise each branch of the kernels
(key widths with and without a specialised copy, feature counts that are not a multiple of the
product's row groups, one-layer models, several contexts per thread)."""
import ctypes
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from icl import native
from icl.bench import perturbed
from icl.config import RunConfig
from icl.models import build, stack_order
from icl.tasks import make_generator, sample_batch

pytestmark = pytest.mark.skipif(native.library("context_updates") is None or native.library("shared_stream") is None,
                                reason="no C compiler: the models use their torch path")

SHAPES = [  # dim, context_length, key_dim, depths
    (8, 16, 2, [3, 2, 1]),
    (16, 32, 4, [5, 2, 1]),
    (6, 16, 3, [4, 1]),  # a key width without its own inlined copy
    (16, 16, 16, [3, 1]),  # full rank: 2k + 1 = 33 rows in the products
]


def outputs(model, shape, native_on, monkeypatch, threads=1, seed=1):
    """pred, layer_preds and the gradients of every parameter, with the kernels on or off."""
    d, P, k, depths = shape
    cfg = RunConfig(model=model, dim=d, context_length=P, key_dim=k, batch_size=6, top_k=2)
    stack = perturbed(build(cfg, stack_order(model, depths)), seed)
    batch = sample_batch(cfg, cfg.batch_size, make_generator(seed + 1, torch.device("cpu")))
    monkeypatch.setenv("ICL_NATIVE", "1" if native_on else "0")
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        out = stack(batch)
        ((out.pred - batch.target[:, None]) ** 2).mean(0).sum().backward()
    finally:
        torch.set_num_threads(before)
    grads = {n: p.grad.clone() for n, p in stack.named_parameters()}
    return out.pred.detach(), out.layer_preds.detach(), grads


def rel(a, b):
    return float((a - b).abs().max() / b.abs().max().clamp_min(1e-12))


@pytest.mark.parametrize("model", ["context_updates", "shared_stream"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"d{s[0]}-P{s[1]}-k{s[2]}")
def test_the_kernels_compute_what_the_torch_path_computes(model, shape, monkeypatch):
    pred, layers, grads = outputs(model, shape, True, monkeypatch)
    ref_pred, ref_layers, ref_grads = outputs(model, shape, False, monkeypatch)
    assert rel(pred, ref_pred) < 1e-5
    assert rel(layers, ref_layers) < 1e-5
    for name, g in ref_grads.items():
        assert rel(grads[name], g) < 1e-4, name
        assert g.abs().max() > 0, name  # every parameter gets a gradient worth comparing


@pytest.mark.parametrize("model", ["context_updates", "shared_stream"])
def test_threads_split_the_contexts_without_changing_the_result(model, monkeypatch):
    one = outputs(model, SHAPES[1], True, monkeypatch, threads=1)
    two = outputs(model, SHAPES[1], True, monkeypatch, threads=2)
    assert torch.equal(one[0], two[0]) and torch.equal(one[1], two[1])  # per context: the same arithmetic
    for name in one[2]:  # the per-thread gradients are summed in another order
        assert rel(two[2][name], one[2][name]) < 1e-6, name


@pytest.mark.parametrize("model", ["context_updates", "shared_stream"])
def test_the_kernels_run_only_where_they_can(model, monkeypatch):
    calls = []
    for name in ("context_forward", "stream_forward"):
        real = getattr(native, name)
        monkeypatch.setattr(native, name, lambda *a, real=real: calls.append(1) or real(*a))
    outputs(model, SHAPES[0], True, monkeypatch)
    assert calls, "a context of 16 tokens on the CPU goes through the kernel"
    calls.clear()
    outputs(model, (8, 12, 2, [3, 1]), True, monkeypatch)  # 12 tokens: not a multiple of 16
    outputs(model, SHAPES[0], False, monkeypatch)  # ICL_NATIVE=0
    assert not calls


def test_the_forward_pass_without_gradients_gives_the_same_predictions(monkeypatch):
    for model in ("context_updates", "shared_stream"):
        d, P, k, depths = SHAPES[1]
        cfg = RunConfig(model=model, dim=d, context_length=P, key_dim=k, batch_size=6, top_k=2)
        stack = perturbed(build(cfg, stack_order(model, depths)), 3)
        batch = sample_batch(cfg, cfg.batch_size, make_generator(4, torch.device("cpu")))
        with torch.no_grad():
            plain = stack(batch).pred
        assert torch.equal(plain, stack(batch).pred.detach())


def test_without_a_compiler_the_library_is_none_and_the_models_fall_back(tmp_path, monkeypatch):
    monkeypatch.setenv("CC", str(tmp_path / "no-such-compiler"))
    monkeypatch.setattr(native, "BUILD", tmp_path / "kernels")
    native.library.cache_clear()
    try:
        assert native.library("context_updates") is None
        assert not native.usable("context_updates", 16, torch.zeros(1))
        cfg = RunConfig(model="context_updates", context_length=16, dim=8, key_dim=2)
        assert not native.in_use(cfg, torch.device("cpu"))
    finally:
        monkeypatch.undo()
        native.library.cache_clear()
    assert isinstance(native.library("context_updates"), ctypes.CDLL)  # the real compiler again


def test_the_run_cache_key_says_whether_the_kernels_trained_it(monkeypatch):
    from icl.cache import run_key

    cfg = RunConfig(model="context_updates", context_length=16, dim=8, key_dim=2)
    on = run_key(cfg)
    monkeypatch.setenv("ICL_NATIVE", "0")
    assert run_key(cfg) != on
    soft = RunConfig(model="softmax", context_length=16, dim=8)
    assert run_key(soft) == (monkeypatch.delenv("ICL_NATIVE") or run_key(soft))  # no kernel: no difference


@pytest.mark.parametrize("model", ["context_updates", "shared_stream"])
def test_the_portable_build_computes_the_same(model, tmp_path, monkeypatch):
    """Built without -march=native (the path of a machine without AVX-512: exp2 from the exponent
    bits instead of vscalefps, 16-float vectors split by the compiler)."""
    monkeypatch.setattr(native, "FLAGS", native.PORTABLE_FLAGS)
    monkeypatch.setattr(native, "BUILD", tmp_path / "kernels")
    native.library.cache_clear()
    try:
        pred, layers, grads = outputs(model, SHAPES[1], True, monkeypatch)
        assert list((tmp_path / "kernels").glob(f"{model}-*.so")), "the portable build was used"
        ref_pred, ref_layers, ref_grads = outputs(model, SHAPES[1], False, monkeypatch)
    finally:
        native.library.cache_clear()
    assert rel(pred, ref_pred) < 1e-5 and rel(layers, ref_layers) < 1e-5
    for name, g in ref_grads.items():
        assert rel(grads[name], g) < 1e-4, name


LOAD = ("from icl import native; lib = native.library('context_updates'); "
        "print(lib is not None and hasattr(lib, 'cu_forward') and hasattr(lib, 'cu_backward'))")


def load_in_a_fresh_process(cache: Path) -> subprocess.CompletedProcess:
    """library() in its own process (a damaged library can kill it), on a kernel cache in tmp_path."""
    return subprocess.run([sys.executable, "-c", LOAD], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "ICL_KERNEL_CACHE": str(cache)})


@pytest.fixture(scope="module")
def built_kernels(tmp_path_factory) -> Path:
    """Both kernels built once into a kernel cache of this module's own."""
    cache = tmp_path_factory.mktemp("kernels")
    subprocess.run([sys.executable, "-c", "from icl import native; native.library('context_updates'); "
                    "native.library('shared_stream')"], check=True, timeout=300, env={**os.environ, "ICL_KERNEL_CACHE": str(cache)})
    return cache


@pytest.mark.parametrize("damage", ["truncated", "the other kernel's"])
def test_a_damaged_kernel_library_is_rebuilt_with_a_one_line_notice(built_kernels, tmp_path, damage):
    """A truncated library was a bus error with no message; another kernel's library under this
    one's name was an `undefined symbol` traceback at its first call."""
    cache = tmp_path / "kernels"
    shutil.copytree(built_kernels, cache)
    assert load_in_a_fresh_process(cache).stderr == ""  # built with its checksum: loaded as it is
    built = next(cache.glob("context_updates-*.so"))
    good = built.read_bytes()
    if damage == "truncated":
        built.write_bytes(good[: len(good) // 2])
    else:
        built.write_bytes(next(cache.glob("shared_stream-*.so")).read_bytes())
    again = load_in_a_fresh_process(cache)
    assert again.returncode == 0 and again.stdout.strip() == "True", (again.returncode, again.stderr)
    notice = again.stderr.strip().splitlines()
    assert len(notice) == 1 and "damaged or replaced" in notice[0] and "rebuilding" in notice[0], again.stderr
    assert load_in_a_fresh_process(cache).stderr == ""  # the rebuilt library passes its check
