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
