"""The models of the paper (§2) against hand computations, their masks and shapes, stacks against
models built alone, and training: batched groups, determinism."""
import math

import numpy as np
import pytest
import torch

from conftest import ENSEMBLES, MODELS, built, tiny_batch, tiny_config
from icl.models import build, stack_order
from icl.tasks import Batch
from icl.train import train, train_group

pytestmark = pytest.mark.usefixtures("one_thread")

DEPTHS = [3, 1, 2]


def params_of(stack, m: int) -> dict:
    """Model m's parameters as float64 numpy arrays: per-layer tensors sliced to its layers."""
    o, L = int(stack.offsets[m]), stack.depths[m]
    own = stack.owners()
    out = {}
    for name, p in stack.named_parameters():
        rows = slice(o, o + L) if len(own[name]) == len(stack.layer_model) else m
        out[name] = p.detach()[rows].double().numpy()
    return out


def softmax(s: np.ndarray) -> np.ndarray:
    e = np.exp(s - s.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def masked_attention(Q, K, Z, linear: bool) -> np.ndarray:
    """Full (P+1)x(P+1) attention over tokens Z = [context; query] with scores (Q z_i).(K z_j),
    written the plain way with an explicit mask: no token attends to the query (last column)."""
    n = Z.shape[0]
    s = (Z @ Q.T) @ (Z @ K.T).T
    allowed = np.ones((n, n), bool)
    allowed[:, -1] = False
    if linear:
        return np.where(allowed, s, 0.0) / (n - 1)
    return softmax(np.where(allowed, s, -np.inf))


def reference(model: str, p: dict, x, y, xq, step: float) -> float:
    """One model's prediction for one context, by the equations of the paper's §2 (numpy, float64)."""
    L, P = p["query"].shape[0], len(y)
    X = np.vstack([x, xq])  # (P+1, d): the query is the last token
    h = np.append(y, 0.0)  # label states; the query's starts at 0
    if model == "shared_stream":
        Z = np.hstack([X, h[:, None]])  # (P+1, d+1): one state per token
        for l in range(L):
            A = masked_attention(p["query"][l], p["key"][l], Z, linear=False)
            Z = Z + step * A @ Z @ p["value"].T
        return float(p["readout"] @ Z[-1])
    hq = 0.0
    for l in range(L):
        A = masked_attention(p["query"][l], p["key"][l], X, linear=model == "linear")
        read = A[-1] @ h  # what the query reads from the current states
        value = p["value"][l] if model == "untied_values" else 1.0
        hq += step * value * read
        if model == "linear":
            h = h - step * np.append(A[:-1] @ h, 0.0)  # context rows take -1
        elif model == "context_updates":
            h = h + p["context_scalar"][l] * np.append(A[:-1] @ h, 0.0)
    return float(p["readout"] * hq)


@pytest.mark.parametrize("scale", ["inverse_depth", "unit"])
@pytest.mark.parametrize("model", MODELS)
def test_every_model_matches_its_masked_reference(model, scale):
    cfg = tiny_config(model=model, residual_scale=scale, key_dim=4)
    depths = stack_order(model, DEPTHS)
    stack = built(cfg, depths, seed=1)
    batch = tiny_batch(cfg, n=4)
    pred = stack(batch).pred.detach().double().numpy()  # (B, M)
    for m, L in enumerate(depths):
        step = 1.0 / L if scale == "inverse_depth" else 1.0
        p = params_of(stack, m)
        for b in range(len(batch)):
            ref = reference(model, p, *(t[b].double().numpy() for t in (batch.x, batch.y, batch.xq)), step)
            assert pred[b, m] == pytest.approx(ref, rel=1e-4, abs=1e-5), (m, L, b)


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
    # float32 softmax rows sum to 1 up to float32 rounding, so compare at float32's tolerance
    att = out.query_attention
    assert att.dtype == torch.float32 and (att >= 0).all()
    torch.testing.assert_close(att.sum(-1), torch.ones(att.shape[:-1]))
    if out.context_attention is not None:
        ctx = out.context_attention
        torch.testing.assert_close(ctx.sum(-1), torch.ones(ctx.shape[:-1]))


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
    pred = lambda q: stack(Batch(batch.x, batch.y, q, batch.weights, batch.rotation, batch.teacher)).pred.double()
    torch.testing.assert_close(pred(q1 + q2), pred(q1) + pred(q2), rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(pred(3 * q1), 3 * pred(q1), rtol=1e-4, atol=1e-5)


def test_linear_model_is_the_ordered_polynomial():
    """Paper §2 (the linear model, A.1): L steps of preconditioned in-context GD, computed by hand with numpy."""
    cfg = tiny_config(model="linear", dim=4, context_length=8, key_dim=3)
    L = 3
    stack = built(cfg, [L], seed=3)
    batch = tiny_batch(cfg, n=2)
    Q, K = stack.query.detach().double().numpy(), stack.key.detach().double().numpy()
    r = float(stack.readout.detach()[0])
    for b in range(2):
        X, h, xq = (t[b].double().numpy() for t in (batch.x, batch.y, batch.xq))
        hq = 0.0
        for l in range(L):
            G = Q[l].T @ K[l]  # Gamma_l = Q_l^T K_l
            u = G @ X.T @ h / 8  # (d,) uses the states before this layer
            h, hq = h - X @ u / L, hq + xq @ u / L
        assert float(stack(batch.slice(b, b + 1)).pred.detach()[0, 0]) == pytest.approx(r * hq, rel=1e-5)


def test_gammas_are_query_transpose_key():
    stack = built(tiny_config(model="linear"), [2, 1])
    g = stack.gammas()
    assert [t.shape[0] for t in g] == [2, 1]
    torch.testing.assert_close(g[1][0], stack.query[2].T @ stack.key[2])


@pytest.mark.parametrize("model", ENSEMBLES)
def test_prediction_is_the_mean_of_the_layer_predictors(model):
    cfg = tiny_config(model=model)
    depths = stack_order(model, DEPTHS)
    out = built(cfg, depths, seed=4)(tiny_batch(cfg, n=6))
    start = 0
    for m, L in enumerate(depths):
        torch.testing.assert_close(out.layer_preds[:, start : start + L].mean(1), out.pred[:, m])
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
        torch.testing.assert_close(alone(batch).pred[:, 0], together[:, m], rtol=1e-5, atol=1e-6)
        with torch.no_grad():  # and so does the forward pass, for any parameters
            for name, p in alone.named_parameters():
                p.copy_(torch.from_numpy(params_of(randomised, m)[name]).float().reshape(p.shape))
        torch.testing.assert_close(alone(batch).pred[:, 0], together_random[:, m], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("model", MODELS)
def test_training_a_group_equals_training_each_alone(model):
    cfg = tiny_config(model=model, steps=8, eval_points=2)
    group = train_group([cfg.replace(depth=L) for L in (1, 2, 4)], progress=False)
    for L, r in zip((1, 2, 4), group):
        assert r["config"]["depth"] == L
        alone = train(cfg.replace(depth=L), progress=False)
        assert r["final_loss"] == pytest.approx(alone["final_loss"], rel=1e-4)
        assert r["final_loss"] != pytest.approx(r["initial_loss"], rel=1e-4)  # it did train


def test_group_with_per_model_learning_rates():
    cfg = tiny_config(model="linear", depth=2, steps=8, eval_points=2)
    rates = (1e-3, 3e-2)
    group = train_group([cfg.replace(learning_rate=lr) for lr in rates], progress=False)
    alone = [train(cfg.replace(learning_rate=lr), progress=False)["final_loss"] for lr in rates]
    assert [r["final_loss"] for r in group] == pytest.approx(alone, rel=1e-4)
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
