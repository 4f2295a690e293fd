"""Sphinx settings for the results website, built by `make site` into build/site/.

The pages are website/index.md (with the README's answer), outputs/REPORT.md, the executed notebooks
as they lie in outputs/<notebook>/<notebook>.ipynb and docs/*.md, staged in build/site-src/ by the
Makefile with the repository's own layout. Nothing is executed: the figures are the notebooks' own
saved outputs. The build is strict (`-W`): a link that resolves to nothing fails it.
"""
import json

project = "Inverse-depth scaling in attention: reproduction results"
author = "icl reproduction"
extensions = ["myst_nb"]
root_doc = "index"

# Only these become pages; a figure or a JSON file that a page links to is copied into the site as
# an image or a download.
include_patterns = ["index.md", "outputs/REPORT.md", "outputs/[0-9][0-9]_*/[0-9][0-9]_*.ipynb", "docs/*.md",
                    "outputs/studies/*.md",
                    "outputs/paper_slice/REPORT.md", "outputs/paper_slice/[0-9][0-9]_*/[0-9][0-9]_*.ipynb"]  # C4 at the paper's (d, P)

# The committed outputs are the results: never re-run a cell to build the site.
nb_execution_mode = "off"
myst_enable_extensions = ["dollarmath"]
myst_heading_anchors = 3  # links to a section (#the-answer) resolve as on GitHub

html_theme = "sphinx_book_theme"
html_title = "Inverse-depth scaling: results"
html_copy_source = False  # the notebooks are megabytes each; their source stays in outputs/
html_show_sourcelink = False
html_theme_options = {"show_toc_level": 2}


def one_parameter_cell(app, docname, source):
    """An executed notebook holds its own parameter cell and papermill's injected one, whose values
    are the run's: the page shows the injected one only, so that no value appears twice."""
    if not str(app.env.doc2path(docname)).endswith(".ipynb"):
        return
    nb = json.loads(source[0])
    tags = [cell.get("metadata", {}).get("tags", []) for cell in nb["cells"]]
    if any("injected-parameters" in t for t in tags):
        nb["cells"] = [c for c, t in zip(nb["cells"], tags) if "parameters" not in t]
        source[0] = json.dumps(nb)


def setup(app):
    app.connect("source-read", one_parameter_cell)
