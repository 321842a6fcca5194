"""An MCS ToolDriver for CSV files under a root: list them, read the head, filter, summarise."""

from .driver import META, CsvToolDriver, __version__

__all__ = ["META", "CsvToolDriver", "__version__"]
