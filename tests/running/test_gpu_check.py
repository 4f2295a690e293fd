"""scripts/gpu_check.sh and its Python parts (scripts/gpu_check.py): the parts on the simulated device
(tests/simdevice.py), the whole script end to end on the CPU, tiny, in a copy of the repository."""
import importlib.util
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from simdevice import NAME, simulate

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("gpu_check", ROOT / "scripts" / "gpu_check.py")
gpu_check = importlib.util.module_from_spec(spec)
spec.loader.exec_module(gpu_check)


def test_the_smoke_cuts_are_parameters_of_the_notebooks_it_runs():
    from icl.running.plan import SMOKE

    words = gpu_check.cuts("paper", [])
    keys = words[1::3]
    assert words[::3] == ["-p"] * len(keys) and set(keys) == set(SMOKE) | set(gpu_check.CUTS)  # every one declared
    only = gpu_check.cuts("ci", ["02_easy_nonlinear"])[1::3]
    assert "seeds" in only and "ablation_seeds" not in only  # icl reproduce --only refuses a key no notebook declares


def test_the_measured_groups_are_timed_on_a_device_as_replicas():
    with simulate():
        out = gpu_check.time_groups("cuda", steps=2, seeds=2, warmup=1, depths=[1, 2])
    assert out["one_seed"]["device"] == NAME and out["one_seed"]["replicas_in_pass"] == 1
    assert out["many_seeds"]["replicas_in_pass"] == 2  # the five-seed group of the H200 runs as replicas there
    assert out["one_seed_per_400"] == pytest.approx(out["one_seed"]["seconds"] * 200, rel=1e-2)


def test_the_cpu_and_a_device_are_compared_in_distribution_not_bits():
    with simulate():
        out = gpu_check.compare("cuda", steps=3, seeds=3, depths=[1, 2])
    cpu, device = out["finals"]["cpu"], out["finals"]["cuda"]
    assert cpu["1"] != device["1"]  # the device draws other batches: the same seed is another sample
    assert all(math.isfinite(r["z"]) and isinstance(r["agree"], bool) for r in out["rows"])
    assert [r["depth"] for r in out["rows"]] == [1, 2]


@pytest.mark.slow
def test_the_gpu_check_runs_end_to_end_on_the_cpu(tmp_path):
    # a copy of the repository, so that nothing (the reproduction's lock included) lands in this one's outputs/
    repo = tmp_path / "repo"
    for part in ("icl", "notebooks", "params", "scripts"):
        shutil.copytree(ROOT / part, repo / part, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", repo)
    tiny = {"GPU_CHECK_PROFILE": "ci", "GPU_CHECK_ONLY": "02_easy_nonlinear", "GPU_CHECK_GROUP_STEPS": "2",
            "GPU_CHECK_GROUP_DEPTHS": "1,2", "GPU_CHECK_COMPARE_STEPS": "3", "GPU_CHECK_COMPARE_SEEDS": "2",
            "GPU_CHECK_COMPARE_DEPTHS": "1,2"}
    env = {**os.environ, **tiny, "PYTHON": sys.executable, "OMP_NUM_THREADS": "1"}
    run = subprocess.run(["bash", str(repo / "scripts" / "gpu_check.sh"), "--cpu", str(tmp_path / "out")], env=env,
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    report = (tmp_path / "out" / "gpu_check.md").read_text()
    assert "| 02_easy_nonlinear | ok |" in report
    assert "| 1.72 |" in report and "| 4.82 |" in report  # beside the H200's measured groups
    assert "| torch |" in report and "CPU against cpu" in report
    assert not (repo / "outputs" / "ci" / "02_easy_nonlinear").exists()  # the smoke went to OUT
