"""The version of mcs-host, in one place, and what ``mcs-host version`` says of the running
host.

Imports only what the interpreter has loaded before any of it runs: ``mcs-host --version`` is
answered from here before the command line imports anything else."""

import os
import sys

__version__ = "0.1.0"


def about(full: bool = True) -> list[str]:
    """The lines of ``mcs-host version``: the version, the Python and platform it runs on,
    and where the package is installed (what a bug report needs); not ``full``: the first
    alone, ``mcs-host --version``'s, which imports nothing."""
    if not full:
        return [f"mcs-host {__version__}"]
    import platform  # noqa: PLC0415 - only for the full answer

    return [
        f"mcs-host {__version__}",
        f"Python {platform.python_version()} ({platform.python_implementation()}) "
        f"at {sys.executable}",
        f"platform {platform.platform()}",
        f"installed at {os.path.dirname(os.path.realpath(__file__))}",
    ]
