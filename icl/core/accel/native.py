"""C kernels for the CPU (kernels/*.c): the layers of the controlled model, of context updates and of the
shared stream, the arithmetic of sampling a batch, and its Gaussian draws (numpy's ziggurat, same bits).

No context needs anything from another, so a C loop runs all its layers with its states in L1 cache,
forming, using and dropping each attention in one pass (the backward pass recomputes it from two numbers
per row; the controlled model needs none). torch does the same arithmetic with a Python round trip and a
trip through memory per layer and operation, several times slower (`make bench`). Gradients are summed
over fixed blocks of contexts in block order (sum_blocks): results do not depend on the number of threads.

Compiled on first use with `cc` (or $CC) into a per-user cache ($ICL_KERNEL_CACHE, else ~/.cache/icl/kernels) with -march=native
(PORTABLE_FLAGS where refused, or ICL_KERNEL_FLAGS=portable), with -fopenmp where taken, and called through ctypes; with OpenMP the
contexts are split among torch's threads (kernels/threads.h), without it among Python threads (ctypes releases the GIL).

Without a compiler, on a GPU, where `runs_in_kernel` or `usable` says no, with ICL_NATIVE=0 (or a list
of the kernels allowed) or ICL_COMPILE=1, the models train through the torch lines of icl.core.layers: the same algebra,
SLOWER (said once per process, with the reason, where the kernels could not be built).
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from pathlib import Path

import torch

from ..attention import KERNEL_NONLINEARITY
from ..registry import MODELS
from . import compiled
from .ziggurat import ziggurat_tables

KERNELS = Path(__file__).with_name("kernels")
FLAGS = ["-O3", "-march=native", "-fPIC", "-shared"]
PORTABLE_FLAGS = ["-O3", "-fPIC", "-shared"]  # for compilers that know no -march=native
OPENMP = ["-fopenmp"]  # where the compiler has it (Apple's clang has not): each set is tried with it first
# ctypes searches the loader's path for a bare name
BUILD = Path(os.environ.get("ICL_KERNEL_CACHE") or Path.home() / ".cache" / "icl" / "kernels").expanduser().absolute()
SLOWER = "3x"  # a step through autograd over the kernels at the quick shapes, 1 thread: 2.7-4.7x (docs/speed.md)


def enabled(name: str) -> bool:
    """Whether the environment allows the kernel `name`: ICL_NATIVE unset or 1 allows every one, 0
    none, and a comma-separated list of names (softmax_ensemble, context_updates, shared_stream,
    sampling, normal) only those (`make bench` times each kernel against autograd that way); ICL_COMPILE=1 no model's."""
    value = os.environ.get("ICL_NATIVE", "1")
    return not compiled.steps_aside(name) and (value == "1" or (value != "0" and name in value.split(",")))


def build_flags() -> list[list[str]]:
    """The flag sets to try, best first: ICL_KERNEL_FLAGS=portable forces the portable build."""
    bases = [PORTABLE_FLAGS] if os.environ.get("ICL_KERNEL_FLAGS") == "portable" else [FLAGS, PORTABLE_FLAGS]
    return [flags for base in bases for flags in (base + OPENMP, base)]


def compiler() -> tuple[str | None, str]:
    """($CC, else cc, gcc or clang on PATH; its path, size and time: a new compiler builds afresh)."""
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    path = cc and (shutil.which(cc) or cc)
    try:
        stat = os.stat(path)
        return cc, f"{os.path.realpath(path)}:{stat.st_size}:{stat.st_mtime_ns}"
    except (OSError, TypeError):  # no compiler, or $CC names no file
        return cc, str(cc)


def _compile(cc: str, source: Path, target: Path, flags: list[str]) -> str | None:
    """None once `target` is built, else why not (one line)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, suffix=".so")
    os.close(fd)
    try:
        done = subprocess.run([cc, *flags, "-o", tmp, str(source), "-lm"], capture_output=True, text=True)
        error = None if done.returncode == 0 else (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[0][:120]
    except OSError as err:  # $CC names no program
        error = err.strerror
    if error is None:
        _write_atomically(_checksum_path(target), _checksum(Path(tmp)))  # first: a library never lacks it
        os.replace(tmp, target)  # atomic: processes compiling at once never load half a file
    else:
        os.unlink(tmp)
    return error


BUILT_WITH: dict[str, str] = {}  # kernel name -> "native" or "portable": the flags its library was built with
ON_TORCH_THREADS: dict[str, bool] = {}  # kernel name -> whether its library splits its work on torch's OpenMP threads


def _checksum(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _checksum_path(target: Path) -> Path:
    return target.with_suffix(".sha256")


def _write_atomically(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    os.fchmod(fd, 0o644)  # mkstemp makes 0600
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def _verified(target: Path) -> bool:
    """Whether `target` holds the bytes it was built with (a truncated library dies of a bus error)."""
    try:
        expected = _checksum_path(target).read_text().strip()
    except OSError:  # built before checksums were written, or the build was interrupted: rebuild
        return False
    if _checksum(target) == expected:
        return True
    print(f"icl: kernel library {target} is damaged or replaced (its checksum does not match); rebuilding it",
          file=sys.stderr)
    return False


@cache
def library(name: str) -> ctypes.CDLL | None:
    """The compiled kernels/<name>.c, or None where they cannot be built or loaded (`fell_back`). Its file
    name hashes the source, machine, compiler and flags; it is loaded only if its checksum matches; a
    failed build leaves a marker under that hash, so later processes go straight to the next flags."""
    source = KERNELS / f"{name}.c"
    code = b"".join(f.read_bytes() for f in [source, *sorted(KERNELS.glob("*.h"))])
    cc, identity = compiler()
    if cc is None:
        return fell_back(name, "no C compiler: $CC is unset and none of cc, gcc, clang is on PATH")
    why = None
    for flags in build_flags():
        key = hashlib.sha256(code + f"{platform.node()}|{platform.machine()}|{identity}|{flags}".encode()).hexdigest()[:16]
        target, failed = BUILD / f"{name}-{key}.so", BUILD / f"{name}-{key}.failed"
        try:  # a cache we cannot write or read: no kernels, never an error
            if failed.exists():
                why = f"{cc} failed to build it before: {failed.read_text().strip() or 'no message'}"
                continue
            if not (target.exists() and _verified(target)):
                why = _compile(cc, source, target, flags)
                if why is not None:
                    _write_atomically(failed, why)  # remembered for this compiler and these flags only
                    why = f"{cc} could not build it: {why}"
                    continue
            lib = ctypes.CDLL(str(target))
        except OSError as err:
            why = f"{err.strerror or err} in the kernel cache {BUILD}"
            continue
        BUILT_WITH[name] = "native" if "-march=native" in flags else "portable"
        ON_TORCH_THREADS[name] = hasattr(lib, "uses_openmp") and bool(lib.uses_openmp()) and one_openmp_runtime()
        return lib
    return fell_back(name, why)


def fell_back(name: str, why: str) -> None:
    """Say once per process, in one line, that the kernels are off, why, and what it costs in time."""
    if not _SAID:
        _SAID.append(name)
        print(f"icl: C kernels off (icl/core/accel/kernels/{name}.c: {why}); training runs about {SLOWER} slower through autograd",
              file=sys.stderr)


_SAID: list[str] = []


# kernels that need contexts of a multiple of 16 tokens (icl.core.registry names each model's kernel)
TOKENS_IN_LANES = {m.kernel for m in MODELS.values() if m.kernel_lanes}


def usable(name: str, tokens: int, *tensors: torch.Tensor) -> bool:
    """Whether the kernels can take these tensors: CPU float32, kernels allowed and built, and for
    the kernels with tokens in the lanes a context of a multiple of 16 tokens."""
    return (enabled(name) and (tokens % 16 == 0 or name not in TOKENS_IN_LANES)
            and all(t.device.type == "cpu" and t.dtype == torch.float32 for t in tensors) and library(name) is not None)


def runs_in_kernel(cfg) -> bool:
    """Whether a model of this config has a C kernel (icl.core.registry): softmax attention, and the heads it takes."""
    entry = MODELS[cfg.model]
    return entry.kernel is not None and cfg.nonlinearity == KERNEL_NONLINEARITY and (entry.kernel_heads or cfg.heads == 1)


def kernel_of(cfg) -> str | None:
    """The C kernel a model of this config trains through on a CPU (icl.core.registry), or None."""
    return MODELS[cfg.model].kernel if runs_in_kernel(cfg) else None


def in_use(cfg, device: torch.device) -> list[str]:
    """The kernels a run of this config trains through, with their builds ("softmax_ensemble:native", ...),
    sampling included (held-out sets are drawn on the CPU); not normal, whose draws are numpy's bits."""
    used = ["sampling"] if usable("sampling", 16) else []
    name = kernel_of(cfg)
    if name is not None and device.type == "cpu" and usable(name, cfg.context_length):
        used.append(name)
    return sorted(f"{n}:{BUILT_WITH[n]}" for n in used)


def ptr(t: torch.Tensor | None):
    if t is None:
        return None
    assert t.is_contiguous(), "the kernels read C-ordered tensors"
    return ctypes.c_void_p(t.data_ptr())


def split(n: int, parts: int) -> list[tuple[int, int]]:
    """[0, n) in at most `parts` contiguous ranges of near-equal size."""
    parts = max(1, min(parts, n))
    edges = [n * i // parts for i in range(parts + 1)]
    return [(a, b) for a, b in zip(edges, edges[1:])]


def one_openmp_runtime() -> bool:
    """Whether this process has one OpenMP runtime loaded (read from /proc/self/maps; False where
    that cannot be read). A kernel library built with -fopenmp shares torch's libgomp when the two
    have one soname; had it loaded a second runtime, that runtime's threads would compete with
    torch's for the cores, as the Python threads once did (2 threads slower than 1)."""
    try:
        maps = Path("/proc/self/maps").read_text()
    except OSError:
        return False
    paths = {line.split()[-1] for line in maps.splitlines() if "/" in line}
    return len({p for p in paths if Path(p).name.startswith(("libgomp", "libomp", "libiomp"))}) == 1


@cache
def pool(threads: int) -> ThreadPoolExecutor:
    """One pool per thread count, kept: starting threads for every call costs more than a small call."""
    return ThreadPoolExecutor(threads, thread_name_prefix="icl-native")


def parallel(name: str, call, n: int) -> None:
    """call(b0, b1, threads) over [0, n) with torch's number of threads: one call where the kernel
    library splits its range on torch's OpenMP threads itself, else one call per part of the range
    on a pool of Python threads."""
    threads = torch.get_num_threads()
    ranges = split(n, threads)
    if ON_TORCH_THREADS.get(name) or len(ranges) == 1:
        call(0, n, threads)
    else:
        list(pool(len(ranges)).map(lambda r: call(*r, 1), ranges))


def context_forward(x, QK, u, y, counts, states, prod, stats) -> None:
    """ContextKernel's forward pass into `states` (and, for a backward pass, `prod`, `stats`)."""
    lib = library("context_updates")
    B, P, d = x.shape
    count = torch.tensor(counts, dtype=torch.int64)
    args = [ptr(x), ptr(QK), ptr(u), ptr(y), ptr(count), len(counts), B, P, d, QK.shape[1] // 2,
            ptr(states), ptr(prod), ptr(stats)]
    parallel("context_updates", lambda *part: lib.cu_forward(*args, *part), B)


def context_backward(x, QK, u, counts, states, prod, stats, grad_states) -> tuple[torch.Tensor, torch.Tensor]:
    """The gradients of ContextKernel with respect to QK = [Q; K] and u, from those of its
    states: sums over fixed blocks of contexts, added in block order (independent of the number
    of threads)."""
    lib = library("context_updates")
    B, P, d = x.shape
    T, k2, _ = QK.shape
    parts = x.new_empty(blocks_of(lib, B), T * (k2 * d + 1))
    count = torch.tensor(counts, dtype=torch.int64)
    args = [ptr(x), ptr(QK), ptr(u), ptr(count), len(counts), B, P, d, k2 // 2, ptr(states), ptr(prod),
            ptr(stats), ptr(grad_states), ptr(parts)]
    parallel("context_updates", lambda *part: lib.cu_backward(*args, *part), parts.shape[0])
    total = sum_blocks(lib, parts)
    return total[: T * k2 * d].view(QK.shape), total[T * k2 * d :]


def stream_forward(z0, QK, V, step, counts, dzq, zq, Z, RD, ST) -> None:
    """SharedStream's layers: the query's updates `dzq` and final states `zq` (and, for a backward
    pass, the states, reads and softmax statistics Z, RD, ST)."""
    lib = library("shared_stream")
    B, N, D = z0.shape
    count = torch.tensor(counts, dtype=torch.int64)
    args = [ptr(z0), ptr(QK), ptr(V), ptr(step), ptr(count), len(counts), B, N - 1, D, QK.shape[1] // 2,
            ptr(dzq), ptr(zq), ptr(Z), ptr(RD), ptr(ST)]
    parallel("shared_stream", lambda *part: lib.ss_forward(*args, *part), B)


def stream_backward(QK, V, step, counts, Z, RD, ST, grad_dzq, grad_zq) -> tuple[torch.Tensor, torch.Tensor]:
    """The gradients of SharedStream's layers with respect to QK = [Q; K] and V: sums over fixed
    blocks of contexts, added in block order (independent of the number of threads)."""
    lib = library("shared_stream")
    T, B, D, NP = Z.shape
    n = QK.numel()
    parts = QK.new_empty(blocks_of(lib, B), n + V.numel())
    count = torch.tensor(counts, dtype=torch.int64)
    args = [ptr(QK), ptr(V), ptr(step), ptr(count), len(counts), B, NP - 16, D, QK.shape[1] // 2, ptr(Z), ptr(RD),
            ptr(ST), ptr(grad_dzq), ptr(grad_zq), ptr(parts)]
    parallel("shared_stream", lambda *part: lib.ss_backward(*args, *part), parts.shape[0])
    total = sum_blocks(lib, parts)
    return total[:n].view(QK.shape), total[n:].view(V.shape)


def blocks_of(lib, contexts: int) -> int:
    """The number of a kernel's fixed blocks of contexts (its block_size()) in `contexts`."""
    return -(-contexts // lib.block_size())


def softmax_merge(Q, K, c, QT, KT, cp, W) -> None:
    """From Q, K (T, k, d) and c (T,): QT, KT (k, d, TP) and cp (TP,) with the layer last, and W
    (d, d, TP) = log2(e) K_t^T Q_t in lane t, zero beyond T: softmax_ensemble.c's layouts."""
    lib = library("softmax_ensemble")
    T, k, d = Q.shape
    TP = W.shape[-1]
    args = [ptr(Q), ptr(K), ptr(c), T, k, d, TP, ptr(QT), ptr(KT), ptr(cp), ptr(W)]
    lib.se_merge(*args, 0, TP)  # (T k d + d^2 T / 16) products: one thread, waking a second costs more


def softmax_blocks(contexts: int) -> int:
    """The number of fixed blocks of contexts whose gradient sums softmax_backward keeps apart."""
    return blocks_of(library("softmax_ensemble"), contexts)


def softmax_forward(x, xq, y, W, QT, KT, c, g, F, GA) -> None:
    """SoftmaxLayers' forward pass into g (B, T), f (B, TP) and, where GA is given (for a backward
    pass), df/da (B, d, TP)."""
    lib = library("softmax_ensemble")
    B, P, d = x.shape
    args = [ptr(x), ptr(xq), ptr(y), ptr(W), ptr(QT), ptr(KT), QT.shape[0], ptr(c), P, d, g.shape[1], W.shape[-1],
            ptr(g), ptr(F), ptr(GA)]
    parallel("softmax_ensemble", lambda *part: lib.se_forward(*args, *part), B)


def softmax_backward(xq, c, F, GA, gg, QT, KT, parts) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The gradients of SoftmaxLayers with respect to Q, K (T, k, d) and c (TP), from gg =
    dLoss/dg (B, T): sums over contexts per fixed block of contexts (into parts, (blocks,
    d d + 1, TP)), added in block order (independent of the number of threads)."""
    lib = library("softmax_ensemble")
    B, d, TP = GA.shape
    k, T = QT.shape[0], gg.shape[1]
    args = [ptr(xq), ptr(c), ptr(F), ptr(GA), ptr(gg), B, d, T, TP, ptr(parts)]
    parallel("softmax_ensemble", lambda *part: lib.se_backward(*args, *part), parts.shape[0])
    total = sum_blocks(lib, parts)  # (d d + 1, TP)
    dQ, dK = QT.new_empty(T, k, d), QT.new_empty(T, k, d)
    lib.se_unmerge(ptr(QT), ptr(KT), ptr(total), T, k, d, TP, ptr(dQ), ptr(dK), 0, TP)  # 2 k d^2 T / 16 products: one thread
    return dQ, dK, total[-1]


def sum_blocks(lib, parts: torch.Tensor) -> torch.Tensor:
    """parts (blocks, ...) summed over blocks in block order, element by element, on one thread
    (memory-bound: a second thread costs more than it saves)."""
    n = parts[0].numel()
    out = parts.new_empty(parts.shape[1:])
    lib.sum_blocks(ptr(parts), parts.shape[0], ctypes.c_int64(n), ptr(out), ctypes.c_int64(0), ctypes.c_int64(n))
    return out


def sample(cfg, draws, lam_sqrt: torch.Tensor, omega_scale: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """icl.core.tasks.compute_batch in icl/core/accel/kernels/sampling.c: (x, y, xq, weights, rotation, teacher)."""
    lib = library("sampling")
    n, P, d = draws.inputs.shape
    easy = cfg.task == "easy"
    G, Z, WZ = draws.rotation.contiguous(), draws.inputs.contiguous(), draws.teacher.contiguous()
    query = draws.query.contiguous()
    ls = None if cfg.input_exponent == 0 else lam_sqrt.contiguous()  # lambda is exactly 1 when isotropic
    os_ = omega_scale.contiguous()
    rot, x, xq, w = G.new_empty(n, d, d), G.new_empty(n, P, d), G.new_empty(n, d), G.new_empty(n, d)
    y, weights = G.new_empty(n, P), G.new_empty(n, P)
    args = [ptr(G), ptr(Z), ptr(WZ), None if easy else ptr(query), ptr(query) if easy else None, ptr(ls), ptr(os_),
            P, d, int(cfg.normalize_inputs), cfg.top_k, ptr(rot), ptr(x), ptr(xq), ptr(w), ptr(y), ptr(weights)]
    parallel("sampling", lambda *part: lib.sample_contexts(*args, *part), n)
    return x, y, xq, weights, rot, w


def normal(seed: int, out: torch.Tensor) -> torch.Tensor:
    """numpy's Generator(PCG64(seed)).standard_normal(out.shape, dtype=float32) into out (CPU float32,
    contiguous), the same bits, from icl/core/accel/kernels/normal.c (on torch's threads: the same bits on any
    number of them)."""
    import numpy as np
    if out.device.type != "cpu" or out.dtype != torch.float32:
        raise ValueError(f"native.normal fills CPU float32 tensors, not {out.dtype} on {out.device}")
    state = np.random.PCG64(seed).state["state"]  # numpy's seeding (SeedSequence) stays numpy's
    s, inc = state["state"], state["inc"]
    w, k, f = ziggurat_tables()
    u64, lib = ctypes.c_uint64, library("normal")
    threads = torch.get_num_threads() if ON_TORCH_THREADS.get("normal") else 1
    scratch = normal_scratch(lib, out.numel()) if threads > 1 else None
    lib.normal_fill(u64(s >> 64), u64(s & (2**64 - 1)), u64(inc >> 64), u64(inc & (2**64 - 1)),
                    w.ctypes.data_as(ctypes.c_void_p), k.ctypes.data_as(ctypes.c_void_p),
                    f.ctypes.data_as(ctypes.c_void_p), ctypes.c_int64(out.numel()), ptr(out), ptr(scratch), threads)
    return out


_scratch = threading.local()  # per thread: two threads drawing at once never share one


def normal_scratch(lib, n: int) -> torch.Tensor:
    """The scratch normal_fill needs for n draws on several threads, kept from call to call (and
    grown, never shrunk): fresh memory would cost a page fault per 4 KiB on every call."""
    lib.normal_scratch.restype = ctypes.c_int64
    size = lib.normal_scratch(ctypes.c_int64(n))
    buf = getattr(_scratch, "floats", None)
    if buf is None or buf.numel() < size:
        buf = _scratch.floats = torch.empty(size)
    return buf
