"""The weak cases of issue 56, each one line (exit status 2, no traceback) or right: `icl judge` in
bounded memory, the guard's estimates, and the streams `--json` writes to. Every test works inside
its own tmp_path."""
import os
import resource
import subprocess
import sys

import numpy as np
import pytest
from conftest import ROOT

from icl.running.cli import main

pytestmark = pytest.mark.usefixtures("one_thread")


def one_line(capsys, argv, code=2) -> str:
    got = main(argv)
    err = capsys.readouterr().err.strip()
    assert got == code and len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


def curves(path, seeds: int, depths=(1, 2, 4, 8, 16, 32, 64)):
    rng = np.random.default_rng(0)
    rows = [f"{L},{s},{(0.1 + 1 / L) * np.exp(0.1 * rng.standard_normal()):.6f}" for s in range(seeds) for L in depths]
    path.write_text("depth,seed,loss\n" + "\n".join(rows) + "\n")
    return str(path)


@pytest.mark.slow
def test_judge_answers_200000_rows_within_a_minute_in_4_gb(tmp_path):
    """Was killed by the kernel at 23 GB after 210 s (a MemoryError traceback under a 4 GB limit)."""
    path = curves(tmp_path / "c.csv", 28_571)
    limit = lambda: resource.setrlimit(resource.RLIMIT_AS, (4_000_000 * 1024,) * 2)  # noqa: E731  ulimit -v 4000000
    out = subprocess.run([sys.executable, "-m", "icl", "judge", path, "--dim", "4", "--key-dim", "2"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60, preexec_fn=limit,
                         env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert out.returncode == 0 and "28571 seeds" in out.stdout, out.stderr[-2000:]


def test_judge_refuses_a_file_too_large_for_memory_in_one_line(tmp_path, capsys, monkeypatch):
    import icl.running.judge

    monkeypatch.setattr(icl.running.judge, "ROW_BYTES", 2**50)
    err = one_line(capsys, ["judge", curves(tmp_path / "c.csv", 3), "--dim", "4", "--key-dim", "2"])
    assert "memory: judging the 21 rows" in err and "fewer rows" in err


@pytest.mark.parametrize("depth", ["99999999999999999999", "9223372036854775808"])
def test_a_huge_depth_is_one_line_naming_its_row(tmp_path, capsys, depth):
    """Was a RuntimeWarning and a garbled depth (-9223372036854775808), or a 58-line traceback."""
    path = tmp_path / "c.csv"
    path.write_text(f"depth,seed,loss\n1,0,1.0\n2,0,0.5\n{depth},0,0.2\n4,0,0.3\n")
    err = one_line(capsys, ["judge", str(path), "--dim", "4", "--key-dim", "2"])
    assert "row 4" in err and "-9223372036854775808" not in err


SMALL = ["bound", "--dim", "4", "--context-length", "8", "--eval-contexts", "64", "--fit-contexts", "64", "--depths", "1"]


def test_bound_prints_its_estimate_before_the_sets_start(capsys, monkeypatch):
    """`bound --eval-sets` printed no estimate when it started (it was told only on a refusal)."""
    import icl.analysis.bounds

    def spread(*a, **k):
        assert "icl: 200,000 evaluation sets of 64 contexts: about" in capsys.readouterr().err
        raise KeyboardInterrupt  # started: stop here
    monkeypatch.setattr(icl.analysis.bounds, "held_out_spread", spread)
    assert main([*SMALL, "--eval-sets", "200000"]) == 130


@pytest.mark.slow
def test_the_eval_set_estimate_is_within_2x_of_the_sets_it_prices():
    """Was the first set alone, cold: 3-18x apart between runs of one command."""
    import time

    from icl.analysis.bounds import held_out_spread
    from icl.core.config import RunConfig
    from icl.running.timing import eval_set_seconds

    cfg = RunConfig.from_dict({"dim": 4, "context_length": 8, "eval_contexts": 64}, "bound")
    each = eval_set_seconds(cfg, 64)
    start = time.perf_counter()
    held_out_spread(cfg, 100, 64)
    assert 0.5 < each / ((time.perf_counter() - start) / 100) < 2


def test_deep_bounds_say_so_before_they_start(capsys, monkeypatch):
    """`bound --depths 1 ... 2000` was silent for 2-120 s."""
    import icl.analysis.bounds

    monkeypatch.setattr(icl.analysis.bounds, "bounds", lambda *a: (_ for _ in ()).throw(KeyboardInterrupt))
    assert main([*SMALL[:-1], "1", "2000"]) == 130
    assert "depths up to 2000: this may take minutes" in capsys.readouterr().err


def test_reproduce_prints_a_notebooks_estimate_when_it_starts(monkeypatch):
    """`reproduce` printed none when it started a long notebook (paper 02: 7.3 h by --plan)."""
    import icl.running.reproduce as rep

    name = next(iter(rep.NOTEBOOKS))
    monkeypatch.setattr(rep.plan, "check_work", lambda root, profile, names, *a: {n: 7.3 * 3600 for n in names})
    monkeypatch.setattr(rep, "run_notebook", quick_notebook)
    lines = []
    rep.run_all(ROOT, "ci", [name], "cpu", 1, log=lines.append)
    assert any("started: about 7.3 h of training left" in line for line in lines), lines


def quick_notebook(root, name, params, env):  # stands in for run_notebook in the worker
    return {"status": "ok", "seconds": 0.0, "runs_trained": 0}
