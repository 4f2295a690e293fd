"""The environment files agree: pyproject.toml, environment.yml, the lock files, the Makefile, .ci/run,
README."""
import re
import subprocess
import tomllib

import pytest
import yaml
from conftest import ROOT
from packaging.requirements import Requirement
from packaging.version import Version


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


# One entry of a pip-compile lock: `name==version \` and its `--hash=sha256:...` lines.
LOCK_ENTRY = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s\\]+)[ \\]*\n((?:[ \t]+--hash=sha256:[0-9a-f]{64}[ \\]*\n)*)", re.M)


def _lock(path: str) -> dict[str, str]:
    """{name: version} of a lock file; every entry must carry its hashes (`pip --require-hashes`)."""
    text = (ROOT / path).read_text()
    entries = LOCK_ENTRY.findall(text)
    unread = [line for line in text.splitlines() if line[:1].isalnum() and "==" not in line]
    assert not unread, f"{path}: lines that are not `name==version` entries: {unread}"
    assert len(entries) == sum(line[:1].isalnum() for line in text.splitlines()), f"{path}: an entry is malformed"
    unhashed = [name for name, _, hashes in entries if "--hash=sha256:" not in hashes]
    assert not unhashed, f"{path}: entries without a hash: {unhashed}"
    return {re.sub(r"[-_.]+", "-", name).lower(): version for name, version, _ in entries}


def test_lock_pins_what_pyproject_and_environment_yml_pin():
    lock = _lock("requirements.lock")
    for source, pins in (("pyproject.toml", _pyproject()), ("environment.yml", _environment_yml())):
        differ = {n: (str(s), lock.get(n)) for n, s in pins.items() if n != "torch" and f"=={lock.get(n)}" != str(s)}
        assert not differ, f"{source} and requirements.lock differ ({source}, lock; run `make lock`): {differ}"


def test_lock_leaves_torch_to_the_makefile_and_installs_with_hashes():
    assert "torch" not in _lock("requirements.lock"), "requirements.lock pins torch: its build is the Makefile's TORCH"
    recipe = re.search(r"^\$\(STAMP\):.*?\n\n", (ROOT / "Makefile").read_text(), re.M | re.S).group(0)
    assert "--require-hashes -r requirements.lock" in recipe and "--no-deps" in recipe and "$(TORCH)" in recipe, (
        f"make install must install requirements.lock with hashes, torch from TORCH, icl with --no-deps:\n{recipe}"
    )


def test_website_lock_keeps_the_main_locks_versions():
    main, site = _lock("requirements.lock"), _lock("website/requirements.lock")
    differ = {n: (main[n], v) for n, v in site.items() if n in main and main[n] != v}
    assert not differ, f"website/requirements.lock and requirements.lock differ (site, main): {differ}"
    wanted = _pins(line for line in (ROOT / "website" / "requirements.in").read_text().splitlines()
                   if line.strip() and not line.startswith("#"))
    missing = {n: str(s) for n, s in wanted.items() if f"=={site.get(n)}" != str(s)}
    assert not missing, f"website/requirements.in pins these, website/requirements.lock does not: {missing}"


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
    from icl.running.report import BEGIN, END

    readme = (ROOT / "README.md").read_text()
    assert readme.count(BEGIN) == 1 and readme.count(END) == 1 and readme.index(BEGIN) < readme.index(END)
    assert len(readme.splitlines()) <= 150, f"README.md has {len(readme.splitlines())} lines; move detail to docs/"
    for link in re.findall(r"\]\(((?:docs|notebooks)/[^)#]+)\)", readme):
        assert (ROOT / link).exists(), f"README links to {link}, which does not exist"


@pytest.mark.slow
def test_make_help_lists_every_target():
    out = subprocess.run(["make", "-s", "help"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    listed = {line.split()[0] for line in out.splitlines() if line.strip()}
    wanted = {"help", "install", "test", "test-fast", "variants", "reproduce", "golden", "lab", "bench", "sync", "clean",
              "lock", "site", "test-site"}
    assert wanted <= listed, f"`make help` does not list: {sorted(wanted - listed)}"
