"""The package, the tests and the scripts pass ruff as pyproject.toml configures it ([tool.ruff])."""
import subprocess
import sys

import pytest
from conftest import ROOT


@pytest.mark.slow  # starts a process
def test_ruff_finds_nothing():
    done = subprocess.run([sys.executable, "-m", "ruff", "check", "icl", "tests", "scripts", "website"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-1000:]
