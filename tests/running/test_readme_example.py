"""The README's papermill example runs as written (issue 46): at the ci profile, in a copy of the
repository, it trains on the custom spectrum alone, prints no NaN, and writes nothing outside
outputs/scratch/."""
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT


def readme_example() -> list[str]:
    """The shell lines of the README's papermill example, continuations joined."""
    text = (ROOT / "README.md").read_text()
    block = next(b for b in re.findall(r"```bash\n(.*?)```", text, re.S) if "papermill" in b)
    return [line.strip() for line in block.replace("\\\n", " ").splitlines() if line.strip()]


def files(folder) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()}


@pytest.mark.slow
def test_the_readmes_papermill_example_runs_clean_at_the_ci_profile(clone):
    before = files(clone)
    path = f"{Path(sys.executable).parent}:/usr/bin:/bin"  # the environment's python first, as after `make install`
    for line in readme_example():
        if "papermill" in line:  # as written: at the ci profile's shapes (issue 57: the README says -f params/ci/...)
            assert "-f params/ci/03_difficult.yaml" in line, line
            line = line.replace(".venv/bin/papermill", f"{sys.executable} -m papermill")
        proc = subprocess.run(line, shell=True, cwd=clone, capture_output=True, text=True, timeout=600,
                              env={"OMP_NUM_THREADS": "1", "MPLBACKEND": "Agg", "PATH": path, "HOME": str(clone.parent / "home")})
        assert proc.returncode == 0, proc.stderr[-3000:]
    new = files(clone) - before
    assert new and all(f.startswith("outputs/scratch/") for f in new), sorted(new)[:5]
    executed = json.loads((clone / "outputs" / "scratch" / "my_spectrum.ipynb").read_text())
    printed = " ".join(str(o.get("text", "")) for c in executed["cells"] for o in c.get("outputs", [])
                       if o.get("output_type") == "stream")  # the sentences (a table may hold an empty cell)
    assert not re.search(r"\bnan", printed, re.I), re.search(r".{60}\bnan.{20}", printed, re.I | re.S)
    results = json.loads((clone / "outputs" / "scratch" / "my_spectrum" / "results.json").read_text())
    spectra = {k: v for k, v in results["parameters"].items() if k.endswith("spectra") or k == "mode_spectrum"}
    assert spectra and all(v in ([[1.3, 0.7]], [1.3, 0.7]) for v in spectra.values()), spectra
