"""The reference predictors of icl.analysis.bounds on cases whose answer is known: a target that one
temperature reproduces exactly, a full-rank "subspace", and the ordering single >= mixture."""
import json

import numpy as np
import pytest
from conftest import PEAK_PROBE, live_memory_env

from icl.analysis import bounds
from icl.core.config import RunConfig
from icl.running.cli import main

pytestmark = pytest.mark.usefixtures("one_thread")

SMALL = dict(dim=8, context_length=16, eval_contexts=256)


def fitted(**changes):
    return bounds.contexts(RunConfig(**{**SMALL, **changes}), n_fit=256)


def test_mean_of_all_labels_is_the_zero_temperature_softmax():
    # top_k = P: the target is the plain mean of the labels, which beta = 0 gives exactly.
    fit, ev = fitted(top_k=16)
    b = bounds.softmax_bound(fit, ev)
    assert b["single"] < 1e-8 and b["beta"] == 0.0
    assert bounds.mixture_bound(fit, ev)["mixture"] < 1e-8


def test_copy_task_is_solved_by_a_sharp_softmax():
    # Easy task: the query is a context token, so a large beta reads exactly its label.
    fit, ev = fitted(task="easy")
    b = bounds.softmax_bound(fit, ev)
    assert b["single"] < 1e-3 and b["beta"] > 100


def test_difficult_task_bound_is_between_zero_and_the_linear_reference():
    fit, ev = fitted()
    b = bounds.softmax_bound(fit, ev)
    lin = bounds.linear_reference(fit, ev)
    assert 0.05 < b["single"] < lin < 1.0
    assert bounds.mixture_bound(fit, ev, b)["mixture"] <= b["single"]


def test_the_mixture_bound_never_exceeds_the_softmax_bound_of_the_issue():
    """Was mixture 0.0859 above softmax 0.0854: the combination's weights, fitted on one set,
    lost to the single softmax on the held-out set."""
    cfg = RunConfig(dim=16, context_length=64, input_exponent=0.7, task_exponent=1.3)
    b = bounds.bounds(cfg, [1], 2048)
    assert b["mixture"] <= b["single"] and b["single"] == pytest.approx(0.0854, abs=5e-4)


RNG = np.random.default_rng(31)
RANDOM_TASKS = [dict(dim=int(RNG.choice([4, 8, 16])), context_length=int(RNG.choice([8, 16, 32])),
                     input_exponent=round(float(RNG.uniform(0, 1.5)), 2), task_exponent=round(float(RNG.uniform(0, 1.5)), 2))
                for _ in range(6)]


@pytest.mark.parametrize("task", RANDOM_TASKS, ids=lambda t: "d{dim} P{context_length} {input_exponent}/{task_exponent}".format(**t))
def test_the_mixture_bound_is_at_most_the_softmax_bound_on_any_task(task):
    # few contexts: the fitted combination overfits most there
    b = bounds.bounds(RunConfig(**task, eval_contexts=128), [1], 64)
    assert b["mixture"] <= b["single"]


def test_held_out_spread_scores_both_bounds_on_several_sets():
    spread = bounds.held_out_spread(RunConfig(**SMALL), sets=3, fit_contexts=256)
    single, mixture = (np.array(spread[k]["values"]) for k in ("single", "mixture"))
    assert len(set(single)) == 3 and (mixture <= single).all()  # three different sets, a bound on each
    assert 0 < spread["single"]["relative_std"] < 0.5 and spread["relative_gain"]["min"] >= 0


def test_raw_inputs_and_a_spectrum_run():
    fit, ev = fitted(normalize_inputs=False, input_exponent=1.0, task_exponent=0.5)
    assert 0 < bounds.softmax_bound(fit, ev)["single"] < 1


def test_command_prints_the_bounds_as_json(capsys):
    argv = ["bound", "--dim=8", "--context-length=16", "--key-dim=2", "--eval-contexts=128",
            "--fit-contexts=128", "--depths", "1", "2", "4", "--json", "-"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert {"single", "beta", "mixture", "random_subspace", "complementary_subspace"} <= set(out)
    assert list(out["random_subspace"]) == ["1", "2", "4"] == list(out["complementary_subspace"])
    assert np.isfinite(out["single"]) and out["key_dim"] == 2


def test_command_prints_the_spread_over_evaluation_sets(capsys):
    assert main(["bound", "--dim=8", "--context-length=16", "--eval-contexts=128", "--fit-contexts=128",
                 "--depths", "1", "--eval-sets=2"]) == 0
    assert "over 2 other evaluation sets of 128: softmax bound" in capsys.readouterr().err


@pytest.mark.parametrize("flags, key", [(["--top-k=17"], "top_k"), (["--dim=0"], "dim"),
                                        (["--depths", "0"], "depths"), (["--model=softmax"], "model"),
                                        (["--eval-sets=1"], "eval-sets")])
def test_command_bad_input_is_one_line(capsys, flags, key):
    assert main(["bound", "--dim=8", "--context-length=16", *flags]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert key in err


def test_bounds_are_cached_and_recomputed_when_their_code_changes(tmp_path, monkeypatch):
    from icl.running import cache as cache_mod
    from icl.running.cache import RunCache

    cfg, runs = RunConfig(**SMALL, key_dim=2), RunCache(tmp_path)
    calls = []
    real = bounds.baselines.all_curves
    monkeypatch.setattr(bounds.baselines, "all_curves", lambda *a: calls.append(1) or real(*a))
    depths = [1, 2, 16]  # "16" sorts before "2" as a JSON key: the stored checksum must still match
    first = bounds.bounds(cfg, depths, 128, cache=runs)
    assert bounds.bounds(cfg, depths, 128, cache=runs) == first and len(calls) == 1
    assert list(tmp_path.glob("*/*.json")) == []  # never counted as a trained run
    monkeypatch.setattr(cache_mod, "source_hash", lambda **kw: "changed code")
    again = bounds.bounds(cfg, depths, 128, cache=runs)
    assert len(calls) == 2 and again["random_subspace"] == first["random_subspace"]


BOUND_PROBE = PEAK_PROBE + """
from icl.analysis import bounds
from icl.core.config import RunConfig

bounds.bounds(RunConfig(dim=4, context_length=8, eval_contexts=32), [1, 2], 32)  # libraries and allocator warm
print(live_peak(lambda: bounds.bounds(RunConfig(**json.loads(sys.argv[1])), json.loads(sys.argv[2]), int(sys.argv[3]))))
"""


@pytest.mark.parametrize("sizes,depths,fit", [({}, [1, 2, 4, 8, 16, 32, 64], 2048), ({"key_dim": 4}, [1, 16, 256], 2048)],
                         ids=["default", "rank 4 to depth 256"])
@pytest.mark.slow
def test_the_bound_memory_estimate_is_within_a_factor_of_two_of_the_measured_peak(sizes, depths, fit):
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", BOUND_PROBE, json.dumps(sizes), json.dumps(depths), str(fit)],
                         capture_output=True, text=True, timeout=300, env=live_memory_env(), check=True)
    measured, estimate = int(out.stdout.split()[-1]), bounds.bound_bytes(RunConfig(**sizes), depths, fit)
    print(f"estimate {estimate / 2**20:.0f} MiB, measured {measured / 2**20:.0f} MiB")
    assert 0.5 < estimate / measured < 2.0


@pytest.mark.parametrize("argv,word", [(["--dim", "100000"], "dim 100000"),
                                       (["--eval-contexts", "1000000000"], "eval_contexts 1000000000"),
                                       (["--fit-contexts", "1000000000"], "fit_contexts 1000000000")])
def test_a_bound_too_large_for_memory_is_refused_in_one_line(capsys, monkeypatch, argv, word):
    """Was a DefaultCPUAllocator traceback."""
    monkeypatch.setattr(bounds, "contexts", lambda *a: pytest.fail("contexts were drawn"))
    assert main(["bound", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("icl: error: memory: ") and word in err and "GiB" in err, err
