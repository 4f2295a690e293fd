"""The README's generated block: `icl reproduce` (or `icl report`, which runs nothing) writes the
claims table and the headline numbers (icl.claims.headline) into README.md between the BEGIN and END
markers, so that the README's numbers are the last run's."""
from __future__ import annotations

import re
from pathlib import Path

from ..claims.headline import alpha_answer, c4_table
from .claim_report import compact_table
from .files import write_atomic

BEGIN, END = "<!-- results: generated from outputs/ by `icl reproduce` or `icl report`; edits here are overwritten -->", "<!-- /results -->"


def readme_block(root: Path, base: Path, rows: list[dict]) -> str:
    """What README.md shows between its markers: the claims at a glance, then the headline question
    and C4's exponents (the mechanism's table and each claim's numbers are REPORT's)."""
    parts = [compact_table(rows, root, base, root) if rows else "",
             "Each claim's core check decides it (its rule, criterion and numbers: [outputs/REPORT.md](outputs/REPORT.md)).\n",
             alpha_answer(base).rstrip("\n") + "\nC4's exponents (notebook 03, d = 16, P = 64, isotropic spectrum; m = "
             "lcm(d, k)/k, the knee; the rule and its calibration on curves of known exponent: "
             "[docs/statistics.md](docs/statistics.md)):\n",
             c4_table(base)]
    return "\n".join(p for p in parts if p.strip()).rstrip("\n")


def update_readme(root: Path, block: str) -> bool:
    """Replace what README.md holds between BEGIN and END with `block`; False where it has no markers."""
    readme = root / "README.md"
    text = readme.read_text() if readme.exists() else ""
    pattern = re.compile(re.escape(BEGIN) + ".*?" + re.escape(END), re.S)
    if not pattern.search(text):
        return False
    write_atomic(readme, pattern.sub(lambda _: f"{BEGIN}\n{block}\n{END}", text))
    return True
