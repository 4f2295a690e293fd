"""The environment files agree: pyproject.toml, environment.yml, the Makefile, .ci/run, README."""
import re
import subprocess
import tomllib
from pathlib import Path

import yaml
from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]


def _pins(requirements):
    """{name: specifier string} from requirement strings, skipping `-e .` style entries."""
    out = {}
    for line in requirements:
        if line.startswith("-"):
            continue
        req = Requirement(line)
        out[req.name.lower()] = req.specifier
    return out


def _pyproject():
    with open(ROOT / "pyproject.toml", "rb") as f:
        return _pins(tomllib.load(f)["project"]["dependencies"])


def _environment_yml():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip = [d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d]
    assert len(pip) == 1, "environment.yml needs exactly one `pip:` list"
    assert "-e ." in pip[0], "environment.yml's pip list must install the package with `-e .`"
    return _pins(pip[0])


def _makefile_torch():
    m = re.search(r"^TORCH\s*\?=\s*(.+?)\s*$", (ROOT / "Makefile").read_text(), re.M)
    assert m, "Makefile has no `TORCH ?=` default"
    return m.group(1)


def test_pyproject_and_environment_yml_list_the_same_packages():
    py, env = _pyproject(), _environment_yml()
    only_py, only_env = sorted(py.keys() - env.keys()), sorted(env.keys() - py.keys())
    assert not only_py and not only_env, (
        f"package lists differ: only in pyproject.toml {only_py}, only in environment.yml {only_env}"
    )
    differ = {n: (str(py[n]), str(env[n])) for n in py if n != "torch" and str(py[n]) != str(env[n])}
    assert not differ, f"pins differ (pyproject.toml, environment.yml): {differ}"
    unpinned = [n for n in py if n != "torch" and not str(py[n]).startswith("==")]
    assert not unpinned, f"pyproject.toml must pin these exactly (==): {unpinned}"


def test_torch_pin_matches_makefile_and_pyproject_range():
    default = _makefile_torch()
    env_torch = _environment_yml()["torch"]
    assert f"torch{env_torch}" == default, (
        f"environment.yml pins torch{env_torch} but the Makefile's default is TORCH ?= {default}"
    )
    version = Version(str(env_torch).removeprefix("=="))
    py_range = _pyproject()["torch"]
    assert py_range.contains(version), f"pyproject's torch range '{py_range}' excludes {version}"


def _readme_commands() -> list[str]:
    """The commands of the README's "Two commands" block, without their comments."""
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Two commands", 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, re.S).group(1)
    return [line.split("#")[0].strip() for line in block.splitlines() if line.strip()]


def test_ci_runs_the_readme_test_command():
    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    commands = _readme_commands()
    assert commands == ["make reproduce", "make test"], f"README's two commands are {commands}"
    assert "make test" in ci, ".ci/run must call the README's test command, `make test`, as a line of its own"


def test_readme_fits_three_screens_and_keeps_its_generated_block():
    from icl.summary import BEGIN, END

    readme = (ROOT / "README.md").read_text()
    assert readme.count(BEGIN) == 1 and readme.count(END) == 1 and readme.index(BEGIN) < readme.index(END)
    assert len(readme.splitlines()) <= 150, f"README.md has {len(readme.splitlines())} lines; move detail to docs/"
    for link in re.findall(r"\]\(((?:docs|notebooks)/[^)#]+)\)", readme):
        assert (ROOT / link).exists(), f"README links to {link}, which does not exist"


def test_make_help_lists_every_target():
    out = subprocess.run(["make", "-s", "help"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    listed = {line.split()[0] for line in out.splitlines() if line.strip()}
    wanted = {"help", "install", "test", "test-fast", "variants", "reproduce", "golden", "lab", "bench", "sync", "clean"}
    assert wanted <= listed, f"`make help` does not list: {sorted(wanted - listed)}"
