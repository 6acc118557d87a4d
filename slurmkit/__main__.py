"""``python -m slurmkit``: the same as the ``slurmkit`` command."""

from slurmkit.cli import main

main()
