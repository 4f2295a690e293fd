"""The fast generalised models (context_updates, shared_stream) against their first, per-model
loop implementation (icl.core.looped): the attention they report, the context scalars' gradients
over repeated steps, and the workspace they keep for the backward pass. Their losses, per-layer
predictors and gradients are checked against the plain algebra in tests/core/test_reference.py."""
import pytest
import torch
from conftest import tiny_batch, tiny_config

from icl.core.layers import context_states, path
from icl.core.models import build, stack_order
from icl.core.reference import FLOOR
from icl.core.registry import having, implementation
from icl.core.tasks import Batch

pytestmark = pytest.mark.usefixtures("one_thread")


def pair(model, depths, seed=3, P=12):
    cfg = tiny_config(model=model, key_dim=3, context_length=P)
    fast = build(cfg, stack_order(model, depths))
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in fast.parameters():
            p.add_(torch.randn(p.shape, generator=gen) * 0.5)
    looped = implementation(model, "looped")(cfg, fast.depths)
    looped.load_state_dict(fast.state_dict())
    return cfg, fast, looped


@pytest.mark.parametrize("model", having("looped"))
def test_attention_equals_the_looped_one(model):
    """The attention the fast stack reports, against the first implementation run in float64."""
    cfg, fast, looped = pair(model, [4, 2, 1])
    looped.double()
    batch = tiny_batch(cfg, n=5)
    exact = Batch(*(t.double() for t in batch.tensors()))
    with torch.no_grad():
        a, b = fast(batch, attention=True), looped(exact, attention=True)
    # Weights in [0, 1] from float32 scores of |s| of a few units: within FLOOR (64 ulps of 1) of
    # their float64 values (measured: 4.6e-7 at most, shared_stream; the predictions 1.4e-7 of their size).
    assert (a.query_attention - b.query_attention).abs().max() < FLOOR
    assert (a.pred - b.pred).abs().max() < FLOOR * b.pred.abs().max()
    if model == "context_updates":
        assert (a.context_attention - b.context_attention).abs().max() < FLOOR


def loss_of(stack, batch):
    return ((stack(batch).pred - batch.target[:, None]) ** 2).mean()


def test_context_scalar_gradient_and_repeated_steps():
    """The learned update scalars get a gradient (zero for each model's last layer), step after
    step while the workspace is reused, and an evaluation pass in between (no gradient, no
    workspace) changes nothing: bit for bit, as the same arithmetic runs on the same numbers."""
    cfg, fast, _ = pair("context_updates", [3, 2, 1])
    for step in range(3):
        batch = tiny_batch(cfg, n=8, seed=step)
        grads = []
        for between in (False, True):
            fast.zero_grad()
            loss = loss_of(fast, batch)
            if between:
                with torch.no_grad():
                    fast(tiny_batch(cfg, n=3, seed=10 + step))
            loss.backward()
            grads.append(fast.context_scalar.grad.clone())
        assert torch.equal(grads[0], grads[1])
        last = fast.offsets + torch.tensor(fast.depths) - 1
        assert torch.all(grads[0][last] == 0) and grads[0].abs().sum() > 0


@pytest.mark.parametrize("P", [12, 16], ids=["P12-autograd", "P16-kernels"])
def test_two_graphs_keep_their_own_attention(P):
    """Two forward passes before one backward: each graph keeps its own attention, on autograd and,
    with a multiple of 16 tokens, in the kernel's workspace."""
    cfg, fast, _ = pair("context_updates", [2, 1], P=P)
    kernel = path(context_states, fast, P, fast.query) is not context_states
    if P == 16 and not kernel:
        pytest.skip("no C compiler: no kernels")
    b1, b2 = tiny_batch(cfg, n=4, seed=1), tiny_batch(cfg, n=4, seed=2)
    alone = []
    for b in (b1, b2):  # each graph built and used alone
        fast.zero_grad()
        loss_of(fast, b).backward()
        alone.append(fast.query.grad.clone())
    fast.zero_grad()
    l1, l2 = loss_of(fast, b1), loss_of(fast, b2)  # the second forward pass must not overwrite the first's A
    (l1 + l2).backward()
    # The same two gradients, perhaps added in another order by the autograd engine: within a few
    # ulps of |g1| + |g2| (re-associating a sum of a few rounded terms moves it by an ulp of each;
    # measured on this machine: equal bit for bit).
    bound = 4 * 2.0**-24 * (alone[0].abs() + alone[1].abs())
    assert torch.all((fast.query.grad - (alone[0] + alone[1])).abs() <= bound)
    fast.zero_grad()
    out = loss_of(fast, b1)
    out.backward(retain_graph=True)
    if kernel:  # the kernel gave its workspace back after the first backward pass, and says so
        with pytest.raises(RuntimeError, match="retain_graph"):
            out.backward()
    else:  # autograd keeps the graph: a second pass adds the same gradient again
        out.backward()
        assert torch.allclose(fast.query.grad, 2 * alone[0], rtol=1e-6, atol=0)
