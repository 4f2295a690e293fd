"""nbval compares a `# NBVAL_CHECK_OUTPUT` cell with the output stored in its golden copy only where
that copy ran the cell: a cell with no execution count or no output is skipped, and the notebook
passes having checked nothing (a golden left half-run by a killed regeneration did). Here such a
cell fails instead."""
import pytest

CHECKED = "# NBVAL_CHECK_OUTPUT"


def pytest_runtest_setup(item):
    cell = getattr(item, "cell", None)  # nbval's cell items; other tests have none
    if cell is not None and CHECKED in cell.source and (cell.execution_count is None or not cell.outputs):
        pytest.fail(f"{item.nodeid}: this checked cell has no stored output in its golden copy, so nbval would "
                    "check nothing; regenerate it with `python -m icl golden`", pytrace=False)
