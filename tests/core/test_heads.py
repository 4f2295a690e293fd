"""Multi-head layers and looped stacks (notebook 08, icl/core/heads.py): with one head and untied layers
every model is today's to the last bit; with several heads or tied layers every fast path computes
the plain algebra of icl.core.reference; and what the mechanism says of the controlled model holds
exactly: a layer of h heads is h layers, a looped stack is its one layer."""
import hashlib
import json

import pytest
import torch
from conftest import built, tiny_batch, tiny_config
from heads_pins import case, fingerprint, losses

from icl.core.accel import native
from icl.core.config import ConfigError, RunConfig
from icl.core.models import build, stack_order
from icl.core.reference import FACTOR, FLOOR, agreement, agrees, perturbed
from icl.core.train import train, train_group
from icl.running.cache import run_key

pytestmark = pytest.mark.usefixtures("one_thread")

# Printed by tests/heads_pins.py under the code before heads (commit 2601ed8), on this machine; the
# torch paths of untied_values and context_updates reprinted when their hand-written backward passes
# gave way to autograd (icl.core.models; the old pins differ from these in the last bits only):
FINGERPRINT = '2.13.0+cpu AVX512'
PINNED = {  # (model, path): per run (depths 3, 2, 1), final loss then loss curve
    ('linear', 'torch'): ['0x1.f16d220000000p-1 0x1.09893e0000000p+0 0x1.f66ad20000000p-1 0x1.f16d220000000p-1', '0x1.0853440000000p+0 0x1.2d85d40000000p+0 0x1.0fe5260000000p+0 0x1.0853440000000p+0', '0x1.1556de0000000p+0 0x1.2e0a520000000p+0 0x1.1a80b80000000p+0 0x1.1556de0000000p+0'],
    ('linear', 'kernels'): ['0x1.e27a6a0000000p-1 0x1.f8a3680000000p-1 0x1.e8da7e0000000p-1 0x1.e27a6a0000000p-1', '0x1.1b40800000000p+0 0x1.352c240000000p+0 0x1.21366c0000000p+0 0x1.1b40800000000p+0', '0x1.1425880000000p+0 0x1.2385780000000p+0 0x1.1803620000000p+0 0x1.1425880000000p+0'],
    ('softmax', 'torch'): ['0x1.cd04760000000p-1 0x1.ec2eec0000000p-1 0x1.d1deae0000000p-1 0x1.cd04760000000p-1', '0x1.148cdc0000000p+0 0x1.29a5f60000000p+0 0x1.19b71a0000000p+0 0x1.148cdc0000000p+0', '0x1.d6d4940000000p-1 0x1.f909a40000000p-1 0x1.e0f2540000000p-1 0x1.d6d4940000000p-1'],
    ('softmax', 'kernels'): ['0x1.efdf680000000p-1 0x1.0195300000000p+0 0x1.f3eca60000000p-1 0x1.efdf680000000p-1', '0x1.0f1e780000000p+0 0x1.22f60a0000000p+0 0x1.14198a0000000p+0 0x1.0f1e780000000p+0', '0x1.e967440000000p-1 0x1.042efe0000000p+0 0x1.f121c40000000p-1 0x1.e967440000000p-1'],
    ('untied_values', 'torch'): ['0x1.cc58dc0000000p-1 0x1.ec2eec0000000p-1 0x1.d14e420000000p-1 0x1.cc58dc0000000p-1', '0x1.1293e80000000p+0 0x1.29a5f60000000p+0 0x1.17d9ba0000000p+0 0x1.1293e80000000p+0', '0x1.d5ee840000000p-1 0x1.f909a40000000p-1 0x1.dfd3600000000p-1 0x1.d5ee840000000p-1'],
    ('untied_values', 'kernels'): ['0x1.f0c8360000000p-1 0x1.0195300000000p+0 0x1.f4d8a80000000p-1 0x1.f0c8360000000p-1', '0x1.0dd59e0000000p+0 0x1.22f60a0000000p+0 0x1.12ebde0000000p+0 0x1.0dd59e0000000p+0', '0x1.e7a3200000000p-1 0x1.042efe0000000p+0 0x1.ef85220000000p-1 0x1.e7a3200000000p-1'],
    ('shared_stream', 'torch'): ['0x1.2d401c0000000p+0 0x1.1e30760000000p+0 0x1.2ee87c0000000p+0 0x1.2d401c0000000p+0', '0x1.0a88e00000000p+0 0x1.1ca4d60000000p+0 0x1.1140320000000p+0 0x1.0a88e00000000p+0', '0x1.a6d8280000000p-1 0x1.620ba00000000p-1 0x1.a198120000000p-1 0x1.a6d8280000000p-1'],
    ('shared_stream', 'kernels'): ['0x1.3460580000000p+0 0x1.3e72560000000p+0 0x1.359a9e0000000p+0 0x1.3460580000000p+0', '0x1.0c86be0000000p+0 0x1.24e4a40000000p+0 0x1.1175a20000000p+0 0x1.0c86be0000000p+0', '0x1.50e5ae0000000p-1 0x1.55ea7c0000000p-1 0x1.5220060000000p-1 0x1.50e5ae0000000p-1'],
    ('context_updates', 'torch'): ['0x1.ccd3a20000000p-1 0x1.ec2eec0000000p-1 0x1.d1a4c40000000p-1 0x1.ccd3a20000000p-1', '0x1.14d55e0000000p+0 0x1.29a5f60000000p+0 0x1.19fea00000000p+0 0x1.14d55e0000000p+0', '0x1.d6d4960000000p-1 0x1.f909a80000000p-1 0x1.e0f2540000000p-1 0x1.d6d4960000000p-1'],
    ('context_updates', 'kernels'): ['0x1.f126580000000p-1 0x1.0195300000000p+0 0x1.f4ec480000000p-1 0x1.f126580000000p-1', '0x1.0ec8140000000p+0 0x1.22f60a0000000p+0 0x1.13d10a0000000p+0 0x1.0ec8140000000p+0', '0x1.e967420000000p-1 0x1.042efe0000000p+0 0x1.f121c40000000p-1 0x1.e967420000000p-1'],
}


# Two machines that both report AVX512 to torch differ in the last bits (2.2e-7 relative at most,
# two float32 ulps, measured on 2026-12-06): their microarchitectures pick other kernels. A change
# to the arithmetic moves six steps of training far more than this tolerance of about eight ulps.
PIN_TOLERANCE = 1e-6


def same_losses(got: list[str], pinned: list[str]) -> bool:
    """Every hexadecimal loss of `got` within PIN_TOLERANCE (relative) of the pinned one."""
    pairs = [(float.fromhex(a), float.fromhex(b)) for g, p in zip(got, pinned) for a, b in zip(g.split(), p.split())]
    return len(got) == len(pinned) and all(abs(a - b) <= PIN_TOLERANCE * abs(b) for a, b in pairs)


@pytest.mark.skipif(fingerprint() != FINGERPRINT, reason=f"losses pinned with torch and CPU {FINGERPRINT}")
@pytest.mark.parametrize("model, path", list(PINNED), ids=lambda v: str(v))
def test_one_head_and_untied_layers_train_to_todays_losses(model, path):
    if path == "kernels" and native.library("softmax_ensemble") is None:
        pytest.skip("no C compiler: no kernels")
    assert same_losses(losses(case(model, path, heads=1, tie_layers=False), path), PINNED[model, path])


def test_the_pin_comparison_fails_on_a_change_of_a_few_ulps_more():
    pinned = PINNED["linear", "torch"]
    moved = [" ".join((float.fromhex(x) * (1 + 4 * PIN_TOLERANCE)).hex() for x in run.split()) for run in pinned]
    assert same_losses(pinned, pinned) and not same_losses(moved, pinned)


HEADED = [(m, h, tied) for m in ("softmax", "untied_values", "shared_stream", "context_updates")
          for h, tied in ((2, False), (3, False), (1, True), (2, True)) if h == 1 or m != "context_updates"]


@pytest.mark.parametrize("model, heads, tied", HEADED, ids=lambda v: str(v))
@pytest.mark.parametrize("depths", [[3, 1, 2], [1]], ids=str)
@pytest.mark.parametrize("P, kernels", [(12, False), (16, True)], ids=["P12-torch", "P16-kernels"])
def test_heads_and_looped_layers_compute_the_plain_algebra(model, heads, tied, depths, P, kernels, monkeypatch):
    """As tests/core/test_reference.py does for one head: losses, per-layer predictors and every
    gradient (a looped layer's: the sum over its depths) within FACTOR of the plain float32 algebra."""
    monkeypatch.setenv("ICL_NATIVE", "1" if kernels else "0")
    cfg = tiny_config(model=model, context_length=P, key_dim=2, heads=heads, tie_layers=tied, batch_size=16)
    stack = perturbed(build(cfg, stack_order(model, depths)), 1)
    result = agreement(stack, tiny_batch(cfg, n=16, seed=1))
    assert agrees(result), {q: r for q, r in result.items() if r["ratio"] > FACTOR}


def close(a, b):
    """The same sums associated otherwise: within 64 ulps of the prediction's size (FLOOR)."""
    return (a - b).abs().max() <= FLOOR * b.abs().max()


@pytest.mark.parametrize("kernels", [False, True])
def test_a_layer_of_h_heads_is_h_layers_in_the_controlled_model(kernels, monkeypatch):
    """notebook 08: heads add predictors exactly as layers do. One layer of 3 heads of rank 2 predicts
    what 3 layers of rank 2 with the same queries and keys predict (1/L residual factor)."""
    monkeypatch.setenv("ICL_NATIVE", "1" if kernels else "0")
    cfg = tiny_config(model="softmax", key_dim=2)
    heads, layers = built(cfg.replace(heads=3), [1], seed=3), build(cfg, [3])
    with torch.no_grad():
        layers.query.copy_(heads.query.reshape(3, 2, 6))
        layers.key.copy_(heads.key.reshape(3, 2, 6))
        layers.readout.copy_(heads.readout)
    batch = tiny_batch(cfg, n=16)
    assert close(heads(batch).pred.detach(), layers(batch).pred.detach())
    assert not close(heads(batch).pred.detach(), build(cfg, [1])(batch).pred.detach())  # it can fail


@pytest.mark.parametrize("kernels", [False, True])
def test_a_looped_controlled_stack_is_its_one_layer(kernels, monkeypatch):
    """notebook 08: a looped controlled stack averages L identical predictors: with a 1/L residual
    factor a depth-4 looped model predicts what its one layer alone predicts."""
    monkeypatch.setenv("ICL_NATIVE", "1" if kernels else "0")
    cfg = tiny_config(model="softmax", key_dim=3, tie_layers=True)
    looped, one = built(cfg, [4, 1], seed=2), build(cfg, [1])
    with torch.no_grad():
        for name, p in one.named_parameters():
            p.copy_(dict(looped.named_parameters())[name][:1])
    out = looped(tiny_batch(cfg, n=16))
    pred = one(tiny_batch(cfg, n=16)).pred.detach()[:, 0]
    assert close(out.pred.detach()[:, 0], pred)
    assert torch.equal(out.layer_preds[:, 0], out.layer_preds[:, 3])  # the same predictor at every depth


@pytest.mark.parametrize("model", ["softmax", "shared_stream", "context_updates"])
def test_a_looped_model_is_one_layer_of_its_untied_twin(model):
    """Its parameters: one layer per model, whatever the depth, starting as the untied model's first."""
    cfg = tiny_config(model=model, key_dim=3)
    depths = stack_order(model, [4, 1])
    tied, untied = build(cfg.replace(tie_layers=True), depths), build(cfg, depths)
    assert tied.query.shape == (2, 3, cfg.dim + (model == "shared_stream"))
    for m, o in enumerate(untied.offsets.tolist()):
        assert torch.equal(tied.query[m], untied.query[o]) and torch.equal(tied.key[m], untied.key[o])
    count = lambda s: sum(p.numel() for p in s.parameters())
    assert count(build(cfg.replace(tie_layers=True), [8])) == count(build(cfg.replace(tie_layers=True), [1]))


@pytest.mark.parametrize("model, heads, tied", [("softmax", 2, True), ("shared_stream", 2, False),
                                                ("context_updates", 1, True)], ids=str)
def test_a_group_of_looped_or_headed_models_trains_each_as_alone(model, heads, tied):
    """Per-model rows (a looped layer belongs to its model) get each model's own updates."""
    cfg = tiny_config(model=model, key_dim=3, heads=heads, tie_layers=tied, steps=8, eval_points=2)
    group = train_group([cfg.replace(depth=L) for L in (1, 2, 4)], progress=False)
    for L, r in zip((1, 2, 4), group):
        alone = train(cfg.replace(depth=L), progress=False)
        assert r["final_loss"] == pytest.approx(alone["final_loss"], rel=1e-4)  # as tests/test_models.py
        assert r["final_loss"] != pytest.approx(r["initial_loss"], rel=1e-4)


# sha256 of json.dumps(cfg.to_dict(), sort_keys=True) under the code before heads (commit 2601ed8)
OLD_KEYS = {"default": "7417a1c17679eacbedeb162aea53ec95c39622ed3bd9e511601736da1c1133cc",
            "stream": "2d05d22f1fc2379719b6ec9792b84b2385a71a79af24b6ee534fd4dd23e187a5"}


def test_one_head_and_untied_layers_keep_the_config_part_of_every_cache_key():
    configs = {"default": RunConfig(), "stream": RunConfig(model="shared_stream", dim=8, key_dim=4, seed=3)}
    for name, cfg in configs.items():
        for same in (cfg, cfg.replace(heads=1, tie_layers=False)):
            assert hashlib.sha256(json.dumps(same.to_dict(), sort_keys=True).encode()).hexdigest() == OLD_KEYS[name]
    cfg = configs["stream"]
    assert cfg.replace(heads=2).to_dict()["heads"] == 2 and cfg.replace(tie_layers=True).to_dict()["tie_layers"] is True
    keys = {run_key(c) for c in (cfg, cfg.replace(heads=2), cfg.replace(tie_layers=True))}
    assert len(keys) == 3  # and new runs get keys of their own
    for c in (cfg, cfg.replace(heads=2, tie_layers=True)):
        assert RunConfig.from_dict(c.to_dict()) == c


@pytest.mark.parametrize("changes, message", [
    (dict(heads=0), "heads: 0 is not allowed"),
    (dict(heads=3, key_dim=3), r"heads: 3 is not allowed; heads \* key_dim \(3 \* 3\) must be at most dim \(6\)"),
    (dict(heads=2), r"heads \* key_dim \(2 \* 6\)"),  # key_dim 0 is dim
    (dict(heads=2, key_dim=2, model="linear"), "heads: 2 is allowed only for the models"),
    (dict(heads=2, key_dim=2, model="context_updates"), "heads: 2 is allowed only for the models"),
    (dict(tie_layers=True, model="linear"), "tie_layers: true is allowed only for the models"),
    (dict(tie_layers=True, key_dim=2, subspace="tiled"), "subspace: 'tiled' is allowed only with heads 1"),
])
def test_impossible_heads_and_loops_are_config_errors_in_one_line(changes, message):
    with pytest.raises(ConfigError, match=message) as err:
        tiny_config(**changes)
    assert "\n" not in str(err.value)


def test_the_estimates_count_heads_and_looped_layers():
    """icl.core.memory and icl.running.workload: h heads are h times the attention, a looped stack has one
    layer's parameters per model; a multi-head shared stream trains without its C kernel."""
    from icl.core.accel.native import in_use
    from icl.core.memory import estimate_bytes, step_floats

    for model in ("softmax", "shared_stream"):
        cfg = RunConfig(model=model, dim=16, key_dim=4, context_length=64, batch_size=64, eval_contexts=64)
        assert step_floats(cfg.replace(heads=4), [4, 2, 1], 64) > 3 * step_floats(cfg, [4, 2, 1], 64)
        assert estimate_bytes(cfg.replace(tie_layers=True), [64]) < estimate_bytes(cfg, [64])
    stream = RunConfig(model="shared_stream", dim=16, key_dim=4, context_length=64)
    assert not any(k.startswith("shared_stream") for k in in_use(stream.replace(heads=2), torch.device("cpu")))
