"""REPORT.md reads as written once rendered: parsed by a CommonMark renderer with GitHub's tables
(markdown-it-py), every table row has its header's cell count, no cell shows more than 200
characters, no Python repr (`between references = False`) shows, and every link and image opens a
file of the repository. Checked on the committed report and README, and on a report made from
claims whose texts hold Markdown syntax (`|Q| |K|`), which an unescaped table cuts apart."""
import importlib
import json
import re
from pathlib import Path

from conftest import ROOT
from markdown_it import MarkdownIt

from icl.running.markdown import MAX_CELL
from icl.running.reproduce import write_report

# The renderer's own splitter of a table row into cells (`\|` is a literal pipe, `|` ends a cell).
escaped_split = importlib.import_module("markdown_it.rules_block.table").escapedSplit
REPR = re.compile(r"= (True|False|None)\b|\[(True|False|None)\b|\{[^}]*: ")


def _renderer() -> MarkdownIt:
    return MarkdownIt("commonmark").enable(["table", "strikethrough"])


def _cells(line: str) -> list[str]:
    """A table row's cells as the renderer splits them (leading and trailing pipes dropped)."""
    cells = escaped_split(line.strip())
    return cells[1 if cells and not cells[0].strip() else 0: -1 if len(cells) > 1 and not cells[-1].strip() else None]


def _text(inline) -> str:
    """What a reader sees of an inline token: its text, code and line breaks, without markup."""
    return "".join(t.content if t.type in ("text", "code_inline") else " " if "break" in t.type else ""
                   for t in inline.children or [])


def problems(path: Path, root: Path) -> list[str]:
    """Everything a reader of the rendered `path` would trip on, one line each."""
    text = path.read_text()
    lines = text.splitlines()
    tokens = _renderer().parse(text)
    found, in_cell = [], False
    for i, t in enumerate(tokens):
        if t.type == "table_open":
            start, end = t.map
            rows = [n for n in range(start, end) if n != start + 1]  # the delimiter row is not a row
            width = len(_cells(lines[start]))
            found += [f"line {n + 1}: {len(_cells(lines[n]))} cells, header has {width}" for n in rows
                      if len(_cells(lines[n])) != width]
        if t.type == "ordered_list_open":  # none is meant: a hard wrap before "1. " makes one of a sentence
            found.append(f"line {t.map[0] + 1}: a numbered list: {lines[t.map[0]][:60]!r}")
        in_cell = t.type in ("th_open", "td_open") or (in_cell and t.type == "inline")
        if t.type == "inline":
            shown = _text(t)
            if in_cell and len(shown) > MAX_CELL:
                found.append(f"line {t.map[0] + 1}: a cell of {len(shown)} characters: {shown[:60]}...")
            if REPR.search(shown):
                found.append(f"line {t.map[0] + 1}: a Python repr: {REPR.search(shown).group(0)!r} in {shown[:80]!r}")
            for child in t.children or []:
                target = child.attrGet("href") if child.type == "link_open" else child.attrGet("src") if child.type == "image" else None
                if target is None or re.match(r"[a-z]+:|#", target):
                    continue
                file = (path.parent / target.split("#")[0]).resolve()
                if not file.is_file() or not file.is_relative_to(root.resolve()):
                    found.append(f"line {t.map[0] + 1}: link to {target}, no such file in the repository")
    return found


def test_the_committed_report_and_readme_render_as_written():
    for path in (ROOT / "outputs" / "REPORT.md", ROOT / "README.md"):
        assert problems(path, ROOT) == [], f"{path.name} renders badly"


def test_the_committed_report_opens_with_one_row_per_claim():
    text = (ROOT / "outputs" / "REPORT.md").read_text()
    claims = json.loads((ROOT / "outputs" / "claims.json").read_text())["claims"]
    tokens = _renderer().parse(text)
    start = next(i for i, t in enumerate(tokens) if t.type == "table_open")
    table = tokens[start:next(i for i, t in enumerate(tokens) if t.type == "table_close")]
    head = table[:next(i for i, t in enumerate(table) if t.type == "thead_close")]
    assert [_text(t) for t in head if t.type == "inline"] == ["claim", "status", "deciding number", "core check", "figure",
                                                              "notebook"]
    ids = [_text(t).split(":")[0] for i, t in enumerate(table) if t.type == "inline" and table[i - 1].type == "td_open"
           and table[i - 2].type == "tr_open"]  # "C4: softmax, top-2: loss ~ 1/L"
    assert ids == [c["id"] for c in claims]
    assert re.findall(r"^## .*", text, re.M)[:2] == ["## The answer", "## The claims at a glance"]  # as the README opens
    for c in claims:
        assert f"\n### {c['id']}: {c['status']}" in text, f"{c['id']} has no section"


def _estimate(value, lo, hi, seeds=3):
    return {"value": value, "ci68": [lo, hi], "ci95": [lo, hi], "n_seeds": seeds}


def _made_up_claims() -> dict[str, list[dict]]:
    """Claims as notebooks record them, with `|` in texts, number names and criteria."""
    cells = {"d16 P64 k4": _estimate(0.22, 0.21, 0.23), "d=8, P=32, key_dim=2": _estimate(0.12, 0.11, 0.13)}
    flat = {"id": "R4a", "claim": "Untrained ensembles follow the trained curves: the largest |R_L / baseline_L - 1| is small.",
            "criterion": "|R_L / baseline_L - 1| <= 0.15 in every cell; a*b and [x](y) are text", "status": "partly reproduced",
            "figure": "outputs/ci/07_mechanism/baselines.png",
            "measured": {"largest |R_L / baseline_L - 1|": cells, "cells within the tolerance": [False, True]}}
    norms = {"id": "C2", "claim": "Query/key norms |Q| |K| grow during training.", "criterion": "|Q| |K| end / start > 1.5",
             "status": "reproduced", "figure": "outputs/ci/07_mechanism/baselines.png",
             "measured": {"|Q| |K| end / start": {"(a, b) = (0, 0)": _estimate(3.7, 3.6, 3.8)}, "norm growth": True,
                          "converged": False}}
    ranked = {"id": "C10", "claim": "Top-16 exponents deviate more: mean |alpha - 1| is larger.", "criterion": "mean |alpha - 1| > 0",
              "status": "inconclusive", "range": ["partly reproduced", "reproduced"], "figure": "outputs/ci/07_mechanism/gone.png",
              "measured": {"holds (at least partly) in": ["key_dim 4"]},
              "regimes": {f"key_dim {k}": {"status": "partly reproduced",
                                           "measured": {"mean |alpha - 1|, top-16 minus top-2": _estimate(0.1 * k, 0.0, 0.2 * k),
                                                        "falls": True, "top-16 deviates more": None}} for k in (4, 8)}}
    return {"07_mechanism": [flat, norms], "03_difficult": [ranked]}


def test_a_report_of_claims_with_markdown_syntax_renders_as_written(tmp_path):
    base = tmp_path / "outputs" / "ci"
    for name, claims in _made_up_claims().items():
        (base / name).mkdir(parents=True)
        (base / name / "results.json").write_text(json.dumps({"claims": claims}))
    (base / "07_mechanism" / "baselines.png").write_bytes(b"png")

    report = write_report(tmp_path, "ci")

    assert problems(report, tmp_path) == []
    text = report.read_text()
    assert r"largest \|R_L / baseline_L - 1\|" in text and r"\|Q\| \|K\| grow" in text
    assert "✗ cells within the tolerance (1 of 2 cells hold)" in text
    assert "gone.png (missing: rerun its notebook)" in text
