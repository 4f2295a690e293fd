"""The closest known name to a mistyped one, for the one-line errors that refuse an unknown key or
parameter (a notebook's, a sweep file's, a run config's, `icl reproduce -p`)."""
from __future__ import annotations

import difflib
from collections.abc import Iterable


def did_you_mean(name: object, known: Iterable[str]) -> str:
    """"; did you mean 'x'?" for the known name closest to `name`, or "" where none is close."""
    close = difflib.get_close_matches(str(name)[:200], sorted(known), n=1)
    return f"; did you mean {close[0]!r}?" if close else ""
