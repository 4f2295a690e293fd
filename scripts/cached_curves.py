"""Depth curves (depth, seed, loss) of one softmax sweep, read from a run cache, as `icl judge` takes
them: what a long run has trained so far, before its notebook finishes (issue 54's paper_slice).

    .venv/bin/python scripts/cached_curves.py outputs/runs --dim 32 --context-length 128 --key-dim 4 \
        --steps 5000 > curves.csv
    .venv/bin/icl judge curves.csv --dim 32 --key-dim 4
"""
from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path


def rows(cache: Path, want: dict) -> list[tuple[int, int, float]]:
    """(depth, seed, final loss) of every cached run whose config has the `want` values."""
    out = []
    for path in sorted(cache.glob("*/*.json")):
        entry = json.loads(path.read_text())
        result = entry.get("result", entry)  # an entry holds its result beside its checksum
        config = result.get("config") or {}
        if all(config.get(k) == v for k, v in want.items()):
            out.append((config["depth"], config["seed"], result["final_loss"]))
    return sorted(out)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("cache", type=Path)
    for name in ("dim", "context_length", "key_dim", "steps", "top_k"):
        p.add_argument(f"--{name.replace('_', '-')}", type=int, default=2 if name == "top_k" else None)
    p.add_argument("--depths", type=int, nargs="+", help="only these depths (a sweep's grid; other runs of its configs left out)")
    args = p.parse_args()
    want = {k: v for k, v in vars(args).items() if k not in ("cache", "depths") and v is not None}
    writer = csv.writer(sys.stdout)
    writer.writerow(["depth", "seed", "loss"])
    found = rows(args.cache, {**want, "model": "softmax", "task": "difficult"})
    writer.writerows(r for r in found if args.depths is None or r[0] in args.depths)


if __name__ == "__main__":
    main()
