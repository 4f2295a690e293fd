"""Untrained ensembles of rank-limited softmax layers: what depth gives with no learning (notebook 07).

A layer reads the context through a k-dimensional subspace U_l (d, k) and scores a token by the
inner product of the projections, as a rank-k bilinear layer does: s_l(x_q, x_mu) =
x_q^T U_l U_l^T x_mu / k (divided by k so that its average over random subspaces is the cosine on
the sphere |x| = sqrt(d), and the temperatures compare with the softmax bound's). Layer l predicts
f_l = sum_mu softmax_mu(beta s_l) y_mu, and a depth-L ensemble r * mean_l f_l. Two ways to draw
the layers (`icl.core.subspaces`):

- `random_subspace`: independent uniformly random subspaces;
- `complementary_subspace`: blocks of lcm(d, k)/k layers whose subspaces tile R^d.

And full-rank layers with anisotropic kernels (`anisotropic_curve`, notebook 07's last section):
layer l scores x_q^T A_l x_mu / (|x_q| |x_mu|) with A_l = U_l diag(s) U_l^T, U_l an independent Haar
rotation and s a fixed spectrum of mean 1 (`two_level_spectrum`), so that s = 1 is the cosine of the
softmax bound. Since the contexts are Haar-rotated, a fixed A_l is a random anisotropic kernel for
every context: does averaging such layers reach below the mixture of isotropic softmaxes?

Each curve is given twice: with the best beta and readout at every depth (its lower envelope), and
at one fixed beta and readout for all depths (those best at the deepest depth). At a fixed beta
the independent ensemble's expected loss is exactly R_L = C + (A - C)/L, with A one layer's loss
and C the loss two independent layers share (App. B with independent errors): alpha = 1 and floor
C. A and C are reported for both kinds of layers. Every beta and readout is fitted on contexts of
their own and scored on the runs' evaluation contexts; a depth L < (number of layers) / 2 is
scored on up to MAX_BLOCKS disjoint ensembles of L layers, for less noise.
"""
from __future__ import annotations

import numpy as np
import torch

from ..core import subspaces
from ..core.tasks import Batch

BETAS = np.geomspace(0.5, 300.0, 24)  # temperatures tried (the softmax bound's beta is ~15 at d = 16)
# The anisotropic ensembles' grid: BETAS and five more steps up to ~1,200, since deep ensembles of
# strongly anisotropic layers chose the top of BETAS (300 at anisotropy 0.6, d 16, P 64, L 1024).
ANISOTROPIC_BETAS = np.concatenate([BETAS, BETAS[-1] * (BETAS[1] / BETAS[0]) ** np.arange(1, 6)])
MAX_BLOCKS = 16
CHUNK = 256  # contexts per pass: bounds memory, not results
KINDS = ("random_subspace", "complementary_subspace")


def layer_bases(kind: str, n: int, dim: int, k: int) -> torch.Tensor:
    """n layers' bases (n, d, k) of one kind, from the fixed subspace seed."""
    gen = torch.Generator().manual_seed(subspaces.SUBSPACE_SEED)
    if kind == "random_subspace":
        return subspaces.random_bases(n, dim, k, gen)
    if kind == "complementary_subspace":
        return subspaces.complementary_bases(n, dim, k, gen)
    raise ValueError(f"kind: {kind!r}; allowed: {', '.join(KINDS)}")


def two_level_spectrum(dim: int, anisotropy: float) -> torch.Tensor:
    """The spectrum s (d,) of mean 1 whose kernels U diag(s) U^T have `anisotropy` exactly
    (`subspaces.anisotropy`, the measure notebook 07 reports for trained layers): 1 + delta on
    the first d/2 directions, 1 - delta on the others, delta = a / sqrt(1 - a^2).

    Why two levels: one number sets the anisotropy in closed form; every eigenvalue stays positive
    (a < 1/sqrt(2)), so a layer keeps every direction, as the trained full-rank layers do; and its
    edge delta = 1 (s = 2 on d/2 directions, 0 on the rest) is the random-subspace layer of rank
    d/2. A power law s_i ~ i^-gamma would instead reach the same anisotropy by letting a few
    directions dominate, mixing anisotropy with the loss of rank that the subspace baselines study."""
    if dim % 2 or not 0 <= anisotropy < 2**-0.5:
        raise ValueError(f"two_level_spectrum: dim {dim} (must be even), anisotropy {anisotropy} "
                         "(must be in [0, 1/sqrt(2)) to keep every eigenvalue positive)")
    delta = anisotropy / (1 - anisotropy**2) ** 0.5
    return torch.cat([torch.full((dim // 2,), 1 + delta), torch.full((dim - dim // 2,), 1 - delta)]).double()


def anisotropic_kernels(n: int, spectrum: torch.Tensor) -> torch.Tensor:
    """n kernels A_l = U_l diag(s) U_l^T (n, d, d), U_l independent Haar rotations from the fixed
    subspace seed."""
    gen = torch.Generator().manual_seed(subspaces.SUBSPACE_SEED)
    rot = subspaces.random_bases(n, len(spectrum), len(spectrum), gen).double()
    return ((rot * spectrum) @ rot.transpose(1, 2)).float()


def anisotropic_curve(fit: Batch, ev: Batch, anisotropy: float, depths) -> dict:
    """The ensemble curve (`ensemble_curve`, keys prefixed "anisotropic") of full-rank layers
    with two-level kernels of this anisotropy."""
    kernels = anisotropic_kernels(max(int(L) for L in depths), two_level_spectrum(fit.x.shape[-1], anisotropy))
    out = ensemble_curve(fit, ev, "anisotropic", depths, lambda batch, betas: kernel_reads(batch, kernels, betas),
                         ANISOTROPIC_BETAS)
    edge = ANISOTROPIC_BETAS[[0, -1]]
    return {**out, "anisotropic_beta_at_grid_edge": any(b in edge for b in out["anisotropic_beta"].values())}


def layer_reads(batch: Batch, bases: torch.Tensor, betas=BETAS) -> torch.Tensor:
    """Every layer's read f_l at every temperature of `betas`: (G, B, S), float64."""
    k = bases.shape[-1]
    parts = []
    for i in range(0, len(batch), CHUNK):
        x, xq, y = batch.x[i:i + CHUNK], batch.xq[i:i + CHUNK], batch.y[i:i + CHUNK]
        # x_mu^T U U^T x_q / k as x_mu . v with v = U U^T x_q / k, the query's projection back in R^d:
        # one (S, d) x (d, P) product per context, instead of projecting every token onto every
        # subspace (k times the work, in einsum's small batched products)
        pq = torch.einsum("bd,sdk->bsk", xq, bases)  # (b, S, k) projected query
        v = torch.einsum("bsk,sdk->bsd", pq, bases) / k  # (b, S, d)
        parts.append(_softmax_reads(torch.bmm(v, x.transpose(1, 2)), y, betas))  # score (b, S, P)
    return torch.cat(parts, dim=1)


def kernel_reads(batch: Batch, kernels: torch.Tensor, betas=BETAS) -> torch.Tensor:
    """As `layer_reads` for full-rank layers with score matrices `kernels` (S, d, d), each scoring
    x_q^T A_l x_mu / (|x_q| |x_mu|): exactly the cosine of the softmax bound at A_l = I."""
    parts = []
    for i in range(0, len(batch), CHUNK):
        x, xq, y = batch.x[i:i + CHUNK], batch.xq[i:i + CHUNK], batch.y[i:i + CHUNK]
        x, xq = x / x.norm(dim=-1, keepdim=True), xq / xq.norm(dim=-1, keepdim=True)
        v = torch.einsum("bd,sde->bse", xq, kernels)  # (b, S, d): x_q^T A_l
        parts.append(_softmax_reads(torch.bmm(v, x.transpose(1, 2)), y, betas))
    return torch.cat(parts, dim=1)


def _softmax_reads(score: torch.Tensor, y: torch.Tensor, betas) -> torch.Tensor:
    """sum_mu softmax_mu(beta score) y_mu at every beta: score (b, S, P), y (b, P) -> (G, b, S), float64."""
    return torch.stack([(torch.softmax(float(beta) * score, -1) * y[:, None, :]).sum(-1) for beta in betas]).double()


def ensembles(reads: torch.Tensor, depth: int) -> torch.Tensor:
    """Mean reads of up to MAX_BLOCKS disjoint runs of `depth` consecutive layers: (G, B, blocks)."""
    blocks = min(MAX_BLOCKS, reads.shape[-1] // depth)
    return reads[..., : blocks * depth].unflatten(-1, (blocks, depth)).mean(-1)


def _readout(f: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    """Least-squares readout per temperature: f (G, N), t (N,) -> (G,)."""
    return (f @ t) / (f * f).sum(-1).clamp_min(1e-30)


def _loss(f: torch.Tensor, r: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    """Relative loss per temperature of r f against t: (G,)."""
    return ((r[:, None] * f - t) ** 2).mean(-1) / (t**2).mean()


def curve(fit: Batch, ev: Batch, kind: str, key_dim: int, depths) -> dict:
    """The ensemble curve of one kind of rank-key_dim layers (`ensemble_curve`)."""
    bases = layer_bases(kind, max(int(L) for L in depths), fit.x.shape[-1], key_dim)
    return ensemble_curve(fit, ev, kind, depths, lambda batch, betas: layer_reads(batch, bases, betas))


def ensemble_curve(fit: Batch, ev: Batch, kind: str, depths, read, betas=BETAS) -> dict:
    """The curve of the layers that `read(batch, betas)` reads ((G, B, S), S >= max(depths)) at
    every depth, with the best temperature and readout per depth and with the fixed ones (best at
    the deepest depth), and its decomposition terms A, C; keys prefixed by `kind`. Every
    temperature of `betas` is tried on the fit set; the evaluation set is read only at the chosen ones."""
    depths = sorted({int(L) for L in depths})
    tf, te = fit.target.double(), ev.target.double()
    on_fit = read(fit, betas)  # (G, B_fit, S)

    def at(reads: torch.Tensor, t: torch.Tensor, L: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The depth-L ensembles' reads (G, blocks B) and their targets (blocks B,)."""
        m = ensembles(reads, L)  # (G, B, blocks)
        return m.transpose(1, 2).flatten(1), t.repeat(m.shape[-1])

    chosen = {}  # depth -> (index into betas, readout): fitted on the fit set
    for L in depths:
        f, t = at(on_fit, tf, L)
        r = _readout(f, t)
        g = int(torch.argmin(_loss(f, r, t)))
        chosen[L] = (g, float(r[g]))
    g_fixed, r_fixed = chosen[depths[-1]]  # the fixed temperature and readout: best at the deepest depth
    used = sorted({g for g, _ in chosen.values()})
    on_ev = dict(zip(used, read(ev, betas[used])))  # index -> (B_ev, S)

    def score(g: int, r: float, L: int) -> float:
        """The evaluation loss of the depth-L ensembles at temperature index g and readout r."""
        f, t = at(on_ev[g][None], te, L)  # (1, blocks B)
        return float(_loss(f, torch.tensor([r], dtype=f.dtype), t)[0])

    best = {L: score(g, r, L) for L, (g, r) in chosen.items()}
    fixed = {L: score(g_fixed, r_fixed, L) for L in depths}
    terms = decomposition(on_ev[g_fixed], r_fixed, te)
    return {kind: best, f"{kind}_beta": {L: float(betas[g]) for L, (g, _) in chosen.items()}, f"{kind}_fixed": fixed,
            f"{kind}_fixed_beta": float(betas[g_fixed]), f"{kind}_A": terms["A"], f"{kind}_C": terms["C"]}


def decomposition(reads: torch.Tensor, r: float, target: torch.Tensor) -> dict:
    """A (mean single-layer loss) and C (mean loss shared by two different layers) of the layers
    r f_l on one set: reads (B, S), relative to E[y*^2]."""
    e = r * reads - target[:, None]  # (B, S) errors
    gram = e.T @ e / e.shape[0] / (target**2).mean()  # (S, S)
    S = gram.shape[0]
    A = float(gram.diagonal().mean())
    C = float((gram.sum() - gram.diagonal().sum()) / (S * (S - 1))) if S > 1 else float("nan")
    return {"A": A, "C": C}


def all_curves(fit: Batch, ev: Batch, key_dim: int, depths) -> dict:
    """Both kinds of ensembles; the complementary one only where a tiling is built (see
    `subspaces.tiling`)."""
    out = curve(fit, ev, "random_subspace", key_dim, depths)
    try:
        out.update(curve(fit, ev, "complementary_subspace", key_dim, depths))
    except ValueError:  # no tiling of R^d by subspaces of this dimension
        pass
    return out
