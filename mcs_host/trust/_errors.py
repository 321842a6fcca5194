"""The error every trust failure at import time is: kept apart so the gate and the loaders
share it without importing each other."""

__all__ = ["IntegrityError"]


class IntegrityError(ImportError):
    """A module may not be imported: it is not verified, or its bytes changed after
    verification."""
