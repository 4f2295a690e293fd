"""The one validated configuration object: every impossible value is a ConfigError that names
its key; YAML/CLI strings are converted to the field's type; the issue's names all exist."""
import math

import pytest
from conftest import tiny_config

from icl.core.config import ConfigError, RunConfig, coerce, field_names

pytestmark = pytest.mark.usefixtures("one_thread")

ISSUE_NAMES = ["model", "task", "top_k", "input_exponent", "task_exponent", "dim", "context_length", "depth",
               "steps", "batch_size", "learning_rate", "seed", "device", "normalize_inputs", "label_noise",
               "eval_contexts"]

BAD = [
    ("top_k", 13), ("top_k", 0), ("top_k", -1), ("depth", 0), ("steps", 0), ("steps", -5), ("dim", 0),
    ("context_length", 0), ("batch_size", 0), ("eval_contexts", 0), ("eval_points", 0), ("key_dim", -1),
    ("learning_rate", -1e-3), ("learning_rate", math.nan), ("label_noise", -0.1), ("label_noise", math.nan),
    ("input_exponent", math.nan), ("task_exponent", math.nan), ("input_exponent", math.inf),
    ("model", "mlp"), ("task", "hard"), ("device", "tpu"), ("schedule", "linear"),
    ("residual_scale", "sqrt"), ("warmup_fraction", 1.0), ("init_scale", -1.0),
    ("key_dim", 7),  # > dim 6
    ("heads", 0), ("heads", 2),  # 2 heads of key_dim 0 (= dim 6): 12 > dim 6
    # non-finite or absurd values (issue 18): each once passed validation, then diverged or crashed
    ("learning_rate", math.inf), ("init_scale", math.inf), ("init_scale", 1e3), ("label_noise", math.inf),
    ("label_noise", 1e6), ("input_exponent", -1000.0), ("task_exponent", 11.0), ("plateau_tolerance", math.inf),
    ("seed", 99999999999999999999), ("seed", -1), ("seed", 2**32),
]


def test_the_issue_names_are_the_config_fields():
    assert set(ISSUE_NAMES) <= set(field_names())


@pytest.mark.parametrize("key,value", BAD, ids=[f"{k}={v}" for k, v in BAD])
def test_impossible_value_names_its_key(key, value):
    with pytest.raises(ConfigError, match=rf"^{key}: ") as err:
        tiny_config(**{key: value})  # context_length 12
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("key,value", [("top_k", 12), ("top_k", 1), ("learning_rate", 0.0), ("label_noise", 0.0),
                                       ("input_exponent", -0.5), ("key_dim", 0), ("key_dim", 6),
                                       ("warmup_fraction", 0.0), ("input_exponent", -10.0), ("task_exponent", 10.0),
                                       ("seed", 2**32 - 1), ("init_scale", 100.0), ("label_noise", 100.0)])
def test_edge_values_are_allowed(key, value):
    assert getattr(tiny_config(**{key: value}), key) == value


def test_replace_validates_too():
    with pytest.raises(ConfigError, match="^depth: "):
        tiny_config().replace(depth=0)


def test_from_dict_rejects_unknown_keys_by_name():
    with pytest.raises(ConfigError, match="myfile.yaml: unknown key 'learning_rat'"):
        RunConfig.from_dict({"learning_rat": 0.1}, "myfile.yaml")


def test_from_dict_converts_strings_and_round_trips():
    cfg = RunConfig.from_dict({"depth": "4", "learning_rate": "1e-3", "normalize_inputs": "false",
                               "input_exponent": 1, "model": "linear"})
    assert (cfg.depth, cfg.learning_rate, cfg.normalize_inputs, cfg.input_exponent) == (4, 1e-3, False, 1.0)
    assert isinstance(cfg.input_exponent, float)
    assert RunConfig.from_dict(cfg.to_dict()) == cfg
    assert hash(RunConfig.from_dict(cfg.to_dict())) == hash(cfg)  # usable as a cache/dict key


@pytest.mark.parametrize("key,value", [("depth", 2.5), ("depth", "two"), ("depth", True), ("dim", None),
                                       ("normalize_inputs", "maybe"), ("normalize_inputs", 2),
                                       ("learning_rate", "fast"), ("model", 3)])
def test_coerce_rejects_wrong_types_by_name(key, value):
    with pytest.raises(ConfigError, match=rf"^{key}: "):
        coerce(key, value)


def test_key_dim_zero_means_dim():
    assert tiny_config(key_dim=0).resolved_key_dim == 6
    assert tiny_config(key_dim=3).resolved_key_dim == 3


def test_config_is_frozen():
    with pytest.raises(Exception):
        tiny_config().depth = 3


def test_the_largest_seed_and_exponents_train():
    from icl.core.train import train

    r = train(tiny_config(seed=2**32 - 1, input_exponent=10.0, task_exponent=-10.0, depth=2, steps=2), progress=False)
    assert math.isfinite(r["final_loss"])


def test_to_dict_is_dataclasses_asdict():
    """to_dict skips asdict's deep copies (a minute for 10^6 configs); the run-cache key hashes it.
    Fields added later (LATER_FIELDS) appear only away from their defaults, so old keys stay."""
    import dataclasses

    from icl.core.config import LATER_FIELDS

    for cfg in (tiny_config(model="linear", key_dim=3, track_modes=True),
                tiny_config(model="softmax", key_dim=3, heads=2, tie_layers=True, lr_inverse_depth_exponent=0.5,
                            nonlinearity="sigmoid")):
        full = dataclasses.asdict(cfg)
        kept = {k: v for k, v in full.items() if k not in LATER_FIELDS or v != LATER_FIELDS[k]}
        assert cfg.to_dict() == kept and list(cfg.to_dict()) == list(kept)
    assert cfg.to_dict() == full  # every field, where the later ones differ from their defaults
