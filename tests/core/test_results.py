"""icl.core.results: the fields a stored result must have are those train.py writes, finished or
diverged, for every model; a result missing one, or holding a wrong value, is named."""
import pytest
from conftest import MODELS, tiny_config

from icl.core.results import field_problem, result_floats
from icl.core.train import diverged_record, train


@pytest.mark.parametrize("model", MODELS)
def test_a_trained_result_has_every_field_the_cache_checks(model):
    cfg = tiny_config(model=model, steps=2)
    result = train(cfg, progress=False)
    assert field_problem(result) is None
    assert field_problem({k: v for k, v in result.items() if k != "final_loss"}) == "its result has no 'final_loss'"
    assert "not a finite float" in field_problem({**result, "final_loss": float("nan")})
    assert result_floats(cfg) > 0


def test_a_diverged_record_has_the_fields_of_one():
    record = diverged_record(tiny_config(), 3)
    assert field_problem(record) is None
    assert "not an integer >= 0" in field_problem({**record, "diverged_step": -1})
    assert field_problem([record]) == "its result is a list, not a mapping"
