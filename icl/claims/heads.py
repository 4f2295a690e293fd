"""The verdict rules of notebook 08 (heads and looped layers, ours: notebook 08): R7 (heads and layers
are interchangeable at fixed head rank), R8 (a shared-stream layer with h k = d leaves depth little
to buy) and R9 (a looped stack's share of the untied stack's gain). Each claim has a *core* check
(CORE) and secondary ones; the numbers they read carry intervals over seeds
(icl.analysis.heads_loops), and every threshold is here, printed into the notebook's criteria cell.

In the controlled model a layer of h heads *is* h layers, and a looped stack *is* its one layer
(the context's label states never change, so the predictors just add): both are identities, unit
tests in tests/core/test_heads.py, never verdict checks. R7's and R9's cores therefore read the
shared stream and the context-update model, where layers read each other's states (since the third
rerun; docs/history.md)."""
from __future__ import annotations

from . import Rules, above, below, every

MATCH_TOL = 0.10  # R7 core: |R(L, h) / R(L h, 1) - 1| below this at every matched L h
CAPTURED_MIN = 0.5  # R7: one layer of d/k heads captures more than half of the h = 1 stack's gain
BASELINE_TOL = 0.15  # R7: multi-head stacks within 15 % of the complementary baseline (as R4b)
STREAM_GAIN_MAX = 0.10  # R8 core: 1 - R_deepest / R_1 of the h k = d shared stream below this
STREAM_GAIN_SHARE = 0.5  # R8: that gain below half of a single head's of rank d / h
STREAM_ONE_LAYER_TOL = 0.10  # R8: one layer of heads within 10 % of one full-rank head
KEEP_MIN = 0.5  # R9 core: looped shared-stream and context-update stacks keep over half the gain

CORE = {"R7": "shared stream, matched L h, same loss", "R8": "h k = d: depth buys little",
        "R9": "looped stacks keep the gain"}

TEXT = {
    "R7": "Heads and layers are interchangeable at a fixed head rank k even where layers read each other's "
          "states (the shared stream): the loss depends on L h, the number of heads in the stack.",
    "R8": "In the shared stream a layer with h k = d heads leaves depth little to buy.",
    "R9": "A looped stack (one layer's parameters at every depth) keeps at least half of the "
          "untied stack's gain from depth in the shared-stream and context-update models.",
}

CRITERIA = {
    "R7": f"core: in the shared stream, the largest |R(L, h) / R(L h, 1) - 1| over its heads h > 1 and every L "
          f"is below {MATCH_TOL}; secondary, in the controlled model at every head rank k: (b) one layer of "
          f"d/k heads captures more than {CAPTURED_MIN:.0%} of the h = 1 stack's gain from depth, "
          f"(R_1 - R(1, d/k)) / (R_1 - R_deepest); (c) the largest "
          f"|R(L, h) / complementary(L h) - 1| is below {BASELINE_TOL}",
    "R8": f"core: the gain 1 - R_deepest / R_1 of the shared stream with h k = d is below "
          f"{STREAM_GAIN_MAX}; secondary: (b) that gain is below {STREAM_GAIN_SHARE} x the gain of "
          f"one head of rank d/h; (c) R_1 of one layer of h heads over R_1 of one head of rank d "
          f"is below {1 + STREAM_ONE_LAYER_TOL}",
    "R9": f"core: the looped stack keeps more than {KEEP_MIN:.0%} of the untied stack's gain from depth "
          "(gain looped / gain untied, gain = 1 - R_deepest / R_1) in the shared stream and in the "
          "context-update model",
}


RULES = Rules(TEXT, CRITERIA, CORE)
status, record, show_criteria = RULES.status, RULES.record, RULES.show_criteria


def r7(stream_deviation, ranks: dict) -> dict:
    """`stream_deviation`: Estimate of the shared stream's largest |R(L, h) / R(L h, 1) - 1|;
    `ranks`, per head rank of the controlled model: {"captured": Estimate of the share of the h = 1
    gain one layer of d/k heads reaches (None where h k = d is not run), "baseline": Estimate of the
    largest |R(L, h) / complementary(L h) - 1|}."""
    return {CORE["R7"]: below(stream_deviation, MATCH_TOL),
            "one layer of d/k heads captures the gain": every(above(r["captured"], CAPTURED_MIN)
                                                              for r in ranks.values()
                                                              if r["captured"] is not None),
            "heads track the complementary baseline": every(below(r["baseline"], BASELINE_TOL)
                                                            for r in ranks.values())}


R7_NUMBERS = {"deviation": "largest |R(L, h) / R(L h, 1) - 1|, controlled",
              "captured": "share captured by one layer",
              "baseline": "largest |R / complementary - 1|"}


def r7_numbers(stream_deviation, ranks: dict) -> dict:
    """R7's numbers for its record: the shared stream's deviation, then {number: {"k=<rank>":
    Estimate}} of the controlled model (the report's case labels; its deviation is shown, not judged)."""
    return {"largest |R(L, h) / R(L h, 1) - 1|, shared stream": stream_deviation,
            **{name: {f"k={k}": r[key] for k, r in ranks.items() if r.get(key) is not None}
               for key, name in R7_NUMBERS.items()}}


def r8(gain, gain_ratio, one_layer_ratio) -> dict:
    """Estimates: the h k = d stream's gain from depth, that gain over one rank-d/h head's, and
    R_1 of the h heads over R_1 of one full-rank head."""
    return {CORE["R8"]: below(gain, STREAM_GAIN_MAX),
            "less than a single rank-limited head gains": below(gain_ratio, STREAM_GAIN_SHARE),
            "one layer of heads matches one full-rank head": below(one_layer_ratio,
                                                                   1 + STREAM_ONE_LAYER_TOL)}


def r9(kept: dict) -> dict:
    """Per model {model: Estimate of gain looped / gain untied} for the shared stream and the
    context-update model: every one keeps more than KEEP_MIN (fails without a model)."""
    return {CORE["R9"]: every(above(e, KEEP_MIN) for e in kept.values()) if kept else False}
