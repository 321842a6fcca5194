"""The names of the ``--json`` documents' schemas, kept apart from their typed definitions
(:mod:`.documents`) so ``list --no-verify --json`` imports neither typing_extensions nor more."""

__all__ = ["SCHEMA_VERSION", "schema_urn"]

SCHEMA_VERSION = 1
"""Goes up when a key is removed or changes meaning, not when one is added."""


def schema_urn(command: str) -> str:
    """The URN a command's ``--json`` document names in its ``"schema"`` key."""
    return f"urn:mcs-host:cli:{command}:{SCHEMA_VERSION}"
