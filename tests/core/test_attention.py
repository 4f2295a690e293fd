"""The attention nonlinearity (icl.core.attention): every softmax-family model trains through
autograd under any entry of NONLINEARITIES and computes what the plain algebra computes with it;
the C kernels, which compute softmax only, step aside; and a nonlinearity added to that one dict,
and nowhere else, is a valid config that trains (docs/architecture.md says so)."""
import math

import pytest
import torch
from conftest import tiny_batch, tiny_config

from icl.core import attention as attention_module
from icl.core.accel import native
from icl.core.config import ConfigError
from icl.core.models import build, stack_order
from icl.core.reference import FACTOR, agreement, agrees, perturbed
from icl.core.train import train_group

pytestmark = pytest.mark.usefixtures("one_thread")

FAMILY = ["softmax", "untied_values", "context_updates", "shared_stream"]


def agree(cfg, depths) -> dict:
    stack = perturbed(build(cfg, stack_order(cfg.model, depths)), 1)
    result = agreement(stack, tiny_batch(cfg, n=16, seed=1))
    assert agrees(result), {q: r for q, r in result.items() if r["ratio"] > FACTOR}
    return result


OTHERS = [k for k in attention_module.NONLINEARITIES if k != attention_module.KERNEL_NONLINEARITY]


@pytest.mark.parametrize("kind", OTHERS)
@pytest.mark.parametrize("model", FAMILY)
@pytest.mark.parametrize("heads, tied", [(1, False), (2, True)], ids=["h1", "h2-tied"])
def test_every_other_nonlinearity_computes_the_plain_algebra(kind, model, heads, tied):
    """With 16 tokens the kernels could run; under a nonlinearity other than softmax they must not,
    and autograd agrees with the plain algebra."""
    heads = 1 if model == "context_updates" else heads  # context updates have one head per layer
    cfg = tiny_config(model=model, nonlinearity=kind, context_length=16, key_dim=3, heads=heads,
                      tie_layers=tied, batch_size=16)
    assert not [k for k in native.in_use(cfg, torch.device("cpu")) if not k.startswith("sampling")]
    agree(cfg, [3, 1, 2])


def test_the_nonlinearity_changes_what_is_computed(monkeypatch):
    """The check above can fail: the plain algebra under sigmoid, the stack under softmax."""
    import icl.core.reference as ref

    cfg = tiny_config(model="softmax", key_dim=3, batch_size=16)
    stack = perturbed(build(cfg, [2, 1]), 1)
    batch = tiny_batch(cfg, n=16, seed=1)
    assert agrees(agreement(stack, batch))
    monkeypatch.setattr(ref, "weights", lambda s, kind: attention_module.weights(s, "sigmoid"))
    assert not agrees(agreement(stack, batch))


def test_a_nonlinearity_added_to_the_dict_alone_trains(monkeypatch):
    """One entry in NONLINEARITIES is all a new nonlinearity needs: the config accepts it, every
    model of the family trains a group with it, and the plain algebra agrees."""
    monkeypatch.setitem(attention_module.NONLINEARITIES, "relu",
                        lambda s: torch.relu(s) / s.shape[-1])  # ReLU attention, scaled by 1 / P
    for model in FAMILY:
        cfg = tiny_config(model=model, nonlinearity="relu", key_dim=3, steps=4, batch_size=16)
        agree(cfg, [2, 1])
        for r in train_group([cfg.replace(depth=L) for L in (2, 1)]):
            assert math.isfinite(r["final_loss"])


@pytest.mark.parametrize("model", FAMILY)
def test_the_attention_a_model_reports_is_each_rows_shares(model):
    """The measurements (target mass, entropy, token selection) read shares: under sigmoid the
    reported rows sum to 1 although the weights do not."""
    cfg = tiny_config(model=model, nonlinearity="sigmoid", key_dim=3, batch_size=16)
    stack = perturbed(build(cfg, stack_order(model, [2, 1])), 1)
    with torch.no_grad():
        out = stack(tiny_batch(cfg, n=8, seed=1), attention=True)
    for att in (out.query_attention, out.context_attention):
        if att is not None:
            assert (att.sum(-1) - 1).abs().max() < 1e-5


def test_an_unknown_nonlinearity_is_named_in_the_error():
    with pytest.raises(ConfigError, match=r"nonlinearity: unknown value 'sofmax'; allowed: softmax, sigmoid"):
        tiny_config(nonlinearity="sofmax")
    with pytest.raises(ConfigError, match="nonlinearity: 'sigmoid' is allowed only for the softmax-family"):
        tiny_config(model="linear", nonlinearity="sigmoid")


def test_softmax_configs_keep_their_cache_keys():
    """nonlinearity is a later field: at its default it is not in the config's dict (nor its key)."""
    assert "nonlinearity" not in tiny_config().to_dict()
    assert tiny_config(nonlinearity="sigmoid").to_dict()["nonlinearity"] == "sigmoid"
