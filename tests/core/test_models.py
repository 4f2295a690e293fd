"""The models' masks and shapes, stacks against models built alone, and training: batched groups,
determinism. Every path against the plain algebra of the paper's equations: tests/core/test_reference.py."""
import math

import pytest
import torch
from conftest import ENSEMBLES, MODELS, built, tiny_batch, tiny_config

from icl.core.models import build, stack_order
from icl.core.reference import FLOOR, model_params
from icl.core.tasks import Batch
from icl.core.train import train, train_group

pytestmark = pytest.mark.usefixtures("one_thread")

DEPTHS = [3, 1, 2]
ULP = 2.0**-24  # float32's unit roundoff: a rounded result is within ULP times its size


def params_of(stack, m: int) -> dict:
    """Model m's parameters, per-layer tensors sliced to its layers."""
    return {name: p.detach() for name, p in model_params(stack, m).items()}


@pytest.mark.parametrize("model", MODELS)
def test_output_shapes(model):
    cfg = tiny_config(model=model)
    depths = stack_order(model, DEPTHS)
    B, T, P = 5, sum(depths), cfg.context_length
    out = build(cfg, depths)(tiny_batch(cfg, n=B), attention=True)
    assert out.pred.shape == (B, len(depths))
    if model == "linear":
        assert out.layer_preds is None and out.query_attention is None
        return
    assert out.layer_preds.shape == (B, T)
    assert out.query_attention.shape == (B, T, P)  # P, not P + 1: the query never reads itself
    if model == "context_updates":
        assert out.context_attention.shape == (B, T, P, P)


@pytest.mark.parametrize("model", ENSEMBLES)
def test_attention_rows_are_distributions_over_the_context(model):
    cfg = tiny_config(model=model)
    out = built(cfg, stack_order(model, DEPTHS))(tiny_batch(cfg, n=6), attention=True)
    # P weights, each rounded once when normalised, summed with P roundings: within 2P ulps of 1
    # (measured: 4 ulps)
    P = cfg.context_length
    att = out.query_attention
    assert att.dtype == torch.float32 and (att >= 0).all()
    assert (att.sum(-1) - 1).abs().max() <= 2 * P * ULP
    if out.context_attention is not None:
        assert (out.context_attention.sum(-1) - 1).abs().max() <= 2 * P * ULP


def test_context_attention_ignores_the_query():
    cfg = tiny_config(model="context_updates")
    stack = built(cfg, [3, 2])
    batch = tiny_batch(cfg, n=4)
    other = Batch(batch.x, batch.y, torch.randn_like(batch.xq), batch.weights, batch.rotation, batch.teacher)
    a, b = stack(batch, attention=True), stack(other, attention=True)
    assert torch.equal(a.context_attention, b.context_attention)
    assert not torch.allclose(a.query_attention, b.query_attention)


def test_linear_prediction_is_linear_in_the_query():
    # Context states never depend on x_q, so y_hat = x_q . (something of the context only).
    # A query that leaked into the context (or read itself) would make y_hat nonlinear in x_q.
    cfg = tiny_config(model="linear")
    stack = built(cfg, [4, 2], seed=2)
    batch = tiny_batch(cfg, n=6)
    q1, q2 = batch.xq, torch.randn_like(batch.xq)
    pred = lambda q: stack(Batch(batch.x, batch.y, q, batch.weights, batch.rotation, batch.teacher)).pred.detach().double()
    # Each float32 prediction rounds a P = 12 term sum in each of up to 4 layers: (4 x 12) ulps of
    # its size, for each of the three compared; 2 x 3 x 48 < 512 (measured: 8 ulps). A query that
    # leaked into the context would break linearity by far more.
    size = pred(q1 + q2).abs().max() + pred(q1).abs().max() + pred(q2).abs().max()
    assert (pred(q1 + q2) - pred(q1) - pred(q2)).abs().max() <= 512 * ULP * size
    assert (pred(3 * q1) - 3 * pred(q1)).abs().max() <= 512 * ULP * 4 * pred(q1).abs().max()


def test_gammas_are_query_transpose_key():
    stack = built(tiny_config(model="linear"), [2, 1])
    g = stack.gammas()
    assert [t.shape[0] for t in g] == [2, 1]
    Q, K = stack.query[2].detach(), stack.key[2].detach()
    # The same k-term sums in another order: within k ulps of sum_c |Q_ci K_cj|
    k = Q.shape[0]
    assert torch.all((g[1][0].detach() - Q.T @ K).abs() <= k * ULP * (Q.abs().T @ K.abs()))


@pytest.mark.parametrize("model", ENSEMBLES)
def test_prediction_is_the_mean_of_the_layer_predictors(model):
    cfg = tiny_config(model=model)
    depths = stack_order(model, DEPTHS)
    out = built(cfg, depths, seed=4)(tiny_batch(cfg, n=6))
    start = 0
    for m, L in enumerate(depths):
        # The same L + D terms (layers, and the shared stream's D = d + 1 state entries) associated
        # otherwise: within 64 ulps of the prediction's size (FLOOR; measured: 3.7 ulps)
        diff = (out.layer_preds[:, start : start + L].mean(1) - out.pred[:, m]).abs().max()
        assert diff <= FLOOR * out.pred[:, m].abs().max()
        start += L


def test_sharp_softmax_layer_copies_the_matching_label():
    cfg = tiny_config(model="softmax", task="easy", dim=8, context_length=16)
    batch = tiny_batch(cfg, n=256)
    stack = build(cfg, [1])
    errors = {}
    for big in (0.0, 50.0):  # K^T Q = big * identity; big = 0 is uniform attention
        with torch.no_grad():
            stack.query.copy_(big**0.5 * torch.eye(8)[None])
            stack.key.copy_(big**0.5 * torch.eye(8)[None])
        pred, t = stack(batch).pred.detach()[:, 0], batch.target
        errors[big] = float((pred - t).abs().max() / t.abs().mean())
    assert errors[50.0] < 1e-3
    assert errors[0.0] > 0.1  # averaging the labels is no copy: the check above can fail


@pytest.mark.parametrize("model", MODELS)
def test_stack_equals_models_built_alone(model):
    cfg = tiny_config(model=model)
    depths = stack_order(model, [1, 2, 4])
    batch = tiny_batch(cfg, n=8)
    stack = build(cfg, depths)
    randomised = built(cfg, depths, seed=5)
    together, together_random = stack(batch).pred, randomised(batch).pred
    for m, L in enumerate(depths):
        alone = build(cfg, [L])  # the initialisation depends on (seed, depth) only
        # The same sums blocked otherwise by the batched products: within 64 ulps of the
        # prediction's size (FLOOR; measured: 2.6 ulps)
        close = lambda a, b: (a - b).abs().max() <= FLOOR * b.abs().max()
        assert close(alone(batch).pred[:, 0].detach(), together[:, m].detach())
        with torch.no_grad():  # and so does the forward pass, for any parameters
            for name, p in alone.named_parameters():
                p.copy_(params_of(randomised, m)[name].reshape(p.shape))
        assert close(alone(batch).pred[:, 0].detach(), together_random[:, m].detach())


@pytest.mark.parametrize("model", MODELS)
def test_training_a_group_equals_training_each_alone(model):
    cfg = tiny_config(model=model, steps=8, eval_points=2)
    group = train_group([cfg.replace(depth=L) for L in (1, 2, 4)], progress=False)
    for L, r in zip((1, 2, 4), group):
        assert r["config"]["depth"] == L
        alone = train(cfg.replace(depth=L), progress=False)
        # Gradients that differ by a few ulps (batched vs alone), through 8 Adam steps, whose
        # update g / sqrt(v) can turn an ulp of a near-zero gradient into a step: measured 2e-7,
        # allowed 1e-4 (wide: this checks that the group trains each model as alone, not rounding)
        assert r["final_loss"] == pytest.approx(alone["final_loss"], rel=1e-4)
        assert r["final_loss"] != pytest.approx(r["initial_loss"], rel=1e-4)  # it did train


def test_group_with_per_model_learning_rates():
    cfg = tiny_config(model="linear", depth=2, steps=8, eval_points=2)
    rates = (1e-3, 3e-2)
    group = train_group([cfg.replace(learning_rate=lr) for lr in rates], progress=False)
    alone = [train(cfg.replace(learning_rate=lr), progress=False)["final_loss"] for lr in rates]
    assert [r["final_loss"] for r in group] == pytest.approx(alone, rel=1e-4)  # as above
    assert alone[0] != pytest.approx(alone[1], rel=1e-3)


@pytest.mark.parametrize("model", ["linear", "softmax", "context_updates"])
def test_same_seed_is_bit_identical_other_seed_differs(model):
    cfg = tiny_config(model=model, depth=2, steps=10, eval_points=5)
    a, b = train(cfg, progress=False), train(cfg, progress=False)
    c = train(cfg.replace(seed=1), progress=False)
    assert a["loss_curve"] == b["loss_curve"]
    assert a["final_loss"] == b["final_loss"]
    assert a["loss_curve"]["loss"][1:] != c["loss_curve"]["loss"][1:]
    assert all(math.isfinite(v) for v in a["loss_curve"]["loss"])
