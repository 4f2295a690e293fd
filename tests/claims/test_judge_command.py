"""`python -m icl judge`: a user's depth curves judged by the rule that judges C4 (issue 43, item 3), and
one line with status 2 for a file it cannot judge. Every file lives in the test's tmp_path."""
import json
import os

import numpy as np
import pytest

from icl.claims import calibration, difficult
from icl.running.cli import main

QUICK = (1, 2, 3, 4, 6, 8, 12, 16, 32, 64)


def curves(tmp_path, alpha=1.0, seeds=5, name="curves.csv", noise=0.0066):
    df = calibration.sweep(calibration.SHAPES["k=4"], alpha, QUICK, seeds, noise, 0.018, np.random.default_rng(1))
    path = tmp_path / name
    df.to_csv(path, index=False)
    return path, df


def test_the_command_prints_the_verdict_of_c4_s_core_and_writes_what_it_read(tmp_path, capsys):
    path, df = curves(tmp_path)
    assert main(["judge", str(path), "--dim", "16", "--key-dim", "4", "--json", str(tmp_path / "v.json")]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("inverse-depth decay (C4's core): reproduced")
    out = json.loads((tmp_path / "v.json").read_text())
    assert out == json.loads(json.dumps(difficult.judge(df, 16, 4)))  # the function the notebooks judge C4 with
    assert out["status"] == "reproduced" and out["primary"] == "tail L >= m" and len(out["alpha"]["ci95"]) == 2


def test_a_half_power_tail_is_not_reproduced_from_the_command_line(tmp_path, capsys):
    path, _ = curves(tmp_path, alpha=0.5)
    assert main(["judge", str(path), "--dim", "16", "--key-dim", "4", "--json", "-"]) == 0
    assert json.loads(capsys.readouterr().out)["status"] == "not reproduced"


@pytest.mark.parametrize("text, says", [
    ("depth,seed\n1,0\n", "has no column loss"),
    ("depth,seed,loss\n1,0,0.5\n2,0,-1\n3,0,0.3\n4,0,0.2\n", "row 3 (depth 2.0, seed 0.0, loss -1.0) is not allowed"),
    ("depth,seed,loss\n1,0,0.5\n1,0,0.4\n2,0,0.3\n3,0,0.2\n4,0,0.1\n", "depth 1 of seed 0 appears twice"),
    ("depth,seed,loss\n2,0,0.5\n3,0,0.4\n4,0,0.3\n8,0,0.2\n", "need depth 1"),
    ("", "cannot be read as a CSV file"),
])
def test_a_file_it_cannot_judge_is_one_line_with_status_2(tmp_path, capsys, text, says):
    path = tmp_path / "bad.csv"
    path.write_text(text)
    assert main(["judge", str(path), "--dim", "16", "--key-dim", "4"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and says in err, err


def test_a_named_pipe_is_refused_not_waited_on(tmp_path, capsys):
    os.mkfifo(tmp_path / "pipe.csv")
    assert main(["judge", str(tmp_path / "pipe.csv"), "--dim", "16", "--key-dim", "4"]) == 2
    assert "not a regular file" in capsys.readouterr().err


def test_a_rank_above_the_dimension_is_refused(tmp_path, capsys):
    path, _ = curves(tmp_path)
    assert main(["judge", str(path), "--dim", "16", "--key-dim", "17"]) == 2
    assert "--key-dim: 17 is not allowed with --dim 16" in capsys.readouterr().err
