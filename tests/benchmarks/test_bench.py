"""`make bench` (benchmarks/bench.py) writes its JSON and Markdown, and refuses bad arguments in one line
before any timing. That icl computes what the plain algebra computes is tested in tests/core/test_reference.py."""
import json

import pytest

from benchmarks.bench import main
from icl.core.reference import FACTOR


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
    code = main(["--json", str(out), "--dim", "4", "--context-length", "6", "--batch-size", "4",
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
    code = main(["--json", str(out), "--generalised-depths", "2", "1", "--generalised-size", "4", "6", "4", "2",
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
    import benchmarks.bench

    monkeypatch.setattr(benchmarks.bench, "peak_flop_rate", lambda *a: pytest.fail("timing started"))
    assert main(["--json", str(tmp_path / "b.json"), *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert all(w in err for w in words), err


def one_line(capsys, argv) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


def test_bench_refuses_absurd_threads_and_a_day_of_benchmarking(capsys, tmp_path):
    err = one_line(capsys, ["--threads", "100000", "--json", str(tmp_path / "b.json")])
    assert "threads: 100000 is not allowed" in err
    err = one_line(capsys, ["--only", "softmax L=16", "--repeats", "10000000", "--json", str(tmp_path / "b.json")])
    assert "more than a day" in err


def test_bench_is_no_longer_a_subcommand_of_icl(capsys):
    """A developer's tool: `make bench` runs it; the user's `icl` lists no bench."""
    from icl.running.cli import COMMANDS

    assert "bench" not in COMMANDS
