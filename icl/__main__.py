import os
import sys

# Before torch is imported: idle OpenMP threads sleep instead of spinning. A spinning thread
# keeps a core busy for milliseconds after every parallel torch operation, and the C kernels'
# own threads (icl.native) need that core: on 2 cores a 2-thread step of the generalised models
# was slower than a 1-thread one. Set OMP_WAIT_POLICY yourself to choose otherwise.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from .cli import main  # noqa: E402

sys.exit(main())
