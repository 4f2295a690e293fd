"""One claim in REPORT.md, rendered from its record (results.json, `icl.claims.claim`): its row in the
table that opens the report (status, the check that decided it with the numbers that check reads, the
figure) and its section (report.md.tmpl's `claim`: the numbers it was judged on, its checks, each marked).
What a record says (its checks, numbers, ranks, the deciding check) is read by `icl.claims.records`;
this module only words and lays it out.
"""
from __future__ import annotations

import math
import os
from pathlib import Path

from ..claims import kind, status_text
from ..claims.records import deciding, is_estimate, leaves, outcome, parts, read, read_names, split, sweep_check, value_of
from .markdown import cell, escape, fill, table

MARKS = {True: "✓", False: "✗", None: "inconclusive:"}
SHORT = {"partly reproduced": "partly", "not reproduced": "not"}  # a rank's status beside the claim's
# Each claim in a few words, for the table that opens REPORT.md and the README (its statement is in
# its section): a reader of the table alone sees what was judged. A claim not named here shows the
# name of its core check.
TITLES = {"C1": "linear, easy task: power law between its references", "C2": "softmax, easy task: solved in one layer",
          "C3": "linear, top-2: plateau by depth 2", "C4": "softmax, top-2: loss ~ 1/L",
          "C5": "shared error sets the floor, gamma ~ 1", "C6a": "linear learns strong modes first",
          "C6b": "softmax learns all modes alike", "C7": "shared stream, untied values: ~ 1/L",
          "C8": "context updates: top-2 ~ 1/L, wide top-k flat", "C9": "depth cuts the upper tail of selection",
          "C10": "joint spectra and wide top-k also fall", "R1": "one full-rank layer = the softmax bound",
          "R2": "full rank: depth adds little", "R3": "rank-limited: ~ 1/L towards the bound",
          "R4a": "random subspaces match the trained curves", "R4b": "complementary subspaces match them",
          "R5": "layers choose complementary subspaces", "R6": "frozen tiling matches the trained stack",
          "R7": "heads and layers interchangeable (L h)", "R8": "h k = d: depth buys little",
          "R9": "looped stacks keep half the gain"}


def number(v) -> str:
    """A recorded value in words: 3 significant digits, an estimate with its 95 % interval
    ('0.721 [0.712, 0.731]'), yes/no for a flag, n/a for a missing number; a number at several depths
    as its smallest and largest, named ('0.0583 [...] (L=4) to 0.154 [...] (L=64)')."""
    if is_estimate(v):
        lo, hi = v["ci95"] or (None, None)
        return number(v["value"]) + (f" [{number(lo)}, {number(hi)}]" if lo is not None and hi is not None else "")
    if isinstance(v, bool) or v is None:
        return {True: "yes", False: "no", None: "n/a"}[v]
    if isinstance(v, float):
        return f"{v:.3g}"
    if isinstance(v, list):
        return ("; " if any(is_estimate(x) for x in v) else ", ").join(number(x) for x in v)
    if isinstance(v, dict):
        items = sorted(((k, x) for k, x in v.items() if leaves(x) and math.isfinite(value_of(x))), key=lambda kx: value_of(kx[1]))
        return f"{number(items[0][1])} ({items[0][0]}) to {number(items[-1][1])} ({items[-1][0]})" if items else "n/a"
    return str(v)


def seeds(values) -> str:
    return ", ".join(map(str, sorted({x["n_seeds"] for v in values for x in leaves(v) if is_estimate(x)})))


def reads(check: str, numbers: list, brief: bool = False) -> str:
    """The numbers `check` reads, in words ('' where READS does not know the check); `brief`: a range
    of several values without their intervals (one value keeps its interval)."""
    word = (lambda x: number(value_of(x))) if brief else number  # noqa: E731
    out = []
    for name, found, unread in read(check, numbers):
        values = sorted((x for x in found if math.isfinite(value_of(x))), key=value_of)  # a fit that gave none is null
        unread = [f"not identified in {unread}"] if unread else []
        if len(found) == 1:
            out.append("; ".join([f"{name} {number(found[0])}"] + unread))
        elif values:
            missing = [f"{len(found) - len(values)} without one"] if len(values) < len(found) else []
            counts = ", ".join([f"{len(values)} values"] + missing + unread)
            out.append(f"{name} {word(values[0])} to {word(values[-1])} ({counts})")
        elif unread:
            out.append(f"{name} {unread[0]}")
    return "; ".join(out)


def check_text(name: str, v, numbers: list | None = None) -> str:
    """'✗ alpha near 1: alpha 0.721 [0.712, 0.731] to 1.04 [1.02, 1.05] (3 values)' (plain text)."""
    sweep, check = sweep_check(name)
    text = f"{MARKS[outcome(v)]} " + (f"{sweep}: {check}" if sweep else check)
    if isinstance(v, list):
        text += f" ({sum(x is True for x in v)} of {len(v)} cells hold)"
    detail = reads(name, numbers) if numbers is not None else ""
    return text + (f": {detail}" if detail else "")


# ---------------------------------------------------------------- what the report shows


def short_status(record: dict) -> str:
    """A status in a word or two: 'reproduced', 'partly', 'not reproduced', 'inconclusive (budget)'."""
    return {"partly reproduced": "partly"}.get(record["status"], record["status"]) + (" (budget)" if record.get("budget") else "")


def rank_statuses(record: dict) -> list[str]:
    """Each rank's status in a word, 'k=4 not', for a claim judged per rank (none otherwise)."""
    return [f"{k} {SHORT.get(r['status'], r['status'])}" for k, r in parts(record) if k is not None]


def glance_status(record: dict) -> str:
    """The claim's status and, where it is judged at several ranks, each rank's: 'inconclusive (k=4 not,
    k=12 inconclusive)', so that a row agrees with an answer that speaks of one rank."""
    ranks = rank_statuses(record)
    return short_status(record) + (f" ({', '.join(ranks)})" if len(ranks) > 1 else "")


def core_criterion(record: dict) -> str:
    """What the core check asks, from the criterion's 'core: ...' clause without its asides in
    parentheses: 'R_deepest / R_1 < 0.9 and |alpha - 1| <= 0.25 for the primary model'."""
    text = record["criterion"].split("; ")[0].removeprefix("core: ")
    out, depth = "", 0
    for i, ch in enumerate(text):  # an aside opens with " (" and ends at its matching ")"; R(L, h) stays
        if ch == "(" and (depth or text[i - 1:i] == " "):
            depth += 1
        if not depth:
            out += ch
        if ch == ")" and depth:
            depth -= 1
    return " ".join(out.split()).replace(" ,", ",")


def figure_link(root: Path, base: Path, figure: str) -> str:
    """A Markdown link relative to the report; a figure that is not on disk is said to be missing."""
    name, path = escape(Path(figure).name), root / figure
    return f"[{name}]({os.path.relpath(path, base)})" if path.exists() else f"{name} (missing: rerun its notebook)"


def deciding_number(record: dict) -> str:
    """The numbers that decided a claim, where, whole: 'k=12: alpha (primary model) 0.9 to 1.01 (3 values)'
    (a range without its intervals: REPORT.md's section has them)."""
    rank, name, _, numbers = deciding(record)
    return (f"{rank}: " if rank else "") + (reads(name, numbers, brief=True) or name if name else "no check recorded")


def compact_table(rows: list[dict], root: Path, outputs: Path, doc: Path) -> str:
    """The claims at a glance, for a document in folder `doc`: id and the claim in a few words, status
    (per rank where judged per rank), the numbers that decided it and what its core check asks of them,
    its figure and its executed notebook (in `outputs`), linked where it is."""
    def notebook(name):
        executed = outputs / name / f"{name}.ipynb"
        return f"[{escape(name[:2])}]({os.path.relpath(executed, doc)})" if executed.is_file() else escape(name[:2])

    body = [[f"{cell(c['id'])}: {cell(TITLES.get(c['id'], c.get('core', '')))}", cell(glance_status(c)),
             cell(deciding_number(c)), cell(core_criterion(c)), figure_link(root, doc, c["figure"]),
             notebook(c["notebook"]) if c.get("notebook") else ""] for c in rows]
    return table(["claim", "status", "deciding number", "core check", "figure", "notebook"], body)


def number_tables(record: dict) -> list[str]:
    """The numbers a claim was judged on: one table per set of rows (spectra, cells, ranks), a
    column per number with its 95 % interval, and a column of ✓/✗ for a check made per cell."""
    ranked, groups, scalars = parts(record), {}, []
    for rank, part in ranked:
        checks, numbers = split(part["measured"])
        by_name: dict[str, dict] = {}
        for case, name, v in numbers:
            if case is None and rank is None:
                scalars.append((name, v))
            else:
                by_name.setdefault(name, {})[", ".join(x for x in (rank, case) if x)] = v
        for name, v in checks.items():  # a check per cell: a column beside the number it reads in every case
            read = next((by_name[n] for within, n in read_names(name) if not within and n in by_name), None)
            if isinstance(v, list) and len(read or ()) == len(v):
                by_name[name] = dict(zip(read, (MARKS[x] for x in v)))
        sets: dict[tuple, list] = {}
        for name, values in by_name.items():
            sets.setdefault(tuple(values), []).append(name)
        for cases, names in sets.items():
            groups.setdefault(tuple(names), []).extend((c, {n: by_name[n][c] for n in names}) for c in cases)
    out = [_table(names, rows, ranked[0][0] is not None) for names, rows in groups.items()]
    if any(seeds([v]) for _, v in scalars):
        out.append(table(["number", "value [95 %]", "seeds"], [[cell(name), cell(number(v)), seeds([v])] for name, v in scalars]))
    elif scalars:  # flags and counts only: a line, not a table
        out.append("Also recorded: " + escape("; ".join(f"{name} {number(v)}" for name, v in scalars)) + ".\n")
    return out


def _table(names: tuple, rows: list, ranked: bool) -> str:
    # a ranked row's label is "k=4" or "k=4, (a, b) = (0, 0)": the rank, then what the rest names
    first = "k" + "".join(f", {kind(rest)}" for rest in rows[0][0].split(", ", 1)[1:]) if ranked else kind(rows[0][0])
    with_seeds = any(seeds(values.values()) for _, values in rows)
    header = [first] + [cell(n) for n in names] + (["seeds"] if with_seeds else [])
    body = [[cell(case)] + [cell(number(values[n])) for n in names] + ([seeds(values.values())] if with_seeds else [])
            for case, values in rows]
    return table(header, body)


def checks_lines(record: dict) -> list[str]:
    """Each check marked, with the numbers it reads; for a claim judged per rank, a line per rank with
    the checks of one sweep after its name once: 'k=4, reproduced: shared stream, top-2: ✓ falls · ✗ alpha near 1'."""
    lines = []
    for rank, part in parts(record):
        checks, numbers = split(part["measured"])
        if rank is None:
            lines += [escape(check_text(name, v, numbers)) for name, v in checks.items()]
            continue
        sweeps: dict[str, list] = {}
        for name, v in checks.items():
            sweep, check = sweep_check(name)
            sweeps.setdefault(sweep or "", []).append(check_text(check, v))
        marks = "; ".join((f"{sweep}: " if sweep else "") + " · ".join(m) for sweep, m in sweeps.items())
        lines.append(f"{escape(rank)}, {escape(status_text(part))}: {escape(marks)}")
    return lines


def section(record: dict, root: Path, base: Path) -> str:
    """A claim's section (report.md.tmpl's `claim`, which ends without a newline): its text, criterion
    and figure, its numbers and its checks."""
    ranks = rank_statuses(record)
    return fill("claim", id=escape(record["id"]), status=escape(status_text(record) + (f" ({', '.join(ranks)})" if ranks else "")),
                claim=escape(record["claim"]), criterion=escape(record["criterion"]),
                figure=figure_link(root, base, record["figure"]), tables="".join(t + "\n" for t in number_tables(record)),
                checks="".join(f"\n- {line}" for line in checks_lines(record)))
