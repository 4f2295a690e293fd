"""Markdown that renders as written: plain text escaped for CommonMark and GitHub's tables, and
tables whose cells stay short. REPORT.md and the README's generated block are built from these.

Text from the results (claim texts, check and number names) holds characters that Markdown reads
as syntax: a `|` ends a table cell, `*` and `[` start emphasis and links. `escape` makes them
literal, so a cell shows what the results say and a row keeps its header's cell count.
"""
from __future__ import annotations

import re

MAX_CELL = 200  # characters a reader sees in one table cell, at most

# What can start Markdown syntax inside a line: `\`, code, emphasis, HTML, a table cell's end,
# strikethrough; `]` only before `(`, `[` or `:` (the rest of a link); `&` only as an entity. An
# underscore between two letters or digits opens no emphasis (CommonMark's flanking rules), so
# `R_deepest` and `[0.71, 0.73]` stay as they are.
_SPECIAL = re.compile(r"[\\`*<|~]|&(?=#?\w+;)|\](?=[(\[:])|(?<![0-9A-Za-z])_|_(?![0-9A-Za-z])")
# A heading, quote, list item or thematic break where the text starts a line ("-0.24" is none).
_LINE_START = re.compile(r"^(\s*)(>|(?:#{1,6}|[-+]|\d{1,9}(?=[.)]))(?=[.)]?(?:\s|$)))")


def escape(text) -> str:
    """`text` as literal Markdown inline text: syntax characters backslash-escaped, newlines as spaces."""
    text = _SPECIAL.sub(lambda m: "\\" + m.group(0), " ".join(str(text).split("\n")))
    return _LINE_START.sub(lambda m: m.group(1) + (m.group(2) + "\\" if m.group(2)[0].isdigit() else "\\" + m.group(2)), text)


def clip(text: str, limit: int = MAX_CELL) -> str:
    """Plain text cut to `limit` characters with an ellipsis (before escaping: the reader's length)."""
    text = str(text)
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def cell(text) -> str:
    """Plain text as a table cell: clipped to MAX_CELL characters, then escaped."""
    return escape(clip(text))


def table(header: list[str], rows: list[list[str]]) -> str:
    """A GitHub table from cells already in Markdown (`cell` for plain text, or a link). Every row
    must have the header's cell count: a short or long row is a bug here, not something to pad."""
    width = len(header)
    for row in rows:
        if len(row) != width:
            raise ValueError(f"table row {row!r} has {len(row)} cells; its header has {width}")
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * width]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines) + "\n"
