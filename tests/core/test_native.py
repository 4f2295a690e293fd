"""icl.core.accel.native's C kernels: bit for bit the same results with 1 and 2 threads (by construction: a
fixed split of the contexts into blocks and a fixed order of the blocks' sums); where they run
and where they fall back; the portable build; the sampler against torch's arithmetic on the
same draws; the run-cache key. That every kernel computes the plain algebra is
tests/core/test_reference.py's (test_the_kernels_compute_the_plain_algebra)."""
import ctypes
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from icl.core.accel import native
from icl.core.config import RunConfig
from icl.core.models import build, stack_order
from icl.core.reference import FACTOR, FLOOR, agreement, agrees, perturbed
from icl.core.registry import MODELS as REGISTRY
from icl.core.tasks import Draws, make_generator, sample_batch

KERNELS = ("softmax_ensemble", "context_updates", "shared_stream", "sampling")
pytestmark = pytest.mark.skipif(any(native.library(n) is None for n in KERNELS),
                                reason="no C compiler: the models use their torch path")
MODELS = ["softmax", "untied_values", "context_updates", "shared_stream"]
CALLS = ["softmax_forward", "softmax_backward", "softmax_merge", "context_forward", "context_backward",
         "stream_forward", "stream_backward", "sample", "sum_blocks"]
ULP = 2.0**-24  # float32's unit roundoff


def stack_and_batch(model, d=16, P=32, k=4, depths=(5, 2, 1), seed=1, batch=40):
    cfg = RunConfig(model=model, dim=d, context_length=P, key_dim=k, batch_size=batch, top_k=2)
    stack = perturbed(build(cfg, stack_order(model, list(depths))), seed)
    return stack, sample_batch(cfg, batch, make_generator(seed + 1, torch.device("cpu")))


def train_step(stack, batch):
    out = stack(batch)
    ((out.pred - batch.target[:, None]) ** 2).mean(0).sum().backward()


def clone(v):
    """A deep copy of a kernel call's arguments (tensors, lists, a batch's draws; the rest as is)."""
    if isinstance(v, torch.Tensor):
        return v.clone()
    if isinstance(v, (list, tuple)):
        return type(v)(clone(a) for a in v)
    if isinstance(v, Draws):
        return Draws(*(t.clone() for t in vars(v).values()))
    return v


def same(a, b) -> bool:
    """Bit for bit."""
    if isinstance(a, torch.Tensor):
        return torch.equal(a, b)
    if isinstance(a, (list, tuple)):
        return all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, Draws):
        return same(list(vars(a).values()), list(vars(b).values()))
    return a == b


@pytest.mark.parametrize("on_torch_threads", [True, False], ids=["openmp", "python-threads"])
@pytest.mark.parametrize("model", MODELS)
def test_threads_split_the_contexts_without_changing_the_result(model, on_torch_threads, monkeypatch):
    """Every kernel call of a training step (sampling, forward, backward, the blocks' sums), made
    again with the same inputs on 2 threads, gives the same bits as on 1, whether the libraries
    split their work on torch's OpenMP threads or icl.core.accel.native splits it among Python threads (the
    path of a build without OpenMP). (The step as a whole also runs torch's own products between
    the calls, which may round otherwise with other thread counts: those agree with the plain
    algebra, test_the_kernels_agree_on_two_threads.)"""
    if not on_torch_threads:
        for name in KERNELS:
            monkeypatch.setitem(native.ON_TORCH_THREADS, name, False)
    calls = []
    for name in CALLS:
        real = getattr(native, name)

        def record(*args, real=real):
            before = clone(args)
            out = real(*args)
            calls.append((real, before, clone(args), clone(out)))
            return out

        monkeypatch.setattr(native, name, record)
    torch.set_num_threads(1)
    stack, batch = stack_and_batch(model)
    train_step(stack, batch)
    assert {c[0].__name__ for c in calls} >= {"sample", "sum_blocks"}
    torch.set_num_threads(2)
    try:
        for real, before, after, out in calls:
            args = clone(before)
            again = real(*args)
            assert same(again, out) and same(args, after), real.__name__
    finally:
        torch.set_num_threads(1)


def test_kernels_built_with_openmp_run_on_torchs_threads():
    """A library built with -fopenmp loads no OpenMP runtime of its own: it shares torch's libgomp
    (one soname), so its threads are torch's. A second runtime's threads would compete with
    torch's for the cores (how a step once ran slower on 2 threads than on 1)."""
    if not Path("/proc/self/maps").exists():
        pytest.skip("no /proc/self/maps to count OpenMP runtimes in: the kernels split their work among Python threads")
    if not any((Path(torch.__file__).parent / "lib").glob("libgomp*")):
        pytest.skip("this torch brings no libgomp (the pip wheels do): the kernels may load a runtime of their own")
    built = [n for n in (*KERNELS, "normal") if native.library(n).uses_openmp()]
    if not built:
        pytest.skip("the compiler builds no OpenMP: the kernels split their work among Python threads")
    assert native.one_openmp_runtime()
    assert all(native.ON_TORCH_THREADS[n] for n in built)


@pytest.mark.slow  # 4-8 s each on a shared 2-core machine (issue 57: make test-fast under a minute)
@pytest.mark.parametrize("model", MODELS)
def test_the_kernels_agree_on_two_threads(model):
    torch.set_num_threads(2)
    try:
        stack, batch = stack_and_batch(model, batch=24)
        result = agreement(stack, batch)
    finally:
        torch.set_num_threads(1)
    assert agrees(result), result


@pytest.mark.parametrize("model", MODELS)
def test_the_kernels_run_only_where_they_can(model, monkeypatch):
    calls = []
    for name in ("softmax_forward", "context_forward", "stream_forward"):
        real = getattr(native, name)
        monkeypatch.setattr(native, name, lambda *a, real=real: calls.append(1) or real(*a))
    train_step(*stack_and_batch(model, d=8, P=16, k=2, depths=(3, 1)))
    assert calls, "a context of 16 tokens on the CPU goes through the kernel"
    calls.clear()
    train_step(*stack_and_batch(model, d=8, P=12, k=2, depths=(3, 1)))  # 12 tokens: not a multiple of 16
    assert bool(calls) == (model in ("softmax", "untied_values"))  # the controlled model's kernel takes any P
    if model != "context_updates":  # asked for the attention weights, the torch path reports them
        calls.clear()
        stack, batch = stack_and_batch(model, d=8, P=16, k=2, depths=(3, 1))
        stack(batch, attention=True)
        assert not calls
    monkeypatch.setenv("ICL_NATIVE", "0")
    train_step(*stack_and_batch(model, d=8, P=16, k=2, depths=(3, 1)))
    assert not calls


@pytest.mark.parametrize("model", MODELS)
def test_the_forward_pass_without_gradients_gives_the_same_predictions(model):
    """Without a backward pass the kernels keep nothing for it, and compute the same bits."""
    stack, batch = stack_and_batch(model, seed=3)
    with torch.no_grad():
        plain = stack(batch)
    kept = stack(batch)
    assert torch.equal(plain.pred, kept.pred.detach()) and torch.equal(plain.layer_preds, kept.layer_preds.detach())


@pytest.mark.slow
def test_without_a_compiler_the_library_is_none_and_the_models_fall_back(tmp_path, monkeypatch):
    monkeypatch.setenv("CC", str(tmp_path / "no-such-compiler"))
    monkeypatch.setattr(native, "BUILD", tmp_path / "kernels")
    native.library.cache_clear()
    try:
        assert native.library("context_updates") is None
        assert not native.usable("context_updates", 16, torch.zeros(1))
        cfg = RunConfig(model="softmax", context_length=16, dim=8, key_dim=2)
        assert native.in_use(cfg, torch.device("cpu")) == []
        batch = sample_batch(cfg, 4, make_generator(0, torch.device("cpu")))  # torch's arithmetic
        assert batch.x.shape == (4, 16, 8)
    finally:
        monkeypatch.undo()
        native.library.cache_clear()
    assert isinstance(native.library("context_updates"), ctypes.CDLL)  # the real compiler again


def test_the_run_cache_key_says_which_kernels_trained_it(monkeypatch):
    from icl.running.cache import run_key

    for model in ("softmax", "context_updates", "linear"):
        cfg = RunConfig(model=model, context_length=16, dim=8, key_dim=2)
        on = run_key(cfg)
        kernels = native.in_use(cfg, torch.device("cpu"))
        assert any(k.startswith("sampling:") for k in kernels) and (model == "linear") == (len(kernels) == 1)
        monkeypatch.setenv("ICL_NATIVE", "0")
        assert run_key(cfg) != on
        monkeypatch.delenv("ICL_NATIVE")
        assert run_key(cfg) == on


@pytest.fixture
def portable(tmp_path, monkeypatch):
    """The kernels built without -march=native (ICL_KERNEL_FLAGS=portable: the path of a machine
    without AVX-512, exp2 from the exponent bits instead of vscalefps, vectors split by the compiler)."""
    monkeypatch.setenv("ICL_KERNEL_FLAGS", "portable")
    monkeypatch.setattr(native, "BUILD", tmp_path / "kernels")
    native.library.cache_clear()
    yield tmp_path / "kernels"
    monkeypatch.undo()
    native.library.cache_clear()


@pytest.mark.slow
@pytest.mark.parametrize("model", MODELS)
def test_the_portable_build_computes_the_plain_algebra(model, portable):
    stack, batch = stack_and_batch(model, batch=24)
    result = agreement(stack, batch)
    assert list(portable.glob(f"{REGISTRY[model].kernel}-*.so")), "the portable build was used"
    assert native.BUILT_WITH[REGISTRY[model].kernel] == "portable"
    assert agrees(result), {q: r for q, r in result.items() if r["ratio"] > FACTOR}


def sampled(cfg, seed, kernels: bool, monkeypatch):
    monkeypatch.setenv("ICL_NATIVE", "1" if kernels else "0")
    return sample_batch(cfg, 64, make_generator(seed, torch.device("cpu")))


@pytest.mark.parametrize("task, changes", [("difficult", {}), ("easy", {}), ("difficult", dict(input_exponent=1.0, task_exponent=0.5)),
                                           ("difficult", dict(normalize_inputs=False, top_k=16)), ("difficult", dict(label_noise=0.1))],
                         ids=["difficult", "easy", "spectra", "raw-top16", "noise"])
def test_the_sampler_computes_what_torch_computes_from_the_same_draws(task, changes, monkeypatch):
    cfg = RunConfig(model="softmax", task=task, dim=16, context_length=64, **{"top_k": 2, **changes})
    c, t = sampled(cfg, 5, True, monkeypatch), sampled(cfg, 5, False, monkeypatch)
    # torch's float32 QR (LAPACK Householder, d = 16) and batched float32 products are off by a
    # few dozen ulps of their size (measured: rotation 50, inputs 39, teacher 25, labels 6); the
    # sampler's values are the roundings of double-precision ones. 256 ulps: FLOOR x 4.
    for name in ("x", "y", "xq", "rotation", "teacher"):
        a, b = getattr(c, name), getattr(t, name)
        assert (a - b).abs().max() <= 4 * FLOOR * b.abs().max(), name
    # The same top-k tokens: a cosine tie to float32 precision could choose another, none does here.
    assert torch.equal(c.weights, t.weights)
    rot = c.rotation.double()  # orthogonal to the rounding of its d x d entries
    eye = torch.eye(cfg.dim, dtype=torch.float64)
    assert (rot.transpose(1, 2) @ rot - eye).abs().max() <= 2 * cfg.dim * ULP


def previous_sample_batch(cfg, n, gen):
    """sample_batch as it was before the sampler (every draw and operation in its order; the draws
    float64 rounded to float32, tasks.gaussian), to check that the torch path still computes exactly that."""
    from icl.core.tasks import _project, gaussian, haar_rotations, power_spectrum, top_k_weights

    d, P = cfg.dim, cfg.context_length
    lam, omega = power_spectrum(d, cfg.input_exponent), power_spectrum(d, cfg.task_exponent)
    rot = haar_rotations(n, d, gen)
    z = gaussian(n, P, d, gen=gen)
    x = torch.einsum("bij,bpj->bpi", rot, z)
    w = torch.einsum("bij,bj->bi", rot, gaussian(n, d, gen=gen) * (omega / d).sqrt())
    xq = torch.einsum("bij,bj->bi", rot, gaussian(n, d, gen=gen) * lam.sqrt())
    x, xq = _project(x, d**0.5), _project(xq, d**0.5)
    y = torch.einsum("bpd,bd->bp", x, w)
    y = y + cfg.label_noise * gaussian(n, P, gen=gen)
    return x, y, xq, top_k_weights(x, xq, cfg.top_k), rot, w


def test_the_sampler_draws_what_torch_draws(monkeypatch):
    """The same random numbers in the same order (the generator ends in the same state), and the
    torch path computes, bit for bit, what sample_batch computed before the sampler existed."""
    cfg = RunConfig(model="softmax", dim=8, context_length=16, label_noise=0.1)
    gens = [make_generator(3, torch.device("cpu")) for _ in range(3)]
    for kernels, gen in zip(("1", "0"), gens):
        monkeypatch.setenv("ICL_NATIVE", kernels)
        batch = sample_batch(cfg, 10, gen)
    before = previous_sample_batch(cfg, 10, gens[2])
    assert torch.equal(gens[0].get_state(), gens[1].get_state()) and torch.equal(gens[1].get_state(), gens[2].get_state())
    assert all(torch.equal(a, b) for a, b in zip(before, (batch.x, batch.y, batch.xq, batch.weights, batch.rotation, batch.teacher)))


LOAD = ("from icl.core.accel import native; lib = native.library('context_updates'); "
        "print(lib is not None and hasattr(lib, 'cu_forward') and hasattr(lib, 'cu_backward'))")


def load_in_a_fresh_process(cache: Path) -> subprocess.CompletedProcess:
    """library() in its own process (a damaged library can kill it), on a kernel cache in tmp_path."""
    return subprocess.run([sys.executable, "-c", LOAD], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "ICL_KERNEL_CACHE": str(cache)})


@pytest.fixture(scope="module")
def built_kernels(tmp_path_factory) -> Path:
    """Both kernels built once into a kernel cache of this module's own."""
    cache = tmp_path_factory.mktemp("kernels")
    subprocess.run([sys.executable, "-c", "from icl.core.accel import native; native.library('context_updates'); "
                    "native.library('shared_stream')"], check=True, timeout=300, env={**os.environ, "ICL_KERNEL_CACHE": str(cache)})
    return cache


@pytest.mark.slow
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
