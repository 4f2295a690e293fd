"""The benchmark checks that icl computes what the plain algebra (icl.core.reference) computes before it
times them, and writes its JSON and Markdown."""
import json

import pytest
import torch
from conftest import tiny_config

from icl.core.models import build
from icl.core.reference import FACTOR, check_same, plain_model
from icl.running.cli import main


@pytest.mark.parametrize("model", ["softmax", "linear", "untied_values", "context_updates", "shared_stream"])
@pytest.mark.parametrize("scale", ["inverse_depth", "unit"])
def test_icl_and_the_plain_algebra_compute_the_same(model, scale):
    cfg = tiny_config(model=model, residual_scale=scale, batch_size=16, key_dim=3)
    check = check_same(cfg, [3, 1, 2], torch.device("cpu"))
    assert check["same"], check
    assert check["error_ratio"] <= FACTOR and set(check["agreement"]) >= {"loss", "grad query", "grad key"}


@pytest.mark.parametrize("model", ["softmax", "linear"])
def test_the_check_sees_a_wrong_mask(model, monkeypatch):
    """The check can fail: letting every token (the query too) read the query changes the plain
    algebra's losses, so icl no longer agrees with it."""
    import icl.core.reference

    cfg = tiny_config(model=model, batch_size=16)
    assert check_same(cfg, [2], torch.device("cpu"))["same"]
    monkeypatch.setattr(icl.core.reference, "attends", lambda P, device=None: torch.ones(P + 1, P + 1, dtype=torch.bool))
    assert not check_same(cfg, [2], torch.device("cpu"))["same"]


def test_the_plain_model_copies_one_model_of_a_stack():
    cfg = tiny_config(model="softmax")
    stack = build(cfg, [2, 3])
    ref = plain_model(stack, 1)
    assert torch.equal(ref.query, stack.query[2:5]) and torch.equal(ref.key, stack.key[2:5])
    assert ref.step == 1 / 3 and torch.equal(ref.readout, stack.readout[1])  # s = 1/L, exactly as the reference sets it


def ratio_of_rates(case: dict, other: str) -> float:
    """What a case's speed-up must be: icl's steps per second over the other side's."""
    rates = case["steps_per_second"]
    return rates["icl"] / rates[other]


@pytest.mark.slow
def test_bench_command_writes_json_and_markdown(tmp_path):
    out = tmp_path / "bench.json"
    small = ["--generalised-depths", "1", "2", "--generalised-size", "4", "6", "4", "2",
             "--deep-sweep-depths", "1", "2", "4", "--deep-sweep-size", "4", "6", "4", "2",
             "--quick-depths", "1", "2", "--quick-size", "4", "6", "4", "2"]
    code = main(["bench", "--json", str(out), "--dim", "4", "--context-length", "6", "--batch-size", "4",
                 "--depths", "2", "--sweep-depths", "1", "2", "--sweep-models", "linear", "--repeats", "1", *small])
    assert code == 0
    result = json.loads(out.read_text())
    names = [c["case"] for c in result["cases"]]
    # the generalised models in the registry's order (icl.core.registry)
    assert names == ["softmax L=2", "linear L=2", "linear sweep 1-2", "shared_stream L=1-2", "context_updates L=1-2",
                     "softmax sweep 1-2 (quick shape)", "shared_stream sweep 1-2 (quick shape)",
                     "context_updates sweep 1-2 (quick shape)", "draws, softmax sweep 1-2 (quick shape)", "softmax sweep 1-4"]
    assert all(c["same"] for c in result["cases"])
    for c in result["cases"][3:5]:  # against their first implementation, at their own size
        assert c["speedup_vs_reference"] == pytest.approx(ratio_of_rates(c, "reference"), rel=1e-9)
        assert c["target_of"] == "speedup_vs_reference" and c["key_dim"] == 2
        assert c["error_ratio"] <= FACTOR and "layer_preds" in c["agreement"]
    for quick in result["cases"][5:9]:  # each kernel against the same stack without it
        assert quick["target_of"] == "speedup_vs_reference" and quick["reference_kind"] in ("autograd", "draws")
        assert quick["speedup_vs_reference"] == pytest.approx(ratio_of_rates(quick, "reference"), rel=1e-9)
    assert "Kernel context_updates at its notebook's quick shape" in out.with_suffix(".md").read_text()
    deep = result["cases"][9]
    assert deep["shallow_depths"] == [1, 2, 4] and deep["ratio_to_shallow"] > 0 and deep["memory_met"]
    assert "softmax sweep 1-4 (7 layers)" in out.with_suffix(".md").read_text()
    sweep = result["cases"][2]
    assert sweep["target_of"] == "speedup_vs_one_after_another" and "reference" not in sweep["steps_per_second"]
    assert result["machine"]["peak_gflops"] > 0 and result["machine"]["max_rss_mib"] > 0
    assert "| linear sweep 1-2 | 3 |" in out.with_suffix(".md").read_text()
    cpu = sweep["cpu_seconds_per_step"]
    assert sweep["speedup_vs_one_after_another"] == pytest.approx(ratio_of_rates(sweep, "icl_one_after_another"), rel=1e-9)
    assert sweep["speedup_vs_one_after_another_cpu_time"] == pytest.approx(cpu["icl_one_after_another"] / cpu["icl"], rel=1e-9)


@pytest.mark.slow
def test_bench_only_runs_the_named_cases(tmp_path):
    out = tmp_path / "bench.json"
    code = main(["bench", "--json", str(out), "--generalised-depths", "2", "1", "--generalised-size", "4", "6", "4", "2",
                 "--repeats", "1", "--only", "shared_stream L=2-1"])
    assert code == 0
    assert [c["case"] for c in json.loads(out.read_text())["cases"]] == ["shared_stream L=2-1"]


@pytest.mark.parametrize("argv,words", [(["--repeats", "0"], ["repeats", "0", ">= 1"]),
                                        (["--depths", "0"], ["depths", "[0]", ">= 1"]),
                                        (["--deep-sweep-depths", "4", "-1"], ["deep_sweep_depths", "-1"]),
                                        (["--only", "nosuchcase"], ["only", "'nosuchcase'", "softmax L=16"]),
                                        (["--dim", "0"], ["dim", "0"]),
                                        (["--json", "-"], ["--json", "'-'", "file path"])])  # it wrote a file named '-'
def test_bad_bench_arguments_exit_2_in_one_line_before_any_timing(tmp_path, capsys, monkeypatch, argv, words):
    """--repeats 0 and --depths 0 were tracebacks, an unknown --only exited 1."""
    import icl.running.bench

    monkeypatch.setattr(icl.running.bench, "peak_flop_rate", lambda *a: pytest.fail("timing started"))
    assert main(["bench", "--json", str(tmp_path / "b.json"), *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert all(w in err for w in words), err


def test_a_step_is_timed_after_its_warm_up_not_with_it():
    """On a GPU the first steps carry its start-up: a plan timed from them was about 100x pessimistic
    (issue 47). A step that is slow twice, then fast, is timed fast."""
    import time

    import torch

    from icl.running.timing import seconds_per_step

    calls = []

    def step():
        calls.append(1)
        time.sleep(0.2 if len(calls) <= 2 else 0.002)

    wall, _ = seconds_per_step({"s": step}, 1, torch.device("cpu"), block=0.02)
    assert wall["s"] < 0.02, wall
