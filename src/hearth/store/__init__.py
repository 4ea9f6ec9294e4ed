"""Storage: one SQLite file (or a PostgreSQL database), numbered migrations, transactions."""

from .connection import Store, inserted_id, utcnow
from .migrations import LATEST_VERSION
from .postgres import PgStore, is_postgres, open_store

__all__ = ["Store", "PgStore", "inserted_id", "utcnow", "LATEST_VERSION", "is_postgres", "open_store"]
