"""Storage: one SQLite file (or a PostgreSQL database), numbered migrations, transactions.

Module code reaches the engine through the store seam (store/engine.py): ``Connection`` and
``Row`` in type hints, ``store.engine`` / ``engine_of(conn)`` where the engines differ, ``state``
for ``app_state``, Hearth's errors (``ConstraintError``, ``StoreError``) from either driver.
"""

from . import files, state, versions
from .connection import Store, inserted_id, utcnow
from .engine import Connection, Cursor, Engine, Row
from .migrations import LATEST_VERSION
from .postgres import PgStore, is_postgres, open_store
from .sqlite import DriverError, engine_of, open_read_only

__all__ = ["Store", "PgStore", "inserted_id", "utcnow", "LATEST_VERSION", "is_postgres", "open_store",
           "Connection", "Cursor", "Engine", "Row", "engine_of", "files", "state", "versions", "DriverError",
           "open_read_only"]
