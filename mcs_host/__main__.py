"""``python -m mcs_host`` runs the ``mcs-host`` command line."""

from .cli._launch import main

main()
