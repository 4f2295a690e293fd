"""A sweep trains the groups that draw the same batches (one seed's ranks) in one pass, as many as
fit in a share of memory, and stores what each group gets trained alone."""
from conftest import tiny_config

import icl.running.sweep
from icl.core.passes import groups, passes
from icl.running.cache import RunCache
from icl.running.sweep import run_sweep

TIMING = {"wall_seconds", "steps_per_second", "models_in_pass"}


def ranks_and_seeds():
    return [tiny_config(model="softmax", task="difficult", key_dim=k, seed=s, depth=L)
            for s in (0, 1) for k in (1, 2, 3) for L in (1, 2)]


def test_a_seeds_ranks_share_a_pass_while_they_fit_in_memory():
    todo = groups(ranks_and_seeds())
    shared = passes(todo)
    assert [[(g[0].seed, g[0].key_dim) for g in p] for p in shared] == [[(0, 1), (0, 2), (0, 3)], [(1, 1), (1, 2), (1, 3)]]
    assert passes(todo, share=1e-12) == [[g] for g in todo]  # nothing fits beside anything: a group a pass


def test_a_sweep_in_shared_passes_stores_what_group_by_group_training_does(tmp_path, monkeypatch):
    calls = []
    real = icl.running.sweep.train_finite_together
    monkeypatch.setattr(icl.running.sweep, "train_finite_together", lambda gs, progress: calls.append(len(gs)) or real(gs, progress))
    shared = run_sweep(ranks_and_seeds(), RunCache(tmp_path / "shared"), progress=False)
    assert calls == [3, 3]
    monkeypatch.setattr(icl.running.sweep, "passes", lambda todo: [[g] for g in todo])
    alone = run_sweep(ranks_and_seeds(), RunCache(tmp_path / "alone"), progress=False)
    strip = lambda rs: [{k: v for k, v in r.items() if k not in TIMING} for r in rs]
    assert strip(shared) == strip(alone)
