"""`python -m icl golden`: the ci-profile copies of the notebooks that nbval compares against."""
from .reproduce import add_arguments_golden as add_arguments, run_golden as run  # noqa: F401
