"""A notebook run outside `icl reproduce` (the README's papermill command, with or without its
`-p output_dir`; Run All in JupyterLab) writes under outputs/scratch/ or where it is told, never
into the committed outputs/<notebook>/: the README's command without `-p output_dir`, or Run All,
rewrote outputs/03_difficult/ in place (35 files, 6,965 deletions). Run at the ci profile on the
cheapest notebook, in a git repository made from a copy of this one."""
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
import yaml
from conftest import ROOT

NAME = "02_easy_nonlinear"
GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]


@pytest.fixture
def repo(tmp_path) -> Path:
    """The code, the parameters and the committed outputs of NAME, committed in a new repository."""
    repo = tmp_path / "repo"
    for part in ("icl", "notebooks", "params", f"outputs/{NAME}"):
        shutil.copytree(ROOT / part, repo / part, ignore=shutil.ignore_patterns("__pycache__", ".ipynb_checkpoints"))
    for name in ("pyproject.toml", ".gitignore", "README.md"):
        shutil.copy(ROOT / name, repo)
    subprocess.run([*GIT, "init", "-q"], cwd=repo, check=True)
    subprocess.run([*GIT, "add", "-A"], cwd=repo, check=True)
    subprocess.run([*GIT, "commit", "-qm", "copy"], cwd=repo, check=True)
    return repo


def readme_command() -> list[str]:
    """The README's papermill command (the line after its `mkdir -p outputs/scratch`), at the ci
    profile on NAME."""
    text = (ROOT / "README.md").read_text()
    block = next(b for b in re.findall(r"```bash\n(.*?)```", text, re.S) if "papermill" in b).replace("\\\n", " ")
    line = next(line for line in block.splitlines() if "papermill" in line)
    words = shlex.split(line.replace("03_difficult", NAME))
    assert words[0].endswith("papermill"), words
    assert f"params/ci/{NAME}.yaml" in words, words  # the README's example runs at the ci shapes (issue 57)
    return [sys.executable, "-m", "papermill", *words[1:]]


def without_output_dir(words: list[str]) -> list[str]:
    i = words.index("output_dir")
    assert words[i - 1] == "-p", words
    return words[:i - 1] + words[i + 2:]


def clean(repo: Path) -> str:
    return subprocess.run(["git", "status", "--porcelain", "outputs/"], cwd=repo, capture_output=True, text=True,
                          check=True).stdout


@pytest.mark.slow
def test_custom_runs_leave_the_committed_outputs_alone(repo):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MPLBACKEND": "Agg"}
    told = readme_command()
    (repo / "outputs" / "scratch").mkdir(parents=True, exist_ok=True)  # the README's first line
    for words in (told, without_output_dir(told)):
        r = subprocess.run(words, cwd=repo, capture_output=True, text=True, env=env, timeout=600)
        assert r.returncode == 0, r.stderr[-3000:]
        assert clean(repo) == "", (words, clean(repo))
    custom = told[told.index("output_dir") + 1]
    assert (repo / custom / "results.json").is_file() and (repo / "outputs" / "scratch" / NAME / "results.json").is_file()

    # Run All: the notebook as it is, its sizes cut to the ci profile's in its parameters cell.
    (repo / "outputs" / "scratch" / NAME / "results.json").unlink()
    nb = nbformat.read(repo / "notebooks" / f"{NAME}.ipynb", 4)
    cell = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
    ci = {k: v for k, v in yaml.safe_load((repo / "params" / "ci" / f"{NAME}.yaml").read_text()).items()
          if k != "output_dir"}  # the sizes, not the folder
    head, last = cell.source.rsplit("\n", 1)
    cell.source = head + "\n" + "".join(f"{k} = {v!r}\n" for k, v in ci.items()) + last
    from nbclient import NotebookClient

    where = {"metadata": {"path": str(repo / "notebooks")}}  # Lab runs a notebook in its folder
    NotebookClient(nb, kernel_name="python3", timeout=600, resources=where).execute()
    assert clean(repo) == "", clean(repo)
    assert (repo / "outputs" / "scratch" / NAME / "results.json").is_file()
