"""The subspaces rank-limited layers read through (notebook 07): how to draw them, and how to measure
them in a trained stack.

A layer with query and key matrices Q_l, K_l of rank k scores a context token by
x_q^T Q_l^T K_l x_mu: it sees x_mu only through its projection on the row space of K_l, and the
query through the row space of Q_l. With P_l the orthogonal projector on a layer's k-dimensional
subspace:

- *overlap* of two layers, ||P_l P_l'||_F^2 / k: 1 for the same subspace, k/d on average for two
  independent random ones, 0 for orthogonal ones;
- *coverage error* of L layers, ||sum_l P_l - (L k / d) I||_F / ||(L k / d) I||_F: 0 when they
  cover R^d evenly (a tiling), about sqrt(d / (L k)) for independent random ones;
- *effective rank* of the stacked subspaces, exp(entropy of the normalised eigenvalues of
  sum_l P_l): d when they cover every direction alike, k for L copies of one subspace;
- *anisotropy* of a layer's score matrix M_l = K_l^T Q_l (`anisotropy`): how far it is from the
  isotropic c I that a softmax of the cosine uses, 0 for c I, sqrt(1 - k/d) for a scaled projector.

Untrained baselines (icl.analysis.baselines) draw layers either as independent random subspaces or in
*complementary* blocks that tile R^d: lcm(d, k) / k layers per block, one random rotation per block.
"""
from __future__ import annotations

import math

import torch

SUBSPACE_SEED = 123_457  # the baselines' random subspaces


def random_bases(n: int, dim: int, k: int, gen: torch.Generator) -> torch.Tensor:
    """n orthonormal bases (n, d, k) of independent uniformly random k-dimensional subspaces."""
    q, r = torch.linalg.qr(torch.randn(n, dim, k, generator=gen, dtype=torch.float64))
    return (q * torch.sign(torch.diagonal(r, dim1=-2, dim2=-1)).unsqueeze(-2)).float()


def block_size(dim: int, k: int) -> int:
    """Layers per complementary block: lcm(d, k) / k."""
    return math.lcm(dim, k) // k


def tiling(dim: int, k: int, gen: torch.Generator) -> torch.Tensor:
    """One complementary block (m, d, k), m = lcm(d, k) / k, with sum of its projectors = (m k / d) I.
    Built from one random rotation: split into d / k blocks of columns when k divides d, or the
    complements of a split into blocks of d - k columns when d - k divides d (k = 12 at d = 16)."""
    rot = random_bases(1, dim, dim, gen)[0]  # (d, d) Haar
    if dim % k == 0:
        return rot.T.reshape(dim // k, k, dim).transpose(1, 2)  # (d/k, d, k) disjoint column blocks
    if k < dim and dim % (dim - k) == 0:
        parts = rot.T.reshape(dim // (dim - k), dim - k, dim)  # (m, d-k, d): tiles of the complement
        return torch.stack([torch.cat([p for j, p in enumerate(parts) if j != i]).T for i in range(len(parts))])
    raise ValueError(f"no complementary tiling of R^{dim} by {k}-dimensional subspaces is built here "
                     "(k or d - k must divide d)")


def complementary_bases(n: int, dim: int, k: int, gen: torch.Generator) -> torch.Tensor:
    """n layers (n, d, k), block after block of `tiling`, each block with its own rotation."""
    m = block_size(dim, k)
    blocks = [tiling(dim, k, gen) for _ in range(-(-n // m))]
    return torch.cat(blocks)[:n]


def projectors(bases: torch.Tensor) -> torch.Tensor:
    """(n, d, d) orthogonal projectors U U^T of orthonormal bases (n, d, k)."""
    return bases @ bases.transpose(1, 2)


def row_space(W: torch.Tensor, k: int | None = None) -> torch.Tensor:
    """Orthonormal bases (n, d, k) of the row spaces of W (n, k, d): its top-k right singular vectors."""
    _, _, vh = torch.linalg.svd(W.double(), full_matrices=False)
    k = k or W.shape[1]
    return vh[:, :k].transpose(1, 2).float()


def mean_overlap(bases: torch.Tensor) -> float:
    """Mean over pairs l != l' of ||P_l P_l'||_F^2 / k = ||U_l^T U_l'||_F^2 / k; NaN for one layer."""
    n, _, k = bases.shape
    if n < 2:
        return math.nan
    g = torch.einsum("adk,bdj->abkj", bases.double(), bases.double()).pow(2).sum((-1, -2)) / k  # (n, n)
    return float((g.sum() - g.diagonal().sum()) / (n * (n - 1)))


def coverage_error(bases: torch.Tensor) -> float:
    """||sum_l P_l - (L k / d) I||_F relative to ||(L k / d) I||_F."""
    n, d, k = bases.shape
    total = projectors(bases.double()).sum(0)
    even = torch.eye(d, dtype=torch.float64, device=bases.device) * (n * k / d)  # where the bases are (a GPU)
    return float((total - even).norm() / even.norm())


def effective_rank(bases: torch.Tensor) -> float:
    """exp(entropy) of the normalised eigenvalues of sum_l P_l: between k and d."""
    ev = torch.linalg.eigvalsh(projectors(bases.double()).sum(0)).clamp_min(0)
    p = ev / ev.sum()
    p = p[p > 0]
    return float(torch.exp(-(p * p.log()).sum()))


def temperature(merged: torch.Tensor, k: int) -> torch.Tensor:
    """The inverse temperature of each layer's score, sqrt(k) ||M_l||_F for M_l = K_l^T Q_l
    (n, d, d) of rank k, on the scale of the baselines' beta (a layer beta/k U U^T has
    sqrt(k) ||.||_F = beta)."""
    return math.sqrt(k) * merged.double().flatten(1).norm(dim=1)


def anisotropy(merged: torch.Tensor) -> torch.Tensor:
    """||M - (tr M / d) I||_F / ||M||_F of each score matrix M_l = K_l^T Q_l (n, d, d): (n,).

    The relative distance of M from the nearest multiple of the identity, whose score x_q^T c I x_mu
    is what the isotropic softmax bounds of icl.analysis.bounds use (on unit inputs, c times the cosine).
    0 for c I; between 0 and 1, since ||M||^2 = ||M - m I||^2 + d m^2 with m = tr M / d; 1 when
    tr M = 0 (e.g. diag(1, -1) or an antisymmetric M). All of M counts: the symmetric part's
    distance from m I and the antisymmetric part add in squares, and both change the scores of
    distinct tokens. A rank-k M can come no closer than sqrt(1 - k/d) (a scaled projector)."""
    m = merged.double()
    d = m.shape[-1]
    mean = torch.diagonal(m, dim1=-2, dim2=-1).sum(-1) / d  # (n,)
    eye = torch.eye(d, dtype=m.dtype, device=m.device)
    return (m - mean[:, None, None] * eye).flatten(1).norm(dim=1) / m.flatten(1).norm(dim=1)


def summary(query: torch.Tensor, key: torch.Tensor) -> dict:
    """What the mechanism notebook reads of one trained model's L layers (Q, K: (L, k, d)): overlap,
    coverage and effective rank of the key and query subspaces, their random-subspace references,
    the mean alignment of each layer's query and key subspaces, and the temperature and anisotropy of
    its score matrices K_l^T Q_l (mean and per layer)."""
    L, k, d = key.shape
    kb, qb = row_space(key), row_space(query)
    align = (kb.transpose(1, 2) @ qb).pow(2).sum((-1, -2)) / k  # (L,) ||P_K P_Q||^2 / k per layer
    merged = key.transpose(1, 2) @ query  # (L, d, d): K^T Q, all heads summed
    beta, aniso = temperature(merged, k), anisotropy(merged)  # (L,) each
    return {"key_dim": k, "depth": L, "overlap": mean_overlap(kb), "query_overlap": mean_overlap(qb),
            "random_overlap": k / d, "coverage_error": coverage_error(kb), "effective_rank": effective_rank(kb),
            "query_key_alignment": float(align.mean()), "temperature": float(beta.mean()), "layer_temperature": beta.tolist(),
            "anisotropy": float(aniso.mean()), "layer_anisotropy": aniso.tolist()}


# ---------------------------------------------------------------- frozen subspaces (the ablation)


class InSubspace(torch.nn.Module):
    """Parametrisation W_l = A_l U_l^T of a layer's query or key (k, d): the k x k map A_l is
    trained, the basis U_l (d, k) is fixed, so the layer reads through U_l whatever it learns."""

    def __init__(self, bases: torch.Tensor):
        super().__init__()
        self.register_buffer("bases", bases)  # (T, d, k)

    def forward(self, inner: torch.Tensor) -> torch.Tensor:  # (T, k, k) -> (T, k, d)
        return inner @ self.bases.transpose(1, 2)

    def right_inverse(self, weight: torch.Tensor) -> torch.Tensor:  # (T, k, d) -> (T, k, k)
        # The initial weights projected on the subspace, rescaled so that the initial scores have
        # the scale the free weights give (a random k x d matrix keeps a fraction k/d of its norm).
        k, d = weight.shape[1:]
        return weight @ self.bases * math.sqrt(d / k)


def freeze(stack, kind: str, seed: int) -> None:
    """Fix every layer's query and key subspace of `stack` (a SoftmaxEnsemble): one basis per layer
    for both, drawn per model from (seed, depth): `random`, independent; `tiled`, complementary
    blocks (`complementary_bases`). Only the maps inside the subspaces, the values and the readout
    are trained."""
    from torch.nn.utils import parametrize

    k, d = stack.query.shape[1:]
    draw = {"random": random_bases, "tiled": complementary_bases}[kind]
    bases = []
    for depth in stack.depths:
        gen = torch.Generator().manual_seed(1_000_003 * int(seed) + int(depth) + SUBSPACE_SEED)
        bases.append(draw(depth, d, k, gen))
    bases = torch.cat(bases)  # (T, d, k)
    for name in ("query", "key"):
        parametrize.register_parametrization(stack, name, InSubspace(bases.clone()))


def random_coverage(depth: int, dim: int, k: int, draws: int = 200) -> float:
    """The mean coverage error of `depth` independent random subspaces (Monte Carlo, fixed seed):
    the reference a trained stack's coverage is compared with."""
    gen = torch.Generator().manual_seed(SUBSPACE_SEED + int(depth))
    return float(sum(coverage_error(random_bases(int(depth), int(dim), int(k), gen)) for _ in range(draws)) / draws)


def least_overlap(dim: int, k: int) -> float:
    """The smallest overlap ||P P'||_F^2 / k two k-dimensional subspaces of R^d can have: they share at
    least 2k - d dimensions (0 when k <= d/2; 8/12 = 0.667 at d = 16, k = 12, against 0.75 for random)."""
    return max(0, 2 * k - dim) / k
