"""Device hygiene: the run cache keys a run by the device it trains on, each result says which
device and matmul precision made it, `make test` never sees a GPU, and a changed TORCH reinstalls."""
import json
import os
import subprocess

import pytest
import torch
from conftest import ROOT, tiny_config

import icl.core.train
from icl.running.cache import RunCache, run_key


def test_auto_and_cpu_are_one_run_on_a_cpu_machine(tmp_path, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    auto, cpu = tiny_config(device="auto"), tiny_config(device="cpu")
    assert run_key(auto) == run_key(cpu)
    # A run stored from `device: cpu` is found by `device: auto`, and the other way round.
    cache = RunCache(tmp_path)
    result = icl.core.train.train(cpu, progress=False)
    cache.store(cpu, result)
    same = lambda a, b: json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)  # NaN == NaN here
    assert same(cache.load(auto), result)
    cache.store(auto, {**result, "config": auto.to_dict()})
    assert cache.load(cpu)["config"]["device"] == "auto"


def test_a_gpu_run_has_its_own_key():
    from simdevice import simulate

    with simulate():
        gpu = run_key(tiny_config(device="cuda"))
    assert gpu != run_key(tiny_config(device="cpu"))


def test_a_result_records_its_device_name_and_matmul_precision():
    r = icl.core.train.train(tiny_config(), progress=False)
    assert r["device"] == "cpu" and isinstance(r["device_name"], str) and r["device_name"]
    assert r["matmul_precision"] == torch.get_float32_matmul_precision()


@pytest.mark.slow
def test_make_test_hides_gpus(tmp_path):
    recipe = subprocess.run(["make", "-n", "test", f"VENV={tmp_path / 'venv'}"], cwd=ROOT, capture_output=True, text=True,
                            check=True).stdout
    runs = [line for line in recipe.splitlines() if "-m pytest" in line]
    assert len(runs) == 3 and all("CUDA_VISIBLE_DEVICES= " in line for line in runs), recipe


FAKE_PYTHON = """#!/bin/bash
# python's stand-in: `-m venv DIR` makes DIR/bin/python this script; any other call is logged
if [ "$1 $2" = "-m venv" ]; then mkdir -p "$3/bin"; cp "$0" "$3/bin/python"; exit 0; fi
echo "$*" >> "$LOG"
"""


@pytest.mark.slow
def test_a_changed_torch_reinstalls_torch_and_keeps_the_run_cache(tmp_path):
    fake = tmp_path / "python"
    fake.write_text(FAKE_PYTHON)
    fake.chmod(0o755)
    log, venv = tmp_path / "log", tmp_path / "venv"
    runs = ROOT / "outputs" / "runs"
    before = runs.exists()

    def install(torch_spec: str) -> list[str]:
        log.write_text("")
        subprocess.run(["make", "-s", "install", f"PYTHON={fake}", f"VENV={venv}", f"TORCH={torch_spec}"], cwd=ROOT,
                       env={**os.environ, "LOG": str(log)}, check=True, capture_output=True)
        return [line for line in log.read_text().splitlines() if "-m pip" in line]  # not the lab settings' step

    lock, editable = "-m pip install -q --require-hashes -r requirements.lock", "-m pip install -q --no-deps --no-build-isolation -e ."
    assert install("torch==2.13.0") == ["-m pip install -q --upgrade pip", lock, "-m pip install -q torch==2.13.0",
                                        editable]
    assert install("torch==2.13.0") == []  # unchanged: nothing to do
    cuda = "torch==2.13.0 --index-url https://download.pytorch.org/whl/cu128"
    assert install(cuda)[1:4] == ["-m pip uninstall -q -y torch", lock, f"-m pip install -q {cuda}"]
    assert runs.exists() == before
