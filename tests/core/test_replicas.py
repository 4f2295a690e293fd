"""Groups that differ only in seed or spectrum train as replicas of one stack (icl.core.replicas),
as they do on a GPU: every replica ends with the numbers its group gets trained alone, up to
float32 rounding, and a replica that breaks leaves the others untouched."""
import numpy as np
import pytest
from conftest import tiny_config

import icl.core.train as train_module
from icl.core.train import DivergenceError, ReplicaPass, lanes, pass_key, train_groups

TIMING = {"wall_seconds", "steps_per_second", "models_in_pass", "replicas_in_pass"}  # how it trained, not what
VARIANTS = [("linear", {}), ("softmax", {"key_dim": 3}), ("untied_values", {}), ("context_updates", {}),
            ("shared_stream", {}), ("softmax", {"heads": 2, "key_dim": 2}), ("shared_stream", {"heads": 2, "key_dim": 3}),
            ("softmax", {"tie_layers": True}), ("context_updates", {"tie_layers": True}),
            ("softmax", {"key_dim": 2, "subspace": "tiled"})]


def group(model: str, seed: int = 0, **changes) -> list:
    return [tiny_config(model=model, task="difficult", depth=L, seed=seed, track_modes=True, track_focus=True, **changes)
            for L in (1, 3)]


def numbers(results: list[dict]) -> np.ndarray:
    """Every number of a group's results, flattened in a fixed order (timings aside)."""
    out = []

    def walk(v):
        if isinstance(v, dict):
            for k in sorted(v):
                if k not in TIMING:
                    walk(v[k])
        elif isinstance(v, (list, tuple)):
            for x in v:
                walk(x)
        elif isinstance(v, (int, float)) and not isinstance(v, bool):
            out.append(float(v))
    walk(results)
    return np.array(out)


def assert_close(replica: list[dict], alone: list[dict]) -> None:
    a, b = numbers(replica), numbers(alone)
    assert a.shape == b.shape
    np.testing.assert_allclose(a, b, rtol=2e-4, atol=1e-6)  # 10x the largest difference seen


@pytest.mark.parametrize("model, changes", VARIANTS, ids=lambda v: str(v) if isinstance(v, str) else
                         ",".join(f"{k}={x}" for k, x in v.items()) or "plain")
def test_each_replica_ends_as_its_group_does_alone(model, changes, one_thread, monkeypatch):
    built = []

    class Counted(ReplicaPass):
        def __init__(self, members):
            built.append(len(members))
            super().__init__(members)

    monkeypatch.setattr(train_module, "ReplicaPass", Counted)
    groups = [group(model, seed, **changes) for seed in (0, 1, 2)]
    together = train_groups(groups, progress=False, replicate=True)
    assert built == [3]  # one lane of three replicas, not three groups side by side
    for g, replica in zip(groups, together):
        assert_close(replica, train_groups([g], progress=False, replicate=False)[0])
        assert {(r["models_in_pass"], r["replicas_in_pass"]) for r in replica} == {(6, 3)}
    # the replicas trained on their own streams: no two seeds end alike
    assert len({r[1]["final_loss"] for r in together}) == 3


def test_spectra_and_ranks_train_in_one_pass_as_lanes_of_replicas(one_thread):
    groups = [group("softmax", seed, key_dim=k, task_exponent=e, input_exponent=e) for seed in (0, 1) for k in (2, 3) for e in (0.0, 1.0)]
    assert len({pass_key(g[0], True) for g in groups}) == 1 and len({pass_key(g[0], False) for g in groups}) == 4
    assert lanes(groups, True) == [[0, 1, 4, 5], [2, 3, 6, 7]]  # one lane per rank, its seeds and spectra replicas
    assert lanes(groups, False) == [[i] for i in range(8)]
    together = train_groups(groups, progress=False, replicate=True)
    for g, replica in zip(groups, together):
        assert_close(replica, train_groups([g], progress=False, replicate=False)[0])


def test_groups_of_other_depths_train_in_the_pass_but_not_as_replicas():
    shallow = [tiny_config(model="softmax", depth=L, seed=1) for L in (1, 2)]
    assert lanes([group("softmax"), shallow, group("softmax", 2)], True) == [[0, 2], [1]]


def test_a_replica_that_breaks_leaves_the_others_untouched(monkeypatch, one_thread):
    draw, drawn = train_module.sample_batch, {}

    def broken_at_step_3_for_seed_1(cfg, n, gen):
        batch = draw(cfg, n, gen)
        drawn[cfg.seed] = drawn.get(cfg.seed, -1) + 1
        if cfg.seed == 1 and drawn[cfg.seed] == 3:
            batch.y[0, 0] = float("nan")
        return batch

    monkeypatch.setattr(train_module, "sample_batch", broken_at_step_3_for_seed_1)
    groups = [group("softmax", seed) for seed in (0, 1, 2)]
    together = train_groups(groups, progress=False, replicate=True)
    assert isinstance(together[1], DivergenceError) and together[1].step == 3 and sorted(together[1].models) == [0, 1]
    drawn.clear()
    for i in (0, 2):
        assert_close(together[i], train_groups([groups[i]], progress=False, replicate=False)[0])


def test_replicas_need_a_device_that_takes_them_or_the_same_batches():
    with pytest.raises(ValueError, match="draw the same batches"):
        train_groups([group("softmax", 0), group("softmax", 1)], progress=False)  # the CPU does not replicate
