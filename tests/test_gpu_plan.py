"""`icl reproduce --plan --device cuda` plans a profile on an H100-class GPU on paper, on any machine:
a fixed cost per step (kernels launched, the looped QR) beside the arithmetic."""
import pytest
import torch

from conftest import tiny_config
from icl import gpu_plan
from icl.cli import main

pytestmark = pytest.mark.usefixtures("one_thread")


def group(model: str, depths) -> list:
    return [tiny_config(model=model, depth=L) for L in depths]


def test_kernels_a_step_launches_grow_with_the_layer_loop_not_with_a_batched_stack():
    # The softmax stack computes every layer in one batched pass; the linear model loops over layers.
    assert gpu_plan.kernels_per_step(group("softmax", [1, 2, 64])) == gpu_plan.kernels_per_step(group("softmax", [1, 2]))
    shallow, deep = gpu_plan.kernels_per_step(group("linear", [1, 2])), gpu_plan.kernels_per_step(group("linear", [1, 2, 16]))
    assert 20 < shallow < deep


def test_a_step_costs_the_larger_of_its_fixed_cost_and_its_arithmetic(monkeypatch):
    g = group("softmax", [1, 2])
    parts = gpu_plan.group_seconds(g)
    kernels = gpu_plan.kernels_per_step(g)
    assert parts["launches"] == pytest.approx(g[0].steps * kernels * gpu_plan.LAUNCH)
    assert parts["qr"] == pytest.approx(g[0].steps * g[0].batch_size * gpu_plan.QR_PER_MATRIX) and parts["arithmetic"] == 0
    monkeypatch.setattr(gpu_plan, "FLOPS", 1.0)  # a GPU of one FLOP/s: the arithmetic is all there is
    slow = gpu_plan.group_seconds(g)
    assert slow["launches"] == slow["qr"] == 0 and slow["arithmetic"] > parts["launches"] + parts["qr"]


def test_the_plan_of_a_gpu_prints_on_a_machine_without_one(capsys, monkeypatch):
    import icl.train

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(icl.train, "train_group", lambda *a, **k: pytest.fail("the plan trained"))
    assert main(["reproduce", "--profile", "ci", "--plan", "--device", "cuda", "--only", "02_easy_nonlinear"]) == 0
    err = capsys.readouterr().err
    assert "on one H100-class GPU (planned on paper, not measured)" in err and "kernel launches" in err, err
    assert "of 80.0 GB" in err
