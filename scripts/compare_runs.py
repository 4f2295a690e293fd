"""Do two runs of the same notebooks agree? Claim by claim: the status in each, and the largest
relative difference between the numbers each claim measured (its `measured` record in the
notebooks' results.json).

For a run under another CPU variant (issue 17): run the notebooks into a folder of their own,
with their own run cache, then compare with the committed outputs, e.g.

    ATEN_CPU_CAPABILITY=default ICL_KERNEL_FLAGS=portable .venv/bin/python -m icl reproduce \
        --only 06_regimes --outputs outputs/variant/portable -p cache_dir outputs/variant/runs
    .venv/bin/python scripts/compare_runs.py outputs outputs/variant/portable --json outputs/studies/variant_run.json
"""
from __future__ import annotations

import argparse
import json
import math
from pathlib import Path


def numbers(x, prefix: str = "") -> dict[str, float]:
    """Every number in a nested record, by its path ('R_1/d16 P64 k16')."""
    if isinstance(x, bool) or x is None:
        return {}
    if isinstance(x, (int, float)):
        return {prefix: float(x)}
    if isinstance(x, dict):
        items = x.items()
    elif isinstance(x, list):
        items = enumerate(x)
    else:
        return {}
    out = {}
    for k, v in items:
        out.update(numbers(v, f"{prefix}/{k}" if prefix else str(k)))
    return out


def claims(root: Path) -> dict[str, dict]:
    out = {}
    for path in sorted(root.glob("0*/results.json")):
        for c in json.loads(path.read_text()).get("claims", []):
            out[c["id"]] = {"notebook": path.parent.name, **c}
    return out


def relative_difference(a: float, b: float) -> float:
    if a == b:
        return 0.0
    if not (math.isfinite(a) and math.isfinite(b)):
        return math.inf
    return abs(a - b) / max(abs(a), abs(b), 1e-12)


def measured(claim: dict) -> dict[str, float]:
    """A claim's numbers: its own `measured` record and, for a claim judged per regime (C4's
    ranks, say), every regime's, prefixed by the regime."""
    out = numbers(claim["measured"])
    for name, regime in (claim.get("regimes") or {}).items():
        out.update(numbers(regime.get("measured", {}), name))
    return out


def statuses(claim: dict) -> dict[str, str]:
    """The claim's status and each regime's, by name ('' for the claim)."""
    return {"": claim["status"], **{n: r.get("status", "") for n, r in (claim.get("regimes") or {}).items()}}


def compare(first: Path, second: Path) -> list[dict]:
    one, two = claims(first), claims(second)
    rows = []
    for cid in [c for c in one if c in two]:
        a, b = measured(one[cid]), measured(two[cid])
        shared = [k for k in a if k in b]
        worst = max(shared, key=lambda k: relative_difference(a[k], b[k]), default=None)
        sa, sb = statuses(one[cid]), statuses(two[cid])
        rows.append({"id": cid, "notebook": one[cid]["notebook"], "status": [one[cid]["status"], two[cid]["status"]],
                     "same_status": sa == sb, "flipped": [n or cid for n in sa if sa[n] != sb.get(n)],
                     "numbers": len(shared), "equal": sum(a[k] == b[k] for k in shared),
                     "max_relative_difference": relative_difference(a[worst], b[worst]) if worst else None,
                     "at": worst})
    return rows


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("first", type=Path)
    p.add_argument("second", type=Path)
    p.add_argument("--json", type=Path, help="also write the comparison here")
    args = p.parse_args()
    rows = compare(args.first, args.second)
    if not rows:
        raise SystemExit(f"no claim is in both {args.first} and {args.second}")
    print("| claim | status | same (every regime) | numbers (equal) | max rel. difference (at) |\n|---|---|---|---|---|")
    for r in rows:
        diff = "" if r["max_relative_difference"] is None else f"{r['max_relative_difference']:.2e} ({r['at']})"
        print(f"| {r['id']} | {r['status'][0]} / {r['status'][1]} | {'yes' if r['same_status'] else 'NO: ' + ', '.join(r['flipped'])} | "
              f"{r['numbers']} ({r['equal']}) | {diff} |")
    if args.json:
        args.json.write_text(json.dumps({"first": str(args.first), "second": str(args.second), "claims": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
