"""The ensemble decomposition R_L = C_L + (A_L - C_L) / L (Appendix B, measurement M2)."""
import pytest
import torch

from icl.core.config import RunConfig
from icl.core.decomposition import decompose
from icl.core.train import train_group


def correlated_predictors(B=4000, L=6, seed=0):
    """Per-layer predictors sharing a common error plus layer-specific, mutually correlated parts."""
    gen = torch.Generator().manual_seed(seed)
    target = torch.randn(B, generator=gen, dtype=torch.float64)
    shared = 0.5 * torch.randn(B, 1, generator=gen, dtype=torch.float64)
    mix = torch.randn(L, L, generator=gen, dtype=torch.float64) / L
    own = torch.randn(B, L, generator=gen, dtype=torch.float64) @ mix + 0.1 * torch.arange(L)  # biased, correlated
    return target[:, None] + shared + own, target


def test_identity_and_terms_on_correlated_predictors():
    g, y = correlated_predictors()
    L = g.shape[1]
    out = decompose(g, y)
    e = g - y[:, None]
    # Computed independently of the error Gram matrix:
    R = ((g.mean(1) - y) ** 2).mean()
    A = (e**2).mean()
    C = sum((e[:, i] * e[:, j]).mean() for i in range(L) for j in range(L) if i != j) / (L * (L - 1))
    assert out["R"] == pytest.approx(float(R), rel=1e-12)
    assert out["A"] == pytest.approx(float(A), rel=1e-12)
    assert out["C"] == pytest.approx(float(C), rel=1e-12)
    assert out["identity_error"] < 1e-12
    assert out["R"] == pytest.approx(out["C"] + (out["A"] - out["C"]) / L, abs=1e-12)
    assert out["C"] < out["R"] < out["A"]  # disagreement helps: averaging beats the average layer


def test_relative_losses_divide_every_term_by_the_power():
    g, y = correlated_predictors(L=3)
    raw, rel = decompose(g, y), decompose(g, y, power=4.0)
    assert (rel["A"], rel["C"], rel["R"]) == pytest.approx((raw["A"] / 4, raw["C"] / 4, raw["R"] / 4), rel=1e-12)


def test_identical_layers_have_no_disagreement():
    g, y = correlated_predictors(L=1)
    out = decompose(g.repeat(1, 5), y)
    assert out["A"] == pytest.approx(out["C"], rel=1e-12)
    assert out["R"] == pytest.approx(out["A"], rel=1e-12)


def test_independent_layer_errors_average_down_as_one_over_L():
    gen = torch.Generator().manual_seed(3)
    y = torch.zeros(200_000, dtype=torch.float64)
    g = torch.randn(200_000, 8, generator=gen, dtype=torch.float64)
    out = decompose(g, y)
    assert abs(out["C"]) < 0.01
    assert out["R"] == pytest.approx(out["A"] / 8, rel=0.03)


def test_identity_on_a_trained_four_layer_softmax_model():
    cfg = RunConfig(model="softmax", task="difficult", dim=4, context_length=8, steps=30, batch_size=32,
                    eval_contexts=256, eval_points=2, device="cpu")
    one, four = train_group([cfg.replace(depth=1), cfg.replace(depth=4)], progress=False)
    dec = four["decomposition"]
    assert dec["depth"] == 4 and len(dec["layer_loss"]) == 4
    assert dec["identity_error"] < 1e-9
    assert dec["A"] == pytest.approx(sum(dec["layer_loss"]) / 4, rel=1e-12)
    # The decomposition's R is the model's own relative evaluation loss (float32 forward pass).
    assert dec["R"] == pytest.approx(four["final_loss"], rel=1e-4)
    assert one["decomposition"]["C"] is None and one["decomposition"]["R"] == pytest.approx(one["final_loss"], rel=1e-4)
