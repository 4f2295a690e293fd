"""The untrained subspace ensembles of icl.analysis.baselines and the subspace measurements of
icl.core.subspaces, on cases whose answer is known."""
import math

import pytest
import torch

from icl.analysis import baselines, bounds
from icl.core import subspaces
from icl.core.config import RunConfig

pytestmark = pytest.mark.usefixtures("one_thread")

SMALL = dict(dim=8, context_length=16, eval_contexts=512)


def fitted(**changes):
    return bounds.contexts(RunConfig(**{**SMALL, **changes}), n_fit=512)


def gen(seed=0):
    return torch.Generator().manual_seed(seed)


def test_full_rank_layers_are_the_isotropic_softmax_at_every_depth():
    # k = d: x_q U U^T x_mu / k = x_q . x_mu / d, the cosine on the sphere of radius sqrt(d)
    fit, ev = fitted()
    single = bounds.softmax_bound(fit, ev)["single"]
    for kind in baselines.KINDS:
        for L, loss in baselines.curve(fit, ev, kind, 8, [1, 4, 16])[kind].items():
            assert loss == pytest.approx(single, rel=0.03), (kind, L, loss, single)  # beta on a coarser grid


def test_rank_limited_ensembles_improve_with_depth_and_tiles_beat_random_draws_at_d_over_k():
    fit, ev = fitted()
    single = bounds.softmax_bound(fit, ev)["single"]
    out = baselines.all_curves(fit, ev, 2, [1, 4, 32])
    rnd, comp = out["random_subspace"], out["complementary_subspace"]
    assert rnd[1] > rnd[4] > rnd[32] > single and rnd[1] > 1.5 * single
    assert comp[4] < rnd[4]  # 4 = d / k layers tile R^8: every direction seen once


def test_at_a_fixed_temperature_independent_layers_fall_exactly_as_one_over_depth():
    """R_L = C + (A - C)/L in expectation over independent layers; the measured curve (means over
    up to 16 disjoint ensembles) must agree within its Monte Carlo error."""
    fit, ev = fitted()
    depths = [1, 2, 4, 8, 32]
    out = baselines.curve(fit, ev, "random_subspace", 2, depths)
    A, C = out["random_subspace_A"], out["random_subspace_C"]
    assert A > C > 0
    for L in depths:
        want = C + (A - C) / L
        blocks = min(baselines.MAX_BLOCKS, max(depths) // L)
        # one ensemble's loss spreads by about (A - C)/L between draws of its layers; a mean over
        # `blocks` of them by that / sqrt(blocks): 4 of those is the tolerance
        tol = 4 * (A - C) / L / math.sqrt(blocks) + 0.01 * want
        assert abs(out["random_subspace_fixed"][L] - want) < tol, (L, out["random_subspace_fixed"][L], want)


@pytest.mark.parametrize("d,k", [(16, 4), (16, 8), (16, 12), (8, 2), (16, 16)])
def test_a_complementary_block_tiles_the_space(d, k):
    block = subspaces.tiling(d, k, gen())
    m = subspaces.block_size(d, k)
    assert block.shape == (m, d, k)
    assert torch.allclose(block.transpose(1, 2) @ block, torch.eye(k).expand(m, k, k), atol=1e-5)  # orthonormal
    assert torch.allclose(subspaces.projectors(block).sum(0), torch.eye(d) * (m * k / d), atol=1e-5)
    assert subspaces.coverage_error(block) < 1e-5
    assert subspaces.effective_rank(block) == pytest.approx(d, rel=1e-5)


def test_no_tiling_is_claimed_where_none_is_built():
    with pytest.raises(ValueError, match="tiling"):
        subspaces.tiling(16, 6, gen())


def test_overlaps_of_random_tiled_and_repeated_subspaces():
    d, k = 16, 4
    rnd = subspaces.random_bases(400, d, k, gen())
    assert subspaces.mean_overlap(rnd) == pytest.approx(k / d, rel=0.05)  # E ||U^T V||_F^2 / k = k / d
    assert subspaces.mean_overlap(subspaces.tiling(d, k, gen())) < 1e-10  # disjoint blocks of one rotation
    same = rnd[:1].expand(5, d, k)
    assert subspaces.mean_overlap(same) == pytest.approx(1.0) and subspaces.effective_rank(same) == pytest.approx(k)


def test_summary_of_trained_weights_reads_the_row_spaces():
    d, k, L = 16, 4, 4
    bases = subspaces.complementary_bases(L, d, k, gen())  # (L, d, k): one tiling
    inner = torch.randn(L, k, k, generator=gen(1))
    key = inner @ bases.transpose(1, 2)  # (L, k, d): row space = the tiles
    query = 2 * key
    out = subspaces.summary(query, key)
    assert out["overlap"] < 1e-6 and out["coverage_error"] < 1e-5 and out["query_key_alignment"] == pytest.approx(1.0)
    assert out["random_overlap"] == k / d and len(out["layer_temperature"]) == L
    beta = subspaces.temperature(7.0 / k * bases @ bases.transpose(1, 2), k)  # a baseline layer at beta = 7
    assert torch.allclose(beta, torch.full((L,), 7.0, dtype=torch.float64), rtol=1e-5)


def test_frozen_subspaces_train_only_the_maps_inside_them():
    from icl.core.config import ConfigError, RunConfig
    from icl.core.train import train

    cfg = RunConfig(model="softmax", dim=8, context_length=16, key_dim=2, steps=20, batch_size=16, eval_contexts=64,
                    eval_points=2, subspace="tiled", depth=4, device="cpu")
    r = train(cfg, progress=False)
    sub = r["parameters"]["subspaces"]
    assert sub["overlap"] < 1e-5 and sub["coverage_error"] < 1e-4  # still the tiling after training
    learned = train(cfg.replace(subspace="learned"), progress=False)["parameters"]["subspaces"]
    assert learned["overlap"] > 1e-3 and learned["random_overlap"] == 2 / 8
    with pytest.raises(ConfigError, match="subspace"):
        RunConfig(model="linear", key_dim=2, dim=8, subspace="random")
    with pytest.raises(ConfigError, match="subspace"):
        RunConfig(model="softmax", key_dim=8, dim=8, subspace="tiled")


@pytest.mark.parametrize("k", [2, 3, 8])
def test_layer_reads_are_the_softmax_of_the_projected_scores(k):
    """Every layer's read, against the score x_mu^T U U^T x_q / k and its softmax in float64:
    layer_reads forms the score in float32 through the query's projection (one product per
    context). The tolerance is float32 rounding amplified by beta = 30 in the softmax, a guard
    against a wrong formula, not the measured agreement (7e-9 relative in the losses, speed.md)."""
    fit, _ = fitted(key_dim=k)
    batch = fit.slice(0, 300)  # more than one CHUNK
    bases = baselines.layer_bases("random_subspace", 5, 8, k)
    betas = [1.0, 30.0]
    reads = baselines.layer_reads(batch, bases, betas)
    x, xq, y, U = batch.x.double(), batch.xq.double(), batch.y.double(), bases.double()
    score = torch.einsum("bpd,sdk,sek,be->bsp", x, U, U, xq) / k
    expected = torch.stack([(torch.softmax(b * score, -1) * y[:, None, :]).sum(-1) for b in betas])
    assert reads.shape == (2, 300, 5)
    torch.testing.assert_close(reads, expected, rtol=0, atol=2e-5)
