"""Placeholder: being written."""

from __future__ import annotations

from typing import Any

__all__ = ["llm_tools"]


def llm_tools(*args: Any, **kwargs: Any) -> Any:
    """Being written."""
    raise NotImplementedError
