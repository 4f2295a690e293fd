"""The CPU accelerator: C kernels for the 2-core laptop, optional.

- `native`: the kernels' build (on first use, with the system's C compiler) and their calls;
  `kernels/`: their C sources; `ziggurat`: the Gaussian sampler's tables.
- `functions`: the model kernels as autograd functions, whose backward passes are written in C.

Every model trains through the torch lines of icl.core.layers on any device; on a CPU, a model
that has a kernel (`native.runs_in_kernel`: softmax attention, one head a layer in the shared
stream) runs its twin instead where the kernel can take the tensors (`layers.path`, `native.usable`:
CPU float32, a compiler, ICL_NATIVE), and each kernel is kept only because `make bench` shows it at least 2x faster than
autograd at its notebook's quick shape (docs/speed.md). Without a C compiler, or with
ICL_NATIVE=0, nothing here runs and every result is still computed, through autograd."""
