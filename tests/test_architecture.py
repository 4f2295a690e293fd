"""The package's architecture (docs/architecture.md), read from its source with ast. Every import of
an icl module is an arrow, at a module's head or inside a function, relative or absolute. Every
module lies in one of four layers, core < analysis < claims < running; no arrow goes up from a layer
to one above it; no arrows close a circle; and an import inside a function, an arrow a reader of the
module's head does not see, says why on its line or the line above. Nor does analysis or claims
call up a layer through an object: they read a notebook's parameters as analysis's value object,
never through running's `Settings`. The walker is also run on a made-up package with one fault of
each kind, so that each check is seen to fail."""
import ast
import io
import re
import tokenize
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import ROOT

LAYERS = ("core", "analysis", "claims", "running")  # each imports only its own layer and those before
FACE = ("__init__.py", "__main__.py")  # the package's own files: its public API reaches every layer


@dataclass(frozen=True)
class Arrow:
    source: str  # the importing module, dotted
    target: str  # the module it imports
    path: Path
    line: int
    in_function: bool
    commented: bool  # a comment on its lines, on a comment line right above, or on the import right above

    def __str__(self):
        where = "/".join(self.path.parts[-len(self.source.split(".")) - (self.path.name == "__init__.py"):])
        return f"{where}:{self.line} imports {self.target}"


def modules(package: Path) -> dict[str, Path]:
    """Every module below the folder `package`, by dotted name (a package's __init__ by the package's)."""
    found = {}
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def public_names(package: Path) -> dict[str, str]:
    """The face's PUBLIC table (name -> module, or (module, attribute)) as name -> module: `from icl
    import bounds` inside a layer is an arrow to icl.analysis.bounds, not to the face."""
    for node in ast.parse((package / "__init__.py").read_text()).body:
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["PUBLIC"]:
            return {k: v if isinstance(v, str) else v[0] for k, v in ast.literal_eval(node.value).items()}
    return {}


def imports(tree: ast.Module):
    """(statement, inside a function) for every import statement of a module, however deep."""
    def walk(node, inside):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                yield child, inside
            yield from walk(child, inside or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)))
    yield from walk(tree, False)


def targets(node, name: str, is_package: bool, known: dict, public: dict) -> list[str]:
    """The package's modules an import statement in module `name` loads (a name imported from a
    module counts as that module; others' modules are left out)."""
    if isinstance(node, ast.Import):
        wanted = [a.name for a in node.names]
    else:
        if node.level:  # from . import x, from ..core.config import RunConfig
            base = name.split(".") if is_package else name.split(".")[:-1]
            stem = ".".join(base[: len(base) - node.level + 1] + (node.module.split(".") if node.module else []))
        else:
            stem = node.module
        face = stem == name.split(".")[0]  # `from icl import x`: x through the public table
        wanted = [public[a.name] if face and a.name in public else f"{stem}.{a.name}" for a in node.names]
    # the longest known prefix: `from icl.core.train import train` -> icl.core.train
    out = []
    for w in wanted:
        parts = w.split(".")
        hit = next((".".join(parts[:n]) for n in range(len(parts), 0, -1) if ".".join(parts[:n]) in known), None)
        if hit is not None:
            out.append(hit)
    return out


def comment_lines(source: str) -> tuple[set, set]:
    """(lines holding a comment, lines holding nothing but a comment)."""
    some, only = set(), set()
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            some.add(tok.start[0])
            if not tok.line[: tok.start[1]].strip():
                only.add(tok.start[0])
    return some, only


def arrows(package: Path) -> list[Arrow]:
    """Every import of one of the package's modules by another, wherever it stands in the module. A
    run of imports with no line between them shares the comment of its first."""
    known, public = modules(package), public_names(package)
    found = set()
    for name, path in known.items():
        source = path.read_text()
        some, only = comment_lines(source)
        said = {}  # the last line of each import statement: whether it says why
        for node, inside in sorted(imports(ast.parse(source)), key=lambda n: n[0].lineno):
            commented = (bool(some & set(range(node.lineno, node.end_lineno + 1))) or node.lineno - 1 in only
                         or said.get(node.lineno - 1, False))
            said[node.end_lineno] = commented
            for target in targets(node, name, path.name == "__init__.py", known, public):
                if target != name:
                    found.add(Arrow(name, target, path.resolve(), node.lineno, inside, commented))
    return sorted(found, key=lambda a: (a.path, a.line, a.target))


def layer(module: str):
    """A module's layer, or None for the package's face (its __init__ and __main__)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] != "__main__" else None


def outside_layers(package: Path) -> list[str]:
    """Modules neither in a layer's folder nor the package's face."""
    return [m for m, p in modules(package).items() if layer(m) not in LAYERS and not (p.parent == package and p.name in FACE)]


def upward(found: list[Arrow]) -> list[str]:
    """Arrows from a layer to a layer above it (the face, each way, is exempt)."""
    rank = {name: i for i, name in enumerate(LAYERS)}  # a module in no layer is outside_layers' to report
    return [f"{a} ({layer(a.source)} -> {layer(a.target)})" for a in found
            if rank.get(layer(a.target), -1) > rank.get(layer(a.source), len(LAYERS))]


def circles(found: list[Arrow]) -> list[list[str]]:
    """The import circles: each strongly connected set of two or more modules (Tarjan's algorithm)."""
    graph: dict[str, set] = {}
    for a in found:
        graph.setdefault(a.source, set()).add(a.target)
        graph.setdefault(a.target, set())
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while not group or group[-1] != v:
                group.append(stack.pop())
                on.discard(group[-1])
            if len(group) > 1:
                out.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def unexplained(found: list[Arrow], exempt=frozenset()) -> list[str]:
    """Imports inside a function that say nothing of why, outside the files in `exempt`."""
    return list(dict.fromkeys(str(a) for a in found if a.in_function and not a.commented and a.path not in exempt))


# ---------------------------------------------------------------- icl itself

ICL = ROOT / "icl"


def test_every_module_of_icl_lies_in_a_layer():
    assert outside_layers(ICL) == [], f"modules in no layer {LAYERS}: {outside_layers(ICL)}"


def test_no_import_circle_in_icl():
    assert circles(arrows(ICL)) == [], f"import circles: {circles(arrows(ICL))}"


def test_no_arrow_in_icl_goes_up_a_layer():
    bad = upward(arrows(ICL))
    assert bad == [], f"{len(bad)} imports up a layer ({' < '.join(LAYERS)}):\n" + "\n".join(bad)


def test_every_import_inside_a_function_of_icl_says_why():
    bad = unexplained(arrows(ICL))
    assert bad == [], (f"{len(bad)} imports inside a function with no comment on their line or the line above "
                       "saying why (e.g. `# heavy: loads torch`); one that loads nothing heavy belongs at the "
                       "module's head (with no circle in icl, moving it there closes none):\n" + "\n".join(bad))


def test_the_walker_finds_icls_arrows_of_every_kind():
    """Not a walker that sees nothing: icl's known arrows, at a module's head, inside a function,
    relative, absolute and through the face, are all found."""
    found = {(a.source, a.target, a.in_function) for a in arrows(ICL)}
    assert ("icl.running.cache", "icl.core.config", False) in found  # from ..core.config import RunConfig
    assert ("icl.core", "icl", False) in found  # from .. import __version__
    assert any(a[2] for a in found) and len(found) > 100


# ---------------------------------------------------------------- the walker, on a made-up package


def write(package: Path, files: dict) -> Path:
    for name, text in files.items():
        path = package / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return package


CLEAN = {
    "__init__.py": 'PUBLIC = {"tasks": "pkg.core.tasks", "Cache": ("pkg.running.cache", "Cache")}\n',
    "__main__.py": "from .running import cache\n",
    "core/__init__.py": "from .. import __version__\n",
    "core/tasks.py": "import math\n",
    "core/train.py": "from . import tasks\nfrom pkg.core.tasks import x\n",
    "analysis/__init__.py": "",
    "analysis/fit.py": "from ..core import train\n\n\ndef f():\n    # heavy: loads the core's tasks\n    from ..core import tasks\n",
    "claims/__init__.py": "from ..analysis.fit import f\n",
    "running/__init__.py": "",
    "running/cache.py": ("import pkg.claims\n\n\ndef g():\n    import pkg.core.train  # why: only when asked\n\n\n"
                         "def h():\n    import math  # why: a run of imports shares its first one's comment\n"
                         "    from ..core import tasks\n"),
}


def test_the_walker_passes_a_clean_package_and_reads_every_kind_of_import(tmp_path):
    found = arrows(write(tmp_path / "pkg", CLEAN))
    assert {(a.source, a.target, a.in_function) for a in found} == {
        ("pkg.__main__", "pkg.running.cache", False), ("pkg.core", "pkg", False),
        ("pkg.core.train", "pkg.core.tasks", False), ("pkg.analysis.fit", "pkg.core.train", False),
        ("pkg.analysis.fit", "pkg.core.tasks", True), ("pkg.claims", "pkg.analysis.fit", False),
        ("pkg.running.cache", "pkg.claims", False), ("pkg.running.cache", "pkg.core.train", True),
        ("pkg.running.cache", "pkg.core.tasks", True)}
    assert (outside_layers(tmp_path / "pkg"), circles(found), upward(found), unexplained(found)) == ([], [], [], [])


def test_the_walker_finds_a_circle(tmp_path):
    found = arrows(write(tmp_path / "pkg", {**CLEAN, "core/tasks.py": "def h():\n    from .train import y  # why\n"}))
    assert circles(found) == [["pkg.core.tasks", "pkg.core.train"]]


@pytest.mark.parametrize("code", ["from ..running.cache import Cache\n", "import pkg.running.cache\n",
                                  "from pkg import Cache\n", "def h():\n    from ..running import cache  # why\n"])
def test_the_walker_finds_an_arrow_up_a_layer(tmp_path, code):
    found = arrows(write(tmp_path / "pkg", {**CLEAN, "analysis/up.py": code}))
    assert upward(found) == [f"pkg/analysis/up.py:{code.count(chr(10))} imports pkg.running.cache (analysis -> running)"]


@pytest.mark.parametrize("code", ["def h():\n    from ..core import tasks\n",
                                  "def h():\n    x = 1  # a comment on another statement\n    from ..core import tasks\n",
                                  "class C:\n    def h(self):\n        if True:\n            import pkg.core.tasks\n",
                                  "def h():\n    import math  # why\n\n    from ..core import tasks\n"])
def test_the_walker_finds_an_import_inside_a_function_that_says_nothing(tmp_path, code):
    found = arrows(write(tmp_path / "pkg", {**CLEAN, "analysis/bare.py": code}))
    line = code.count("\n")
    assert unexplained(found) == [f"pkg/analysis/bare.py:{line} imports pkg.core.tasks"]
    assert unexplained(found, exempt={(tmp_path / "pkg" / "analysis" / "bare.py").resolve()}) == []


def test_the_walker_finds_a_module_in_no_layer(tmp_path):
    assert outside_layers(write(tmp_path / "pkg", {**CLEAN, "util.py": "", "misc/more.py": ""})) == ["pkg.misc.more", "pkg.util"]


# ---------------------------------------------------------------- calls through a later layer's objects
# An import is not the only way up a layer: a function of analysis handed running's `Settings` calls
# back into running through it (`s.grid` was `Settings.grid` -> `running.sweep.expand`), and no
# arrow shows it. So a notebook's parameters reach analysis and claims as a value object of
# analysis (`icl.analysis.grids.Parameters`), and these checks hold them to it.

LATER = ("running/notebook.py", "Settings")  # the object of a later layer that a notebook holds
VALUE = ("analysis/grids.py", "Parameters")  # what analysis and claims receive of it instead
READERS = ("analysis", "claims")


def members(path: Path, cls: str) -> set[str]:
    """The attributes a class defines in its body (methods, properties, fields), dunders aside; none
    where the file or the class is missing."""
    if not path.exists():
        return set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ClassDef) and node.name == cls:
            names = set()
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    names.add(item.name)
                elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    names.add(item.target.id)
                elif isinstance(item, ast.Assign):
                    names |= {t.id for t in item.targets if isinstance(t, ast.Name)}
            return {n for n in names if not n.startswith("__")}
    return set()


def later_calls(package: Path) -> list[str]:
    """Attributes read in analysis and claims (`name.attribute`) that the later layer's object
    offers and the value object does not (`s.run(...)`, `s.path(...)`, `s.config(...)`): a call
    through an object of the later layer, which the import walker cannot see."""
    only = members(package / LATER[0], LATER[1]) - members(package / VALUE[0], VALUE[1])
    found = []
    for layer_name in READERS:
        for path in sorted((package / layer_name).rglob("*.py")):
            where = path.relative_to(package.parent).as_posix()
            reads = sorted({(node.lineno, node.value.id, node.attr) for node in ast.walk(ast.parse(path.read_text()))
                            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.attr in only})
            found += [f"{where}:{line} reads {name}.{attr} ({LATER[1]} only)" for line, name, attr in reads]
    return found


def takes_parameters(package: Path) -> set[str]:
    """'module:qualname' of every function of analysis and claims with an argument annotated as the
    value object (`s: Parameters`, `s: Parameters | None`): a notebook's parameters go in there."""
    out = set()
    known = modules(package)
    for name, path in known.items():
        if layer(name) not in READERS:
            continue

        def walk(node, prefix):
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.ClassDef):
                    walk(child, f"{prefix}{child.name}.")
                elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    args = child.args.posonlyargs + child.args.args + child.args.kwonlyargs
                    if any(a.annotation is not None and VALUE[1] in ast.unparse(a.annotation).split(" | ") for a in args):
                        out.add(f"{name}:{prefix}{child.name}")

        walk(ast.parse(path.read_text()), "")
    return out


def test_analysis_and_claims_call_nothing_only_running_settings_offers():
    bad = later_calls(ICL)
    assert bad == [], (f"{len(bad)} reads in {' and '.join(READERS)} of what only running's {LATER[1]} offers; they "
                       f"receive a notebook's parameters as {VALUE[1]} (a value: add it there, or pass the value "
                       "itself):\n" + "\n".join(bad))


def test_the_check_finds_a_call_through_running_settings(tmp_path):
    package = write(tmp_path / "pkg", {**CLEAN,
                                       "running/notebook.py": "class Settings:\n    values: dict\n\n    def run(self):\n"
                                                              "        pass\n\n    def grid(self):\n        pass\n",
                                       "analysis/grids.py": "class Parameters:\n    values: dict\n\n    def grid(self):\n"
                                                            "        pass\n",
                                       "claims/__init__.py": "def f(s):\n    return s.values, s.grid()\n"})
    assert later_calls(package) == []  # what the value object also offers is a value
    write(package, {"analysis/fit.py": "def f(s):\n    return s.run()\n"})
    assert later_calls(package) == ["pkg/analysis/fit.py:2 reads s.run (Settings only)"]


def test_every_function_given_a_notebooks_parameters_runs_on_the_value_object_alone(capsys):
    """Each function of analysis and claims that takes a notebook's parameters (`takes_parameters`),
    called with a fresh value object of the notebook's own validated parameters (ci profile) and no
    running object: the list of those called is the list of those annotated, so a new one is
    called here too."""
    import copy
    import importlib
    import pkgutil

    from icl import claims
    from icl.analysis import grids
    from icl.running.parameters import NOTEBOOKS, notebook_parameters, settings

    def params(name: str) -> grids.Parameters:
        values = settings(ROOT, name, notebook_parameters(ROOT, "ci", name, "cpu")).values
        return grids.Parameters(copy.deepcopy(values))  # built here: no object of running in it

    called = set()

    def fills(rules, cid, p) -> bool:
        """Whether a notebook's parameters fill in every one the claim's statement names."""
        try:
            return "{" not in "".join(rules.statement(cid, p))
        except KeyError:
            return False

    def call(fn, *args):
        called.add(f"{fn.__module__}:{fn.__qualname__}")
        return fn(*args)

    of = {name: params(name) for name in NOTEBOOKS}
    for name, fn in grids.RUNS.items():  # every notebook's run lists, as the plan calls them
        also = [of[grids.TRAINED_WITH[name]].values] if name in grids.TRAINED_WITH else []
        assert all(cfgs for cfgs in call(fn, of[name], *also).values()), name
    assert call(grids.regime_cells, of["06_regimes"])[1]
    for module in pkgutil.iter_modules(claims.__path__):
        rules = getattr(importlib.import_module(f"icl.claims.{module.name}"), "RULES", None)
        for cid, core in (rules.core.items() if rules else ()):
            p = next(of[n] for n in NOTEBOOKS if fills(rules, cid, of[n]))
            call(rules.show_criteria, p, cid)
            call(rules.statement, cid, p)
            call(rules.record, p, cid, {core: True}, {}, "f.png")
            call(rules.record_by_regime, p, cid, {"r": {core: True}}, {"r": {}}, "f.png")
            assert [c["id"] for c in p.claims][-1] == cid
    p = of["03_difficult"]
    call(claims.claim, p, "X", "text", "reproduced", {}, "f.png", "rule")
    call(claims.claim_by_regime, p, "Y", "text", {"r": {"status": "reproduced", "measured": {}}}, "f.png", "rule")
    call(claims.show_claims, p)
    assert "X: reproduced" in capsys.readouterr().out
    assert called == takes_parameters(ICL), f"annotated but not called here: {takes_parameters(ICL) - called}"


# ---------------------------------------------------------------- the counts docs/architecture.md gives


def counts_block(package: Path) -> str:
    """The table of lines per layer (the core's accelerator apart) and the science's share, as
    docs/architecture.md states them: the science is the core without its accelerator, analysis
    and claims, of the whole package."""
    count = lambda files: sum(len(p.read_text().splitlines()) for p in files)  # noqa: E731
    lines = {layer: count(sorted((package / layer).rglob("*.py"))) for layer in LAYERS}
    accel = count(sorted((package / "core" / "accel").rglob("*.py")))
    rows = {"core, without its accelerator": lines["core"] - accel, "core/accel": accel,
            **{layer: lines[layer] for layer in LAYERS[1:]}}
    total = sum(rows.values())
    science = total - accel - lines["running"]
    table = "".join(f"| {name} | {n:,} |\n" for name, n in rows.items())
    return (f"| layer | lines |\n| --- | ---: |\n{table}| total | {total:,} |\n\nThe science (core without its "
            f"accelerator, analysis and claims) is {science:,} lines, **{science / total:.0%}**; the accelerator "
            f"{accel:,}, {accel / total:.0%}; the running machinery {lines['running']:,}, {lines['running'] / total:.0%}.")


def test_the_counts_in_the_architecture_page_are_the_codes():
    page = (ROOT / "docs" / "architecture.md").read_text()
    stated = page.split("<!-- counts -->\n", 1)[1].split("\n<!-- /counts -->", 1)[0]
    assert stated == counts_block(ROOT / "icl"), "docs/architecture.md's counts are stale; paste:\n\n" + counts_block(ROOT / "icl")


def test_the_machinery_table_lists_every_running_module_once():
    """docs/architecture.md's table of running/ by part: each module in exactly one row. Its line
    counts are retired (issue 57): what running/ holds answers closed issues, and the layer's total
    is in the counts block above."""
    page = (ROOT / "docs" / "architecture.md").read_text()
    section = page.split("## What the machinery adds", 1)[1].split("\n## ", 1)[0]
    rows = [line.split(" | ") for line in section.splitlines() if line.startswith("| `")]
    listed = [m.strip("` ") for modules, _ in rows for m in modules.strip("| ").split(", ")]
    modules = sorted(p.stem for p in (ROOT / "icl" / "running").glob("*.py"))
    assert sorted(listed) == modules, "each module of running/ in exactly one row"


def test_the_architecture_page_names_every_module_of_each_layer():
    """Each layer's list in docs/architecture.md names each of its modules (a subpackage as `name/`)
    and nothing that is not one; a package's `__init__` only where it holds more than imports."""
    page = (ROOT / "docs" / "architecture.md").read_text()
    for layer in LAYERS:
        section = page.split(f"\n**{layer}**:", 1)[1].split("\n\n", 1)[0]
        named = {name for line in section.splitlines() if line.startswith("- `")
                 for name in re.findall(r"`([\w/]+)`", line.split(":", 1)[0])}
        folder = ROOT / "icl" / layer
        modules = {p.stem for p in folder.glob("*.py")} | {p.name + "/" for p in folder.iterdir() if (p / "__init__.py").exists()}
        named, modules = named - {"__init__"}, modules - {"__init__"}
        assert named == modules, f"{layer}: listed but absent {named - modules}, absent from the list {modules - named}"


def test_no_module_is_over_400_lines():
    """DESIGN's room size: a module a reader takes in at once (the C kernels are not Python)."""
    long = {str(p.relative_to(ROOT)): n for p in sorted((ROOT / "icl").rglob("*.py"))
            if (n := len(p.read_text().splitlines())) > 400}
    assert not long, long


# Functions over 50 lines in files this change may not touch: their syntax keys the run cache
# (icl/core/train.py), so a split would retrain every cached run. Each is named, with its length,
# so that one growing further, or a new one, still fails.
LONG_EXEMPT = {"icl/core/train.py:train_groups": 52}
MAX_FUNCTION = 50


def long_functions(package: Path) -> dict[str, int]:
    """'path:qualname' -> lines, from `def` to its last line, of each function over MAX_FUNCTION lines."""
    found = {}
    for path in sorted(package.rglob("*.py")):
        where = path.relative_to(package.parent).as_posix()

        def walk(node, prefix):
            for child in ast.iter_child_nodes(node):
                name = prefix
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    name = f"{prefix}{child.name}."
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    lines = child.end_lineno - child.lineno + 1
                    if lines > MAX_FUNCTION:
                        found[f"{where}:{prefix}{child.name}"] = lines
                walk(child, name)

        walk(ast.parse(path.read_text()), "")
    return found


def test_no_function_of_icl_is_over_50_lines():
    """A function a reader takes in at once (issue 57); the exempt ones no longer than they were."""
    long = long_functions(ICL)
    grown = {k: n for k, n in long.items() if n > LONG_EXEMPT.get(k, MAX_FUNCTION)}
    assert not grown, f"functions over {MAX_FUNCTION} lines (split them where a name explains the part): {grown}"


def test_the_length_check_sees_a_long_method(tmp_path):
    body = "".join(f"        x{i} = {i}\n" for i in range(MAX_FUNCTION))
    package = write(tmp_path / "pkg", {**CLEAN, "core/long.py": f"class C:\n    def m(self):\n{body}"})
    assert long_functions(package) == {"pkg/core/long.py:C.m": MAX_FUNCTION + 1}
