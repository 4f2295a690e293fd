"""What a claim's record says (results.json, `icl.claims.claim`), apart from how the report shows it
(icl.running.claim_report): its named checks and its numbers, its ranks, the outcome of a check
made per cell, which check decided it, and the numbers a check reads. Beside `verdict`, so that
the rule that decides a claim and the rule that says which check decided it are read in one layer.

A record keeps its numbers and its named checks side by side in `measured`. A check is True (holds),
False (fails) or None (inconclusive), or a list of these, one per cell; a number is an estimate
{"value", "ci95", "n_seeds"}, a plain number, a dict of them by spectrum or cell ("number-first"), or one
sweep's numbers by name ("case-first"). Which numbers a check reads is not in the record: `READS`.
"""
from __future__ import annotations

import math

from . import CASE, READS, every, label


def is_estimate(v) -> bool:
    return isinstance(v, dict) and {"value", "ci95", "n_seeds"} <= set(v)


def value_of(v) -> float:
    """A recorded number, or an estimate's value, as a float (NaN for a missing one)."""
    x = v["value"] if is_estimate(v) else v
    return math.nan if x is None else float(x)


def leaves(v) -> list:
    """The single numbers in a recorded value (an estimate, a list or dict of them)."""
    if isinstance(v, list):
        return [x for item in v for x in leaves(item)]
    if isinstance(v, dict) and not is_estimate(v):
        return [x for item in v.values() for x in leaves(item)]
    return [v] if is_estimate(v) or (isinstance(v, (int, float)) and not isinstance(v, bool)) else []


def split(measured: dict) -> tuple[dict, list]:
    """(checks {name: outcome}, numbers [(case label or None, number name, value)]) of a record;
    convergence is a flag shown beside the numbers, not a check."""
    checks, numbers = {}, []
    for key, v in measured.items():
        flags = v is None or isinstance(v, bool) or (isinstance(v, list) and v and all(x is None or isinstance(x, bool) for x in v))
        if flags and "converged" not in key:
            checks[key] = v
        elif isinstance(v, dict) and not is_estimate(v):
            if all(CASE.match(k) for k in v):  # {spectrum or cell: value}
                numbers += [(label(c), key, x) for c, x in v.items()]
            else:  # one sweep's numbers by name
                numbers += [(label(key), name, x) for name, x in v.items()]
        else:
            case, _, name = key.rpartition(": ")  # "key_dim 4: random / tiled"
            if name == "spectrum" and isinstance(v, list) and len(v) == 2:
                v = f"(a, b) = ({v[0]:g}, {v[1]:g})"
            numbers.append((label(case) if case else None, name, v))
    return checks, numbers


def parts(record: dict) -> list[tuple[str | None, dict]]:
    """(rank label or None, the record judged there): one per rank, or the record itself."""
    return [(label(k), r) for k, r in record["regimes"].items()] if record.get("regimes") else [(None, record)]


def outcome(v) -> bool | None:
    """A check's outcome; a check made per cell is judged as `verdict` judges it (`every`)."""
    return every(v) if isinstance(v, list) else v


def sweep_check(name: str) -> tuple[str | None, str]:
    """(sweep label, check) of a check made per sweep, "shared_stream, top-2, (0, 0): falls";
    (None, name) for any other check (a name in READS may hold ': ' itself)."""
    if name in READS or ": " not in name:
        return None, name
    sweep, _, check = name.rpartition(": ")
    return label(sweep), check


def read_names(check: str) -> list[tuple[str, str]]:
    """(scope, name) of each number `check` reads (`READS`: "top-2 > alpha" reads alpha in the
    cases of top-2 only; scope '' for every case)."""
    return [(within, name) for within, _, name in (spec.rpartition(" > ") for spec in READS.get(sweep_check(check)[1], ()))]


def read(check: str, numbers: list) -> list[tuple[str, list, int]]:
    """The numbers `check` reads (`read_names`; a sweep's check reads that sweep's only): for each
    name, (name, the single numbers found, how many of the values found a fit did not identify)."""
    case = sweep_check(check)[0]
    out = []
    for within, name in read_names(check):
        found = [v for c, n, v in numbers if n == name and (case is None or c == case)
                 and (not within or c == within or (c or "").startswith(within + " "))]
        unread = sum(isinstance(v, str) and v.startswith("not identified") for v in found)
        out.append((name, [x for v in found for x in leaves(v)], unread))
    return out


def deciding(record: dict) -> tuple[str | None, str, object, list]:
    """(rank, check name, its value, the numbers judged there) of the check that decided `record`:
    its core check where the record names one (`core`), else the first that fails, else the first
    inconclusive one, else the first; for a claim judged per rank, in the first rank whose status is
    the claim's (an inconclusive claim: the rank left undecided), else the first not reproduced."""
    ranked = parts(record)
    rank, part = next(((k, r) for k, r in ranked if r["status"] == record["status"]),
                      next(((k, r) for k, r in ranked if r["status"] != "reproduced"), ranked[0]))
    checks, numbers = split(part["measured"])
    core = part.get("core", record.get("core"))
    name = min(checks, key=lambda n: (n != core, [False, None, True].index(outcome(checks[n]))), default=None)
    return rank, name, checks.get(name), numbers
