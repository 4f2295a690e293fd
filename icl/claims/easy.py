"""The verdict rules of notebooks 01 and 02 (the easy task): C1 and C6a (linear attention), C2
(softmax attention).

Each function takes the notebook's tables, whose numbers carry intervals over seeds
(`icl.analysis.estimates`; a column `x` with `x_lo95`, `x_hi95`, ...), and returns the named checks of one
claim (True holds, False fails, None inconclusive; `icl.claims`). The thresholds below are the
ones the notebooks' criteria cells state before the runs. C1's former uncertainty allowances
(alpha within 2 standard errors of the references, spectra 3 combined standard errors apart) are
replaced by the 95 % intervals themselves: they were the old way of saying how sure a number is.
Each claim's core check (CORE) carries the paper's statement; the others are secondary
(`icl.claims.verdict`).
"""
from __future__ import annotations

from ..analysis.estimates import estimate
from . import Rules, above, below, every, some, within

R2_MIN = 0.95  # C1 (a): the power law describes the losses
ORDER_MIN, FEW_LAYERS = 0.5, 4  # C6a: rank correlation of the learning order; "by depth 4"
NEAR_ZERO, DEEPER_MIN, FOCUS_MASS, NORM_GROWTH = 0.01, 0.5, 0.9, 1.5  # C2
SPECTRUM_GAP = 0.1  # C1 (c): two spectra's exponents "differ" when they are this far apart
REF_TOL = 0.05  # C1 (b): the trained loss within 5 % of the band between the two reference curves

CORE = {"C1": "between references", "C6a": "strong modes first (training)", "C2": "near zero"}
# Why the quick profile does not decide C1 and C6a where runs they read were still falling: their
# records say it beside the largest fall a run had over its last 20 % of steps.
UNDECIDED = ("the deepest linear runs keep falling as long as this CPU can train them: no budget tried (more steps, "
             "larger batches, lower rates, a steeper depth exponent: docs/training_protocol.md, sections 7 and 11) "
             "brought them to their plateau, so the quick profile cannot decide it")


def budget_note(plateau_check, falls) -> dict:
    """What a C1 or C6a record adds where its runs had not all reached their plateau: UNDECIDED and
    the largest relative fall over a run's last 20 % of steps (`falls`: the runs' plateau column)."""
    if plateau_check is True:
        return {}
    return {"why undecided": UNDECIDED, "largest fall over the last 20 % of steps": float(max(falls))}


TEXT = {
    "C1": "Linear attention on the easy task: the loss falls with depth as a power law whose exponent depends on "
          "the spectra and lies between the repeated-update and free-polynomial references.",
    "C6a": "Linear attention learns strong modes first: along training and across depth, weak modes lag.",
    "C2": "Softmax attention solves the easy task in one layer for every spectrum; depth adds nothing; the matching "
          "token gets nearly all attention; query/key norms grow.",
}
# {mode_level}: notebook 01's parameter, filled in when the claim is recorded
CRITERIA = {
    "C1": f"core: at every depth the trained loss lies between the Monte Carlo reference curves, R_L <= "
          f"{1 + REF_TOL} x repeated update and R_L >= {1 - REF_TOL} x free polynomial, every run at its plateau "
          f"(else inconclusive: budget); secondary: R2 >= {R2_MIN}, some pair of spectra with |alpha difference| > "
          f"{SPECTRUM_GAP}; spectra with a > 0; 95 % intervals over seeds",
    "C6a": f"core: rank correlation(mode index, half-fall step) >= {ORDER_MIN} at depth 1 and the deepest; secondary: "
           f"strongest mode below {{mode_level}} by depth {FEW_LAYERS}, weakest not; means over seeds, 95 % intervals",
    "C2": f"core: depth-1 loss < {NEAR_ZERO} for all spectra; secondary: the best deeper model's loss / depth-1 loss > "
          f"{DEEPER_MIN} (depth does not halve it), attention "
          f"mass >= {FOCUS_MASS}, norm growth > {NORM_GROWTH}; means over seeds, 95 % intervals",
}
RULES = Rules(TEXT, CRITERIA, CORE)
status, record, show_criteria = RULES.status, RULES.record, RULES.show_criteria

def _rows(table):
    return [r for _, r in table.iterrows()]


def between(x, low: float, high: float) -> bool | None:
    """low <= x <= high: True when x's whole interval lies in the band, False when it lies wholly
    outside it (or the band is empty, low > high), inconclusive otherwise (also for a NaN bound)."""
    if low > high:
        return False
    return within(x, (low + high) / 2, (high - low) / 2)


def differs(difference, gap: float = SPECTRUM_GAP) -> bool | None:
    """|difference| > gap: True when its whole interval lies beyond +-gap, False when it lies
    wholly inside [-gap, gap]. (Against 0 it could only fail for a difference of exactly 0.)"""
    return some([above(difference, gap), below(difference, -gap)])


def c1(exponents, differences: dict, over_refs: dict) -> dict:
    """Linear attention, easy task, on the judged spectra: (a) R² >= R2_MIN for every spectrum;
    (b) at every depth the trained loss between the Monte Carlo reference curves (`over_refs`:
    {spectrum: {"repeated": [R_L / repeated_L], "free": [R_L / free_L]}}, Estimates): a stack of
    layer-specific preconditioners holds the repeated update and is a polynomial of degree L at most,
    so it ends at or below the one and at or above the other once trained; (c) some pair of spectra
    has exponents more than SPECTRUM_GAP apart (`differences`: alpha_i - alpha_j). (b) is the core.
    (Before the third rerun (b) asked alpha_rep <= alpha <= alpha_free, which follows from neither
    reference.) With no judged spectrum, (a) and (b) fail; with fewer than two, (c) fails."""
    rows = _rows(exponents)
    power_law = every(above(estimate(r, "r2"), R2_MIN) for r in rows) if rows else False
    inside = every([below(e, 1 + REF_TOL) for r in over_refs.values() for e in r["repeated"]]
                   + [above(e, 1 - REF_TOL) for r in over_refs.values() for e in r["free"]]) if over_refs else False
    depends = some(differs(d) for d in differences.values()) if differences else False
    return {"power law": power_law, "between references": inside, "depends on spectrum": depends}


def c6a(numbers: dict, level: float) -> dict:
    """`estimates.mode_estimates`: (a) the learning order (rank correlation of mode index and
    half-fall step) at least ORDER_MIN at every depth it was read at; (b) the strongest mode's
    normalised final loss below `level` by depth FEW_LAYERS, the weakest mode's not."""
    orders = [e for name, e in numbers.items() if name.startswith("learning order")]
    strongest, weakest = (numbers[f"{m} mode by depth {FEW_LAYERS}"] for m in ("strongest", "weakest"))
    return {"strong modes first (training)": every(above(e, ORDER_MIN) for e in orders),
            "weak modes need depth": every([below(strongest, level), above(weakest, level)])}


def c2(table) -> dict:
    """Softmax attention, easy task, per spectrum (columns R_1, deeper_over_one, target_mass and
    norm_growth of the one-layer model): near-zero loss, no gain from depth, focusing, growing norms."""
    each = lambda name, check: every(check(estimate(r, name)) for r in _rows(table))
    return {"near zero": each("R_1", lambda e: below(e, NEAR_ZERO)),
            "no depth gain": each("deeper_over_one", lambda e: above(e, DEEPER_MIN)),
            "focusing": each("target_mass", lambda e: above(e, FOCUS_MASS)),
            "norm growth": each("norm_growth", lambda e: above(e, NORM_GROWTH))}
