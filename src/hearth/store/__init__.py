"""Storage: one SQLite file, numbered migrations, transactions."""

from .connection import Store, utcnow
from .migrations import LATEST_VERSION

__all__ = ["Store", "utcnow", "LATEST_VERSION"]
