"""Sphinx configuration of the mcs-host documentation site (pages in Markdown, read by MyST).

Build it strictly, as the tests do: ``python -m sphinx -W -n -b html docs docs/_build/html``.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mcs_host import __version__  # noqa: E402

project = "mcs-host"
author = "the mcs-host developers"
copyright = "the mcs-host developers, Apache-2.0"
release = version = __version__

extensions = ["myst_parser"]
source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build"]

myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3

html_theme = "furo"
html_title = f"mcs-host {release}"

# every cross-reference must resolve (-n); the Python API page is plain Markdown, generated
# by scripts/gen_cli_docs.py, so no page documents Python objects through Sphinx
nitpicky = True
