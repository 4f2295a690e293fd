"""Groups that draw the same batches (one seed's sweeps at several ranks) train in one pass,
each batch drawn once: every group ends with the numbers it gets trained alone."""
import json

import pytest
from conftest import tiny_config

from icl.core.train import DivergenceError, data_key, group_key, train_group, train_groups

TIMING = {"wall_seconds", "steps_per_second", "models_in_pass"}


def group(key_dim: int, **changes) -> list:
    return [tiny_config(model="softmax", task="difficult", key_dim=key_dim, depth=L, input_exponent=1.0, **changes)
            for L in (1, 2, 3)]


def numbers(results: list[dict]) -> str:
    return json.dumps([{k: v for k, v in r.items() if k not in TIMING} for r in results], sort_keys=True)


def test_ranks_of_one_seed_draw_the_same_batches_and_other_seeds_do_not():
    assert data_key(group(2)[0]) == data_key(group(4)[0]) and group_key(group(2)[0]) != group_key(group(4)[0])
    assert data_key(group(2)[0]) != data_key(group(2, seed=1)[0])
    with pytest.raises(ValueError, match="draw the same batches"):
        train_groups([group(2), group(2, seed=1)], progress=False)


def test_each_group_of_a_shared_pass_ends_as_it_does_alone(one_thread):
    groups = [group(1), group(2), group(6)]
    together = train_groups(groups, progress=False)
    for g, shared in zip(groups, together):
        assert numbers(shared) == numbers(train_group(g, progress=False))
        assert {r["models_in_pass"] for r in shared} == {9}


def test_a_group_that_breaks_leaves_the_others_of_its_pass_untouched(one_thread):
    broken, sound = group(2, learning_rate=1e30), group(4)
    together = train_groups([broken, sound], progress=False)
    assert isinstance(together[0], DivergenceError)
    assert numbers(together[1]) == numbers(train_group(sound, progress=False))
