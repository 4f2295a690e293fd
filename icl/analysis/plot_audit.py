"""What a referee checks in a figure before reading it, as a list of problems: text too small to
read, panels without axis labels or without data, and kinds of line or marker that no legend names.
`notebook.save_figure` warns with it; tests/running/test_figures.py asserts it is empty."""
from __future__ import annotations

from matplotlib.container import ErrorbarContainer
from matplotlib.text import Text

from .plots import SMALLEST_FONT

BLANK = {"None", "none", " ", "", None}


def kind(line) -> tuple:
    """A line's kind as a reader tells it apart: its dash pattern, its marker and whether the
    marker is hollow (colour tells sweeps apart, and each sweep is named by its own entry)."""
    ls, marker = line.get_linestyle(), line.get_marker()
    return ("" if ls in BLANK else ls, "" if marker in BLANK else marker,
            str(line.get_markerfacecolor()).lower() == "none" and marker not in BLANK)


def legend_labels(fig) -> set[str]:
    legends = [ax.get_legend() for ax in fig.axes] + list(fig.legends)
    return {t.get_text() for leg in legends if leg is not None for t in leg.get_texts()}


def _has_data(ax) -> bool:
    return any(a.get_visible() for a in [*ax.lines, *ax.collections, *ax.patches, *ax.images])


def _small_texts(fig) -> list[str]:
    return [f"text {t.get_text()[:30]!r} at {t.get_fontsize():.1f} pt < {SMALLEST_FONT}" for t in fig.findobj(Text)
            if t.get_visible() and t.get_text().strip() and (t.axes is None or t.axes.get_visible())
            and t.get_fontsize() < SMALLEST_FONT - 1e-9]


def _labelled(fig, ax, which: str) -> bool:
    """ax's own label, the figure's (supxlabel/supylabel), or one of a panel sharing that axis in
    the same column (x) or row (y) of its grid: a shared label per row or column is enough."""
    if getattr(ax, f"get_{which}label")():
        return True
    sup = getattr(fig, f"_sup{which}label", None)
    if sup is not None and sup.get_text():
        return True
    spec = ax.get_subplotspec()
    if spec is None:
        return False
    span = (lambda s: tuple(s.colspan)) if which == "x" else (lambda s: tuple(s.rowspan))
    shared = getattr(ax, f"get_shared_{which}_axes")()
    return any(getattr(o, f"get_{which}label")() for o in fig.axes if o is not ax and o.get_visible()
               and shared.joined(ax, o) and o.get_subplotspec() is not None and span(o.get_subplotspec()) == span(spec))


def _unnamed_kinds(fig) -> list[str]:
    """Kinds of line or marker drawn but in no legend of the figure (a label in a legend names
    its artists' kind; an error bar's points are named by its container, its caps by its points)."""
    named = legend_labels(fig)
    drawn, covered = set(), set()
    for ax in (a for a in fig.axes if a.get_visible()):
        holder = {id(part): c for c in ax.containers if isinstance(c, ErrorbarContainer) for part in c.get_children()}
        for line in ax.lines:
            if not line.get_visible() or len(line.get_xdata()) == 0:
                continue
            c = holder.get(id(line))
            if c is not None and line is not c.lines[0]:
                continue  # a cap
            (covered if (c or line).get_label() in named else drawn).add(kind(line))
    if not named and len(drawn) <= 1:
        return []  # one kind of line and no legend: the axis labels name it
    return [f"a line or marker {k} in no legend" for k in sorted(drawn - covered)]


def figure_problems(fig) -> list[str]:
    """Everything in fig a reader of a paper would send back, one line each; [] when none."""
    problems = _small_texts(fig)
    for i, ax in enumerate(fig.axes):
        if not ax.get_visible() or ax.get_label() == "<colorbar>":
            continue
        name = f"panel {i} ({ax.get_title()[:30]!r})"
        if not _has_data(ax):
            problems.append(f"{name} is empty")
            continue
        problems += [f"{name} has no {w} label" for w in "xy" if not _labelled(fig, ax, w)]
    return problems + _unnamed_kinds(fig)
