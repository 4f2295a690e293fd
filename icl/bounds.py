"""Reference predictors of the softmax model from the task alone, no training (M8 of the plan).

Why they matter: a controlled softmax model predicts `c * mean_l sum_mu A^l_{q,mu} y_mu`. With
full-rank layers each A^l can be the softmax of the cosine itself, so its best single layer is
bounded by the best *isotropic* softmax of the cosine, and an ensemble of such layers by the best
mixture of temperatures. With rank-limited layers (key_dim < dim) each layer sees the similarity
through its own subspace; the random-subspace curve is what averaging L such layers gives with no
learning at all. Three predictors:

- **softmax bound** `f_beta = sum_mu softmax_mu(beta cos(x_q, x_mu)) y_mu`, best beta, best readout;
- **mixture bound** the best non-negative combination of `f_beta` over a grid of beta;
- **random-subspace curve** the mean of L layers, layer l taking the cosine inside a fixed random
  key_dim-dimensional subspace U_l (the contexts' Haar rotations make a fixed U_l a random one for
  every context), best beta per depth, best readout.

Every beta, weight and readout is fitted on FIT_SEED contexts and scored on the run's held-out
evaluation contexts (the very set every trained model is scored on), so a bound and a trained
loss are a paired comparison. Losses are relative, `E[(y_hat - y*)^2] / E[y*^2]`.
"""
from __future__ import annotations

import math
import sys
import time

import numpy as np
import torch
from scipy.optimize import minimize_scalar, nnls

from .config import ConfigError, RunConfig
from .tasks import Batch, held_out, make_generator, sample_batch

FIT_SEED = 7_777_2610  # the contexts the betas and readouts are fitted on (not the evaluation set)
BETAS = np.concatenate([[0.0], np.geomspace(0.3, 600.0, 47)])  # mixture grid; 0 = plain label mean
SUBSPACE_BETAS = np.geomspace(0.5, 300.0, 20)  # temperatures tried for the random-subspace curve
SUBSPACE_SEED = 123_457  # the random subspaces U_l
MAX_BLOCKS = 16  # depth L < L_max is scored on up to this many disjoint blocks of L layers
CHUNK = 256  # contexts per pass when layers are many: bounds memory, not results


# ---------------------------------------------------------------- the pieces


def cosines(batch: Batch, bases: torch.Tensor | None = None) -> torch.Tensor:
    """cos(x_q, x_mu): (B, P); or inside each subspace of `bases` (S, d, k): (B, S, P)."""
    x, xq = batch.x, batch.xq
    if bases is None:
        num = torch.einsum("bpd,bd->bp", x, xq)
        return num / (x.norm(dim=-1) * xq.norm(dim=-1, keepdim=True))
    px = torch.einsum("bpd,sdk->bspk", x, bases)  # (B, S, P, k)
    pq = torch.einsum("bd,sdk->bsk", xq, bases)  # (B, S, k)
    num = torch.einsum("bspk,bsk->bsp", px, pq)
    return num / (px.norm(dim=-1) * pq.norm(dim=-1, keepdim=True)).clamp_min(1e-12)


def softmax_reads(cos: torch.Tensor, y: torch.Tensor, betas) -> torch.Tensor:
    """sum_mu softmax_mu(beta cos) y_mu for every beta: cos (B, ..., P), y (B, P) -> (G, B, ...)."""
    yy = y.view(y.shape[0], *[1] * (cos.dim() - 2), y.shape[1])
    return torch.stack([(torch.softmax(float(b) * cos, dim=-1) * yy).sum(-1) for b in betas])


def relative_loss(pred: np.ndarray, target: np.ndarray) -> float:
    return float(np.mean((pred - target) ** 2) / np.mean(target**2))


def readout(f: np.ndarray, target: np.ndarray) -> float:
    """The least-squares scalar r of y_hat = r f."""
    return float(f @ target / max(f @ f, 1e-30))


def random_bases(n: int, dim: int, key_dim: int, seed: int = SUBSPACE_SEED) -> torch.Tensor:
    """n orthonormal d x k bases of random subspaces (QR of Gaussians): (n, d, k)."""
    g = torch.randn(n, dim, key_dim, generator=torch.Generator().manual_seed(seed))
    return torch.linalg.qr(g).Q


def contexts(cfg: RunConfig, n_fit: int) -> tuple[Batch, Batch]:
    """(fit set, evaluation set): the evaluation set is the trained runs' held-out set."""
    fit = sample_batch(cfg, n_fit, make_generator(FIT_SEED, torch.device("cpu")))
    return fit, held_out(cfg, torch.device("cpu"))


# ---------------------------------------------------------------- the bounds


def _np(t: torch.Tensor) -> np.ndarray:
    return t.double().numpy()


def softmax_bound(fit: Batch, ev: Batch) -> dict:
    """Best single isotropic softmax of the cosine: beta on the grid, then refined in log beta."""
    cf, ce, tf, te = cosines(fit), cosines(ev), _np(fit.target), _np(ev.target)

    def fit_loss(beta: float) -> float:
        f = _np(softmax_reads(cf, fit.y, [beta])[0])
        return relative_loss(readout(f, tf) * f, tf)

    grid = [fit_loss(b) for b in BETAS]
    best = int(np.argmin(grid))
    beta = float(BETAS[best])
    if 0 < best < len(BETAS) - 1:  # refine between the grid neighbours
        lo, hi = math.log(BETAS[best - 1] if best > 1 else BETAS[1] / 2), math.log(BETAS[best + 1])
        sol = minimize_scalar(lambda t: fit_loss(math.exp(t)), bounds=(lo, hi), method="bounded",
                              options={"xatol": 1e-3})
        beta = math.exp(sol.x) if sol.fun < grid[best] else beta
    ff, fe = (_np(softmax_reads(c, b.y, [beta])[0]) for c, b in ((cf, fit), (ce, ev)))
    r = readout(ff, tf)
    return {"single": relative_loss(r * fe, te), "beta": beta, "readout": r, "beta_at_grid_edge":
            best in (0, len(BETAS) - 1)}


def mixture_bound(fit: Batch, ev: Batch, extra_beta: float | None = None) -> dict:
    """Best non-negative combination of isotropic softmaxes over BETAS (plus `extra_beta`)."""
    betas = np.sort(np.append(BETAS, [] if extra_beta is None else [extra_beta]))
    ff = _np(softmax_reads(cosines(fit), fit.y, betas)).T  # (B, G)
    fe = _np(softmax_reads(cosines(ev), ev.y, betas)).T
    w, _ = nnls(ff, _np(fit.target))
    used = {f"{b:.4g}": float(x) for b, x in zip(betas, w) if x > 0}
    return {"mixture": relative_loss(fe @ w, _np(ev.target)), "mixture_weights": used}


def linear_reference(fit: Batch, ev: Batch) -> float:
    """Best isotropic linear-attention predictor r (1/P) sum_mu (x_q . x_mu) y_mu."""
    lin = lambda b: _np(torch.einsum("bpd,bd,bp->b", b.x, b.xq, b.y) / b.x.shape[1])
    r = readout(lin(fit), _np(fit.target))
    return relative_loss(r * lin(ev), _np(ev.target))


def _layer_reads(batch: Batch, bases: torch.Tensor) -> torch.Tensor:
    """Every layer's softmax read at every SUBSPACE_BETAS temperature: (G, B, S)."""
    parts = [softmax_reads(cosines(batch.slice(i, i + CHUNK), bases), batch.y[i:i + CHUNK], SUBSPACE_BETAS)
             for i in range(0, len(batch), CHUNK)]
    return torch.cat(parts, dim=1)


def _block_means(reads: torch.Tensor, depth: int) -> np.ndarray:
    """Mean over each of up to MAX_BLOCKS disjoint blocks of `depth` layers: (G, blocks * B)."""
    blocks = min(MAX_BLOCKS, reads.shape[-1] // depth)
    means = reads[..., : blocks * depth].unflatten(-1, (blocks, depth)).mean(-1)  # (G, B, blocks)
    return _np(means.transpose(1, 2).flatten(1))


def random_subspace_curve(fit: Batch, ev: Batch, key_dim: int, depths) -> dict:
    """Loss of the mean of L untrained random-subspace softmax layers, best beta and readout per
    depth (fitted on `fit`, scored on `ev`), for every L in `depths`."""
    depths = sorted({int(L) for L in depths})
    bases = random_bases(max(depths), fit.x.shape[-1], key_dim)
    rf, re_ = _layer_reads(fit, bases), _layer_reads(ev, bases)
    losses, betas = {}, {}
    for L in depths:
        mf, me = _block_means(rf, L), _block_means(re_, L)
        tf = np.tile(_np(fit.target), mf.shape[1] // len(fit))  # blocks are stacked block-major
        te = np.tile(_np(ev.target), me.shape[1] // len(ev))
        fit_losses = [relative_loss(readout(f, tf) * f, tf) for f in mf]
        g = int(np.argmin(fit_losses))
        losses[L] = relative_loss(readout(mf[g], tf) * me[g], te)
        betas[L] = float(SUBSPACE_BETAS[g])
    return {"random_subspace": losses, "random_subspace_beta": betas}


def bounds(cfg: RunConfig, depths=(1, 2, 4, 8, 16, 32, 64), fit_contexts: int = 2048, cache=None) -> dict:
    """All reference predictors for the task `cfg` describes, at cfg.resolved_key_dim; read from
    (or written to) `cache` (a RunCache) when one is given."""
    if cache is not None:
        from .cache import memo

        return _int_depths(memo(cache, "bounds", {"config": {k: getattr(cfg, k) for k in BOUND_KEYS}, "key_dim": cfg.resolved_key_dim,
                                     "depths": sorted({int(L) for L in depths}), "fit_contexts": fit_contexts},
                                lambda: bounds(cfg, depths, fit_contexts), SOURCES))
    check_bound_fits(cfg, depths, fit_contexts)
    start = time.perf_counter()
    fit, ev = contexts(cfg, fit_contexts)
    single = softmax_bound(fit, ev)
    out = {**single, **mixture_bound(fit, ev, extra_beta=single["beta"]), "linear": linear_reference(fit, ev),
           **random_subspace_curve(fit, ev, cfg.resolved_key_dim, depths)}
    return {"config": {k: getattr(cfg, k) for k in BOUND_KEYS}, "key_dim": cfg.resolved_key_dim,
            **out, "seconds": round(time.perf_counter() - start, 2)}


def bound_bytes(cfg: RunConfig, depths, fit_contexts: int) -> int:
    """Estimated peak of `bounds` (float32, float64 where numpy takes over): the two context sets, kept
    throughout, and the larger of drawing one, the mixture's reads over BETAS and the random-subspace
    reads (every layer at every SUBSPACE_BETAS, both sets, chunks of CHUNK contexts)."""
    from .memory import FLOAT, batch_floats

    d, P, k, E, n = cfg.dim, cfg.context_length, cfg.resolved_key_dim, cfg.eval_contexts, fit_contexts
    S, B = max(int(L) for L in depths), n + E
    kept = B * (P * d + 2 * P + d * d + 2 * d)
    draw = batch_floats(cfg, max(n, E))
    mixture = 5 * len(BETAS) * B + 3 * max(n, E) * P  # reads, their float64 copies, one softmax
    # one chunk's projected inputs (C, S, P, k) and einsum's copy of them, cosines and softmaxes (C, S, P)
    chunk = min(CHUNK, max(n, E)) * S * (2 * P * k + 6 * P + k + 2 * len(SUBSPACE_BETAS))
    subspace = 4 * len(SUBSPACE_BETAS) * B * S + chunk + 4 * len(SUBSPACE_BETAS) * B * min(MAX_BLOCKS, S)
    return FLOAT * (kept + max(draw, mixture, subspace))


def check_bound_fits(cfg: RunConfig, depths, fit_contexts: int) -> None:
    """ConfigError (one line: the estimate and the limit) if the bounds cannot fit in memory."""
    from .memory import check_bytes

    check_bytes(bound_bytes(cfg, depths, fit_contexts), "cpu",
                f"the bounds at dim {cfg.dim}, context_length {cfg.context_length}, eval_contexts {cfg.eval_contexts}, "
                f"fit_contexts {fit_contexts} and depths up to {max(depths)} need about {{need}}",
                "lower dim, context_length, eval_contexts, --fit-contexts or --depths")


def _int_depths(b: dict) -> dict:
    """Depth-keyed curves keep int keys after a JSON round trip through the cache."""
    return {**b, **{k: {int(L): v for L, v in b[k].items()} for k in ("random_subspace", "random_subspace_beta")}}


# The source files a bound's value depends on (the cache recomputes when one of them changes).
SOURCES = ("bounds",)  # and the icl modules it imports


def table(results) -> "pd.DataFrame":
    """One row per `bounds` result: its task, rank and the numbers (random-subspace curve as
    subspace_L<depth> columns)."""
    import pandas as pd

    rows = [{**{k: b["config"][k] for k in ("dim", "context_length", "top_k", "input_exponent", "task_exponent")},
             "key_dim": b["key_dim"], "single_bound": b["single"], "beta": b["beta"], "mixture_bound": b["mixture"],
             "linear_reference": b["linear"], **{f"subspace_L{L}": v for L, v in b["random_subspace"].items()}}
            for b in results]
    return pd.DataFrame(rows)


# The config fields a bound depends on (the task and the evaluation set; nothing about training).
BOUND_KEYS = ("task", "top_k", "input_exponent", "task_exponent", "dim", "context_length", "normalize_inputs",
              "label_noise", "eval_contexts", "key_dim")


# ---------------------------------------------------------------- `python -m icl bound`


def add_arguments(p) -> None:
    from .cli import add_config_flags

    add_config_flags(p, only=BOUND_KEYS)
    p.add_argument("--depths", type=int, nargs="+", default=[1, 2, 4, 8, 16, 32, 64],
                   help="depths of the random-subspace curve (default: 1 2 4 ... 64)")
    p.add_argument("--fit-contexts", type=int, default=2048, help="contexts the betas and readouts are fitted on")
    p.add_argument("--json", metavar="PATH", help="write the bounds as JSON to PATH ('-' for standard output)")


def run(args) -> int:
    from .cli import check_output_path, write_json

    values = {k: v for k, v in vars(args).items() if k in BOUND_KEYS}
    cfg = RunConfig.from_dict(values, "bound")
    if min(args.depths) < 1 or max(args.depths) > 4096:
        raise ConfigError(f"depths: {args.depths} is not allowed; every depth must be between 1 and 4096")
    if args.fit_contexts < 16:
        raise ConfigError(f"fit-contexts: {args.fit_contexts} is not allowed; it must be >= 16")
    check_output_path(args.json)
    check_bound_fits(cfg, args.depths, args.fit_contexts)  # before the contexts are drawn
    out = bounds(cfg, args.depths, args.fit_contexts)
    if args.json:
        write_json(out, args.json)
    curve = ", ".join(f"{L}: {v:.3f}" for L, v in out["random_subspace"].items())
    print(f"softmax bound {out['single']:.4f} (beta {out['beta']:.3g}), mixture bound {out['mixture']:.4f}, "
          f"linear {out['linear']:.4f}; random subspaces of rank {out['key_dim']}: {curve} "
          f"({out['seconds']:.1f} s)", file=sys.stderr)
    return 0
