"""The fast generalised models (context_updates, shared_stream) against their first, per-model
loop implementation (icl.bench.LOOPED): same losses, per-layer predictors, attention and
gradients, for depth-1 stacks, mixed depths and both residual scales."""
import pytest
import torch

from conftest import tiny_batch, tiny_config
from icl.bench import LOOPED, check_same_looped
from icl.models import build, stack_order

pytestmark = pytest.mark.usefixtures("one_thread")

STACKS = [[1], [2], [3, 1, 2], [1, 2, 4, 8], [5, 5, 1]]


@pytest.mark.parametrize("model", list(LOOPED))
@pytest.mark.parametrize("depths", STACKS, ids=str)
@pytest.mark.parametrize("scale", ["inverse_depth", "unit"])
def test_fast_model_equals_the_looped_one(model, depths, scale):
    cfg = tiny_config(model=model, residual_scale=scale, key_dim=3, batch_size=16)
    check = check_same_looped(cfg, depths, torch.device("cpu"))
    assert check["same"], check
    assert check["loss_rel_diff"] < 1e-5 and check["grad_rel_diff"] < 1e-4 and check["layer_pred_rel_diff"] < 1e-5


def pair(model, depths, seed=3):
    cfg = tiny_config(model=model, key_dim=3)
    fast = build(cfg, stack_order(model, depths))
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in fast.parameters():
            p.add_(torch.randn(p.shape, generator=gen) * 0.5)
    looped = LOOPED[model](cfg, fast.depths)
    looped.load_state_dict(fast.state_dict())
    return cfg, fast, looped


@pytest.mark.parametrize("model", list(LOOPED))
def test_attention_equals_the_looped_one(model):
    cfg, fast, looped = pair(model, [4, 2, 1])
    batch = tiny_batch(cfg, n=5)
    with torch.no_grad():
        a, b = fast(batch, attention=True), looped(batch, attention=True)
    torch.testing.assert_close(a.query_attention, b.query_attention)
    torch.testing.assert_close(a.pred, b.pred)
    if model == "context_updates":
        torch.testing.assert_close(a.context_attention, b.context_attention)


def test_context_scalar_gradient_and_repeated_steps():
    """The learned update scalars get the looped model's gradient (zero for each model's last
    layer), step after step while the workspace is reused, and an evaluation pass in between
    (no gradient, no workspace) changes nothing."""
    cfg, fast, looped = pair("context_updates", [3, 2, 1])
    for step in range(3):
        batch = tiny_batch(cfg, n=8, seed=step)
        grads = []
        for stack in (fast, looped):
            stack.zero_grad()
            loss = ((stack(batch).pred - batch.target[:, None]) ** 2).mean()
            with torch.no_grad():
                stack(tiny_batch(cfg, n=3, seed=10 + step))
            loss.backward()
            grads.append(stack.context_scalar.grad.clone())
        torch.testing.assert_close(grads[0], grads[1])
        last = fast.offsets + torch.tensor(fast.depths) - 1
        assert torch.all(grads[0][last] == 0) and grads[0].abs().sum() > 0


def test_two_graphs_keep_their_own_attention():
    cfg, fast, looped = pair("context_updates", [2, 1])
    b1, b2 = tiny_batch(cfg, n=4, seed=1), tiny_batch(cfg, n=4, seed=2)
    loss = lambda s, b: ((s(b).pred - b.target[:, None]) ** 2).mean()
    fast.zero_grad()
    l1, l2 = loss(fast, b1), loss(fast, b2)  # the second forward pass must not overwrite the first's A
    (l1 + l2).backward()
    looped.zero_grad()
    (loss(looped, b1) + loss(looped, b2)).backward()
    torch.testing.assert_close(fast.query.grad, looped.query.grad)
    with pytest.raises(RuntimeError, match="retain_graph"):
        out = loss(fast, b1)
        out.backward(retain_graph=True)
        out.backward()
