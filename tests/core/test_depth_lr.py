"""The depth-scaled learning rate (`lr_inverse_depth_exponent`): depth L trains at
learning_rate / L**x inside the one batched Adam; at x = 0, exactly today's rates and cache keys."""
import copy

import pytest
import torch
from conftest import tiny_config

import icl.core.train as train_module
from icl.core.config import ConfigError, RunConfig
from icl.core.reference import model_params
from icl.core.train import lr_factor, model_lr, train_group

pytestmark = pytest.mark.usefixtures("one_thread")

DEPTHS = (1, 4, 16)


class Spy(train_module.StackAdam):
    """StackAdam that keeps its stack, the per-model rates it was given and the initial parameters."""
    made = []

    def __init__(self, stack, lrs, **kw):
        super().__init__(stack, lrs, **kw)
        self.stack, self.lrs = stack, lrs.clone()
        self.initial = copy.deepcopy(stack)
        Spy.made.append(self)


@pytest.fixture
def spy(monkeypatch):
    Spy.made = []
    monkeypatch.setattr(train_module, "StackAdam", Spy)
    return Spy.made


def test_exponent_zero_is_todays_config_and_rates(spy):
    cfg = tiny_config(model="softmax", steps=2, eval_points=1)
    assert "lr_inverse_depth_exponent" not in cfg.to_dict()  # the run cache's config part is unchanged
    assert RunConfig.from_dict({**cfg.to_dict(), "lr_inverse_depth_exponent": 0}) == cfg
    train_group([cfg.replace(depth=L) for L in DEPTHS], progress=False)
    rates = torch.tensor([cfg.learning_rate] * len(DEPTHS))  # as the stack's Adam got them before the option
    assert torch.equal(spy[0].lrs.cpu(), rates)
    assert all(model_lr(cfg.replace(depth=L)) == cfg.learning_rate for L in (1, 64, 256))  # bit for bit


def test_exponent_scales_each_models_first_step(spy):
    """Adam's first step moves every parameter by lr * g / (|g| + eps): the largest move of each
    model's own parameters is its peak rate times the warm-up factor, so it shows the rate used."""
    cfg = tiny_config(model="softmax", steps=1, eval_points=1, learning_rate=1e-2, lr_inverse_depth_exponent=0.5)
    cfgs = [cfg.replace(depth=L) for L in DEPTHS]
    train_group(cfgs, progress=False)
    opt = spy[0]
    for m, L in enumerate(opt.stack.depths):
        before, after = model_params(opt.initial, m), model_params(opt.stack, m)
        moved = max(float((after[n] - before[n]).detach().abs().max()) for n in after)
        assert moved == pytest.approx(1e-2 * L**-0.5 * lr_factor(cfg, 0), rel=1e-3), f"depth {L}"


@pytest.mark.parametrize("bad", [float("nan"), 2.5, -3.0])
def test_exponent_outside_its_range_is_refused_by_name(bad):
    with pytest.raises(ConfigError, match="lr_inverse_depth_exponent"):
        tiny_config(lr_inverse_depth_exponent=bad)
