"""Every rule that turns measured numbers into a verdict, in one place.

A *check* compares a number with a threshold. A number comes with its 95 % interval over seeds
(`icl.analysis.intervals.Estimate`, a jackknife-t interval), and a check holds (True) when the whole interval lies on the right side
of its threshold, fails (False) when the whole interval lies on the wrong side, and is
inconclusive (None) otherwise (docs/statistics.md). A number from a single seed has no interval and is judged
on its value (its record says n_seeds = 1).

A claim's *status* follows from its *core* check, the one that carries the paper's statement, and
its secondary checks (`verdict`, docs/statistics.md): not reproduced when the core fails; reproduced when the
core and every secondary check hold; partly reproduced when the core holds and a secondary check
does not. When the core is inconclusive (its interval straddles the threshold, or the fit it reads
is ill-conditioned) the status is *inconclusive*, and the record names the range it lies in (from
the worst case, the core failing, to the best, the core holding). A check that cannot fail (an
algebraic identity) is a unit test in tests/, never a check here.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np

from ..analysis.exponents import ESTIMANDS, estimand, exponent, power_law, window_exponent
from ..analysis.grids import Parameters
from ..analysis.intervals import Estimate

# Each check's name -> the names of the numbers it reads ("case > number" where it reads one case's
# number only): what the report shows beside a check's mark.
READS = {
    "power law": ["R2"], "between references": ["R_L / repeated update"], "depends on spectrum": ["alpha differences"],
    "runs at their plateau": [],
    "near zero": ["one-layer loss"], "no depth gain": ["best deeper / one layer"],
    "focusing": ["attention on match"], "norm growth": ["|Q| |K| end / start"],
    "settled by depth 2": ["R_2 / plateau"], "matches MC floor": ["plateau / MC floor (S)"],
    "falls": ["R_deepest / R_1", "R_deepest / R_ref"], "alpha near 1": ["alpha"],
    "inverse-depth decay": ["alpha (primary model)", "R_deepest / R_1", "R_deepest / R_ref"],
    "joint inverse-depth decay": ["top-2 > alpha (primary model)", "top-2 > R_deepest / R_1"],
    "floor below linear": ["floor / linear plateau"],
    "shared error -> floor": ["gamma"], "disagreement -> constant": ["disagreement slope"],
    "strong modes first (training)": ["learning order L=1", "learning order L=32"],
    "weak modes need depth": ["strongest mode by depth 4", "weakest mode by depth 4"],
    "softmax collapses": ["softmax spread / linear spread"], "linear strong first": ["linear half-fall margin (steps)"],
    "A, C level off": ["A_L change", "C_L change"],
    "top-2 inverse-depth signal": ["top-2 > alpha (primary model)", "top-2 > R_deepest / R_ref"],
    "top-16 stops improving": ["top-16 > R_deepest / R_ref"], "top-2 u varies with depth": ["top-2 > u span"],
    "top-16 u constant": ["top-16 > u span"], "top-16 u near -2.3": ["top-16 > u mean"],
    "attention: top-2 identity, top-16 broad": ["top-2 > self mass", "top-16 > self mass"],
    "upper tail cut": ["p90 deepest / depth 1", "p99 deepest / depth 1"], "depth 1 better at p1": ["p1 deepest / depth 1"],
    "joint alpha near 1": ["top-2 > alpha"], "top-16 deviates more": ["mean |alpha - 1|, top-16 minus top-2"],
    "cells within the tolerance": ["R_1 / softmax bound", "largest |R_L / baseline_L - 1|"],
    "flat with depth": ["R_deepest / R_1"], "not below the mixture bound": ["R_deepest / mixture bound"],
    "half the gap to the bound closed": ["gap to the bound closed"],
    "overlap below random at L = m": ["excess overlap / random's at L = m"], "even coverage from L = m on": ["coverage error / random"],
    "frozen tiling matches the trained stack": ["tiled / trained"], "frozen random subspaces are worse": ["random / tiled"],
    "shared stream, matched L h, same loss": ["largest |R(L, h) / R(L h, 1) - 1|, shared stream"],
    "one layer of d/k heads captures the gain": ["share captured by one layer"],
    "heads track the complementary baseline": ["largest |R / complementary - 1|"],
    "h k = d: depth buys little": ["gain from depth, h k = d"],
    "less than a single rank-limited head gains": ["gain / one rank-d/h head's gain"],
    "one layer of heads matches one full-rank head": ["R_1 / one rank-d head's R_1"],
    "looped stacks keep the gain": ["looped / untied gain, shared_stream", "looped / untied gain, context_updates"],
}

# A record names its spectra and cells in its notebook's style (`d16 P64 k4`, `key_dim 4`, notebook 04's
# `shared_stream, top-2, (0, 1)`): the report shows them in one, and names what a row's label is.
CASE = re.compile(r"\(a, b\)|d=?\d|top-\d|key_dim|k=\d")  # how a spectrum's or cell's label starts
KINDS = ((r".* minus ", "pair of spectra"), (r"\(a, b\)", "spectrum"), (r"d=\d", "cell"), (r"top-\d+$", "target"),
         (r"top-\d+ \(a, b\)", "target, spectrum"), (r"k=\d+$", "k"))


def label(text) -> str:
    """One style for every spectrum and cell label: `d=16, P=64, k=4`, `k=4`, `(a, b) = (1, 0)`."""
    text = re.sub(r"\bd(\d+) P(\d+) k(\d+)\b", r"d=\1, P=\2, k=\3", str(text))
    text = re.sub(r"\bkey_dim[ =](\d+)", r"k=\1", text)
    text = re.sub(r", \((-?[\d.]+), (-?[\d.]+)\)$", r", (a, b) = (\1, \2)", text)
    return text.replace("_", " ")


def kind(case: str) -> str:
    """What a row label names (a spectrum, a cell, a target...), for the first column of its table."""
    return next((name for pattern, name in KINDS if re.match(pattern, case)), "sweep")


INTRO = ("Each claim of the paper in our words (C1, C2, ...) and of our own regime map, mechanism, heads and loops "
         "(R1, R2, ...), with the verdict under the criterion its notebook states before the numbers are computed. A "
         "number is given as value [95 % interval over seeds]; ✓ a check holds, ✗ it fails.\n\n")
DECIDED_BY = ("*Decided by*: the claim's core check, the one that carries its statement (not reproduced when it "
              "fails, partly reproduced when it holds and a secondary check does not); for a claim judged at several "
              "ranks k (each rank's status beside the claim's), at the first rank whose status is the claim's, else "
              "the first not reproduced. The numbers are those the check reads: one as value [95 % interval over "
              "seeds], several as the smallest to the largest (their intervals in the claim's section below); the "
              "core check column says what it asks of them.")


def claim_order(c: dict) -> tuple:
    """The paper's claims first, then ours, each by number and then by the letter after it:
    C1 < C2 < ... < C6a < C6b < ... < C10 < R1 < ... < R9 < R10; any other id after them, by name."""
    m = re.fullmatch(r"([CR])(\d+)(\w*)", c["id"])
    return ("CR".index(m.group(1)), int(m.group(2)), m.group(3)) if m else (2, 0, c["id"])


STATUSES = ("reproduced", "partly reproduced", "not reproduced", "inconclusive")
DECIDED = STATUSES[:3]
# A check every claim may carry beside its others: True when every run its core reads finished falling
# (`at_plateau`), None when some had not. Then the core is not read, whichever side it lay on: the
# claim is inconclusive for want of training budget, not reproduced or not (docs/statistics.md).
PLATEAU = "runs at their plateau"


class Status(str):
    """A status string that also knows the range (worst, best) inconclusive checks leave open, and
    whether it is inconclusive because runs its core reads had not reached their plateau (`budget`)."""

    range: tuple[str, str]
    budget: bool = False

    def __new__(cls, worst: str, best: str, budget: bool = False):
        self = super().__new__(cls, worst if worst == best else "inconclusive")
        self.range, self.budget = (worst, best), budget and worst != best
        return self


# ---------------------------------------------------------------- checks


def _bounds(x) -> tuple[float, float]:
    """The interval a check judges: the 95 % interval of an Estimate with one, else the value."""
    if isinstance(x, Estimate):
        return x.ci95 if x.has_interval else (x.value, x.value)
    return float(x), float(x)


def below(x, threshold: float) -> bool | None:
    """x < threshold: True when its whole interval is below, False when none of it is."""
    lo, hi = _bounds(x)
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return None
    return True if hi < threshold else False if lo >= threshold else None


def above(x, threshold: float) -> bool | None:
    """x > threshold, with the same three outcomes as `below`."""
    lo, hi = _bounds(x)
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return None
    return True if lo > threshold else False if hi <= threshold else None


def within(x, centre: float, tol: float) -> bool | None:
    """|x - centre| <= tol: True when the whole interval is inside the band, False when it is
    wholly outside."""
    lo, hi = _bounds(x)
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return None
    if centre - tol <= lo and hi <= centre + tol:
        return True
    return False if hi < centre - tol or lo > centre + tol else None


def near_one(row, tol: float) -> bool | None:
    """|alpha - 1| <= tol for a sweep's exponent: its primary model's, with its interval over seeds
    (`icl.analysis.exponents.exponent`), read only where the curve is a power law
    (`exponents.power_law`: fails where an exponential approach fits decisively better, inconclusive
    where another shape fits better, or as well and says otherwise); inconclusive where the primary
    fit does not identify alpha (its digits are not read) or where the check flips when the fit
    starts at twice its first depth (`exponents.window_exponent`)."""
    e, window = exponent(row), window_exponent(row)
    read = None if e is None else within(e, 1.0, tol)
    later = None if window is None else within(window, 1.0, tol)
    return power_law(row, None if {read, later} == {True, False} else read)[0]


def read_otherwise(row, tol: float) -> str:
    """The estimands (`exponents.ESTIMANDS`) whose own |alpha - 1| <= tol check gives the opposite
    definite answer to the deciding one (`near_one`), as 'name: holds' / 'name: fails', or 'none'."""
    decided = near_one(row, tol)
    if decided is None:
        return "none (the deciding check is undecided)"
    other = {name: within(e, 1.0, tol) for name, col in ESTIMANDS.items()
             if isinstance(e := estimand(row, col), Estimate)}
    out = [f"{name}: {'holds' if v else 'fails'}" for name, v in other.items() if v is not None and v != decided]
    return "; ".join(out) or "none"


def at_plateau(*runs) -> bool | None:
    """The PLATEAU check of the runs a core reads (frames with a `converged` column, or flags): True
    when every one finished falling, None when some had not (icl.core.train: the loss fell by more
    than its tolerance over the last 20 % of its steps)."""
    flags = [bool(x) for r in runs for x in (r["converged"] if hasattr(r, "columns") else [r])]
    return True if all(flags) else None


def every(results) -> bool | None:
    """A check over several cases (e.g. every spectrum): fails if one fails, holds if all hold."""
    results = list(results)
    if any(r is False for r in results):
        return False
    return True if results and all(r is True for r in results) else None


def some(results) -> bool | None:
    """At least one case holds: holds if one holds, fails if all fail."""
    results = list(results)
    if any(r is True for r in results):
        return True
    return False if results and all(r is False for r in results) else None


def share(results, at_least: float) -> bool | None:
    """At least a fraction `at_least` of the cases hold (inconclusive ones may go either way)."""
    results = list(results)
    n = len(results)
    sure, maybe = sum(r is True for r in results), sum(r is None for r in results)
    if n == 0:
        return None
    return True if sure >= at_least * n else False if sure + maybe < at_least * n else None


# ---------------------------------------------------------------- statuses


def verdict(checks: dict, core: str) -> Status:
    """A claim's status from its named checks (True holds, False fails, None inconclusive; a list
    is a check per cell, holding when every cell holds) and the name of its core check."""
    if core not in checks:
        raise KeyError(f"core check {core!r} is not among {list(checks)}")
    flat = {k: every(v) if isinstance(v, list) else v for k, v in checks.items()}
    bad = {k: v for k, v in flat.items() if v not in (True, False, None)}
    if bad:
        raise ValueError(f"checks must be True, False or None (inconclusive), got {bad}")
    secondary = [v for k, v in flat.items() if k not in (core, PLATEAU)]
    holds = "reproduced" if all(v is True for v in secondary) else "partly reproduced"
    budget = flat.get(PLATEAU, True) is not True
    read = None if budget else flat[core]
    if read is True:
        return Status(holds, holds)
    return Status("not reproduced", "not reproduced" if read is False else holds, budget)


def _decided_overall(statuses: list[str]) -> str:
    if all(x == "reproduced" for x in statuses):
        return "reproduced"
    if all(x == "not reproduced" for x in statuses):
        return "not reproduced"
    return "partly reproduced"


def status_range(status) -> tuple[str, str]:
    """(worst, best) of a status; a decided status is its own range."""
    if status not in STATUSES:
        raise ValueError(f"status {status!r}; each must be one of {STATUSES}")
    rng = getattr(status, "range", None)
    if rng is None and status == "inconclusive":
        raise ValueError("an inconclusive status needs its range (make it with verdict or Status)")
    return tuple(rng) if rng else (str(status), str(status))


def overall(statuses) -> Status:
    """One status from the statuses of a claim judged in several regimes (e.g. per key_dim):
    reproduced where it is reproduced in every regime, not reproduced where in none it is even
    partly reproduced, otherwise partly reproduced; inconclusive where the regimes' ranges leave
    both open."""
    statuses = list(statuses)
    if not statuses:
        raise ValueError("overall() needs at least one status")
    ranges = [status_range(x) for x in statuses]
    return Status(_decided_overall([w for w, _ in ranges]), _decided_overall([b for _, b in ranges]),
                  any(getattr(x, "budget", False) for x in statuses))


# ---------------------------------------------------------------- records


def _plain(v):
    """Measured values as JSON: an Estimate becomes {"value", "ci68", "ci95", "n_seeds"}."""
    if isinstance(v, Estimate):
        return round_numbers(v.to_dict(), 6)
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    return round_numbers(v, 6)


def _record_status(row: dict, status) -> dict:
    worst, best = status_range(status)
    row["status"] = str(status)
    if worst != best:
        row["range"] = [worst, best]
    if getattr(status, "budget", False):
        row["budget"] = True  # inconclusive because runs its core reads had not reached their plateau
    return row


def claim(s: Parameters, cid: str, text: str, status, measured: dict, figure: str, criterion: str,
          regimes: dict | None = None, core: str | None = None) -> dict:
    """Record one claim's verdict in the notebook's parameters' `claims` (it goes to results.json,
    then to outputs/REPORT.md), with the name of its core check (the report's "decided by"). A claim judged in several regimes gives
    `regimes` = {regime: {"status": ..., "measured": {...}}}."""
    if not isinstance(s, Parameters):  # a running object would pass for one (it carries .claims too)
        raise TypeError(f"{cid}: a claim is recorded on a notebook's parameters, s.params, not on {type(s).__name__}")
    row = _record_status({"id": cid, "claim": text, "criterion": criterion}, status)
    row.update(measured=_plain(measured), figure=figure)
    if core is not None:
        row["core"] = core
    if regimes:
        row["regimes"] = {str(k): _record_status({"measured": _plain(r["measured"])}, r["status"])
                          for k, r in regimes.items()}
    s.claims[:] = [c for c in s.claims if c["id"] != cid] + [row]  # in place: Parameters is frozen, its list is the record
    return row


def claim_by_regime(s: Parameters, cid: str, text: str, regimes: dict, figure: str, criterion: str,
                    core: str | None = None) -> dict:
    """Record a claim judged in several regimes, {regime: {"status": ..., "measured": {...}}}: its
    overall status (`overall`) and the regimes where it holds, at least partly and fully."""
    summary = {"holds (at least partly) in": [k for k, r in regimes.items() if r["status"] in ("reproduced", "partly reproduced")],
               "reproduced in": [k for k, r in regimes.items() if r["status"] == "reproduced"],
               "inconclusive in": [k for k, r in regimes.items() if r["status"] == "inconclusive"]}
    return claim(s, cid, text, overall(r["status"] for r in regimes.values()), summary, figure,
                 criterion + "; judged in every regime: reproduced when reproduced in all, not reproduced when in none",
                 regimes, core)


@dataclass(frozen=True)
class Rules:
    """One notebook's claims, stated once: each claim's statement (`text`), its criterion with the
    thresholds of its module (`criteria`, printed into the notebook's criteria cell before any
    number is computed) and the name of its core check (`core`)."""

    text: dict
    criteria: dict
    core: dict

    def status(self, cid: str, checks: dict):
        """The claim's status from its checks, judged by its core (`verdict`)."""
        return verdict(checks, self.core[cid])

    def statement(self, cid: str, s: Parameters | None = None) -> tuple[str, str]:
        """Claim `cid`'s text and criterion; a number that is a notebook parameter ("{mode_level}")
        is filled in from the notebook's parameters `s` where given."""
        fill = lambda t: t.format(**s.values) if s is not None and "{" in t else t  # noqa: E731
        return fill(self.text[cid]), fill(self.criteria[cid])

    def show_criteria(self, s: Parameters | None = None, *cids: str) -> None:
        """The criteria cell: each claim's statement and criterion, with its thresholds (the claims
        `cids`, or all of them; a module can serve two notebooks)."""
        for cid in cids or self.core:
            print("{}: {}\n    {}".format(cid, *self.statement(cid, s)))

    def record(self, s: Parameters, cid: str, checks: dict, numbers: dict, figure: str) -> dict:
        """Record claim `cid` from its checks and the numbers its record shows beside them."""
        text, criterion = self.statement(cid, s)
        return claim(s, cid, text, self.status(cid, checks), {**numbers, **checks}, figure, criterion,
                     core=self.core[cid])

    def record_by_regime(self, s: Parameters, cid: str, checks: dict, numbers: dict, figure: str) -> dict:
        """Record claim `cid` judged in several regimes: `checks` and `numbers` keyed by regime."""
        regimes = {r: {"status": self.status(cid, c), "measured": {**numbers[r], **c}} for r, c in checks.items()}
        text, criterion = self.statement(cid, s)
        return claim_by_regime(s, cid, text, regimes, figure, criterion, core=self.core[cid])


def status_text(record: dict) -> str:
    """A record's status in words, with its range where inconclusive: 'inconclusive (budget) (not reproduced
    to reproduced)' (a notebook's own lines and the report's)."""
    return record["status"] + (" (budget)" if record.get("budget") else "") + (
        f" ({record['range'][0]} to {record['range'][1]})" if "range" in record else "")


def show_claims(s: Parameters) -> None:
    """One line per recorded claim: its id and status (with its range where inconclusive)."""
    for c in s.claims:
        where = "".join(f"; {k}: {status_text(r)}" for k, r in c.get("regimes", {}).items())
        print(f"{c['id']}: {status_text(c)}{where}")


def round_numbers(v, digits: int = 4):
    """Floats of any nesting of dicts and lists to `digits` significant digits (None for NaN and
    inf, so that the JSON stays valid); numpy integers to int."""
    if isinstance(v, dict):
        return {k: round_numbers(x, digits) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [round_numbers(x, digits) for x in v]
    if isinstance(v, (float, np.floating)):
        return float(f"{float(v):.{digits}g}") if math.isfinite(v) else None
    if isinstance(v, np.integer):
        return int(v)
    return v
