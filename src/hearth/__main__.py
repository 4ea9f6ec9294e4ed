"""``python -m hearth`` runs the hearth command."""

from .cli import main

main()
