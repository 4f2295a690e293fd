"""The models' registry (icl.core.registry): one entry per model is all the package reads about a
model. Outside the registry no code of the layers that build, price and run models branches on a
model's name, and a model that only its class, its plain algebra and its entry know of validates,
trains, agrees with its plain algebra and is priced (docs/architecture.md, "Adding a model")."""
import ast
import dataclasses
import math
import re
from pathlib import Path

import pytest
from conftest import tiny_batch, tiny_config

from icl.core import memory, models, reference, registry, results
from icl.core.models import Output, SoftmaxEnsemble, build, stack_order
from icl.core.reference import FACTOR, agreement, agrees, perturbed
from icl.core.train import train_group
from icl.running import workload

pytestmark = pytest.mark.usefixtures("one_thread")

PACKAGE = Path(registry.__file__).parents[1]


def names_a_model(node: ast.AST) -> bool:
    """A string constant that is a model's name, or a literal tuple, list or set holding one."""
    if isinstance(node, ast.Constant):
        return node.value in registry.MODELS
    return isinstance(node, (ast.Tuple, ast.List, ast.Set)) and any(names_a_model(e) for e in node.elts)


def mentions_model(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Attribute) and n.attr == "model" or isinstance(n, ast.Name) and n.id == "model"
               for n in ast.walk(node))


def branches_on_names(source: str) -> list[int]:
    """Lines that compare a model (`cfg.model`, `model`) with a model's name, or that hold a dispatch
    table: a dict literal keyed by two or more models' names."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            if any(map(mentions_model, operands)) and any(map(names_a_model, operands)):
                lines.append(node.lineno)
        elif isinstance(node, ast.Dict) and sum(isinstance(k, ast.Constant) and k.value in registry.MODELS
                                                  for k in node.keys) >= 2:
            lines.append(node.lineno)
    return lines


def test_the_check_sees_a_branch_on_a_models_name():
    """The check below can fail: each of these is how a model used to be dispatched."""
    assert branches_on_names('if cfg.model == "linear":\n    pass') == [1]
    assert branches_on_names('ok = model in ("softmax", "untied_values")') == [1]
    assert branches_on_names('KERNEL = {"softmax": 1, "shared_stream": 2}') == [1]
    assert branches_on_names('cfg = RunConfig(model="softmax")') == []  # choosing a model is not branching on it


def test_no_module_that_builds_prices_or_runs_models_branches_on_a_name():
    """core and running read every fact about a model from its entry. (analysis and claims choose
    the runs a notebook trains by name, as a parameter file does.)"""
    found = {}
    for layer in ("core", "running"):
        for path in sorted((PACKAGE / layer).rglob("*.py")):
            if path != Path(registry.__file__):
                lines = branches_on_names(path.read_text())
                if lines:
                    found[str(path.relative_to(PACKAGE))] = lines
    assert not found, f"branches on a model's name outside icl/core/registry.py: {found}"


class Doubled(SoftmaxEnsemble):
    """A model no file of icl/ knows: the controlled softmax model, read out at twice its prediction."""

    def forward(self, batch, attention: bool = False) -> Output:
        out = super().forward(batch, attention)
        return Output(2 * out.pred, 2 * out.layer_preds, out.query_attention)


class PlainDoubled(reference.Softmax):
    def forward(self, x, y, xq):
        pred, g = super().forward(x, y, xq)
        return 2 * pred, 2 * g


@pytest.fixture
def doubled(monkeypatch):
    """The three files an added model touches, and nothing else: its class in models.py, its plain
    algebra in reference.py, its entry in registry.py."""
    touched = {models: ("Doubled", Doubled), reference: ("PlainDoubled", PlainDoubled)}
    for module, (name, cls) in touched.items():
        monkeypatch.setattr(module, name, cls, raising=False)
    entry = dataclasses.replace(registry.MODELS["softmax"], stack="Doubled", plain="PlainDoubled")
    monkeypatch.setitem(registry.MODELS, "doubled", entry)
    return {*touched, registry}


def test_a_model_added_in_three_files_validates_trains_agrees_and_is_priced(doubled):
    """The three modules the fixture patches are the three files docs/architecture.md lists."""
    page = (PACKAGE.parent / "docs" / "architecture.md").read_text().split("## Adding a model\n", 1)[1].split("\n## ")[0]
    listed = {PACKAGE.parent / p for p in re.findall(r"^\d+\. `([^`]+)`", page, re.M)}
    assert listed == {Path(m.__file__) for m in doubled}, listed
    cfg = tiny_config(model="doubled", key_dim=3, steps=4, batch_size=16)
    stack = perturbed(build(cfg, stack_order(cfg.model, [2, 1])), 1)
    assert isinstance(stack, Doubled)
    result = agreement(stack, tiny_batch(cfg, n=16, seed=1))  # against PlainDoubled, in float64
    assert agrees(result), {q: r for q, r in result.items() if r["ratio"] > FACTOR}
    for r in train_group([cfg.replace(depth=L) for L in (2, 1)]):
        assert math.isfinite(r["final_loss"])
    twin = cfg.replace(model="softmax")  # the same entry but for its classes: priced alike
    assert memory.estimate_bytes(cfg, [2, 1]) == memory.estimate_bytes(twin, [2, 1])
    assert results.result_floats(cfg) == results.result_floats(twin)
    assert workload.group_step_seconds([cfg.replace(depth=L) for L in (2, 1)]) > 0


def test_the_registry_catches_a_model_its_entry_does_not_name(doubled):
    """An entry whose class is missing fails where the model is built, naming the class."""
    registry.MODELS["doubled"] = dataclasses.replace(registry.MODELS["doubled"], stack="Tripled")
    with pytest.raises(AttributeError, match="Tripled"):
        build(tiny_config(model="doubled"), [1])


def test_every_entry_names_classes_that_exist():
    for name in registry.MODELS:
        assert issubclass(registry.implementation(name), models.Stack)
        assert issubclass(registry.implementation(name, "plain"), reference.Plain)
        if registry.MODELS[name].looped:
            assert issubclass(registry.implementation(name, "looped"), models.Stack)


def test_each_kernel_sits_beside_its_torch_lines_with_their_signature():
    """icl.core.layers: every C kernel is the twin of one torch function, called the same way, and
    the models name only the torch function (no kernel, no native call, in models.py)."""
    import inspect

    from icl.core import layers

    for torch_lines, (name, kernel) in layers.KERNELS.items():
        assert inspect.signature(torch_lines) == inspect.signature(kernel), torch_lines.__name__
        assert name in {entry.kernel for entry in registry.MODELS.values()}, name
    source = Path(models.__file__).read_text()
    imported = {a.name for node in ast.walk(ast.parse(source)) if isinstance(node, ast.ImportFrom)
                for a in node.names if (node.module or "").startswith("accel")}
    assert imported <= {"Workspace"}, imported
    assert "native." not in source


def numbers_in(x) -> int:
    """The numbers a stored result holds (lists and dicts of them, nested)."""
    if isinstance(x, dict):
        return sum(map(numbers_in, x.values()))
    if isinstance(x, (list, tuple)):
        return sum(map(numbers_in, x))
    return int(isinstance(x, (int, float)) and not isinstance(x, bool))


@pytest.mark.parametrize("model", list(registry.MODELS))
def test_an_entrys_result_numbers_bound_what_its_result_holds(model):
    """`result_numbers` (what the plan prices a result's size by) against a real result of each
    model: at least what it holds, at most four times it (the estimate runs high, never low)."""
    from icl.core import measure

    assert registry.SELECTION_PERCENTILES == len(measure.SELECTION_PERCENTILES)
    cfg = tiny_config(model=model, key_dim=3, steps=2, depth=3, eval_points=2)
    held = numbers_in({k: v for k, v in train_group([cfg])[0].items() if k != "config"})  # priced per entry
    assert held <= results.result_floats(cfg) <= 4 * held, (held, results.result_floats(cfg))
