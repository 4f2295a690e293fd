"""The verdict rules of notebook 08 (heads and looped layers, ours: notebook 08): R7 (heads and layers
are interchangeable at fixed head rank), R8 (a shared-stream layer with h k = d leaves depth little
to buy) and R9 (a looped stack's share of the untied stack's gain). Each claim has a *core* check
(CORE) and secondary ones; the numbers they read carry intervals over seeds
(icl.analysis.heads_loops), and every threshold is here, printed into the notebook's criteria cell."""
from __future__ import annotations

from . import Rules, above, below, every, within

MATCH_TOL = 0.10  # R7 core: |R(L, h) / R(L h, 1) - 1| below this at every matched L h
CAPTURED_MIN = 0.5  # R7: one layer of d/k heads captures more than half of the h = 1 stack's gain
BASELINE_TOL = 0.15  # R7: multi-head stacks within 15 % of the complementary baseline (as R4b)
STREAM_GAIN_MAX = 0.10  # R8 core: 1 - R_deepest / R_1 of the h k = d shared stream below this
STREAM_GAIN_SHARE = 0.5  # R8: that gain below half of a single head's of rank d / h
STREAM_ONE_LAYER_TOL = 0.10  # R8: one layer of heads within 10 % of one full-rank head
LOOP_FLAT_TOL = 0.03  # R9 core: the looped controlled stack's gain within +-3 % of 0
KEEP_MIN = 0.5  # R9: looped shared-stream and context-update stacks keep over half the gain

CORE = {"R7": "matched L h: same loss", "R8": "h k = d: depth buys little",
        "R9": "looped controlled stack: no gain"}

TEXT = {
    "R7": "In the controlled model heads and layers are interchangeable at a fixed head rank k: "
          "the loss depends on L h, the number of heads in the stack.",
    "R8": "In the shared stream a layer with h k = d heads leaves depth little to buy.",
    "R9": "A looped stack (one layer's parameters at every depth) keeps at least half of the "
          "untied stack's gain from depth in the shared-stream and context-update models, and "
          "none in the controlled model.",
}

CRITERIA = {
    "R7": f"core: the largest |R(L, h) / R(L h, 1) - 1| over every h > 1 and L with L h in the "
          f"h = 1 depths is below {MATCH_TOL}, at every head rank k; secondary: (b) one layer of "
          f"d/k heads captures more than {CAPTURED_MIN:.0%} of the h = 1 stack's gain from depth, "
          f"(R_1 - R(1, d/k)) / (R_1 - R_deepest); (c) the largest "
          f"|R(L, h) / complementary(L h) - 1| is below {BASELINE_TOL}",
    "R8": f"core: the gain 1 - R_deepest / R_1 of the shared stream with h k = d is below "
          f"{STREAM_GAIN_MAX}; secondary: (b) that gain is below {STREAM_GAIN_SHARE} x the gain of "
          f"one head of rank d/h; (c) R_1 of one layer of h heads over R_1 of one head of rank d "
          f"is below {1 + STREAM_ONE_LAYER_TOL}",
    "R9": f"core: the looped controlled stack's gain 1 - R_deepest / R_1 is within "
          f"+-{LOOP_FLAT_TOL} of 0; secondary: the looped stack keeps more than {KEEP_MIN:.0%} of "
          "the untied stack's gain (gain looped / gain untied) in (b) the shared stream and (c) "
          "the context-update model",
}


RULES = Rules(TEXT, CRITERIA, CORE)
status, record, show_criteria = RULES.status, RULES.record, RULES.show_criteria


def r7(ranks: dict) -> dict:
    """Per head rank {"deviation": Estimate of the largest |R(L, h) / R(L h, 1) - 1|, "captured":
    Estimate of the share of the h = 1 gain one layer of d/k heads reaches (None where h k = d is
    not run), "baseline": Estimate of the largest |R(L, h) / complementary(L h) - 1|}."""
    return {CORE["R7"]: every(below(r["deviation"], MATCH_TOL) for r in ranks.values()),
            "one layer of d/k heads captures the gain": every(above(r["captured"], CAPTURED_MIN)
                                                              for r in ranks.values()
                                                              if r["captured"] is not None),
            "heads track the complementary baseline": every(below(r["baseline"], BASELINE_TOL)
                                                            for r in ranks.values())}


R7_NUMBERS = {"deviation": "largest |R(L, h) / R(L h, 1) - 1|",
              "captured": "share captured by one layer",
              "baseline": "largest |R / complementary - 1|"}


def r7_numbers(ranks: dict) -> dict:
    """R7's numbers for its record, {number: {"k=<rank>": Estimate}} (the report's case labels)."""
    return {name: {f"k={k}": r[key] for k, r in ranks.items() if r[key] is not None}
            for key, name in R7_NUMBERS.items()}


def r8(gain, gain_ratio, one_layer_ratio) -> dict:
    """Estimates: the h k = d stream's gain from depth, that gain over one rank-d/h head's, and
    R_1 of the h heads over R_1 of one full-rank head."""
    return {CORE["R8"]: below(gain, STREAM_GAIN_MAX),
            "less than a single rank-limited head gains": below(gain_ratio, STREAM_GAIN_SHARE),
            "one layer of heads matches one full-rank head": below(one_layer_ratio,
                                                                   1 + STREAM_ONE_LAYER_TOL)}


def r9(looped_gain, kept: dict) -> dict:
    """Estimates: the looped controlled stack's gain, and per model {model: gain looped / gain
    untied} for the shared stream and the context-update model."""
    checks = {CORE["R9"]: within(looped_gain, 0.0, LOOP_FLAT_TOL)}
    checks.update({f"{m} keeps the gain": above(e, KEEP_MIN) for m, e in kept.items()})
    return checks
