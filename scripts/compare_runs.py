"""Do two runs of the same notebooks agree? Claim by claim: the status in each, and the largest
relative difference between the numbers each claim measured (its `measured` record in the
notebooks' results.json).

For a run under another CPU variant (issue 17): run the notebooks into a folder of their own,
with their own run cache, then compare with the committed outputs, e.g.

    ATEN_CPU_CAPABILITY=default ICL_KERNEL_FLAGS=portable .venv/bin/python -m icl reproduce \
        --only 06_regimes --outputs outputs/variant/portable -p cache_dir outputs/variant/runs
    .venv/bin/python scripts/compare_runs.py outputs outputs/variant/portable --json outputs/variant_run.json
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


def compare(first: Path, second: Path) -> list[dict]:
    one, two = claims(first), claims(second)
    rows = []
    for cid in [c for c in one if c in two]:
        a, b = numbers(one[cid]["measured"]), numbers(two[cid]["measured"])
        shared = [k for k in a if k in b]
        worst = max(shared, key=lambda k: relative_difference(a[k], b[k]), default=None)
        rows.append({"id": cid, "notebook": one[cid]["notebook"], "status": [one[cid]["status"], two[cid]["status"]],
                     "same_status": one[cid]["status"] == two[cid]["status"], "numbers": len(shared),
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
    print("| claim | status | same | numbers | max rel. difference (at) |\n|---|---|---|---|---|")
    for r in rows:
        diff = "" if r["max_relative_difference"] is None else f"{r['max_relative_difference']:.2e} ({r['at']})"
        print(f"| {r['id']} | {r['status'][0]} / {r['status'][1]} | {'yes' if r['same_status'] else 'NO'} | "
              f"{r['numbers']} | {diff} |")
    if args.json:
        args.json.write_text(json.dumps({"first": str(args.first), "second": str(args.second), "claims": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
