"""In-context tasks with rotated power-law spectra (paper §2.1).

Every context gets its own Haar rotation O_c, so the model cannot learn fixed directions:
Sigma_c = O_c diag(lambda) O_c^T for the inputs, Omega_c = O_c diag(omega) O_c^T for the teacher.
Sampling is vectorised over contexts and runs on whatever device the generator lives on.
"""
from __future__ import annotations

import functools
import threading
from dataclasses import dataclass

import numpy as np
import torch

from .config import RunConfig

# Seeds of the held-out sets. Each training seed is scored on an evaluation set of its own
# (`eval_seed`), so that the set-to-set noise of a loss (about 2 % at 16,384 contexts,
# outputs/studies/eval_set_spread.json) enters the intervals over seeds; every depth and sweep of one seed
# shares its set, so comparisons within a seed stay paired. The validation set, which only picks
# learning rates and flags plateaus, is one for all.
EVAL_SEED = 20_261_063
VALIDATION_SEED = 11_063_2610


def eval_seed(seed: int) -> int:
    """The seed of training seed `seed`'s evaluation set (seed 0 keeps EVAL_SEED)."""
    return EVAL_SEED + 1_000_003 * int(seed)


@dataclass
class Batch:
    x: torch.Tensor  # (B, P, d) context inputs
    y: torch.Tensor  # (B, P) context labels
    xq: torch.Tensor  # (B, d) query input
    weights: torch.Tensor  # (B, P) target weights over context tokens (one-hot or 1/k on top-k)
    rotation: torch.Tensor  # (B, d, d) O_c, columns are the eigen-directions
    teacher: torch.Tensor  # (B, d) w_c

    @property
    def target(self) -> torch.Tensor:  # (B,)
        return (self.weights * self.y).sum(-1)

    def __len__(self) -> int:
        return self.x.shape[0]

    def slice(self, start: int, stop: int) -> "Batch":
        return Batch(*(t[start:stop] for t in self.tensors()))

    def tensors(self) -> tuple[torch.Tensor, ...]:
        return self.x, self.y, self.xq, self.weights, self.rotation, self.teacher


def gaussian(*shape: int, gen: torch.Generator, out: torch.Tensor | None = None) -> torch.Tensor:
    """Standard normal float32 draws that are the same bits on every CPU: torch's float32 randn
    vectorises its Box-Muller transform one way under ATEN_CPU_CAPABILITY=default and another
    under avx2 and avx512 (and its float64 draws cost 4x more), so the numbers come from numpy's
    ziggurat (PCG64), which has one code path everywhere, seeded by one integer drawn from `gen`
    (so `gen` still carries the stream). Into `out` where given; on gen's device. On the CPU the
    same bits come from icl/core/accel/kernels/normal.c, 3x faster (it was a third of a training step).
    On any other device (a GPU) torch draws there: reading the seed back and copying numpy's draws
    over would wait for the device twice per call. Those bits are the device's own (the cache
    key holds the device type); they need not match the CPU's."""
    from .accel import native  # here, not at the head: moving it would change the syntax that keys the cached runs

    if gen.device.type != "cpu":
        return torch.randn(shape, generator=gen, device=gen.device) if out is None else torch.randn(shape, generator=gen, out=out)
    seed = int(torch.randint(0, 2**62, (1,), generator=gen, device=gen.device))
    if native.usable("normal", 16):
        direct = out is not None and out.shape == shape and native.usable("normal", 16, out) and out.is_contiguous()
        z = native.normal(seed, out if direct else torch.empty(shape, dtype=torch.float32))
        return z if out is None or direct else out.copy_(z)
    z = torch.from_numpy(np.random.Generator(np.random.PCG64(seed)).standard_normal(shape, dtype=np.float32))
    return z if out is None else out.copy_(z)


def power_spectrum(dim: int, exponent: float, device=None) -> torch.Tensor:
    """k^-exponent for k = 1..dim, normalised to sum to dim (exponent 0 is isotropic)."""
    k = torch.arange(1, dim + 1, dtype=torch.float64, device=device)
    s = k ** (-float(exponent))
    return (s * dim / s.sum()).float()


def haar_rotations(n: int, dim: int, gen: torch.Generator) -> torch.Tensor:
    """n Haar-distributed orthogonal matrices: QR of a Gaussian with the signs of R fixed."""
    return orthogonal_factor(gaussian(n, dim, dim, gen=gen))


def orthogonal_factor(g: torch.Tensor) -> torch.Tensor:
    """O of g = O R with diag(R) > 0, for a batch of square matrices (n, d, d). On the CPU by
    LAPACK's QR (the committed numbers are its bits); on any other device (a GPU) by
    `cholesky_orthogonal_factor`, since cuSOLVER's QR runs one small matrix after another."""
    if g.device.type != "cpu":
        return cholesky_orthogonal_factor(g)
    q, r = torch.linalg.qr(g)
    return q * torch.sign(torch.diagonal(r, dim1=-2, dim2=-1)).unsqueeze(-2)


def cholesky_orthogonal_factor(g: torch.Tensor) -> torch.Tensor:
    """O of g = O R with diag(R) > 0 (n, d, d), by shifted Cholesky QR done three times in float64
    (Fukaya et al., SIAM J. Sci. Comput. 42, 2020): each pass is one batched product G^T G = R^T R,
    one batched Cholesky and one batched triangular solve Q = G R^-1, so the whole batch costs
    17 torch operations whatever n and d are (cuSOLVER's QR: one matrix after another). Cholesky's R
    has a positive diagonal, so O needs no sign fix and is the same Haar O as torch.linalg.qr's,
    sign-fixed: within 1e-7 of LAPACK's float64 QR, and orthogonal to 1e-7, at d up to 64 (tests/
    test_rotations.py). Why this and not the alternatives:
    - Householder QR in batched torch ops is as accurate (1e-6 in float32) but launches 10 to 25
      kernels per column: 405-1,605 operations a batch as tried at d = 16-64, against 17 here;
    - plain Cholesky QR twice needs cond(G)^2 eps < 1, about; a Gaussian d x d matrix has cond(G) > t
      with probability about 2d/t, so in float32 (measured: up to cond ~1e4) it fails on about one
      matrix in a hundred at d = 64, and in float64 (~1e8) on about a thousand of the paper
      profile's 2.4e9.
      The shift (11 (2d^2 + d) u |G|_F^2 on the Gram's diagonal, u = 2^-53) keeps the first
      Cholesky defined, and the two passes after it restore orthogonality to float64 precision,
      up to cond(G) ~ 1e13 at d = 64 (measured): ~1e-12 of the matrices fail, giving NaNs (a
      divergence), about 0.003 expected over the whole paper profile.
    No pass reads anything back (cholesky_ex, not cholesky, whose error check waits for the GPU).
    Float64 costs little on an H100-class GPU (half its float32 rate); on a consumer GPU it would
    be slow, but these products are ~1 % of a step's FLOPs."""
    a = g.double()
    d = a.shape[-1]
    gram = a.mT @ a
    diagonal = gram.diagonal(dim1=-2, dim2=-1)
    diagonal.add_((11 * (2 * d * d + d) * 2.0**-53 * diagonal.sum(-1)).unsqueeze(-1))  # sum: |G|_F^2
    q = _cholesky_pass(a, gram)
    for _ in range(2):
        q = _cholesky_pass(q, q.mT @ q)
    return q.to(g.dtype)


def _cholesky_pass(a: torch.Tensor, gram: torch.Tensor) -> torch.Tensor:
    """a R^-1 where gram = R^T R, R upper triangular with a positive diagonal."""
    r = torch.linalg.cholesky_ex(gram, upper=True).L
    return torch.linalg.solve_triangular(r, a, upper=True, left=False)


def _project(x: torch.Tensor, radius: float) -> torch.Tensor:
    return x * (radius / x.norm(dim=-1, keepdim=True))


def top_k_weights(x: torch.Tensor, xq: torch.Tensor, k: int) -> torch.Tensor:
    """1/k on the k context tokens with the highest cosine similarity to the query."""
    cos = torch.einsum("bpd,bd->bp", x, xq) / (x.norm(dim=-1) * xq.norm(dim=-1, keepdim=True))
    idx = cos.topk(k, dim=-1).indices
    return torch.zeros_like(cos).scatter_(-1, idx, 1.0 / k)


@dataclass
class Draws:
    """The Gaussian (and, for the easy task, uniform) draws of one batch, in the order drawn."""
    rotation: torch.Tensor  # (n, d, d) Gaussian: its orthogonal factor is O_c
    inputs: torch.Tensor  # (n, P, d) standard normal z: x = O diag(sqrt(lambda)) z
    teacher: torch.Tensor  # (n, d) standard normal: w = O diag(sqrt(omega / d)) z'
    query: torch.Tensor  # (n, d) standard normal (difficult task), or (n,) the copied token (easy task)


def draw(cfg: RunConfig, n: int, gen: torch.Generator, into: Draws | None = None) -> Draws:
    """The batch's draws, in their order; into the tensors of `into` where given (the same numbers)."""
    d, P, dev = cfg.dim, cfg.context_length, gen.device
    out = into or Draws(torch.empty(n, d, d, device=dev), torch.empty(n, P, d, device=dev), torch.empty(n, d, device=dev),
                        torch.empty(n, dtype=torch.int64, device=dev) if cfg.task == "easy" else torch.empty(n, d, device=dev))
    gaussian(n, d, d, gen=gen, out=out.rotation)
    gaussian(n, P, d, gen=gen, out=out.inputs)
    gaussian(n, d, gen=gen, out=out.teacher)
    if cfg.task == "easy":  # the query is a copy of a uniformly chosen context token
        torch.randint(P, (n,), generator=gen, out=out.query)
    else:
        gaussian(n, d, gen=gen, out=out.query)
    return out


@functools.cache
def spectra(dim: int, input_exponent: float, task_exponent: float, device: str) -> tuple[torch.Tensor, ...]:
    """lambda, omega, sqrt(lambda) and sqrt(omega / d) of a task, computed once (read only: they
    never leave sample_batch)."""
    lam, omega = power_spectrum(dim, input_exponent, device), power_spectrum(dim, task_exponent, device)
    return lam, omega, lam.sqrt(), (omega / dim).sqrt()


# The draws of the last batch of each shape sampled in C on this thread: only the sampler reads
# them, so the next batch of that shape draws into the same memory (a fresh MiB costs a page
# fault per 4 KiB page, every step).
_reused = threading.local()


def reused_draws(cfg: RunConfig, n: int, gen: torch.Generator) -> Draws:
    key = (n, cfg.dim, cfg.context_length, cfg.task)
    cache = _reused.__dict__.setdefault("draws", {})
    cache[key] = draw(cfg, n, gen, cache.get(key))
    return cache[key]


def sample_batch(cfg: RunConfig, n: int, gen: torch.Generator) -> Batch:
    """n fresh contexts of the task that cfg describes, drawn with gen. On the CPU the arithmetic
    after the draws runs in icl/core/accel/kernels/sampling.c (the same draws; values that agree with
    torch's to float32 rounding: see that file); elsewhere, or with ICL_NATIVE=0, in torch."""
    from .accel import native  # here, not at the head: moving it would change the syntax that keys the cached runs

    lam, omega, lam_sqrt, omega_scale = spectra(cfg.dim, cfg.input_exponent, cfg.task_exponent, str(gen.device))
    if gen.device.type == "cpu" and native.usable("sampling", 16):
        draws = reused_draws(cfg, n, gen)
        x, y, xq, weights, rot, w = native.sample(cfg, draws, lam_sqrt, omega_scale)
    else:
        x, y, xq, weights, rot, w = compute_batch(cfg, draw(cfg, n, gen), lam, omega)
    if cfg.label_noise > 0:
        y = y + cfg.label_noise * gaussian(n, cfg.context_length, gen=gen)
    return Batch(x, y, xq, weights, rot, w)


def compute_batch(cfg: RunConfig, draws: Draws, lam: torch.Tensor, omega: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """The batch's tensors (x, y, xq, weights, rotation, teacher) from its draws, in torch."""
    d, P = cfg.dim, cfg.context_length
    rot = orthogonal_factor(draws.rotation)  # (n, d, d)
    # x = O diag(sqrt(lambda)) z, w = O diag(sqrt(omega / d)) z'
    z = draws.inputs
    if cfg.input_exponent != 0:  # isotropic lambda is exactly 1: skip a pass over (n, P, d)
        z = z * lam.sqrt()
    x = torch.einsum("bij,bpj->bpi", rot, z)
    w = torch.einsum("bij,bj->bi", rot, draws.teacher * (omega / d).sqrt())
    if cfg.task == "easy":  # its closest token is itself
        pick = draws.query
        xq = x[torch.arange(len(pick), device=x.device), pick]
    else:
        xq = torch.einsum("bij,bj->bi", rot, draws.query * lam.sqrt())
    if cfg.normalize_inputs:
        # Radius sqrt(d) keeps E|x|^2 = d as for Gaussian inputs, so Sigma stays of trace d.
        x, xq = _project(x, d**0.5), _project(xq, d**0.5)
    y = torch.einsum("bpd,bd->bp", x, w)
    if cfg.task == "easy":
        weights = torch.nn.functional.one_hot(draws.query, P).to(x.dtype)
    else:
        weights = top_k_weights(x, xq, cfg.top_k)
    return x, y, xq, weights, rot, w


def make_generator(seed: int, device: torch.device) -> torch.Generator:
    gen = torch.Generator(device=device)
    gen.manual_seed(int(seed))
    return gen


# The config fields a held-out set depends on (nothing about the model or its training).
TASK_FIELDS = ("task", "top_k", "input_exponent", "task_exponent", "dim", "context_length", "normalize_inputs",
               "label_noise", "eval_contexts")


def held_out(cfg: RunConfig, device: torch.device, seed: int = EVAL_SEED) -> Batch:
    """The fixed evaluation (or validation) set: drawn on the CPU so every device sees the same.
    The last few are kept (read only): every group of a sweep on one task is scored on the same."""
    return _held_out(tuple(getattr(cfg, f) for f in TASK_FIELDS), str(device), seed)


@functools.lru_cache(maxsize=4)  # a few sets of up to ~100 MB: the tasks a notebook sweeps one after another
def _held_out(task: tuple, device: str, seed: int) -> Batch:
    cfg = RunConfig(**dict(zip(TASK_FIELDS, task)))
    batch = sample_batch(cfg, cfg.eval_contexts, make_generator(seed, torch.device("cpu")))
    return Batch(*(t.to(device) for t in batch.tensors()))


def mode_labels(batch: Batch) -> torch.Tensor:
    """Labels of teachers along each eigen-direction, w = O_c e_k: (d, B, P)."""
    return torch.einsum("bpd,bdk->kbp", batch.x, batch.rotation)
