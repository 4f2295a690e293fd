"""icl.analysis.grids.Parameters.checked: a notebook's values as the typed object analysis and claims
read, with a custom spectrum put in place and every list of runs checked once."""
import pytest

from icl.analysis.grids import Parameters
from icl.core.config import ConfigError

VALUES = {"depths": [1, 2], "seeds": [0], "spectra": [[0.0, 0.0], [1.0, 0.0]], "mode_spectrum": [1.0, 0.0],
          "input_exponent": None, "task_exponent": None}


def test_a_custom_spectrum_replaces_every_spectrum_and_leaves_no_exponent_behind():
    p = Parameters.checked({**VALUES, "input_exponent": 1.3, "task_exponent": "0.7"})
    assert p["spectra"] == [[1.3, 0.7]] and p["mode_spectrum"] == [1.3, 0.7]
    assert "input_exponent" not in p.values and "task_exponent" not in p.values
    assert Parameters.checked(VALUES)["spectra"] == VALUES["spectra"]


@pytest.mark.parametrize("change, message", [
    ({"input_exponent": 1.3}, "task_exponent: not given"),
    ({"depths": [1, 0]}, "every depth must be >= 1"),
    ({"seeds": []}, "non-empty list of integers"),
    ({"seeds": [2**32]}, "every seed must be in"),
    ({"spectra": [[0.0]]}, r"\[input_exponent, task_exponent\] pairs"),
])
def test_a_list_that_cannot_be_a_run_s_is_named(change, message):
    with pytest.raises(ConfigError, match=message):
        Parameters.checked({**VALUES, **change})
