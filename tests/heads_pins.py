"""The losses that pin today's models for tests/test_heads.py: a short training of a small group
(depths 3, 2, 1) of every model, on the torch path and on the C kernels. Run under the code before
heads and looped layers existed, it printed the numbers test_heads.PINNED holds:

    git worktree add /tmp/old <commit> && cd tests && ICL_OLD=/tmp/old python heads_pins.py
"""
import os
import sys

if __name__ == "__main__" and os.environ.get("ICL_OLD"):
    sys.path.insert(0, os.environ["ICL_OLD"])

import torch  # noqa: E402

from icl.core.config import RunConfig  # noqa: E402
from icl.core.train import train_group  # noqa: E402

MODELS = ("linear", "softmax", "untied_values", "shared_stream", "context_updates")
PATHS = {"torch": 12, "kernels": 16}  # context length: the kernels need a multiple of 16 tokens


def case(model: str, path: str, **changes) -> list[RunConfig]:
    base = dict(model=model, dim=6, context_length=PATHS[path], key_dim=3, batch_size=16, steps=6,
                eval_contexts=32, eval_points=2, device="cpu", learning_rate=1e-2)
    return [RunConfig(**{**base, "depth": L, **changes}) for L in (3, 2, 1)]


def losses(cfgs: list[RunConfig], path: str) -> list[str]:
    """Each run's final loss and loss curve, as exact hexadecimal floats."""
    before = os.environ.get("ICL_NATIVE")
    os.environ["ICL_NATIVE"] = "1" if path == "kernels" else "0"
    try:
        results = train_group(cfgs, progress=False)
    finally:  # the environment as it was
        if before is None:
            del os.environ["ICL_NATIVE"]
        else:
            os.environ["ICL_NATIVE"] = before
    return [" ".join(float(v).hex() for v in [r["final_loss"], *r["loss_curve"]["loss"]]) for r in results]


def fingerprint() -> str:
    """The machine's numbers depend on: torch's version and the vector unit its CPU kernels use."""
    return f"{torch.__version__} {torch.backends.cpu.get_cpu_capability()}"


if __name__ == "__main__":
    torch.set_num_threads(1)
    print(f"FINGERPRINT = {fingerprint()!r}")
    print("PINNED = {")
    for model in MODELS:
        for path in PATHS:
            print(f"    ({model!r}, {path!r}): {losses(case(model, path), path)!r},")
    print("}")
