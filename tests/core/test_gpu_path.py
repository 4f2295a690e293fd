"""The GPU path, checked on the CPU: every model, the end-of-run summaries, a divergence and a tiny
sweep train on a simulated second device (tests/simdevice.py), which raises on any operation that
mixes its tensors with CPU tensors (as CUDA does) and records every scalar read and every copy
between host and device; none may happen inside a training step (each one waits for a GPU)."""
import json

import pytest
import simdevice
import torch
import yaml
from conftest import MODELS, TINY, tiny_config
from simdevice import NAME, simulate

import icl.core.train
from icl.core.train import DivergenceError
from icl.running.cli import main

ON_DEVICE = {**TINY, "device": "cuda", "steps": 8, "eval_points": 2}
STEP_COSTS = ("sync", "h2d", "d2h")  # what a training step must not do on a GPU


def group(model: str, **changes) -> list:
    """One small group (depths 1 and 2) with every end-of-run summary the model has: rank-limited
    softmax layers (the subspaces summary), mode-wise losses and focusing statistics."""
    key_dim = 3 if model in ("softmax", "untied_values") else 0
    return [tiny_config(**{**ON_DEVICE, "model": model, "depth": L, "key_dim": key_dim, "track_modes": True,
                           "track_focus": True, **changes}) for L in (1, 2)]


def assert_no_step_costs(watch) -> None:
    assert not any(watch.summary(in_step=True).get(k) for k in STEP_COSTS), \
        "inside training steps:\n" + watch.describe(STEP_COSTS, in_step=True)


def test_the_simulated_device_sees_what_a_gpu_would():
    with simulate() as watch:
        x = torch.arange(6.0).to(simdevice.DEVICE)  # a copy to the device
        y = (x * 2 + torch.tensor(1.0)).sum()  # a 0-dim CPU tensor is a scalar: allowed
        assert y.device.type == NAME and float(y) == 36.0  # a sync
        (x > 2).nonzero()  # its size depends on the numbers: a sync
        x.cpu()  # a copy back
        with pytest.raises(RuntimeError, match="same device"):
            x + torch.ones(6)
    assert [e.kind for e in watch.events] == ["h2d", "sync", "sync", "d2h", "mixed"]


# Every model, and the multi-head and looped ones (notebook 08): their torch paths and gathers.
VARIANTS = [(m, {}) for m in MODELS] + [
    ("softmax", {"heads": 2}), ("shared_stream", {"heads": 2, "key_dim": 3}),
    ("softmax", {"tie_layers": True}), ("shared_stream", {"tie_layers": True}), ("context_updates", {"tie_layers": True})]


@pytest.mark.parametrize("model, changes", VARIANTS, ids=lambda v: str(v) if isinstance(v, str) else
                         ",".join(f"{k}={x}" for k, x in v.items()) or "plain")
def test_every_model_trains_on_a_device_without_host_round_trips(model, changes):
    with simulate() as watch:
        results = icl.core.train.train_group(group(model, **changes), progress=False)
    assert [r["device"] for r in results] == [NAME] * 2
    assert all(r["final_loss"] > 0 for r in results)
    if model in ("softmax", "untied_values"):  # the rank-limited summary (subspaces.coverage_error) ran
        assert all("coverage_error" in r["parameters"]["subspaces"] for r in results)
    assert_no_step_costs(watch)


@pytest.mark.parametrize("model, changes", VARIANTS + [("softmax", {"subspace": "tiled"})],
                         ids=lambda v: str(v) if isinstance(v, str) else ",".join(f"{k}={x}" for k, x in v.items()) or "plain")
def test_seeds_train_on_a_device_as_replicas_without_host_round_trips(model, changes):
    groups = [group(model, seed=seed, **changes) for seed in (0, 1)]
    with simulate() as watch:
        results = icl.core.train.train_groups(groups, progress=False)  # a device replicates by default
    assert all(r["models_in_pass"] == 4 and r["replicas_in_pass"] == 2 and r["device"] == NAME for rs in results for r in rs)
    assert results[0][1]["final_loss"] != results[1][1]["final_loss"]
    assert_no_step_costs(watch)


@pytest.mark.parametrize("model", MODELS)
def test_a_divergence_in_the_final_evaluation_on_a_device_is_a_divergence_error(model):
    # One step at a huge rate: the step's loss is finite, the update is not, so the final
    # evaluation is where it shows (the path that names the models from the evaluation's losses).
    with simulate(), pytest.raises(DivergenceError, match="final evaluation") as err:
        icl.core.train.train_group([tiny_config(**{**ON_DEVICE, "model": model, "depth": L, "steps": 1, "learning_rate": 1e30})
                               for L in (1, 2)], progress=False)
    assert sorted(err.value.models) == [0, 1] and err.value.step is None


def test_a_divergence_along_training_on_a_device_names_its_step():
    with simulate(), pytest.raises(DivergenceError, match=r"at step \d+"):
        icl.core.train.train_group([tiny_config(**{**ON_DEVICE, "model": "linear", "depth": 2, "steps": 40,
                                               "learning_rate": 1e6, "schedule": "constant"})], progress=False)


def test_a_tiny_sweep_runs_on_a_device(tmp_path):
    spec = {**ON_DEVICE, "model": "softmax", "key_dim": 3, "depths": [1, 2], "seeds": [0, 1]}
    (tmp_path / "sweep.yaml").write_text(yaml.safe_dump(spec))
    out = tmp_path / "sweep.json"
    with simulate() as watch:
        assert main(["sweep", str(tmp_path / "sweep.yaml"), "--cache", str(tmp_path / "runs"), "--json", str(out),
                     "--no-progress"]) == 0
    runs = json.loads(out.read_text())["runs"]
    assert len(runs) == 4 and {r["device"] for r in runs} == {NAME}
    assert_no_step_costs(watch)
