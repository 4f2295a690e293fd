"""icl.core.subspaces.anisotropy on score matrices whose answer is known, and in a trained run's summary."""
import math

import pytest
import torch

from icl.core import subspaces

pytestmark = pytest.mark.usefixtures("one_thread")


def test_a_multiple_of_the_identity_is_isotropic():
    m = torch.stack([3.0 * torch.eye(5), -0.5 * torch.eye(5)])
    assert subspaces.anisotropy(m).tolist() == pytest.approx([0.0, 0.0], abs=1e-12)


@pytest.mark.parametrize("diag, expected", [([2.0, 0.0], math.sqrt(2) / 2), ([1.0, -1.0], 1.0),
                                            ([1.0, 1.0, 1.0, 0.0], 0.5)])
def test_a_diagonal_matrix_is_as_far_from_the_identity_as_its_spread(diag, expected):
    # diag(2, 0): m = 1, ||diag(1, -1)|| / ||diag(2, 0)|| = sqrt(2) / 2; trace 0: 1; a rank-3
    # projector in R^4, the closest a rank-3 matrix comes: sqrt(1 - 3/4)
    got = float(subspaces.anisotropy(torch.diag(torch.tensor(diag))[None])[0])
    assert got == pytest.approx(expected, rel=1e-9)


def test_an_antisymmetric_part_counts_and_a_rotation_does_not_change_it():
    a = torch.tensor([[0.0, 1.0], [-1.0, 0.0]])
    assert float(subspaces.anisotropy(a[None])[0]) == pytest.approx(1.0)
    gen = torch.Generator().manual_seed(0)
    m = torch.randn(6, 6, generator=gen, dtype=torch.float64)
    rot = subspaces.random_bases(1, 6, 6, gen)[0].double()
    before, after = subspaces.anisotropy(torch.stack([m, rot.T @ m @ rot]))
    assert float(after) == pytest.approx(float(before), rel=1e-9) and 0 < float(before) <= 1


def test_a_rank_k_matrix_is_at_least_sqrt_one_minus_k_over_d_away():
    gen = torch.Generator().manual_seed(1)
    k, d = 3, 8
    low = torch.randn(50, d, k, generator=gen, dtype=torch.float64) @ torch.randn(50, k, d, generator=gen, dtype=torch.float64)
    assert (subspaces.anisotropy(low) >= math.sqrt(1 - k / d) - 1e-12).all()


def test_the_summary_records_the_anisotropy_per_layer():
    q = torch.eye(4).expand(3, 4, 4).clone()  # three isotropic layers, K^T Q = I
    k = torch.diag(torch.tensor([1.0, 1.0, 1.0, 2.0])).expand(3, 4, 4).clone()
    k[0] = torch.eye(4)
    s = subspaces.summary(q, k)
    assert s["layer_anisotropy"][0] == pytest.approx(0.0, abs=1e-12) and s["layer_anisotropy"][1] > 0.1
    assert s["anisotropy"] == pytest.approx(sum(s["layer_anisotropy"]) / 3)


def test_a_trained_full_rank_run_records_its_anisotropy():
    """Was recorded for rank-limited layers only: full-rank runs kept no subspace summary."""
    from icl.core.config import RunConfig
    from icl.core.train import train

    cfg = RunConfig(model="softmax", dim=4, context_length=8, steps=5, batch_size=16, eval_contexts=32,
                    eval_points=2, depth=3, device="cpu")
    sub = train(cfg, progress=False)["parameters"]["subspaces"]
    assert sub["key_dim"] == 4 and len(sub["layer_anisotropy"]) == 3 and 0 < sub["anisotropy"] <= 1
