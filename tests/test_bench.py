"""The benchmark's reference (plain full masked attention over all P+1 tokens) computes the same
losses and gradients as icl's fast models, so `make bench` compares the same work."""
import json

import pytest
import torch

from conftest import tiny_config
from icl.bench import Reference, check_same
from icl.cli import main
from icl.models import build


@pytest.mark.parametrize("model", ["softmax", "linear"])
@pytest.mark.parametrize("scale", ["inverse_depth", "unit"])
def test_reference_and_icl_compute_the_same_losses(model, scale):
    cfg = tiny_config(model=model, residual_scale=scale, batch_size=16)
    check = check_same(cfg, [3, 1, 2], torch.device("cpu"))
    assert check["same"], check
    assert check["loss_rel_diff"] < 1e-5 and check["grad_rel_diff"] < 1e-4


@pytest.mark.parametrize("model", ["softmax", "linear"])
def test_reference_sees_a_wrong_mask(model, monkeypatch):
    """The check can fail: letting the query attend to itself changes the reference's losses."""
    cfg = tiny_config(model=model, batch_size=16)
    real_forward = Reference.forward

    def no_mask_forward(self, x, y, xq):
        # Same model, but every token (the query too) attends to every token, itself included.
        B, P, _ = x.shape
        tokens = torch.cat([x, xq.unsqueeze(1)], 1)
        h = torch.cat([y, y.new_zeros(B, 1)], 1).unsqueeze(-1)
        for l in range(self.query.shape[0]):
            q, k = tokens @ self.query[l].T, tokens @ self.key[l].T
            if self.model == "softmax":
                read = torch.softmax(q @ k.transpose(1, 2), -1) @ h
                h = torch.cat([h[:, :P], h[:, P:] + self.step * read[:, P:]], 1)
            else:
                h = h + self.step * (q @ k.transpose(1, 2)) / P @ h
        return self.readout * h[:, P, 0]

    monkeypatch.setattr(Reference, "forward", no_mask_forward)
    assert not check_same(cfg, [2], torch.device("cpu"))["same"]
    monkeypatch.setattr(Reference, "forward", real_forward)
    assert check_same(cfg, [2], torch.device("cpu"))["same"]


def test_reference_copies_one_model_of_a_stack():
    cfg = tiny_config(model="softmax")
    stack = build(cfg, [2, 3])
    ref = Reference.from_stack(stack, 1)
    assert torch.equal(ref.query, stack.query[2:5]) and torch.equal(ref.key, stack.key[2:5])
    assert ref.step == pytest.approx(1 / 3)


def test_bench_command_writes_json_and_markdown(tmp_path):
    out = tmp_path / "bench.json"
    small = ["--generalised-depths", "1", "2", "--generalised-size", "4", "6", "4", "2",
             "--deep-sweep-depths", "1", "2", "4", "--deep-sweep-size", "4", "6", "4", "2"]
    code = main(["bench", "--json", str(out), "--dim", "4", "--context-length", "6", "--batch-size", "4",
                 "--depths", "2", "--sweep-depths", "1", "2", "--sweep-models", "linear", "--repeats", "1", *small])
    assert code == 0
    result = json.loads(out.read_text())
    names = [c["case"] for c in result["cases"]]
    assert names == ["softmax L=2", "linear L=2", "linear sweep 1-2", "context_updates L=1-2", "shared_stream L=1-2",
                     "softmax sweep 1-4"]
    assert all(c["same"] for c in result["cases"])
    for c in result["cases"][3:5]:  # against their first implementation, at their own size
        assert c["speedup_vs_reference"] > 0 and c["target_of"] == "speedup_vs_reference" and c["key_dim"] == 2
        assert c["layer_pred_rel_diff"] < 1e-4
    deep = result["cases"][5]
    assert deep["shallow_depths"] == [1, 2, 4] and deep["ratio_to_shallow"] > 0 and deep["memory_met"]
    assert "softmax sweep 1-4 (7 layers)" in out.with_suffix(".md").read_text()
    sweep = result["cases"][2]
    assert sweep["target_of"] == "speedup_vs_one_after_another" and "reference" not in sweep["steps_per_second"]
    assert result["machine"]["peak_gflops"] > 0 and result["machine"]["max_rss_mib"] > 0
    assert "| linear sweep 1-2 | 3 |" in out.with_suffix(".md").read_text()
    assert sweep["cpu_seconds_per_step"]["icl"] > 0 and sweep["speedup_vs_one_after_another_cpu_time"] > 0


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
                                        (["--dim", "0"], ["dim", "0"])])
def test_bad_bench_arguments_exit_2_in_one_line_before_any_timing(tmp_path, capsys, monkeypatch, argv, words):
    """--repeats 0 and --depths 0 were tracebacks, an unknown --only exited 1."""
    import icl.bench

    monkeypatch.setattr(icl.bench, "peak_flop_rate", lambda *a: pytest.fail("timing started"))
    assert main(["bench", "--json", str(tmp_path / "b.json"), *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert all(w in err for w in words), err
