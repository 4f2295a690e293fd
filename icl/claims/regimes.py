"""The verdict rules of notebook 06 (the regime map, ours): R1, R2 and R3, judged on every cell
they concern. The table they read is `icl.regimes.regime_table` (numbers with bootstrap intervals
over seeds); thresholds as the notebook's criteria cell states them before the runs."""
from __future__ import annotations

from ..estimates import estimate
from . import Status, above, below, every, verdict, within

BOUND_TOL = 0.05  # R1: one full-rank layer within 5 % of the softmax bound
FLAT_FALL, MIXTURE_TOL = 0.9, 0.05  # R2
ALPHA_TOL, GAP_CLOSED = 0.25, 0.5  # R3 (and FLAT_FALL)


def _each(table, name: str, check) -> list:
    return [check(estimate(r, name)) for _, r in table.iterrows()]


def share_status(results: list, half_counts: bool = False) -> Status:
    """Reproduced when every cell holds; not reproduced when none does (or, with `half_counts`, when
    fewer than half do); partly otherwise. Inconclusive cells are tried both ways."""
    def decided(values: list[bool]) -> str:
        if values and all(values):
            return "reproduced"
        enough = 2 * sum(values) >= len(values) if half_counts else any(values)
        return "partly reproduced" if enough else "not reproduced"

    return Status(decided([r is True for r in results]), decided([r is not False for r in results]))


def r1(full) -> list:
    """Per full-rank cell: |R_1 / softmax bound - 1| <= BOUND_TOL."""
    return _each(full, "R_1_over_bound", lambda e: within(e, 1.0, BOUND_TOL))


def r2(full) -> dict:
    """Full rank: the deepest model not FLAT_FALL below one layer, nor MIXTURE_TOL below the mixture bound."""
    return {"flat with depth": every(_each(full, "fall", lambda e: above(e, FLAT_FALL))),
            "not below the mixture bound": every(_each(full, "deepest_over_mixture", lambda e: above(e, 1 - MIXTURE_TOL)))}


def r3(limited) -> dict:
    """Rank-limited: falls, alpha near 1, at least half the gap to the softmax bound closed."""
    return {"falls": every(_each(limited, "fall", lambda e: below(e, FLAT_FALL))),
            "alpha near 1": every(_each(limited, "alpha", lambda e: within(e, 1.0, ALPHA_TOL))),
            "half the gap to the bound closed": every(_each(limited, "gap_closed", lambda e: above(e, GAP_CLOSED)))}


RULES = {"R1": share_status, "R2": lambda c: verdict(c), "R3": lambda c: verdict(c, "falls")}
