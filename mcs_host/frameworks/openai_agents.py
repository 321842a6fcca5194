"""Placeholder: being written."""

from __future__ import annotations

from typing import Any

__all__ = ["openai_agents_tools"]


def openai_agents_tools(*args: Any, **kwargs: Any) -> Any:
    """Being written."""
    raise NotImplementedError
