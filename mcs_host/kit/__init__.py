"""The driver author's kit: helpers for writing, scaffolding, testing and checking a driver.

A driver imports only what this package exports (``from mcs_host.kit import
tool_from_model, parse_arguments, manifest_meta, report_progress``); the scaffold, conformance
checks, test instances, pytest plugin and release tools live in its submodules and are
imported by name.
"""

from mcs_host.interfaces import report_progress

from .authoring import manifest_meta, parse_arguments, tool_from_model

__all__ = ["manifest_meta", "parse_arguments", "report_progress", "tool_from_model"]
