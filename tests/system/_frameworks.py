"""What the agent frameworks' tests share (the fixtures are in this directory's conftest.py)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from mcs_host import Loaded


@dataclass(frozen=True)
class AgentStack:
    """A load as an agent framework gets it, and what its tools touch."""

    loaded: Loaded
    data: Path
    """The csv driver's root: a copy of scripts/demo/data (sales.csv...)."""
    marker: Path
    """What the gated server's tool ``wipe`` appends to: absent until a call of it runs."""
