"""The training core: tasks, the five attention models, training and its measurements, the same
code on CPU and GPU, trained through autograd (the optional C kernels of accel/ speed up the CPU;
reference.py is the plain algebra every path is tested against). Nothing here imports the analysis or the running machinery."""

from .. import __version__  # train.py records it with every result

__all__ = ["__version__"]
