"""The claims a notebook judges: a verdict from named checks, one record per claim (into
results.json through `notebook.write_results`, then into outputs/REPORT.md), and the short
listing every notebook ends with (its last NBVAL_CHECK_OUTPUT lines)."""
from __future__ import annotations

from .notebook import Settings, round_numbers

STATUSES = ("reproduced", "partly reproduced", "not reproduced")


def verdict(checks: dict, needed: str | None = None, plus_one: bool = False) -> str:
    """A claim's status from its named checks (True = holds). Every check holds: reproduced. Not
    reproduced when none holds, when the `needed` check fails, or (plus_one) when the `needed`
    check is the only one that holds. Otherwise partly reproduced."""
    if needed is not None and needed not in checks:
        raise KeyError(f"needed check {needed!r} is not among {list(checks)}")
    values = [bool(v) for v in checks.values()]
    others = [bool(v) for k, v in checks.items() if k != needed]
    if values and all(values):
        return "reproduced"
    if not any(values) or (needed is not None and not checks[needed]) or (plus_one and not any(others)):
        return "not reproduced"
    return "partly reproduced"


def claim(s: Settings, cid: str, text: str, status: str, measured: dict, figure: str, criterion: str) -> dict:
    """Record one claim's verdict (it goes to results.json, then to outputs/REPORT.md)."""
    if status not in STATUSES:
        raise ValueError(f"status {status!r}; allowed: {STATUSES}")
    row = {"id": cid, "claim": text, "criterion": criterion, "status": status, "measured": round_numbers(measured), "figure": figure}
    s.claims = [c for c in s.claims if c["id"] != cid] + [row]
    return row


def show_claims(s: Settings) -> None:
    """One line per recorded claim: its id and status."""
    for c in s.claims:
        print(f"{c['id']}: {c['status']}")
