"""Sphinx settings for the results website, built by `make site` into build/site/.

The pages are the executed notebooks as they lie in outputs/<notebook>/<notebook>.ipynb and
outputs/REPORT.md, staged with website/index.md in build/site-src/ by the Makefile. Nothing is
executed: the figures are the notebooks' own saved outputs.
"""

project = "Inverse-depth scaling in attention: reproduction results"
author = "icl reproduction"
extensions = ["myst_nb"]
root_doc = "index"

# Only these become pages; the tables and figure files beside each notebook stay plain files
# (a figure that REPORT.md shows is copied into the site as an image).
include_patterns = ["index.md", "REPORT.md", "[0-9][0-9]_*/[0-9][0-9]_*.ipynb"]

# The committed outputs are the results: never re-run a cell to build the site.
nb_execution_mode = "off"
myst_enable_extensions = ["dollarmath"]
# REPORT.md links to repository files outside the site (docs/, the JSON timings): those links
# cannot resolve here and are not pages of the site.
suppress_warnings = ["myst.xref_missing"]

html_theme = "sphinx_book_theme"
html_title = "Inverse-depth scaling: results"
html_copy_source = False  # the notebooks are megabytes each; their source stays in outputs/
html_show_sourcelink = False
html_theme_options = {"show_toc_level": 2}
