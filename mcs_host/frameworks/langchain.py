"""Placeholder: being written."""

from __future__ import annotations

from typing import Any

__all__ = ["langchain_tools"]


def langchain_tools(*args: Any, **kwargs: Any) -> Any:
    """Being written."""
    raise NotImplementedError
