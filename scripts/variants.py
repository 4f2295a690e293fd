"""Does `make test` survive another CPU? The whole suite under every variant of torch's CPU kernels
(ATEN_CPU_CAPABILITY), the thread count and the C kernels' build, and the spread of every number
the notebooks' regression cells print.

Variants: ATEN_CPU_CAPABILITY in default, avx2 and avx512 (where this CPU has it), OMP_NUM_THREADS
1 and 2, and icl's C kernels built with -march=native or portably (ICL_KERNEL_FLAGS=portable).
For each, the golden notebooks (tests/golden/*.ipynb, the ci profile) are executed with papermill
and the lines of their `# NBVAL_CHECK_OUTPUT` cells collected; with --suite, `make test`'s two
pytest commands run too. The table printed at the end gives, per checked number, its smallest and
largest value over the variants, and whether the printed line was the same under all of them.

    .venv/bin/python scripts/variants.py                 # checked numbers, every variant (~10 min)
    .venv/bin/python scripts/variants.py --suite         # and the whole suite under each (~1 h)
    .venv/bin/python scripts/variants.py --only default,1,portable avx512,2,native
"""
from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable


def capabilities() -> list[str]:
    flags = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    return ["default", "avx2"] + (["avx512"] if "avx512f" in flags else [])


def variants() -> list[tuple[str, str, str]]:
    return list(itertools.product(capabilities(), ("1", "2"), ("native", "portable")))


def environment(cap: str, threads: str, build: str) -> dict:
    env = {**os.environ, "ATEN_CPU_CAPABILITY": cap, "OMP_NUM_THREADS": threads, "MPLBACKEND": "Agg",
           "CUDA_VISIBLE_DEVICES": ""}  # CPU variants, as make test: a GPU would train the goldens' "auto"
    env["ICL_KERNEL_FLAGS"] = build
    return env


def checked_lines(env: dict, out: Path) -> dict[str, list[dict]]:
    """Execute every golden notebook (its parameters are baked in) and keep what its checked cells
    printed: per line, the text and its numbers unrounded (`notebook.show` records them)."""
    lines = {}
    for nb in sorted((ROOT / "tests" / "golden").glob("*.ipynb")):
        record = out / f"{nb.stem}.jsonl"
        subprocess.run([PY, "-m", "papermill", str(nb), str(out / nb.name), "--cwd", str(ROOT / "notebooks"),
                        "--no-progress-bar"], env={**env, "ICL_CHECKED_VALUES": str(record)}, check=True, capture_output=True)
        lines[nb.stem] = [json.loads(x) for x in record.read_text().splitlines()] if record.exists() else []
    return lines


def suite(env: dict) -> bool:
    """`make test`'s two commands (the Makefile's TESTENV sets one OpenMP thread; here the variant's)."""
    unit = subprocess.run([PY, "-m", "pytest", "tests", "-q", "-p", "no:cacheprovider"], cwd=ROOT, env=env)
    golden = sorted(str(p) for p in (ROOT / "tests" / "golden").glob("*.ipynb"))
    nbval = subprocess.run([PY, "-m", "pytest", "--nbval-lax", "--nbval-current-env", "-p", "no:cacheprovider", "-q",
                            *golden], cwd=ROOT, env=env)
    return unit.returncode == 0 and nbval.returncode == 0


def spread_table(collected: dict) -> list[dict]:
    """Per notebook, checked line and position: the smallest and largest unrounded number over the
    variants, and whether the printed line was the same under all of them."""
    rows = []
    first = next(iter(collected.values()))
    for nb, lines in first.items():
        for i, line in enumerate(lines):
            seen = [c[nb][i] for c in collected.values() if i < len(c[nb])]
            same = len({x["line"] for x in seen}) == 1 and len(seen) == len(collected)
            for j, value in enumerate(line["values"]):
                got = [x["values"][j] for x in seen if j < len(x["values"]) and isinstance(x["values"][j], float)]
                if got:
                    rows.append({"notebook": nb, "line": line["line"].split(":")[0], "position": j, "min": min(got),
                                 "max": max(got), "same text": same})
    return rows


def markdown(names: list[str], rows: list[dict], passed: dict) -> str:
    """Per notebook: how many numbers its checked cells print, the largest relative spread of one
    of them over the variants, and whether every printed line was the same; the suite per variant."""
    out = [f"# Checked numbers under {len(names)} variants", "", "Variants (ATEN_CPU_CAPABILITY, OMP_NUM_THREADS, "
           "C kernel build): " + "; ".join(names) + ".", "",
           "| notebook | checked numbers | largest relative spread | printed lines the same |", "|---|---|---|---|"]
    for nb in dict.fromkeys(r["notebook"] for r in rows):
        mine = [r for r in rows if r["notebook"] == nb]
        spread = max((r["max"] - r["min"]) / max(abs(r["max"]), 1e-300) for r in mine)
        out.append(f"| {nb} | {len(mine)} | {spread:.1e} | {'yes' if all(r['same text'] for r in mine) else '**no**'} |")
    if passed:
        out += ["", "`make test`'s two commands: " + "; ".join(f"{v} {'passed' if ok else '**failed**'}"
                                                          for v, ok in passed.items()) + "."]
    return "\n".join(out) + "\n"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--suite", action="store_true", help="also run make test's two commands under each variant")
    p.add_argument("--only", nargs="+", metavar="CAP,THREADS,BUILD", help="run only these variants")
    p.add_argument("--json", default="outputs/studies/variants.json", help="where the collected lines and the table go")
    args = p.parse_args()
    chosen = [tuple(v.split(",")) for v in args.only] if args.only else variants()
    collected, passed = {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        for cap, threads, build in chosen:
            name = f"{cap},{threads},{build}"
            print(f"variant {name} ...", flush=True)
            env = environment(cap, threads, build)
            out = Path(tmp) / name
            out.mkdir()
            collected[name] = checked_lines(env, out)
            if args.suite:
                passed[name] = suite(env)
    rows = spread_table(collected)
    varying = [r for r in rows if r["max"] != r["min"] or not r["same text"]]
    print(f"{len(rows)} checked numbers over {len(chosen)} variants; {len(varying)} vary:")
    for r in varying:
        rel = (r["max"] - r["min"]) / max(abs(r["max"]), 1e-300)
        print(f"  {r['notebook']} {r['line']}[{r['position']}]: {r['min']:.6g} .. {r['max']:.6g} (relative {rel:.1e}); "
              f"printed line {'the same' if r['same text'] else 'DIFFERS'}")
    if passed:
        print("suite: " + ", ".join(f"{v} {'passed' if ok else 'FAILED'}" for v, ok in passed.items()))
    Path(args.json).write_text(json.dumps({"variants": list(collected), "lines": collected, "table": rows,
                                           "suite": passed}, indent=1))
    Path(args.json).with_suffix(".md").write_text(markdown(list(collected), rows, passed))
    same = all(r["same text"] for r in rows)
    return 0 if same and all(passed.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
