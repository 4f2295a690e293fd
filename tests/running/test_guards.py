"""`icl reproduce` refuses what `train` and `sweep` refuse: more than a day of training without
--yes, and a parameter no notebook declares, in --plan as in a run; every unknown name, wherever
it is refused, comes with the closest known one."""
import re
import subprocess
import sys

import pytest
from conftest import ROOT

from icl.core.config import ConfigError, RunConfig
from icl.core.expansion import expand
from icl.running import notebook as nb
from icl.running import plan
from icl.running import reproduce as rep

HINT = "did you mean 'input_exponent'?"
HINT_RE = re.escape(HINT)


@pytest.mark.slow
def test_plan_refuses_an_unknown_parameter_with_the_closest_name():
    """--plan priced the run and ignored the key (the run itself refused it)."""
    done = subprocess.run([sys.executable, "-m", "icl", "reproduce", "--profile", "ci", "--only", "03_difficult",
                           "-p", "input_exponet", "0.8", "--plan"], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == f"icl: error: unknown parameter 'input_exponet' for 03_difficult; {HINT}"


def test_a_run_refuses_an_unknown_parameter_with_the_closest_name():
    with pytest.raises(ConfigError, match=f"unknown parameter 'input_exponet' for 03_difficult; {HINT_RE}"):
        rep.checked_parameters(ROOT, "ci", ["03_difficult"], "cpu", 1, {"input_exponet": 0.8}, None)


@pytest.mark.slow  # more than a second
def test_reproduce_refuses_more_than_a_day_of_training_before_a_notebook_starts(monkeypatch):
    """-p steps 10^12 started (its own --plan said 197,357 days) where train and sweep refuse."""
    monkeypatch.setattr(rep, "run_notebook", lambda *a: pytest.fail("a notebook started"))
    with pytest.raises(ConfigError) as err:
        rep.run_all(ROOT, "ci", ["03_difficult"], "cpu", 1, {"steps": 10**12}, log=lambda line: None)
    text = str(err.value)
    assert text.startswith("work: the training left") and "days" in text and "--yes" in text and "\n" not in text, text


@pytest.mark.slow  # times real steps for the estimate: 4 s on a shared 2-core machine (issue 57)
def test_with_yes_the_estimate_is_returned_not_refused():
    params = rep.checked_parameters(ROOT, "ci", ["03_difficult"], "cpu", 1, {"steps": 10**12}, None)
    cost = plan.check_work(ROOT, "ci", ["03_difficult"], params, yes=True)
    assert cost["03_difficult"] > 86_400


def test_a_notebook_names_the_closest_parameter():
    nb.end_of_parameters({"input_exponent": 0.0, "output_dir": "outputs/scratch/x"})
    try:
        with pytest.raises(ConfigError, match=f"unknown parameter 'input_exponet'.*; {HINT_RE}$"):
            nb.parameters({"input_exponent": 0.0, "output_dir": "outputs/scratch/x", "input_exponet": 0.8},
                          make_outputs=False)
    finally:
        nb.end_of_parameters({})


def test_run_configs_and_sweep_files_name_the_closest_key():
    with pytest.raises(ConfigError, match="unknown key 'lerning_rate'.*; did you mean 'learning_rate'[?]$"):
        RunConfig.from_dict({"lerning_rate": 0.01}, "train")
    with pytest.raises(ConfigError, match="unknown key 'dephts'.*; did you mean 'depths'[?]$"):
        expand({"dephts": [1, 2]}, "sweep.yaml")
    with pytest.raises(ConfigError) as err:  # nothing close: no guess
        expand({"zzzzzz": 1}, "sweep.yaml")
    assert "did you mean" not in str(err.value)


def test_a_custom_spectrum_replaces_every_spectrum_and_half_of_one_is_refused():
    """`-p input_exponent 1.3` alone ran (1.3, 0) silently, and notebook 02 still trained its default
    raw-input spectra beside a custom one (NaN in its table, empty bars)."""
    declared = {"input_exponent": None, "task_exponent": None, "spectra": [[0.0, 0.0]], "raw_spectra": [[1.0, 1.0]],
                "mode_spectrum": [1.0, 0.0], "progress": True, "output_dir": "outputs/scratch/x"}
    nb.end_of_parameters(declared)
    try:
        with pytest.raises(ConfigError, match="task_exponent: not given; a custom spectrum needs both"):
            nb.parameters({**declared, "input_exponent": 1.3}, make_outputs=False)
        s = nb.parameters({**declared, "input_exponent": 1.3, "task_exponent": "0.7", "progress": "true"},
                          make_outputs=False)
        assert s["spectra"] == s["raw_spectra"] == [[1.3, 0.7]] and s["mode_spectrum"] == [1.3, 0.7]
        assert s["progress"] is True  # papermill's -p hands "true" over as a string
    finally:
        nb.end_of_parameters({})


def test_an_imported_constant_is_no_parameter_of_a_notebook():
    """In a kernel, `from icl.claims import PLATEAU` in the first cell made PLATEAU a parameter: it was
    listed in a bad parameter's error. Only the parameters cell's own names are parameters; the
    imported one is unknown only if papermill sets it."""
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    try:
        run = lambda code: shell.run_cell(code, store_history=True).error_in_exec  # noqa: E731
        assert run("from icl.claims import PLATEAU\nfrom icl import notebook as nb") is None
        assert run("steps = 3\noutput_dir = 'outputs/scratch/x'\nnb.end_of_parameters(globals())") is None
        assert set(shell.user_ns["nb"]._DECLARED) == {"steps", "output_dir"}
        err = run("stepz = 4\nnb.parameters(globals(), make_outputs=False)")  # papermill's injected -p stepz 4
        assert isinstance(err, ConfigError) and "PLATEAU" not in str(err) and "did you mean 'steps'" in str(err), err
        err = run("del stepz\nPLATEAU = 0.5\nnb.parameters(globals(), make_outputs=False)")
        assert isinstance(err, ConfigError) and "unknown parameter 'PLATEAU'" in str(err), err
    finally:
        InteractiveShell.clear_instance()
