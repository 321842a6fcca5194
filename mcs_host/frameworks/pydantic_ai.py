"""Placeholder: being written."""

from __future__ import annotations

from typing import Any

__all__ = ["pydantic_ai_toolset"]


def pydantic_ai_toolset(*args: Any, **kwargs: Any) -> Any:
    """Being written."""
    raise NotImplementedError
