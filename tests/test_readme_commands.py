"""The README's commands run as written after its setup (issue 57): every command line it shows, in a
bash block or in backticks, that starts with `.venv/bin/` or `make` names what exists, with arguments
it takes (checked here without running; tests/running/test_readme_example.py runs the papermill
example), and none starts with a bare `icl`, which `make install` does not put on the PATH."""
import importlib.util
import re
import shlex
import sys
from pathlib import Path

import pytest
import yaml
from conftest import ROOT

from icl.running.cli import COMMANDS, build_parser
from icl.running.parameters import NOTEBOOKS, declared_parameters


def command_lines(text: str) -> list[str]:
    """Each line of a bash block (continuations joined, comments dropped) and each code span, of
    those that start with `.venv/bin/`, `make` or `icl`. HTML comments (the generated results'
    markers) are prose."""
    text = re.sub(r"<!--.*?-->", "", text, flags=re.S)
    found = []
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        found += [" ".join(line.split("  #")[0].split()) for line in block.replace("\\\n", " ").splitlines()]
    found += re.findall(r"`([^`\n]+)`", re.sub(r"```.*?```", "", text, flags=re.S))
    return [c for c in found if re.match(r"(\.venv/bin/\S|make\b|icl\s)", c)]


COMMANDS_SHOWN = command_lines((ROOT / "README.md").read_text())


def check_make(argv: list[str]) -> None:
    """Targets the Makefile has, and variables it lets the command line set (`?=`)."""
    text = (ROOT / "Makefile").read_text()
    targets, variables = set(re.findall(r"^([a-zA-Z][\w-]*):", text, re.M)), set(re.findall(r"^(\w+)\s*\?=", text, re.M))
    assert {a for a in argv if "=" not in a} <= targets, argv
    assert {a.split("=")[0] for a in argv if "=" in a} <= variables, argv


def pairs(argv: list[str], flag: str) -> list[tuple[str, str]]:
    return [(argv[i + 1], argv[i + 2]) for i, a in enumerate(argv) if a == flag]


def check_icl(argv: list[str], capsys) -> None:
    """A subcommand icl has, whose --help works and whose parser takes the arguments shown."""
    if argv == ["--help"]:
        argv = []
    else:
        assert argv and argv[0] in COMMANDS, f"icl has no subcommand {argv[:1]}; it has {sorted(COMMANDS)}"
        build_parser([argv[0]]).parse_args(argv)  # a ConfigError (one line) for a flag it does not take
    with pytest.raises(SystemExit) as exit:
        build_parser(argv[:1]).parse_args([*argv[:1], "--help"])
    assert exit.value.code == 0 and "usage: icl" in capsys.readouterr().out
    if argv[:1] == ["reproduce"]:  # its -p keys, declared by the notebooks it runs
        names = pairs(argv, "--only")[0][0:1] if "--only" in argv else list(NOTEBOOKS)
        declared = {k for n in names for k in declared_parameters(ROOT, n)}
        assert {k for k, _ in pairs(argv, "-p")} <= declared


def check_papermill(argv: list[str]) -> None:
    """The notebook exists, and each -p key and each key of a -f file is one of its parameters."""
    notebook = ROOT / argv[0]
    assert notebook.exists() and notebook.stem in NOTEBOOKS, argv[0]
    declared = declared_parameters(ROOT, notebook.stem)
    keys = {k for k, _ in pairs(argv, "-p")}
    for i in (i for i, a in enumerate(argv) if a == "-f"):
        keys |= set(yaml.safe_load((ROOT / argv[i + 1]).read_text()))
    assert keys and keys <= set(declared), f"not parameters of {notebook.stem}: {sorted(keys - set(declared))}"
    if "--cwd" in argv:
        assert (ROOT / argv[argv.index("--cwd") + 1]).is_dir()


def test_the_readme_shows_commands_and_none_with_a_bare_icl():
    """`icl judge ...` failed after `make install`: icl is in .venv/bin/, not on the PATH."""
    assert any(c.startswith(".venv/bin/icl judge") for c in COMMANDS_SHOWN) and any(c.startswith("make ") for c in COMMANDS_SHOWN)
    bare = [c for c in COMMANDS_SHOWN if c.startswith("icl ")]
    assert not bare, f"write .venv/bin/icl (or say to activate .venv): {bare}"


@pytest.mark.parametrize("line", [c for c in COMMANDS_SHOWN if not c.startswith("icl ")])
def test_each_command_the_readme_shows_exists_with_its_arguments(line, capsys):
    argv = shlex.split(line)
    if argv[0] == "make":
        return check_make(argv[1:])
    tool = argv[0].removeprefix(".venv/bin/")
    assert (Path(sys.executable).parent / tool).exists(), f"{argv[0]}: make install puts no {tool} there"
    if tool == "icl":
        check_icl(argv[1:], capsys)
    elif tool == "papermill":
        check_papermill(argv[1:])
    elif tool == "python":
        module = argv[argv.index("-m") + 1] if "-m" in argv else None
        assert (importlib.util.find_spec(module) is not None) if module else (ROOT / argv[1]).exists(), line


def test_the_check_finds_a_bad_command(capsys):
    """Not a check that passes anything: a misspelt subcommand, parameter and target fail it."""
    with pytest.raises(AssertionError):
        check_icl(["jugde"], capsys)
    with pytest.raises(AssertionError):
        check_papermill(["notebooks/03_difficult.ipynb", "out.ipynb", "-p", "stepz", "10"])
    with pytest.raises(AssertionError):
        check_make(["reproduce", "PROFLIE=paper"])
    assert command_lines("a `icl judge x` and `make lab`\n```bash\n.venv/bin/icl \\\n  judge x  # why\n```\n") == [
        ".venv/bin/icl judge x", "icl judge x", "make lab"]
