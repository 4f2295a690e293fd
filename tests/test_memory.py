"""The memory estimate that refuses runs too big to fit: close to the measured peak of real runs
of every model, and refusing in one line with the estimate and the limit."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import PEAK_PROBE, live_memory_env
from icl.config import ConfigError, RunConfig
from icl.memory import GIB, check_fits, estimate_bytes

ROOT = Path(__file__).resolve().parents[1]

PROBE = PEAK_PROBE + """
from icl.config import RunConfig
from icl.train import train_group

cfg, depths = RunConfig(**json.loads(sys.argv[1])), json.loads(sys.argv[2])
train_group([RunConfig(model=cfg.model, dim=4, context_length=8, steps=2, batch_size=8, eval_contexts=8,
                       eval_points=1, device="cpu")], progress=False)  # libraries and allocator warm
print(live_peak(lambda: train_group([cfg.replace(depth=L) for L in depths], progress=False)))
"""

CASES = [  # (config, depths): a few hundred MiB each, where the run's tensors dominate the peak
    (dict(model="softmax", dim=16, context_length=512, batch_size=256, eval_contexts=2048), [16, 8, 4, 2, 1]),
    (dict(model="linear", dim=64, context_length=2048, batch_size=256, eval_contexts=512), [4, 2, 1]),
    (dict(model="context_updates", dim=16, key_dim=4, context_length=128, batch_size=64, eval_contexts=256), [8, 4, 2, 1]),
    (dict(model="shared_stream", dim=16, key_dim=4, context_length=128, batch_size=64, eval_contexts=256), [8, 4, 2, 1]),
    # multi-head layers (the torch path): h times the attention
    (dict(model="shared_stream", dim=16, key_dim=4, heads=4, context_length=128, batch_size=128, eval_contexts=128), [4, 2, 1]),
]


@pytest.mark.slow
@pytest.mark.parametrize("sizes,depths", CASES, ids=[c[0]["model"] + (f"-h{c[0]['heads']}" if "heads" in c[0] else "") for c in CASES])
def test_estimate_is_within_a_factor_of_two_of_the_measured_peak(sizes, depths):
    cfg = dict(sizes, steps=2, eval_points=1, device="cpu")
    out = subprocess.run([sys.executable, "-c", PROBE, json.dumps(cfg), json.dumps(depths)], capture_output=True,
                         text=True, timeout=300, cwd=ROOT, env=live_memory_env(), check=True)
    measured = int(out.stdout.split()[-1])
    estimate = estimate_bytes(RunConfig(**cfg), depths)
    print(f"{sizes['model']}: estimate {estimate / 2**20:.0f} MiB, measured {measured / 2**20:.0f} MiB")
    assert 0.5 < estimate / measured < 2.0


def test_refusal_names_the_sizes_the_estimate_and_the_limit():
    with pytest.raises(ConfigError) as err:
        check_fits(RunConfig(dim=100_000, device="cpu"))
    text = str(err.value)
    assert text.startswith("memory: ") and "dim 100000" in text and "GiB" in text and ("RAM" in text or "limit" in text)
    assert "\n" not in text


@pytest.mark.parametrize("profile,limit_gib", [("quick", 4), ("paper", 40)])
def test_the_generalised_notebooks_runs_are_never_refused(profile, limit_gib):
    """Notebook 04's deepest groups at the quick profile fit a laptop of 8 GiB (P = 64 and depth 64
    since the C kernels: the largest, 2.3 GiB, is the evaluation's stored context attention), the
    paper's a GPU."""
    import yaml

    p = yaml.safe_load((ROOT / "params" / profile / "04_generalized.yaml").read_text())
    sizes = {k: p[k] for k in ("dim", "context_length", "batch_size", "eval_contexts")}
    for key_dim in p["key_dims"]:
        for model, depths in [("softmax", p["depths"]), ("shared_stream", p["depths"]), ("context_updates", p["context_depths"])]:
            need = estimate_bytes(RunConfig(model=model, key_dim=key_dim, **sizes), depths)
            print(f"{profile} {model} key_dim {key_dim} {depths[-1]}: {need / GIB:.2f} GiB")
            assert need < limit_gib * GIB, (model, key_dim)
