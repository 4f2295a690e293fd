"""The command line and sweeps: bad input exits with status 2 and one line naming the key,
divergence is reported with its step and recorded as such, help lists every option, JSON output."""
import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import ROOT, TINY, tiny_config

import icl.core.train
from icl.core.config import field_names
from icl.core.expansion import expand
from icl.core.train import DivergenceError, train
from icl.running.cache import RunCache
from icl.running.cli import main
from icl.running.sweep import run_sweep

pytestmark = pytest.mark.usefixtures("one_thread")

TINY_FLAGS = [f"--{k.replace('_', '-')}={v}" for k, v in TINY.items()] + ["--no-progress"]


def one_error_line(capsys, argv: list[str], key: str) -> str:
    """Run the CLI in-process; it must exit 2 with exactly one stderr line naming `key`."""
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert key in err and "Traceback" not in err
    return err


BAD_TRAIN = [
    (["--top-k=13"], "top_k"),  # > context_length 12
    (["--top-k=0"], "top_k"),
    (["--depth=0"], "depth"),
    (["--steps=0"], "steps"),
    (["--dim=0"], "dim"),
    (["--context-length=-3"], "context_length"),
    (["--batch-size=0"], "batch_size"),
    (["--eval-contexts=0"], "eval_contexts"),
    (["--learning-rate=-0.1"], "learning_rate"),
    (["--label-noise=-1"], "label_noise"),
    (["--input-exponent=nan"], "input_exponent"),
    (["--task-exponent=NaN"], "task_exponent"),
    (["--model=mlp"], "model"),
    (["--task=medium"], "task"),
    (["--device=tpu"], "device"),
    (["--depth=2.5"], "depth"),
    (["--normalize-inputs=maybe"], "normalize_inputs"),
    (["--no-such-flag=1"], "--no-such-flag"),
    # non-finite or absurd values (issue 18): accepted before, then a divergence or a traceback
    (["--learning-rate=inf"], "learning_rate"),
    (["--init-scale=inf"], "init_scale"),
    (["--label-noise=inf"], "label_noise"),
    (["--input-exponent=-1000"], "input_exponent"),
    (["--seed=99999999999999999999"], "seed"),
]


@pytest.mark.parametrize("flags,key", BAD_TRAIN, ids=[k + "-" + f[0] for f, k in BAD_TRAIN])
def test_bad_train_flag_exits_2_naming_the_key(capsys, flags, key):
    err = one_error_line(capsys, ["train", *TINY_FLAGS, *flags], key)
    value = flags[0].split("=", 1)[1]
    assert value.lower() in err.lower()  # the bad value is quoted back


def test_cuda_without_cuda_is_a_config_error(capsys):
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    one_error_line(capsys, ["train", *TINY_FLAGS, "--device=cuda"], "device")


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


SWEEP = "model: linear\ndim: 4\ncontext_length: 8\nbatch_size: 16\nsteps: 4\neval_contexts: 32\neval_points: 2\ndevice: cpu\n"


@pytest.mark.parametrize("text,key", [
    (SWEEP + "depths: [1, 2]\nlearning_rat: 0.1\n", "learning_rat"),
    (SWEEP + "depths: [1, 0]\n", "depth"),
    (SWEEP + "depths: 3\n", "depths"),
    (SWEEP + "depth: 1\ndepths: [1, 2]\n", "depths"),
    (SWEEP + "top_ks: [2, 9]\n", "top_k"),
    (SWEEP + "spectra: [[1.0]]\n", "spectra"),
    (SWEEP + "seeds: [0, one]\n", "seed"),
])
def test_bad_sweep_file_exits_2_naming_the_key(capsys, tmp_path, text, key):
    params = write(tmp_path / "bad.yaml", text)
    one_error_line(capsys, ["sweep", str(params), "--cache", str(tmp_path / "c"), "--no-progress"], key)
    assert not list((tmp_path / "c").rglob("*.json"))


def test_malformed_and_missing_yaml_exit_2_naming_the_file(capsys, tmp_path):
    broken = write(tmp_path / "broken.yaml", "depths: [1, 2\nsteps: 3\n")
    one_error_line(capsys, ["sweep", str(broken)], "broken.yaml")
    listed = write(tmp_path / "list.yaml", "- 1\n- 2\n")
    one_error_line(capsys, ["sweep", str(listed)], "list.yaml")
    one_error_line(capsys, ["sweep", str(tmp_path / "missing.yaml")], "missing.yaml")


@pytest.mark.slow
def test_bad_input_in_a_real_process_exits_2_with_one_line():
    proc = subprocess.run([sys.executable, "-m", "icl", "train", "--top-k", "99", "--context-length", "8"],
                          capture_output=True, text=True, cwd=ROOT, timeout=120,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 2
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "top_k" in lines[0] and "99" in lines[0], proc.stderr


def help_text(capsys, command: str) -> str:
    with pytest.raises(SystemExit) as exit_:
        main([command, "--help"])
    assert exit_.value.code == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("command", ["train", "sweep"])
def test_help_lists_every_config_field_with_its_default(capsys, command):
    text = help_text(capsys, command)
    flat = " ".join(text.split())
    for name in field_names():
        spelled = "--" + name.replace("_", "-") if command == "train" else name
        assert re.search(rf"(^|[\s,]){re.escape(spelled)}\b", text), f"{command} --help misses {name}"
    assert "(default: 2000)" in flat  # steps
    assert "(default: inverse_depth)" in flat  # residual_scale


def test_train_json_to_stdout(capsys):
    assert main(["train", *TINY_FLAGS, "--model=softmax", "--depth=2", "--json", "-"]) == 0
    result = json.loads(capsys.readouterr().out)
    for key in ("config", "final_loss", "initial_loss", "loss_curve", "wall_seconds", "decomposition"):
        assert key in result
    assert result["config"]["depth"] == 2 and result["config"]["model"] == "softmax"
    assert result["loss_curve"]["loss"][0] == result["initial_loss"]
    assert result["loss_curve"]["loss"][-1] == result["final_loss"]
    d = result["decomposition"]
    assert d["R"] == pytest.approx(d["C"] + (d["A"] - d["C"]) / 2, rel=1e-9)
    assert d["R"] == pytest.approx(result["final_loss"], rel=1e-4)  # R is the relative loss


def test_linear_json_has_no_decomposition(capsys, tmp_path):
    out = tmp_path / "r.json"
    assert main(["train", *TINY_FLAGS, "--model=linear", "--json", str(out)]) == 0
    result = json.loads(out.read_text())
    assert "decomposition" not in result and math.isfinite(result["final_loss"])


# --- divergence ---------------------------------------------------------------------------

HUGE = dict(model="linear", depth=2, learning_rate=1e6, steps=40, schedule="constant")


def record_training_losses(monkeypatch) -> list:
    """Record, independently of train.py, whether each training step's loss is finite."""
    seen = []
    build = icl.core.train.build

    def recording_build(cfg, depths):
        stack = build(cfg, depths)
        forward = stack.forward

        def spy(batch, attention=False):
            out = forward(batch, attention)
            if len(batch) == cfg.batch_size and not attention:  # a training step
                seen.append(bool(torch.isfinite(((out.pred - batch.target[:, None]) ** 2).mean(0)).all()))
            return out

        stack.forward = spy
        return stack

    monkeypatch.setattr(icl.core.train, "build", recording_build)
    return seen


def test_divergence_names_the_first_bad_step(monkeypatch):
    seen = record_training_losses(monkeypatch)
    with pytest.raises(DivergenceError, match=r"step \d+") as err:
        train(tiny_config(**HUGE, eval_contexts=48), progress=False)
    first = seen.index(False)
    assert re.search(r"step (\d+)", str(err.value)).group(1) == str(first), (str(err.value), seen)
    assert "depth 2" in str(err.value)


def test_a_diverged_run_is_recorded_as_diverged_never_as_a_result(tmp_path, capsys):
    cache = RunCache(tmp_path)
    (record,) = run_sweep([tiny_config(**HUGE)], cache, progress=False)
    assert record["diverged"] is True and "final_loss" not in record and "depth 2" in record["error"]
    assert cache.load(tiny_config(**HUGE)) == record
    # Through the CLI: status 1, the run named by its config, and no training the second time.
    params = write(tmp_path / "huge.yaml", "\n".join(f"{k}: {v}" for k, v in {**TINY, **HUGE}.items()))
    for _ in range(2):
        assert main(["sweep", str(params), "--cache", str(tmp_path / "c"), "--no-progress"]) == 1
        err = [line for line in capsys.readouterr().err.strip().splitlines() if "to train in" not in line]  # the estimate
        assert len(err) == 2 and "diverged" in err[0] and "step" in err[0] and "learning_rate 1e+06" in err[0], err
    assert len([p for p in (tmp_path / "c").rglob("*.json")]) == 1


def test_expand_crosses_every_axis():
    cfgs = expand({**TINY, "depths": [1, 2], "seeds": [0, 1], "spectra": [[0, 0], [1.0, 0.5]],
                   "models": ["linear", "softmax"]})
    assert len(cfgs) == 16 and len(set(cfgs)) == 16
    assert {(c.input_exponent, c.task_exponent) for c in cfgs} == {(0.0, 0.0), (1.0, 0.5)}


def test_expand_nests_spectrum_then_seed_outermost_and_depth_then_learning_rate_innermost():
    spec = {k: v for k, v in TINY.items() if k != "learning_rate"}
    cfgs = expand({**spec, "depths": [2, 1], "seeds": [1, 0], "spectra": [[1.0, 0.5], [0, 0]],
                   "learning_rates": [0.01, 0.02]})
    order = [(c.input_exponent, c.task_exponent, c.seed, c.depth, c.learning_rate) for c in cfgs]
    assert order == [(a, b, s, L, lr) for a, b in ((1.0, 0.5), (0.0, 0.0)) for s in (1, 0) for L in (2, 1)
                     for lr in (0.01, 0.02)]


@pytest.mark.parametrize("path", sorted((ROOT / "params" / "sweeps").glob("*.yaml")), ids=lambda p: p.name)
def test_example_sweep_files_are_valid_sweeps(path):
    from icl.core.passes import groups
    from icl.running.sweep import read_yaml

    cfgs = expand(read_yaml(path), str(path))
    assert cfgs and all(c.device != "auto" for c in cfgs)  # explicit device: the cache key holds it
    assert len(groups(cfgs)) < len(cfgs)  # depths share batched passes


# --- the issue-11 table: one line, exit 2, in seconds, before any training -----------------

@pytest.fixture
def no_training(monkeypatch):
    """Fail the test if anything starts to train."""
    fail = lambda *a, **k: pytest.fail("training started before the input was checked")
    monkeypatch.setattr(icl.core.train, "train_group", fail)
    monkeypatch.setattr(icl.core.train, "train", fail)
    monkeypatch.setattr(sys.modules["icl.running.sweep"], "train_finite", fail)


def quick_error(capsys, argv, *words) -> str:
    import time

    start = time.perf_counter()
    err = one_error_line(capsys, argv, words[0])
    for w in words[1:]:
        assert w in err, (w, err)
    assert time.perf_counter() - start < 5
    return err


@pytest.mark.parametrize("content", [b"\x80\x04\x95 pickled, not YAML", b"model: linear\n\x00\x00\x01", "dépths: [1]".encode("latin-1")],
                         ids=["binary", "nul", "latin-1"])
def test_binary_or_non_utf8_sweep_file_exits_2(capsys, tmp_path, no_training, content):
    (tmp_path / "bad.yaml").write_bytes(content)
    quick_error(capsys, ["sweep", str(tmp_path / "bad.yaml"), "--cache", str(tmp_path / "c")], "bad.yaml", "not a text file")


@pytest.mark.parametrize("text", ["", "\n\n", "# only a comment\n", "{}\n"], ids=["empty", "blank", "comment", "empty-mapping"])
def test_empty_sweep_file_exits_2(capsys, tmp_path, no_training, text):
    params = write(tmp_path / "empty.yaml", text)
    quick_error(capsys, ["sweep", str(params), "--cache", str(tmp_path / "c")], "empty.yaml", "sets nothing")


@pytest.mark.parametrize("flags", [["--dim=100000"], ["--context-length=10000000"], ["--batch-size=100000000"]],
                         ids=lambda f: f[0])
def test_sizes_that_cannot_fit_are_refused_up_front(capsys, no_training, flags):
    flag = flags[0].split("=")[0][2:].replace("-", "_")
    err = quick_error(capsys, ["train", "--no-progress", *flags], "memory", "GiB", flag)
    assert "more than" in err


def test_sweep_sizes_that_cannot_fit_are_refused_before_any_group_trains(capsys, tmp_path, no_training):
    params = write(tmp_path / "big.yaml", SWEEP.replace("dim: 4", "dim: 200000") + "depths: [1, 2]\nseeds: [0, 1]\n")
    quick_error(capsys, ["sweep", str(params), "--cache", str(tmp_path / "c")], "memory", "GiB")


def test_key_dim_above_dim_exits_2(capsys, no_training):
    quick_error(capsys, ["train", "--key-dim=64", "--dim=8"], "key_dim", "64", "dim (8)")


def test_unwritable_json_path_is_refused_before_training(capsys, tmp_path, no_training):
    (tmp_path / "a_file").write_text("x")
    for path in (tmp_path / "a_file" / "r.json", tmp_path):  # a file as folder; a folder as file
        quick_error(capsys, ["train", *TINY_FLAGS, "--json", str(path)], "--json", str(path))
    params = write(tmp_path / "s.yaml", SWEEP + "depths: [1, 2]\n")
    quick_error(capsys, ["sweep", str(params), "--cache", str(tmp_path / "c"), "--json", str(tmp_path / "a_file" / "x")],
                "--json")


def test_sweep_into_a_read_only_cache_is_refused_before_training(tmp_path, capsys, monkeypatch):
    from conftest import read_only, writable_again

    params = write(tmp_path / "s.yaml", SWEEP + "depths: [1]\nseeds: [0, 1]\n")
    cache = tmp_path / "cache"
    assert main(["sweep", str(write(tmp_path / "one.yaml", SWEEP + "depths: [1]\nseeds: [0]\n")),
                 "--cache", str(cache), "--no-progress"]) == 0  # one entry present, one missing
    capsys.readouterr()
    read_only(monkeypatch, cache)
    import icl.running.sweep

    monkeypatch.setattr(icl.running.sweep, "train_finite", lambda *a, **k: pytest.fail("trained into a read-only cache"))
    try:
        assert main(["sweep", str(params), "--cache", str(cache), "--no-progress"]) == 2
        lines = capsys.readouterr().err.strip().splitlines()
        assert len(lines) == 1 and "cache" in lines[0] and "not writable" in lines[0], lines
    finally:
        writable_again(cache)


def test_help_describes_each_option_and_its_allowed_values(capsys):
    text = " ".join(help_text(capsys, "train").split())
    assert "one of linear, softmax, shared_stream, untied_values, context_updates (default: softmax)" in text
    assert "number of attention layers L (default: 1)" in text
    assert "true or false (default: True)" in text  # normalize_inputs
    from icl.running.cli import build_parser

    sub = next(a for a in build_parser()._actions if a.dest == "command").choices["train"]
    helps = {a.dest: a.help for a in sub._actions}
    for name in field_names():  # every option says something besides its default
        assert len(helps[name].split("(default:")[0].split()) >= 2, f"--{name} has no description"
    with pytest.raises(SystemExit):
        main(["--help"])
    top = " ".join(capsys.readouterr().out.split())
    assert "Bad input exits with status 2 and one line." in top  # a whole sentence, not cut off
