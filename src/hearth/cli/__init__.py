"""The ``hearth`` command: thin click commands over the library, one module per area.

Every command resolves settings once (flags > HEARTH_* env > config file > defaults), opens the
deployment, acts as one user (the owner unless ``--user`` names another), and prints errors from
the error tree as one clear line. Invalid settings and invalid input exit with code 2, other
errors with code 1.

The command modules are imported when their command runs, not here: ``commands.COMMANDS`` names
each command's modules and short help, so ``hearth --help`` imports none of them (S20).
"""

from .base import cli, main

__all__ = ["cli", "main"]
