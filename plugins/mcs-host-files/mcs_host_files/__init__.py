"""An MCS ToolDriver for a local directory tree: list, read, search and stat files under a root."""

from .driver import META, FilesToolDriver, __version__

__all__ = ["META", "FilesToolDriver", "__version__"]
