"""The compiled step (ICL_COMPILE=1, icl.core.accel.compiled): the same losses as the eager step,
to float32 rounding, on the CPU and on the simulated device, and its runs marked as compiled."""
import numpy as np
import pytest
from conftest import TINY, tiny_config
from simdevice import simulate

import icl.core.train

pytestmark = pytest.mark.slow  # compiling takes tens of seconds per stack shape


def group(device: str, model: str = "softmax", seed: int = 0) -> list:
    return [tiny_config(**{**TINY, "model": model, "depth": L, "key_dim": 3, "steps": 6, "eval_points": 2,
                           "device": device, "seed": seed}) for L in (1, 2)]


def losses(results: list[dict]) -> np.ndarray:
    return np.array([[*r["loss_curve"]["loss"], r["final_loss"]] for r in results])


def trained(monkeypatch, cfgs: list, compiled: bool) -> list[dict]:
    monkeypatch.setenv("ICL_COMPILE", "1" if compiled else "0")
    return icl.core.train.train_group(cfgs, progress=False)


@pytest.mark.parametrize("model", ["softmax", "shared_stream"])
def test_the_compiled_step_trains_to_the_eager_losses_on_the_cpu(monkeypatch, model):
    eager = trained(monkeypatch, group("cpu", model), compiled=False)
    fused = trained(monkeypatch, group("cpu", model), compiled=True)
    np.testing.assert_allclose(losses(fused), losses(eager), rtol=1e-4)
    assert [r.get("compiled_step") for r in fused] == [True, True]
    assert "compiled_step" not in eager[0]


def test_the_compiled_step_trains_to_the_eager_losses_on_the_simulated_device(monkeypatch):
    with simulate():
        eager = trained(monkeypatch, group("cuda"), compiled=False)
    with simulate():
        fused = trained(monkeypatch, group("cuda"), compiled=True)
    np.testing.assert_allclose(losses(fused), losses(eager), rtol=1e-4)


def test_the_compiled_replicated_step_trains_to_the_eager_losses_on_the_simulated_device(monkeypatch):
    """Two seeds as replicas of one stack (a GPU's pass): the step the paper_core profile spends its time in."""
    groups = [group("cuda", seed=s) for s in (0, 1)]
    with simulate():
        monkeypatch.setenv("ICL_COMPILE", "0")
        eager = icl.core.train.train_groups(groups, progress=False)
    with simulate():
        monkeypatch.setenv("ICL_COMPILE", "1")
        fused = icl.core.train.train_groups(groups, progress=False)
    assert [r["replicas_in_pass"] for g in fused for r in g] == [2] * 4
    for e, f in zip(eager, fused):
        np.testing.assert_allclose(losses(f), losses(e), rtol=1e-4)


def test_a_wrong_loss_would_be_seen(monkeypatch):
    """The comparison can fail: one more step moves the losses past its tolerance."""
    eager = trained(monkeypatch, group("cpu"), compiled=False)
    longer = trained(monkeypatch, [c.__class__(**{**c.to_dict(), "steps": 7}) for c in group("cpu")], compiled=False)
    with pytest.raises(AssertionError):
        np.testing.assert_allclose(losses(longer), losses(eager), rtol=1e-4)
