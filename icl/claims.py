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


def overall(statuses) -> str:
    """One status from the statuses of a claim judged in several regimes (e.g. per key_dim):
    reproduced where it is reproduced in every regime, not reproduced where in none it is even
    partly reproduced, otherwise partly reproduced."""
    statuses = list(statuses)
    if not statuses or any(x not in STATUSES for x in statuses):
        raise ValueError(f"statuses {statuses!r}; each must be one of {STATUSES}")
    if all(x == "reproduced" for x in statuses):
        return "reproduced"
    if all(x == "not reproduced" for x in statuses):
        return "not reproduced"
    return "partly reproduced"


def claim(s: Settings, cid: str, text: str, status: str, measured: dict, figure: str, criterion: str,
          regimes: dict | None = None) -> dict:
    """Record one claim's verdict (it goes to results.json, then to outputs/REPORT.md). A claim
    judged in several regimes gives `regimes` = {regime: {"status": ..., "measured": {...}}}."""
    for st in [status] + [r["status"] for r in (regimes or {}).values()]:
        if st not in STATUSES:
            raise ValueError(f"status {st!r}; allowed: {STATUSES}")
    row = {"id": cid, "claim": text, "criterion": criterion, "status": status, "measured": round_numbers(measured), "figure": figure}
    if regimes:
        row["regimes"] = {str(k): {"status": r["status"], "measured": round_numbers(r["measured"])} for k, r in regimes.items()}
    s.claims = [c for c in s.claims if c["id"] != cid] + [row]
    return row


def claim_by_regime(s: Settings, cid: str, text: str, regimes: dict, figure: str, criterion: str) -> dict:
    """Record a claim judged in several regimes, {regime: {"status": ..., "measured": {...}}}: its
    overall status (`overall`) and the regimes where it holds, at least partly and fully."""
    summary = {"holds (at least partly) in": [k for k, r in regimes.items() if r["status"] != "not reproduced"],
               "reproduced in": [k for k, r in regimes.items() if r["status"] == "reproduced"]}
    return claim(s, cid, text, overall(r["status"] for r in regimes.values()), summary, figure,
                 criterion + "; judged in every regime: reproduced when reproduced in all, not reproduced when in none",
                 regimes)


def show_claims(s: Settings) -> None:
    """One line per recorded claim: its id and status."""
    for c in s.claims:
        where = "".join(f"; {k}: {r['status']}" for k, r in c.get("regimes", {}).items())
        print(f"{c['id']}: {c['status']}{where}")
