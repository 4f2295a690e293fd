"""Markdown that renders as written, and the templates REPORT.md and the README's generated block are
filled from (report.md.tmpl). Text from the results (claim texts, check and number names) holds
characters that Markdown reads as syntax (a `|` ends a table cell, `*` and `[` start emphasis and
links): `escape` makes them literal, so a cell shows what the results say and a row keeps its header's
cell count."""
from __future__ import annotations

import re
from pathlib import Path
from string import Template

MAX_CELL = 200  # characters a reader sees in one table cell, at most

# What can start Markdown syntax inside a line: `\`, code, emphasis, HTML, a table cell's end,
# strikethrough; `]` only before `(`, `[` or `:` (the rest of a link); `&` only as an entity. An
# underscore between two letters or digits opens no emphasis (CommonMark's flanking rules), so
# `R_deepest` and `[0.71, 0.73]` stay as they are.
_SPECIAL = re.compile(r"[\\`*<|~]|&(?=#?\w+;)|\](?=[(\[:])|(?<![0-9A-Za-z])_|_(?![0-9A-Za-z])")
# A heading, quote, list item or thematic break where the text starts a line ("-0.24" is none).
_LINE_START = re.compile(r"^(\s*)(>|(?:#{1,6}|[-+]|\d{1,9}(?=[.)]))(?=[.)]?(?:\s|$)))")

# report.md.tmpl's blocks: "-- name" lines, each followed by its text (its file says how it ends)
_BLOCKS = re.split(r"^-- (\w+)\n", Path(__file__).with_name("report.md.tmpl").read_text(), flags=re.M)
TEMPLATES = {name: Template(text[:-1]) for name, text in zip(_BLOCKS[1::2], _BLOCKS[2::2])}


def fill(block: str, /, **values) -> str:
    """A block of report.md.tmpl filled with `values`; one left unfilled raises (no stray `$` in the report)."""
    return TEMPLATES[block].substitute(values)


def escape(text) -> str:
    """`text` as literal Markdown inline text: syntax characters backslash-escaped, newlines as spaces."""
    text = _SPECIAL.sub(lambda m: "\\" + m.group(0), " ".join(str(text).split("\n")))
    return _LINE_START.sub(lambda m: m.group(1) + (m.group(2) + "\\" if m.group(2)[0].isdigit() else "\\" + m.group(2)), text)


def cell(text) -> str:
    """Plain text as a table cell: cut to MAX_CELL characters with an ellipsis (the reader's length, so
    before escaping), then escaped."""
    text = str(text)
    return escape(text if len(text) <= MAX_CELL else text[: MAX_CELL - 1].rstrip() + "…")


def table(header: list[str], rows: list[list[str]]) -> str:
    """A GitHub table from cells already in Markdown (`cell` for plain text, or a link). A row without
    the header's cell count is a bug here, not something to pad."""
    for row in rows:
        if len(row) != len(header):
            raise ValueError(f"table row {row!r} has {len(row)} cells; its header has {len(header)}")
    return "\n".join(["| " + " | ".join(header) + " |", "|" + "---|" * len(header)] + ["| " + " | ".join(r) + " |" for r in rows]) + "\n"
