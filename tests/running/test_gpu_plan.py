"""`icl reproduce --plan --device cuda` plans a profile on an H100-class GPU on paper, on any machine:
a fixed cost per step (kernels launched, the rotations' among them) beside the arithmetic."""
import pytest
import torch

from conftest import tiny_config
from icl.running import gpu_plan
from icl.running.cli import main

pytestmark = pytest.mark.usefixtures("one_thread")


def group(model: str, depths) -> list:
    return [tiny_config(model=model, depth=L) for L in depths]


def test_kernels_a_step_launches_grow_with_the_layer_loop_not_with_a_batched_stack():
    # The softmax stack computes every layer in one batched pass; the linear model loops over layers.
    assert gpu_plan.lane_kernels([group("softmax", [1, 2, 64])]) == gpu_plan.lane_kernels([group("softmax", [1, 2])])
    shallow, deep = gpu_plan.lane_kernels([group("linear", [1, 2])]), gpu_plan.lane_kernels([group("linear", [1, 2, 16])])
    assert 20 < shallow < deep


@pytest.mark.parametrize("model", ["softmax", "linear", "shared_stream"])
def test_replicas_launch_the_kernels_of_one_stack_and_the_draws_of_each(model):
    seeds = [[c.replace(seed=s) for c in group(model, [1, 2, 8])] for s in range(4)]
    one, two, four = (gpu_plan.lane_kernels(seeds[:n]) for n in (1, 2, 4))
    assert two == four  # whatever the number of replicas
    assert one <= two < one + 20  # a few more than one group: the batched reads of per-replica buffers
    alone = sum(gpu_plan.pass_seconds([g])["launches"] for g in seeds)
    together = gpu_plan.pass_seconds(seeds)["launches"]
    draws = seeds[0][0].steps * gpu_plan.draw_kernels(seeds[0][0]) * gpu_plan.LAUNCH
    assert together == pytest.approx(seeds[0][0].steps * four * gpu_plan.LAUNCH + 4 * draws)
    assert together < alone


def test_a_step_costs_the_larger_of_its_fixed_cost_and_its_arithmetic(monkeypatch):
    g = group("softmax", [1, 2])
    parts = gpu_plan.pass_seconds([g])
    kernels = gpu_plan.lane_kernels([g]) + gpu_plan.draw_kernels(g[0])
    assert parts["launches"] == pytest.approx(g[0].steps * kernels * gpu_plan.LAUNCH)
    assert parts["arithmetic"] == 0
    monkeypatch.setattr(gpu_plan, "FLOPS", 1.0)  # a GPU of one FLOP/s: the arithmetic is all there is
    slow = gpu_plan.pass_seconds([g])
    assert slow["launches"] == 0 and slow["arithmetic"] > parts["launches"]


def test_the_rotations_cost_their_batched_kernels_not_one_qr_per_matrix():
    # A draw counted on the CPU (LAPACK's QR: 3 operations) is planned with the device's rotations:
    # about 15 batched kernels, the same at any batch size; nothing is charged per matrix.
    from icl.core.tasks import cholesky_orthogonal_factor, orthogonal_factor

    g = torch.eye(4).repeat(2, 1, 1)
    assert 10 <= gpu_plan.operations(lambda: cholesky_orthogonal_factor(g)) <= 20
    assert gpu_plan.operations(lambda: orthogonal_factor(g)) == 3
    small, large = group("softmax", [1, 2]), [c.replace(batch_size=64) for c in group("softmax", [1, 2])]
    steps = [{k: v for k, v in gpu_plan.pass_seconds([g]).items() if k != "evaluation"} for g in (small, large)]
    assert steps[0] == steps[1] and steps[0]["launches"] > 0


def test_the_plan_of_a_gpu_prints_on_a_machine_without_one(capsys, monkeypatch):
    import icl.core.train

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(icl.core.train, "train_group", lambda *a, **k: pytest.fail("the plan trained"))
    assert main(["reproduce", "--profile", "ci", "--plan", "--device", "cuda", "--only", "02_easy_nonlinear"]) == 0
    err = capsys.readouterr().err
    assert "on one H100-class GPU (planned on paper, not measured)" in err and "kernel launches" in err, err
    assert "of 80.0 GB" in err
