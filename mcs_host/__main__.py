"""``python -m mcs_host`` runs the ``mcs-host`` command line."""

from .cli import main

main()
