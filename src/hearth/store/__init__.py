"""Storage: one SQLite file, numbered migrations, transactions."""

from .connection import Store, inserted_id, utcnow
from .migrations import LATEST_VERSION

__all__ = ["Store", "inserted_id", "utcnow", "LATEST_VERSION"]
