"""Numbered, forward-only migrations, each written once for both engines.

Each migration is a function ``mNNN_verb_noun()`` returning its operations (``store/schema.py``):
neutral SQL with the few words the engines spell differently written as tokens (``{int}``,
``{key}``, ``{json:col}``...), named ``Step``s where the engines have no common form (FTS5 tables
against GIN indexes, SQLite trigger bodies against plpgsql functions), and data steps in Python.
``migrate()`` applies the missing ones in order, rendered for the database's engine, each together
with its row in ``schema_migrations`` inside the caller's transaction. A shipped migration is never
edited: change the schema by adding the next number. A database whose recorded version is newer
than this code knows is refused (S1).

The numbers and names recorded are the same on both engines, so a database on either says which
Hearth schema it holds (``hearth migrate-store`` compares them). SQLite databases exist at every
version from 1 and take each migration in turn. PostgreSQL databases start at version 14: a blank
one gets the schema migrations 1 to 14 leave, folded into one script from the same operations
(``schema.fold``: each table created once with the columns later migrations added, PostgreSQL's
rendering of each step), and records all fourteen; every later migration runs on both engines
one by one. ``tests/test_migrations.py`` checks that each engine reaches exactly its recorded
schema at every version (``tests/schema.sql``, ``tests/schema_postgres.txt``).
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Callable

from ...errors import SchemaError
from ..schema import POSTGRESQL, SQLITE, Migration, Renderer, ensure_vector, fold
from .baseline import (
    m001_create_foundation,
    m002_create_memories_and_continuity,
    m003_create_branch_requests,
    m004_create_layers,
    m005_create_recall,
    m006_count_vectors,
    m007_add_memory_versions,
    m008_add_interop,
    m009_create_client_chats,
    m010_create_channels,
    m011_create_activations,
    m012_add_item_versions,
    m013_create_timeline,
    m014_add_message_alternatives_and_persona_archive,
)
from .changes import (
    TURN_VERSION_EVENTS,
    m015_create_message_branches,
    m016_keep_keyword_totals,
    m017_fold_diacritics_in_keyword_search,
    m018_index_turn_version_events,
    m019_index_chat_turns_by_time,
    m020_index_chat_turns_by_time_for_time_bounds_only,
    m021_scope_fragment_books,
    m022_add_user_display_name,
    m023_add_persona_uuid,
    m024_add_thread_pins_tags_and_imported,
    m025_add_chat_models_and_prompt_presets,
    m026_create_facts,
    m027_keep_archive_turns,
    m028_store_keyword_words,
    m029_keep_keyword_vocabulary,
    m030_keep_message_texts_uncompressed,
    m031_keep_keyword_postings,
    m032_keep_vectors_inline,
    m033_add_model_connections_and_disabled_users,
    m034_create_message_attachments,
    m035_verify_contact_addresses,
    scope_card_books,
    unbake_card_macros,
)

__all__ = ["LATEST_VERSION", "MIGRATIONS", "POSTGRESQL", "SQLITE", "TURN_VERSION_EVENTS", "check_version",
           "current_version", "ensure_vector", "migrate", "number", "scope_card_books", "unbake_card_macros"]



MIGRATIONS: list[Callable[..., None]] = [
    m001_create_foundation,
    m002_create_memories_and_continuity,
    m003_create_branch_requests,
    m004_create_layers,
    m005_create_recall,
    m006_count_vectors,
    m007_add_memory_versions,
    m008_add_interop,
    m009_create_client_chats,
    m010_create_channels,
    m011_create_activations,
    m012_add_item_versions,
    m013_create_timeline,
    m014_add_message_alternatives_and_persona_archive,
    m015_create_message_branches,
    m016_keep_keyword_totals,
    m017_fold_diacritics_in_keyword_search,
    m018_index_turn_version_events,
    m019_index_chat_turns_by_time,
    m020_index_chat_turns_by_time_for_time_bounds_only,
    m021_scope_fragment_books,
    m022_add_user_display_name,
    m023_add_persona_uuid,
    m024_add_thread_pins_tags_and_imported,
    m025_add_chat_models_and_prompt_presets,
    m026_create_facts,
    m027_keep_archive_turns,
    m028_store_keyword_words,
    m029_keep_keyword_vocabulary,
    m030_keep_message_texts_uncompressed,
    m031_keep_keyword_postings,
    m032_keep_vectors_inline,
    m033_add_model_connections_and_disabled_users,
    m034_create_message_attachments,
    m035_verify_contact_addresses,
]


def number(migration: Callable[..., None]) -> int:
    """A migration's number is in its name: ``m007_add_things`` is version 7."""
    return int(migration.__name__[1:4])


LATEST_VERSION = max(number(m) for m in MIGRATIONS)


def _ensure_table(conn: Any, renderer: Renderer = SQLITE) -> None:
    renderer.run(conn, renderer.render(
        "CREATE TABLE IF NOT EXISTS schema_migrations ("
        " version {int} PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)"))


def current_version(conn: Any, renderer: Renderer = SQLITE) -> int:
    if not renderer.has_table(conn, "schema_migrations"):
        return 0
    return int(renderer.query(conn, "SELECT coalesce(max(version), 0) FROM schema_migrations").fetchone()[0])


def check_version(conn: Any, renderer: Renderer = SQLITE) -> int:
    version = current_version(conn, renderer)
    if version > LATEST_VERSION:
        raise SchemaError(
            f"this database is at schema version {version}, newer than this Hearth knows "
            f"({LATEST_VERSION}); upgrade Hearth to open it"
        )
    return version


def _record(conn: Any, renderer: Renderer, migration: Callable[..., None]) -> int:
    renderer.query(conn, "INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)",
                   (number(migration), migration.__name__, datetime.now(timezone.utc).isoformat()))
    return number(migration)


def migrate(conn: Any, renderer: Renderer = SQLITE, *, upto: int | None = None) -> list[int]:
    """Apply missing migrations (up to version ``upto``, all by default) for ``renderer``'s engine
    inside the caller's transaction; return the versions applied."""
    check_version(conn, renderer)
    renderer.prepare(conn)
    _ensure_table(conn, renderer)
    # By the recorded numbers, not the newest one: a migration numbered below one already applied
    # (two landed in the other order) still runs.
    done = {int(r[0]) for r in renderer.query(conn, "SELECT version FROM schema_migrations").fetchall()}
    pending = [m for m in sorted(MIGRATIONS, key=number)
               if number(m) not in done and (upto is None or number(m) <= upto)]
    applied = []
    if renderer.baseline > 1:
        # The versions up to the baseline are one step on this engine (module docstring).
        first = [m for m in pending if number(m) <= renderer.baseline]
        pending = pending[len(first):]
        if first and renderer.baseline not in done:
            if upto is not None and upto < renderer.baseline:
                raise ValueError(f"a {renderer.name} database starts at version {renderer.baseline}")
            renderer.run(conn, fold(renderer, (m.operations for m in first)))  # type: ignore[attr-defined]
            applied += [_record(conn, renderer, m) for m in first]
    for m in pending:
        if isinstance(m, Migration):
            m(conn, renderer)
        else:
            m(conn)  # a plain function (tests add one): SQLite's
        applied.append(_record(conn, renderer, m))
    return applied
