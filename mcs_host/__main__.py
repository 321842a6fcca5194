"""``python -m mcs_host`` runs the ``mcs-host`` command line."""

from ._launch import main

main()
