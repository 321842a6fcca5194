"""Where the host keeps what it writes: its state (a trust root) and its cache (not one)."""

from __future__ import annotations

import os

__all__ = ["cache_directory", "state_directory"]


def state_directory() -> str:
    """Where the host keeps what it accepted: ``$MCS_HOST_STATE_DIR``, else
    ``$XDG_STATE_HOME/mcs-host``, else ``~/.local/state/mcs-host``."""
    return os.environ.get("MCS_HOST_STATE_DIR") or os.path.join(
        os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state"), "mcs-host"
    )


def cache_directory() -> str:
    """Where the host keeps what it can make again: ``$MCS_HOST_CACHE_DIR``, else
    ``$XDG_CACHE_HOME/mcs-host``, else ``~/.cache/mcs-host``."""
    return os.environ.get("MCS_HOST_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "mcs-host"
    )
