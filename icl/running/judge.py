"""`python -m icl judge CURVES.csv --dim D --key-dim K`: your own depth curves judged by the rule
that judges C4 (`icl.claims.difficult.judge`: inverse-depth decay), with the numbers it read. The
file is checked before any fit: a row that is not a depth, a seed and a positive finite loss, a
(depth, seed) given twice, or too few depths is one line naming it."""
from __future__ import annotations

import sys
from pathlib import Path

from ..core.config import ConfigError
from ..core.memory import check_bytes
from .cli import check_output_path, write_json
from .files import NotAnEntry, read_regular

CURVES_LIMIT = 64 * 2**20  # bytes of a curves file: millions of rows, far more than any sweep
ROW_BYTES = 1_000  # peak memory per row of a judged file (measured: 0.7 kB at 2,000,000 rows, issue 56)
MAX_DEPTH = 2**31  # deeper is a typo; 1e20 overflowed int64 into a garbled depth (-9223372036854775808)


def add_arguments(p) -> None:
    p.add_argument("curves", metavar="CURVES.csv", help="depth curves: columns depth, seed, loss (one row per trained "
                   "model, loss > 0, e.g. the relative loss); depth 1 among the depths")
    p.add_argument("--dim", type=int, required=True, metavar="D", help="the input dimension d")
    p.add_argument("--key-dim", type=int, required=True, metavar="K", help="each layer's query/key rank k (k = d: full rank)")
    p.add_argument("--json", metavar="PATH", help="write the verdict and the numbers it read as JSON to PATH ('-' for standard output)")


def read_curves(path: str):
    """The curves file as a frame (depth, seed, loss), or ConfigError naming what is wrong with it."""
    import io

    import pandas as pd  # heavy: a second to import, and only `judge` reads a CSV

    from ..analysis.exponents import MIN_POINTS  # heavy: loads scipy, for `judge` alone

    try:
        df = pd.read_csv(io.StringIO(read_regular(Path(path), CURVES_LIMIT)))
    except (OSError, NotAnEntry, UnicodeDecodeError, pd.errors.ParserError, pd.errors.EmptyDataError) as err:
        raise ConfigError(f"CURVES.csv: {path} cannot be read as a CSV file ({getattr(err, 'strerror', None) or err})") from None
    check_bytes(ROW_BYTES * len(df), "cpu", f"judging the {len(df):,} rows of {path} needs about {{need}}",
                "give fewer rows (fewer seeds)")
    missing = [c for c in ("depth", "seed", "loss") if c not in df.columns]
    if missing:
        raise ConfigError(f"CURVES.csv: {path} has no column {', '.join(missing)}; it needs depth, seed, loss "
                          f"(it has {', '.join(map(str, df.columns[:8]))})")
    df = df[["depth", "seed", "loss"]].apply(pd.to_numeric, errors="coerce")
    bad = df[~df.depth.between(1, MAX_DEPTH) | (df.depth % 1 != 0) | ~(df.loss > 0) | ~df.loss.lt(float("inf")) | df.seed.isna()]
    if len(bad):
        r = bad.iloc[0]
        raise ConfigError(f"CURVES.csv: row {bad.index[0] + 2} (depth {r.depth}, seed {r.seed}, loss {r.loss}) is not allowed: "
                          f"depth an integer from 1 to {MAX_DEPTH:,}, a seed, loss a finite number > 0")
    twice = df.duplicated(["depth", "seed"])
    if twice.any():
        r = df[twice].iloc[0]
        raise ConfigError(f"CURVES.csv: depth {r.depth:g} of seed {r.seed:g} appears twice; give one loss per (depth, seed)")
    if 1 not in set(df.depth) or df.depth.nunique() < MIN_POINTS:  # the fewest depths a fit identifies
        raise ConfigError(f"CURVES.csv: depths {sorted(df.depth.unique().astype(int).tolist())} need depth 1 and at least "
                          f"{MIN_POINTS} depths in all")
    return df.astype({"depth": int})


def run(args) -> int:
    from ..claims.difficult import judge  # heavy: pandas, scipy and the fits

    if not 1 <= args.key_dim <= args.dim:
        raise ConfigError(f"--key-dim: {args.key_dim} is not allowed with --dim {args.dim}; it must be between 1 and d")
    check_output_path(args.json)
    out = judge(read_curves(args.curves), args.dim, args.key_dim)
    if args.json and not write_json(out, args.json, "the verdict"):
        return 1
    print(summary(out), file=sys.stderr if args.json == "-" else sys.stdout)
    return 0


def summary(out: dict) -> str:
    """The verdict and the numbers it read, a few lines: the deciding alpha, the shape test, the refit
    from twice the first depth, the fall, and the three estimands (each its interval or why not)."""
    interval = lambda e: f"{e['value']:.3g}" + (f" [{e['ci95'][0]:.3g}, {e['ci95'][1]:.3g}]" if e["ci95"] else "")  # noqa: E731
    alpha = interval(out["alpha"]) if out["alpha"] else f"not identified ({out['problem']})"
    window = out["window"]
    later = interval(window) if window["value"] is not None else "not identified"
    estimands = ", ".join(f"{name} {v if isinstance(v, str) else interval(v)}" for name, v in out["estimands"].items())
    return (f"inverse-depth decay (C4's core): {out['status']}\n  alpha {alpha}, primary model {out['primary']} "
            f"(m = {out['knee_depth']}); |alpha - 1| <= {out['tolerance']} needed\n"
            f"  shape: {out['shape']}" + (f"; {out['shape_reading']}" if out["shape_reading"] else "") + "\n"
            f"  refitted from L >= {window['from']}: {later}\n  R_deepest / R_1 {interval(out['fall'])}, "
            f"below {out['fall_below']} needed; {out['n_seeds']} seeds, {out['depths']} depths\n  estimands: {estimands}")
