"""C kernels for the layers of the generalised models on the CPU (icl/kernels/*.c).

In ContextUpdates and SharedStream every (model, context) pair needs nothing from any other, so
a C loop can run all of one pair's layers with its states in L1 cache, forming each P x P
attention, using it and dropping it in one pass over its rows (the backward pass recomputes it
from two numbers per row). torch's batched kernels do the same arithmetic with a Python round
trip and a trip through memory per layer and operation, several times slower per step
(`icl bench`). They are compiled on first use with the system's C compiler (`cc`, or $CC) into
a per-user cache ($ICL_KERNEL_CACHE, default ~/.cache/icl/kernels) and called through ctypes,
which releases the GIL, so threads split the contexts.

Where there is no compiler, on a GPU, for contexts that are not a multiple of 16 tokens, or with
ICL_NATIVE=0, the models use their torch path: the same algebra, which the tests compare with
this one (tests/test_native.py).
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from pathlib import Path

import torch

KERNELS = Path(__file__).with_name("kernels")
FLAGS = ["-O3", "-march=native", "-fPIC", "-shared"]
PORTABLE_FLAGS = ["-O3", "-fPIC", "-shared"]  # for compilers that know no -march=native
BUILD = Path(os.environ.get("ICL_KERNEL_CACHE", Path.home() / ".cache" / "icl" / "kernels"))


def enabled() -> bool:
    """Whether the environment allows the kernels (ICL_NATIVE=0 switches them off)."""
    return os.environ.get("ICL_NATIVE", "1") != "0"


def _compile(source: Path, target: Path) -> bool:
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        return False
    target.parent.mkdir(parents=True, exist_ok=True)
    for flags in (FLAGS, PORTABLE_FLAGS):
        fd, tmp = tempfile.mkstemp(dir=target.parent, suffix=".so")
        os.close(fd)
        done = subprocess.run([cc, *flags, "-o", tmp, str(source), "-lm"], capture_output=True).returncode == 0
        if done:
            os.replace(tmp, target)  # atomic: processes compiling at once never load half a file
            return True
        os.unlink(tmp)
    return False


@cache
def library(name: str) -> ctypes.CDLL | None:
    """The compiled kernels of icl/kernels/<name>.c, or None where they cannot be built or loaded.
    The file name holds a hash of the source, the machine and the flags: -march=native code is
    only for the machine it was built on."""
    source = KERNELS / f"{name}.c"
    code = b"".join(f.read_bytes() for f in [source, *sorted(KERNELS.glob("*.h"))])
    key = hashlib.sha256(code + f"{platform.node()}|{platform.machine()}|{FLAGS}".encode()).hexdigest()[:16]
    target = BUILD / f"{name}-{key}.so"
    try:
        if not target.exists() and not _compile(source, target):
            return None
        return ctypes.CDLL(str(target))
    except OSError:
        return None


KERNEL_OF = {"softmax": "softmax_ensemble", "untied_values": "softmax_ensemble",
             "context_updates": "context_updates", "shared_stream": "shared_stream"}  # model -> its kernels
TOKENS_IN_LANES = ("context_updates", "shared_stream")  # kernels that need contexts of a multiple of 16 tokens


def usable(name: str, tokens: int, *tensors: torch.Tensor) -> bool:
    """Whether the kernels can take these tensors: CPU float32, kernels allowed and built, and for
    the kernels with tokens in the lanes a context of a multiple of 16 tokens."""
    return (enabled() and (tokens % 16 == 0 or name not in TOKENS_IN_LANES)
            and all(t.device.type == "cpu" and t.dtype == torch.float32 for t in tensors) and library(name) is not None)


def in_use(cfg, device: torch.device) -> bool:
    """Whether a run of this config trains through the kernels."""
    name = KERNEL_OF.get(cfg.model)
    return name is not None and device.type == "cpu" and usable(name, cfg.context_length)


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


@cache
def pool(threads: int) -> ThreadPoolExecutor:
    """One pool per thread count, kept: starting threads for every call costs more than a small call."""
    return ThreadPoolExecutor(threads, thread_name_prefix="icl-native")


def parallel(call, n: int) -> int:
    """call(part, b0, b1) for ranges of [0, n), one per torch thread; returns the number of parts."""
    ranges = split(n, torch.get_num_threads())
    if len(ranges) == 1:
        call(0, *ranges[0])
    else:
        list(pool(len(ranges)).map(lambda i: call(i, *ranges[i]), range(len(ranges))))
    return len(ranges)


def context_forward(x, QK, u, y, counts, states, prod, stats) -> None:
    """ContextRecurrence's forward pass into `states` (and, for a backward pass, `prod`, `stats`)."""
    lib = library("context_updates")
    B, P, d = x.shape
    count = torch.tensor(counts, dtype=torch.int64)
    args = [ptr(x), ptr(QK), ptr(u), ptr(y), ptr(count), len(counts), B, P, d, QK.shape[1] // 2,
            ptr(states), ptr(prod), ptr(stats)]
    parallel(lambda _, b0, b1: lib.cu_forward(*args, b0, b1), B)


def context_backward(x, QK, u, counts, states, prod, stats, grad_states) -> tuple[torch.Tensor, torch.Tensor]:
    """The gradients of ContextRecurrence with respect to QK = [Q; K] and u, from those of its states."""
    lib = library("context_updates")
    B, P, d = x.shape
    parts = len(split(B, torch.get_num_threads()))
    dQK, du = QK.new_zeros((parts,) + QK.shape), u.new_zeros(parts, *u.shape)  # one of each per thread
    count = torch.tensor(counts, dtype=torch.int64)
    args = [ptr(x), ptr(QK), ptr(u), ptr(count), len(counts), B, P, d, QK.shape[1] // 2, ptr(states), ptr(prod),
            ptr(stats), ptr(grad_states)]
    parallel(lambda i, b0, b1: lib.cu_backward(*args, ptr(dQK[i]), ptr(du[i]), b0, b1), B)
    return dQK.sum(0), du.sum(0)


def stream_forward(z0, QK, V, step, counts, dzq, zq, Z, RD, ST) -> None:
    """SharedStream's layers: the query's updates `dzq` and final states `zq` (and, for a backward
    pass, the states, reads and softmax statistics Z, RD, ST)."""
    lib = library("shared_stream")
    B, N, D = z0.shape
    count = torch.tensor(counts, dtype=torch.int64)
    args = [ptr(z0), ptr(QK), ptr(V), ptr(step), ptr(count), len(counts), B, N - 1, D, QK.shape[1] // 2,
            ptr(dzq), ptr(zq), ptr(Z), ptr(RD), ptr(ST)]
    parallel(lambda _, b0, b1: lib.ss_forward(*args, b0, b1), B)


def stream_backward(QK, V, step, counts, Z, RD, ST, grad_dzq, grad_zq) -> tuple[torch.Tensor, torch.Tensor]:
    """The gradients of SharedStream's layers with respect to QK = [Q; K] and V."""
    lib = library("shared_stream")
    T, B, D, NP = Z.shape
    parts = len(split(B, torch.get_num_threads()))
    dQK, dV = QK.new_zeros((parts,) + QK.shape), V.new_zeros((parts,) + V.shape)  # one of each per thread
    count = torch.tensor(counts, dtype=torch.int64)
    args = [ptr(QK), ptr(V), ptr(step), ptr(count), len(counts), B, NP - 16, D, QK.shape[1] // 2, ptr(Z), ptr(RD),
            ptr(ST), ptr(grad_dzq), ptr(grad_zq)]
    parallel(lambda i, b0, b1: lib.ss_backward(*args, ptr(dQK[i]), ptr(dV[i]), b0, b1), B)
    return dQK.sum(0), dV.sum(0)


def layers_last(Q: torch.Tensor, TP: int) -> torch.Tensor:
    """(T, k, d) -> (k, d, TP): the layer index in the lanes, zero beyond T."""
    return torch.nn.functional.pad(Q.permute(1, 2, 0), (0, TP - Q.shape[0])).contiguous()


def softmax_merge(QT, KT) -> torch.Tensor:
    """W (d, d, TP) = log2(e) K_t^T Q_t in lane t, from QT, KT (k, d, TP): softmax_ensemble.c's layout."""
    lib = library("softmax_ensemble")
    k, d, TP = QT.shape
    W = QT.new_empty(d, d, TP)
    parallel(lambda _, b0, b1: lib.se_merge(ptr(QT), ptr(KT), k, d, TP, ptr(W), 16 * b0, 16 * b1), TP // 16)
    return W


def softmax_forward(x, xq, y, W, c, keep: bool) -> tuple[torch.Tensor, ...]:
    """SoftmaxLayers' forward pass: g and f (B, TP) and, where `keep` (for a backward pass), GA
    (B, d, TP) = df/da; else None."""
    lib = library("softmax_ensemble")
    B, P, d = x.shape
    TP = W.shape[-1]
    g, F = x.new_empty(B, TP), x.new_empty(B, TP)
    GA = x.new_empty(B, d, TP) if keep else None
    args = [ptr(x), ptr(xq), ptr(y), ptr(W), ptr(c), P, d, TP, ptr(g), ptr(F), ptr(GA)]
    parallel(lambda _, b0, b1: lib.se_forward(*args, b0, b1), B)
    return g, F, GA


def softmax_backward(xq, c, F, GA, gg, QT, KT) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The gradients of SoftmaxLayers with respect to QT, KT (k, d, TP) and c (TP), from gg =
    dLoss/dg (B, TP): sums over contexts per fixed block of contexts, added in block order
    (independent of the number of threads)."""
    lib = library("softmax_ensemble")
    B, d, TP = GA.shape
    k = QT.shape[0]
    blocks = -(-B // lib.se_block())
    dW, dc = xq.new_empty(blocks, d, d, TP), xq.new_empty(blocks, TP)
    args = [ptr(xq), ptr(c), ptr(F), ptr(GA), ptr(gg), B, d, TP, ptr(dW), ptr(dc)]
    parallel(lambda _, k0, k1: lib.se_backward(*args, k0, k1), blocks)
    dM, dcs = sum_blocks(lib, dW), sum_blocks(lib, dc)
    dQT, dKT = torch.empty_like(QT), torch.empty_like(KT)
    parallel(lambda _, b0, b1: lib.se_unmerge(ptr(QT), ptr(KT), ptr(dM), k, d, TP, ptr(dQT), ptr(dKT), 16 * b0, 16 * b1),
             TP // 16)
    return dQT, dKT, dcs


def sum_blocks(lib, parts: torch.Tensor) -> torch.Tensor:
    """parts (blocks, ...) summed over blocks in block order, element by element (threads split
    the elements, never a sum)."""
    n = parts[0].numel()
    out = parts.new_empty(parts.shape[1:])
    parallel(lambda _, i0, i1: lib.se_sum_blocks(ptr(parts), parts.shape[0], ctypes.c_int64(n), ptr(out),
                                                ctypes.c_int64(i0), ctypes.c_int64(i1)), n)
    return out
