"""The version of mcs-host, in one place."""

__version__ = "0.1.0"
