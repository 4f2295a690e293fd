"""Reference predictors of the softmax model from the task alone, no training.

Why they matter: a controlled softmax model predicts `c * mean_l sum_mu A^l_{q,mu} y_mu`. With
full-rank layers each A^l can be the softmax of the cosine itself, so its best single layer is
bounded by the best *isotropic* softmax of the cosine, and an ensemble of such layers by the best
mixture of temperatures. With rank-limited layers (key_dim < dim) each layer sees the similarity
through its own subspace; the untrained subspace ensembles of `icl.analysis.baselines` (random and
complementary subspaces) are what averaging L such layers gives with no learning at all. Here:

- **softmax bound** `f_beta = sum_mu softmax_mu(beta cos(x_q, x_mu)) y_mu`, best beta, best readout;
- **mixture bound** the best non-negative combination of `f_beta` over a grid of beta, never above
  the softmax bound (`mixture_bound` says why and how);
- **subspace ensembles** (`icl.analysis.baselines`) the mean of L untrained rank-key_dim layers with the
  bilinear score of a rank-k layer, independent random or complementary subspaces (the contexts'
  Haar rotations make a fixed U_l a random one for every context);
- **anisotropic ensembles** (`anisotropic`) the mean of L untrained full-rank layers with random
  anisotropic kernels, beside the two bounds: can averaging them go below the mixture bound?

Every beta, weight and readout is fitted on FIT_SEED contexts and scored on the run's held-out
evaluation contexts (the very set every trained model is scored on), so a bound and a trained
loss are a paired comparison. Losses are relative, `E[(y_hat - y*)^2] / E[y*^2]`.

Held-out noise (`held_out_spread`, `icl bound --eval-sets 5`): over five other evaluation sets of
16,384 contexts at d = 16, both bounds move by a relative standard deviation of 1.3-2.1 % (range
3-5 %; P 16 and 64, top-2 and top-16, isotropic and (0.7, 1.3) spectra), about 9 % with 2,048
contexts. They move together: on one set the mixture lies 0-2.7 % below the softmax bound (top-2:
0.7-2.7 %, top-16: 0 %), a gap that noise between sets is as large as, so a trained loss is compared
with a bound on its own evaluation set, never with one on another. The fit contexts matter less:
2,048 against 32,768 moves either bound by under 0.1 % (d 16, P 16 top-2 and P 64 top-16).
"""
from __future__ import annotations

import math
import time

import numpy as np
import torch
from scipy.optimize import minimize_scalar, nnls

from ..core.config import ConfigError, RunConfig
from ..core.tasks import Batch, held_out, make_generator, sample_batch
from . import baselines

FIT_SEED = 7_777_2610  # the contexts the betas and readouts are fitted on (not the evaluation set)
BETAS = np.concatenate([[0.0], np.geomspace(0.3, 600.0, 47)])  # mixture grid; 0 = plain label mean


# ---------------------------------------------------------------- the pieces


def cosines(batch: Batch) -> torch.Tensor:
    """cos(x_q, x_mu): (B, P)."""
    x, xq = batch.x, batch.xq
    num = torch.einsum("bpd,bd->bp", x, xq)
    return num / (x.norm(dim=-1) * xq.norm(dim=-1, keepdim=True))


def softmax_reads(cos: torch.Tensor, y: torch.Tensor, betas) -> torch.Tensor:
    """sum_mu softmax_mu(beta cos) y_mu for every beta: cos (B, ..., P), y (B, P) -> (G, B, ...)."""
    yy = y.view(y.shape[0], *[1] * (cos.dim() - 2), y.shape[1])
    return torch.stack([(torch.softmax(float(b) * cos, dim=-1) * yy).sum(-1) for b in betas])


def relative_loss(pred: np.ndarray, target: np.ndarray) -> float:
    return float(np.mean((pred - target) ** 2) / np.mean(target**2))


def readout(f: np.ndarray, target: np.ndarray) -> float:
    """The least-squares scalar r of y_hat = r f."""
    return float(f @ target / max(f @ f, 1e-30))


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


def mixture_bound(fit: Batch, ev: Batch, single: dict | None = None) -> dict:
    """Best non-negative combination of isotropic softmaxes over BETAS and the single bound's beta,
    never above the single softmax bound (`single`: softmax_bound's result, computed when not given).

    The weights are fitted on the fit contexts, where the combination contains the single softmax
    (its beta, weighted by its readout) and so never fits worse. On the held-out contexts noise can
    still put the fitted combination above the single softmax (0.0859 against 0.0854 at d 16, P 64,
    spectrum (0.7, 1.3) with 2,048 contexts). Both candidates are fitted on the same contexts and
    scored on the same held-out ones, and the bound is the better of the two there. Why choose on
    the held-out set: a mixture contains the single softmax, so a mixture bound above it is not a
    bound; the choice is one bit read from the evaluation set and can only lower the bound, so a
    trained model that goes below it has beaten both candidates."""
    single = single or softmax_bound(fit, ev)
    betas = np.sort(np.append(BETAS, single["beta"]))
    ff = _np(softmax_reads(cosines(fit), fit.y, betas)).T  # (B, G)
    fe = _np(softmax_reads(cosines(ev), ev.y, betas)).T
    w, _ = nnls(ff, _np(fit.target))
    combination = relative_loss(fe @ w, _np(ev.target))
    if combination <= single["single"]:
        used = {f"{b:.4g}": float(x) for b, x in zip(betas, w) if x > 0}
        return {"mixture": combination, "mixture_weights": used, "mixture_choice": "combination"}
    return {"mixture": single["single"], "mixture_weights": {f"{single['beta']:.4g}": single["readout"]},
            "mixture_choice": "single"}


def linear_reference(fit: Batch, ev: Batch) -> float:
    """Best isotropic linear-attention predictor r (1/P) sum_mu (x_q . x_mu) y_mu."""
    lin = lambda b: _np(torch.einsum("bpd,bd,bp->b", b.x, b.xq, b.y) / b.x.shape[1])
    r = readout(lin(fit), _np(fit.target))
    return relative_loss(r * lin(ev), _np(ev.target))


def bounds(cfg: RunConfig, depths=(1, 2, 4, 8, 16, 32, 64), fit_contexts: int = 2048, cache=None) -> dict:
    """All reference predictors for the task `cfg` describes, at cfg.resolved_key_dim; read from
    (or written to) `cache` (a RunCache) when one is given."""
    if cache is not None:
        return _int_depths(cache.memo("bounds", {"config": {k: getattr(cfg, k) for k in BOUND_KEYS}, "key_dim": cfg.resolved_key_dim,
                                     "depths": sorted({int(L) for L in depths}), "fit_contexts": fit_contexts},
                                lambda: bounds(cfg, depths, fit_contexts), SOURCES))
    check_bound_fits(cfg, depths, fit_contexts)
    start = time.perf_counter()
    fit, ev = contexts(cfg, fit_contexts)
    single = softmax_bound(fit, ev)
    out = {**single, **mixture_bound(fit, ev, single), "linear": linear_reference(fit, ev),
           **baselines.all_curves(fit, ev, cfg.resolved_key_dim, depths)}
    return {"config": {k: getattr(cfg, k) for k in BOUND_KEYS}, "key_dim": cfg.resolved_key_dim,
            **out, "seconds": round(time.perf_counter() - start, 2)}


def anisotropic(cfg: RunConfig, levels, depths=(1, 2, 4, 8, 16, 32, 64), fit_contexts: int = 2048, cache=None) -> dict:
    """Untrained ensembles of full-rank layers with anisotropic kernels (`baselines.anisotropic_curve`)
    at each anisotropy of `levels`, beside the softmax and mixture bounds on the same fit and
    evaluation contexts: {"single", "mixture", "levels": {anisotropy: curve}, "seconds"}. Read from
    (or written to) `cache` (a RunCache) when one is given."""
    levels = [float(a) for a in levels]
    if cache is not None:
        key = {"config": {k: getattr(cfg, k) for k in BOUND_KEYS if k != "key_dim"}, "levels": levels, "spectrum": "two_level",
               "depths": sorted({int(L) for L in depths}), "fit_contexts": fit_contexts}
        out = cache.memo("anisotropic", key, lambda: anisotropic(cfg, levels, depths, fit_contexts), SOURCES)
        return {**out, "levels": {float(a): _int_depths(c, ("anisotropic",)) for a, c in out["levels"].items()}}
    check_bound_fits(cfg.replace(key_dim=cfg.dim), depths, fit_contexts)  # full-rank reads: those of key_dim = d
    start = time.perf_counter()
    fit, ev = contexts(cfg, fit_contexts)
    single = softmax_bound(fit, ev)
    return {"single": single["single"], "mixture": mixture_bound(fit, ev, single)["mixture"],
            "levels": {a: baselines.anisotropic_curve(fit, ev, a, depths) for a in levels},
            "seconds": round(time.perf_counter() - start, 2)}


def held_out_spread(cfg: RunConfig, sets: int = 5, fit_contexts: int = 2048, budget=None) -> dict:
    """How much the evaluation set moves the softmax and mixture bounds: both fitted once on the fit
    contexts and scored on `sets` independently drawn evaluation sets of cfg.eval_contexts contexts
    (seeds after the runs' own). Per bound: its values, mean, relative standard deviation and range.
    `budget(seconds)`, if given, is called with the estimated time of all sets once the first is
    done (it may raise: a million sets is a refusal, not two days)."""
    from ..core.tasks import EVAL_SEED  # here, not at the head: moving it would change the syntax that keys the bounds' memo

    fit = contexts(cfg, fit_contexts)[0]
    rows = []
    for i in range(1, sets + 1):
        start = time.perf_counter()
        ev = held_out(cfg, torch.device("cpu"), seed=EVAL_SEED + 7919 * i)
        single = softmax_bound(fit, ev)
        rows.append({"single": single["single"], "mixture": mixture_bound(fit, ev, single)["mixture"]})
        if i == 1 and budget is not None:
            budget(sets * (time.perf_counter() - start))
    out = {}
    for k in ("single", "mixture"):
        v = np.array([r[k] for r in rows])
        out[k] = {"values": v.tolist(), "mean": float(v.mean()), "relative_std": float(v.std(ddof=1) / v.mean()),
                  "relative_range": float(np.ptp(v) / v.mean())}
    gap = np.array([r["single"] - r["mixture"] for r in rows]) / out["single"]["mean"]
    out["relative_gain"] = {"mean": float(gap.mean()), "min": float(gap.min()), "max": float(gap.max())}  # (single - mixture) / single
    return out


def bound_bytes(cfg: RunConfig, depths, fit_contexts: int) -> int:
    """Estimated peak of live memory in `bounds` (float32, float64 where numpy takes over): the two
    context sets, kept throughout, and the larger of drawing one, the mixture's reads over BETAS and
    the random-subspace reads of the subspace ensembles (`icl.analysis.baselines`: every layer at every
    temperature on the fit set in float64, in chunks of CHUNK contexts, one kind at a time)."""
    from ..core.memory import FLOAT, batch_floats  # here, not at the head: moving it would change the syntax that keys the bounds' memo

    d, P, k, E, n = cfg.dim, cfg.context_length, cfg.resolved_key_dim, cfg.eval_contexts, fit_contexts
    S, B = max(int(L) for L in depths), n + E
    kept = B * (P * d + 2 * P + d * d + 2 * d)
    draw = batch_floats(cfg, max(n, E))
    mixture = 5 * len(BETAS) * B + 3 * max(n, E) * P  # reads, their float64 copies, one softmax
    G = len(baselines.BETAS)
    # one chunk's projected queries (C, S, k + d), its scores, their scaled copy, softmax and weighted
    # values (C, S, P), and its reads at every temperature, stacked and in float64 (G, C, S)
    chunk = min(baselines.CHUNK, max(n, E)) * S * (k + d + 4 * P + 4 * G)  # the evaluation set is read in chunks too
    # the fit set's reads in float64 (G, n, S) and its chunks while they are joined; per depth the
    # ensembles' means and the loss temporaries, float64 (G, blocks n)
    subspace = 4 * G * n * S + chunk + 10 * G * n * min(baselines.MAX_BLOCKS, S)
    return FLOAT * (kept + max(draw, mixture, subspace))


def check_bound_fits(cfg: RunConfig, depths, fit_contexts: int) -> None:
    """ConfigError (one line: the estimate and the limit) if the bounds cannot fit in memory."""
    from ..core.memory import check_bytes  # here, not at the head: moving it would change the syntax that keys the bounds' memo

    check_bytes(bound_bytes(cfg, depths, fit_contexts), "cpu",
                f"the bounds at dim {cfg.dim}, context_length {cfg.context_length}, eval_contexts {cfg.eval_contexts}, "
                f"fit_contexts {fit_contexts} and depths up to {max(depths)} need about {{need}}",
                "lower dim, context_length, eval_contexts, --fit-contexts or --depths")


def _int_depths(b: dict, kinds=baselines.KINDS) -> dict:
    """Depth-keyed curves keep int keys after a JSON round trip through the cache."""
    curves = [f"{kind}{part}" for kind in kinds for part in ("", "_beta", "_fixed")]
    return {**b, **{k: {int(L): v for L, v in b[k].items()} for k in curves if k in b}}


# The source files a bound's value depends on (the cache recomputes when one of them changes).
SOURCES = ("analysis.bounds",)  # and the icl modules it imports (baselines, subspaces, tasks, ...)


def table(results) -> "pd.DataFrame":
    """One row per `bounds` result: its task, rank and the numbers (the subspace ensembles as
    random_L<depth> and complementary_L<depth> columns, best temperature per depth)."""
    import pandas as pd

    short = {"random_subspace": "random", "complementary_subspace": "complementary"}
    rows = [{**{k: b["config"][k] for k in ("dim", "context_length", "top_k", "input_exponent", "task_exponent")},
             "key_dim": b["key_dim"], "single_bound": b["single"], "beta": b["beta"], "mixture_bound": b["mixture"],
             "linear_reference": b["linear"],
             **{f"{short[kind]}_L{L}": v for kind in short for L, v in b.get(kind, {}).items()}}
            for b in results]
    return pd.DataFrame(rows)


# The config fields a bound depends on (the task and the evaluation set; nothing about training).
BOUND_KEYS = ("task", "top_k", "input_exponent", "task_exponent", "dim", "context_length", "normalize_inputs",
              "label_noise", "eval_contexts", "key_dim")
