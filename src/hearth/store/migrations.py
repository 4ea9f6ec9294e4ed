"""Numbered, forward-only migrations.

Each migration is a function ``mNNN_verb_noun(conn)``; ``migrate()`` applies the missing ones in
order, each together with its row in ``schema_migrations`` inside the caller's transaction. A
shipped migration is never edited: change the schema by adding the next number. A database whose
recorded version is newer than this code knows is refused (S1).
"""

from __future__ import annotations

import sqlite3
from datetime import datetime, timezone
from typing import Callable

from ..errors import SchemaError


def run_script(conn: sqlite3.Connection, script: str) -> None:
    """Run several statements inside the current transaction.

    ``executescript`` would commit first, which would split a migration from its record.
    """
    statement = ""
    for line in script.splitlines(keepends=True):
        statement += line
        if sqlite3.complete_statement(statement):
            conn.execute(statement)
            statement = ""
    if statement.strip():
        raise ValueError("incomplete SQL statement at the end of a migration script")


def m001_create_foundation(conn: sqlite3.Connection) -> None:
    run_script(
        conn,
        """
        CREATE TABLE users (
            id INTEGER PRIMARY KEY,
            name TEXT NOT NULL UNIQUE,
            is_owner INTEGER NOT NULL DEFAULT 0,
            password_hash TEXT,
            created_at TEXT NOT NULL
        );
        CREATE TABLE api_tokens (
            id INTEGER PRIMARY KEY,
            user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            name TEXT NOT NULL,
            token_hash TEXT NOT NULL UNIQUE,
            created_at TEXT NOT NULL,
            last_used_at TEXT,
            revoked_at TEXT
        );
        CREATE TABLE auth_sessions (
            id TEXT PRIMARY KEY,
            user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            csrf_token TEXT NOT NULL,
            created_at TEXT NOT NULL,
            expires_at TEXT NOT NULL
        );
        CREATE TABLE app_state (
            key TEXT PRIMARY KEY,
            value TEXT NOT NULL CHECK (json_valid(value))
        );
        CREATE TABLE personas (
            id INTEGER PRIMARY KEY,
            user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            name TEXT NOT NULL,
            display_name TEXT NOT NULL,
            identity TEXT NOT NULL DEFAULT '',
            user_label TEXT NOT NULL,
            assistant_label TEXT NOT NULL,
            legacy_labels TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(legacy_labels)),
            tone TEXT NOT NULL DEFAULT 'Natural',
            custom_instructions TEXT NOT NULL DEFAULT '',
            sections TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(sections)),
            characters TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(characters)),
            auto_continuity INTEGER NOT NULL DEFAULT 1,
            archive_access INTEGER NOT NULL DEFAULT 0,
            web_search INTEGER NOT NULL DEFAULT 0,
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            UNIQUE (user_id, name)
        );
        CREATE TABLE folders (
            id INTEGER PRIMARY KEY,
            user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            name TEXT NOT NULL,
            hidden INTEGER NOT NULL DEFAULT 0,
            created_at TEXT NOT NULL,
            UNIQUE (user_id, name)
        );
        CREATE TABLE conversations (
            id INTEGER PRIMARY KEY,
            user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            persona_id INTEGER NOT NULL REFERENCES personas(id),
            folder_id INTEGER REFERENCES folders(id) ON DELETE SET NULL,
            title TEXT NOT NULL DEFAULT '',
            state TEXT NOT NULL DEFAULT 'open' CHECK (state IN ('open', 'ended')),
            trashed_at TEXT,
            continuity_shielded INTEGER NOT NULL DEFAULT 0,
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            ended_at TEXT
        );
        CREATE INDEX conversations_user_updated ON conversations (user_id, updated_at);

        -- The ledger (S2): append-only; ordered by (created_at, id).
        CREATE TABLE events (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            conversation_id INTEGER REFERENCES conversations(id) ON DELETE CASCADE,
            kind TEXT NOT NULL,
            channel TEXT NOT NULL DEFAULT 'web',
            created_at TEXT NOT NULL,
            payload TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(payload))
        );
        CREATE INDEX events_user_time ON events (user_id, created_at, id);
        CREATE INDEX events_conversation_time ON events (conversation_id, created_at, id);
        CREATE TRIGGER events_append_only BEFORE UPDATE ON events
        BEGIN
            SELECT RAISE(ABORT, 'events are append-only');
        END;

        -- A message is an event with a row here: messages.id is its event's id, so the two are
        -- written in one transaction and can never drift apart.
        CREATE TABLE messages (
            id INTEGER PRIMARY KEY REFERENCES events(id) ON DELETE CASCADE,
            user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
            role TEXT NOT NULL CHECK (role IN ('system', 'user', 'assistant', 'tool')),
            kind TEXT NOT NULL DEFAULT 'chat'
                CHECK (kind IN ('chat', 'static_prompt', 'handoff_artifact', 'tool_result')),
            content TEXT NOT NULL,
            channel TEXT NOT NULL DEFAULT 'web',
            created_at TEXT NOT NULL,
            metadata TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(metadata))
        );
        CREATE INDEX messages_conversation ON messages (conversation_id, id);
        -- Exactly one stored static prompt per conversation (P2).
        CREATE UNIQUE INDEX messages_one_static_prompt ON messages (conversation_id)
            WHERE kind = 'static_prompt';

        -- Keyword index (S6) over ordinary chat turns only: stored prompts, handoff artifacts and
        -- tool results never enter it (P6, K1).
        CREATE VIRTUAL TABLE messages_fts USING fts5(
            content, content='messages', content_rowid='id',
            tokenize='unicode61 remove_diacritics 2'
        );
        CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages
        WHEN new.kind = 'chat' AND new.role IN ('user', 'assistant')
        BEGIN
            INSERT INTO messages_fts (rowid, content) VALUES (new.id, new.content);
        END;
        CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages
        WHEN old.kind = 'chat' AND old.role IN ('user', 'assistant')
        BEGIN
            INSERT INTO messages_fts (messages_fts, rowid, content) VALUES ('delete', old.id, old.content);
        END;
        CREATE TRIGGER messages_fts_update AFTER UPDATE OF content, kind, role ON messages
        BEGIN
            INSERT INTO messages_fts (messages_fts, rowid, content)
                SELECT 'delete', old.id, old.content
                WHERE old.kind = 'chat' AND old.role IN ('user', 'assistant');
            INSERT INTO messages_fts (rowid, content)
                SELECT new.id, new.content
                WHERE new.kind = 'chat' AND new.role IN ('user', 'assistant');
        END;
        """
    )


def m002_create_memories_and_continuity(conn: sqlite3.Connection) -> None:
    run_script(
        conn,
        """
        -- Long-term memories (M1). AUTOINCREMENT: a deleted id is never handed out again (M7).
        CREATE TABLE memories (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            text TEXT NOT NULL,
            category TEXT NOT NULL DEFAULT '',
            importance INTEGER NOT NULL DEFAULT 0,
            position INTEGER NOT NULL,
            eligible INTEGER NOT NULL DEFAULT 1,
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL
        );
        CREATE INDEX memories_user_position ON memories (user_id, position);

        -- Snapshot membership (M2): which memory ids a conversation may carry.
        CREATE TABLE conversation_memories (
            conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
            memory_id INTEGER NOT NULL REFERENCES memories(id) ON DELETE CASCADE,
            PRIMARY KEY (conversation_id, memory_id)
        ) WITHOUT ROWID;
        CREATE INDEX conversation_memories_memory ON conversation_memories (memory_id, conversation_id);

        -- Snapshot metadata (M5): timestamps and provenance only. Rows that predate snapshots keep
        -- provenance 'legacy' and no invented capture time.
        ALTER TABLE conversations ADD COLUMN snapshot_provenance TEXT NOT NULL DEFAULT 'legacy';
        ALTER TABLE conversations ADD COLUMN snapshot_captured_at TEXT;
        ALTER TABLE conversations ADD COLUMN snapshot_refreshed_at TEXT;
        ALTER TABLE conversations ADD COLUMN snapshot_backfilled INTEGER NOT NULL DEFAULT 0;

        -- Continuity rows (H10): the historical table name and its retired columns are kept; the
        -- runtime reads and writes only handoff and the structured source columns.
        CREATE TABLE conversation_summaries (
            id INTEGER PRIMARY KEY,
            user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            conversation_id INTEGER NOT NULL UNIQUE REFERENCES conversations(id) ON DELETE CASCADE,
            source_conversation_id INTEGER REFERENCES conversations(id) ON DELETE SET NULL,
            source_message_ids TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(source_message_ids)),
            handoff TEXT NOT NULL DEFAULT '',
            summary TEXT NOT NULL DEFAULT '',
            recent_raw TEXT NOT NULL DEFAULT '',
            created_at TEXT NOT NULL
        );
        """,
    )


def m003_create_branch_requests(conn: sqlite3.Connection) -> None:
    run_script(
        conn,
        """
        -- Branch idempotency (H8): one destination per client retry key and user.
        CREATE TABLE branch_requests (
            id INTEGER PRIMARY KEY,
            user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            retry_key TEXT NOT NULL,
            source_conversation_id INTEGER REFERENCES conversations(id) ON DELETE SET NULL,
            destination_conversation_id INTEGER NOT NULL
                REFERENCES conversations(id) ON DELETE CASCADE,
            created_at TEXT NOT NULL,
            UNIQUE (user_id, retry_key)
        );
        """,
    )


MIGRATIONS: list[Callable[[sqlite3.Connection], None]] = [
    m001_create_foundation,
    m002_create_memories_and_continuity,
    m003_create_branch_requests,
]


def number(migration: Callable[[sqlite3.Connection], None]) -> int:
    """A migration's number is in its name: ``m007_add_things`` is version 7."""
    return int(migration.__name__[1:4])


LATEST_VERSION = max(number(m) for m in MIGRATIONS)


def _ensure_table(conn: sqlite3.Connection) -> None:
    conn.execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations ("
        " version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)"
    )


def current_version(conn: sqlite3.Connection) -> int:
    exists = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'"
    ).fetchone()
    if not exists:
        return 0
    return conn.execute("SELECT coalesce(max(version), 0) FROM schema_migrations").fetchone()[0]


def check_version(conn: sqlite3.Connection) -> int:
    version = current_version(conn)
    if version > LATEST_VERSION:
        raise SchemaError(
            f"this database is at schema version {version}, newer than this Hearth knows "
            f"({LATEST_VERSION}); upgrade Hearth to open it"
        )
    return version


def migrate(conn: sqlite3.Connection) -> list[int]:
    """Apply missing migrations inside the caller's transaction; return the versions applied."""
    _ensure_table(conn)
    check_version(conn)
    done = {r[0] for r in conn.execute("SELECT version FROM schema_migrations")}
    applied = []
    for migration in sorted(MIGRATIONS, key=number):
        if number(migration) in done:
            continue
        migration(conn)
        conn.execute(
            "INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)",
            (number(migration), migration.__name__, datetime.now(timezone.utc).isoformat()),
        )
        applied.append(number(migration))
    return applied
