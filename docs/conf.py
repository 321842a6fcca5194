"""Sphinx configuration of the mcs-host documentation site (pages in Markdown, read by MyST).

Build it strictly, as the tests do: ``python -m sphinx -W -n -b html docs docs/_build/html``.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
from pathlib import Path
from typing import Any

from sphinx.util.nodes import make_refnode

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import mcs_host  # noqa: E402
from mcs_host import __version__  # noqa: E402

project = "mcs-host"
author = "the mcs-host developers"
copyright = "the mcs-host developers, Apache-2.0"
release = version = __version__

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
]
source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build"]

myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3

html_theme = "furo"
html_title = f"mcs-host {release}"

# the Python API page: signatures as written, members in source order
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_preserve_defaults = True

# every cross-reference must resolve (-n), but names from outside the package (the standard
# library, pydantic, pluggy...) have no inventory here: the build runs without network
nitpicky = True
nitpick_ignore_regex = [
    (r"py:.*", r"(typing|collections|collections\.abc|pathlib|os|io|types|enum|asyncio)\..*"),
    (r"py:.*", r"(pydantic|pluggy|packaging|typer|mcp|cryptography|importlib)(\..*)?"),
    (r"py:.*", r"(Any|Self|Callable|Mapping|Sequence|Iterable|Iterator|Awaitable|Literal)"),
    (r"py:.*", r"(str|int|float|bool|bytes|dict|list|tuple|set|frozenset|object|type|None)"),
    (r"py:.*", r"(BaseException|Exception|ValueError|TypeError|RuntimeError|OSError)"),
    (r"py:.*", r"(NoneType|TextIO|BinaryIO|PathLike|Path|TypeAlias|TypeVar|ParamSpec|T|P)"),
    (r"py:.*", r"(annotated_types|jsonschema|openai|anthropic|google|ollama|starlette)\..*"),
    (r"py:.*", r"(abc|datetime)\..*|Ed25519PrivateKey|Ed25519PublicKey|_Pydantic\w*"),
    # a generic type in a signature, split by Sphinx at its comma (``dict[str, Any]``)
    (r"py:class", r".*\[.*"),
]


def _by_suffix(app: Any, env: Any, node: Any, contnode: Any) -> Any:
    """A docstring's short name (``ToolCall``, ``Host.load``, ``mcs_host.Orchestrator``: the
    public path) resolved to the one documented object whose full name ends with it, the
    docstring's own class tried first. A name of the package that is not on the site (a
    private stage, a constant) is shown as code when it names one object that exists; any
    other name is left unresolved: a warning, which the strict build fails on."""
    if node.get("refdomain") != "py":
        return None
    target = node["reftarget"].lstrip(".~")
    objects = env.get_domain("py").objects
    tails = [target.removeprefix("mcs_host.")]
    if node.get("py:class"):
        tails.insert(0, f"{node['py:class']}.{tails[0]}")
    for tail in tails:
        found = [
            name
            for name, entry in objects.items()
            if (name == tail or name.endswith("." + tail)) and not entry.aliased
        ]
        if len(found) == 1:
            entry = objects[found[0]]
            docname = node["refdoc"]
            return make_refnode(app.builder, docname, entry.docname, entry.node_id, contnode)
    if any(len(_existing(tail)) == 1 for tail in tails):
        return contnode
    return None


def _existing(tail: str) -> set[int]:
    """The objects of the package whose dotted name ends with ``tail``, by identity."""
    names = _package_names().items()
    return {id(obj) for name, obj in names if name == tail or name.endswith("." + tail)}


_NAMES: dict[str, Any] = {}


def _package_names() -> dict[str, Any]:
    """Every module of mcs_host, and every name each defines (classes' members too)."""
    if not _NAMES:
        for info in pkgutil.walk_packages(mcs_host.__path__, "mcs_host."):
            if info.name.endswith("__main__"):
                continue  # runs the command line
            try:
                module = importlib.import_module(info.name)
            except ModuleNotFoundError:  # an optional dependency (pytest, mcp) not installed
                continue
            _NAMES[info.name] = module
            for name, value in vars(module).items():
                _NAMES[f"{info.name}.{name}"] = value
                if isinstance(value, type) and value.__module__ == info.name:
                    fields = getattr(value, "model_fields", None) or {}  # a pydantic model's
                    for member in [*vars(value), *fields]:
                        _NAMES[f"{info.name}.{name}.{member}"] = getattr(value, member, member)
    return _NAMES


def setup(app: Any) -> None:
    app.connect("missing-reference", _by_suffix)
