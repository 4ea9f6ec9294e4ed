"""PostgreSQL's entry points to the one migration list (``store/migrations.py``), rendered for
PostgreSQL: its databases start at the baseline (version 14) and take each later migration in turn."""

from __future__ import annotations

from typing import Any

from . import migrations
from .schema import POSTGRESQL, ensure_vector

__all__ = ["BASELINE", "check_version", "current_version", "ensure_vector", "migrate"]

BASELINE = POSTGRESQL.baseline


def migrate(conn: Any, *, upto: int | None = None) -> list[int]:
    return migrations.migrate(conn, POSTGRESQL, upto=upto)


def current_version(conn: Any) -> int:
    return migrations.current_version(conn, POSTGRESQL)


def check_version(conn: Any) -> int:
    return migrations.check_version(conn, POSTGRESQL)
