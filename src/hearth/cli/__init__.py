"""The ``hearth`` command: thin click commands over the library, one module per area.

Every command resolves settings once (flags > HEARTH_* env > config file > defaults), opens the
deployment, acts as one user (the owner unless ``--user`` names another), and prints errors from
the error tree as one clear line. Invalid settings and invalid input exit with code 2, other
errors with code 1.
"""

from . import (  # noqa: F401  (registers commands)
    activations,
    channels,
    choices,  # noqa: F401  (registers threads model / instructions and presets)
    forget,  # noqa: F401  (registers `hearth forget`)
    health,
    imports,
    layers,
    maintenance,
    memory,
    recall,
    server,
    threads,
    timeline,
    versions,  # noqa: F401  (registers history and restore for fragments, personas, status)
)
from .base import cli, main

__all__ = ["cli", "main"]
