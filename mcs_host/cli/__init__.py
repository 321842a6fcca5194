"""The ``mcs-host`` command line."""
