"""Numbered, forward-only migrations.

Each migration is a function ``mNNN_verb_noun(conn)``; ``migrate()`` applies the missing ones in
order, each together with its row in ``schema_migrations`` inside the caller's transaction. A
shipped migration is never edited: change the schema by adding the next number. A database whose
recorded version is newer than this code knows is refused (S1).
"""

from __future__ import annotations

import sqlite3
from datetime import datetime, timezone
from typing import Any, Callable

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
            ended_at TEXT,
            -- Kept by triggers on messages: visible turns, and a revision bumped whenever an
            -- existing turn changes or goes, so cached history knows when it is stale.
            turn_count INTEGER NOT NULL DEFAULT 0,
            history_rev INTEGER NOT NULL DEFAULT 0
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
        CREATE TRIGGER messages_turn_insert AFTER INSERT ON messages
        WHEN new.kind IN ('chat', 'handoff_artifact') AND new.role IN ('user', 'assistant')
        BEGIN
            UPDATE conversations SET turn_count = turn_count + 1 WHERE id = new.conversation_id;
        END;
        CREATE TRIGGER messages_turn_delete AFTER DELETE ON messages
        WHEN old.kind IN ('chat', 'handoff_artifact') AND old.role IN ('user', 'assistant')
        BEGIN
            UPDATE conversations SET turn_count = turn_count - 1, history_rev = history_rev + 1
            WHERE id = old.conversation_id;
        END;
        CREATE TRIGGER messages_turn_update AFTER UPDATE OF content, kind, role ON messages
        WHEN old.kind IN ('chat', 'handoff_artifact') OR new.kind IN ('chat', 'handoff_artifact')
        BEGIN
            UPDATE conversations SET history_rev = history_rev + 1,
                turn_count = turn_count
                    - (old.kind IN ('chat', 'handoff_artifact') AND old.role IN ('user', 'assistant'))
                    + (new.kind IN ('chat', 'handoff_artifact') AND new.role IN ('user', 'assistant'))
            WHERE id = new.conversation_id;
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


def m004_create_layers(conn: sqlite3.Connection) -> None:
    run_script(
        conn,
        """
        -- Background jobs: a durable queue, so a restart resumes pending work. last_error holds an
        -- error class or kind only, never content. One pending job per (user, kind, dedupe key).
        CREATE TABLE jobs (
            id INTEGER PRIMARY KEY,
            user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            kind TEXT NOT NULL,
            payload TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(payload)),
            dedupe_key TEXT,
            status TEXT NOT NULL DEFAULT 'pending'
                CHECK (status IN ('pending', 'running', 'done', 'dead')),
            attempts INTEGER NOT NULL DEFAULT 0,
            max_attempts INTEGER NOT NULL DEFAULT 5,
            run_after TEXT NOT NULL,
            lease_until TEXT,
            last_error TEXT,
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            finished_at TEXT
        );
        CREATE INDEX jobs_due ON jobs (status, run_after, id);
        CREATE UNIQUE INDEX jobs_one_pending ON jobs (user_id, kind, dedupe_key)
            WHERE status = 'pending' AND dedupe_key IS NOT NULL;

        -- Per-user settings of the memory layers (cadences, budgets, auto-approve per kind).
        CREATE TABLE layer_settings (
            user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            key TEXT NOT NULL,
            value TEXT NOT NULL CHECK (json_valid(value)),
            PRIMARY KEY (user_id, key)
        ) WITHOUT ROWID;

        -- How far a background layer has read a conversation (status detection, review).
        CREATE TABLE layer_cursors (
            conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
            layer TEXT NOT NULL,
            user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            message_id INTEGER NOT NULL,
            updated_at TEXT NOT NULL,
            PRIMARY KEY (conversation_id, layer)
        ) WITHOUT ROWID;

        -- Household status (HS1): named fields; a value is retired (valid_to), never overwritten.
        CREATE TABLE status_fields (
            id INTEGER PRIMARY KEY,
            user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            name TEXT NOT NULL,
            options TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(options)),
            aliases TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(aliases)),
            position INTEGER NOT NULL,
            created_at TEXT NOT NULL,
            retired_at TEXT
        );
        CREATE UNIQUE INDEX status_fields_active_name ON status_fields (user_id, name COLLATE NOCASE)
            WHERE retired_at IS NULL;
        CREATE TABLE status_values (
            id INTEGER PRIMARY KEY,
            user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            field_id INTEGER NOT NULL REFERENCES status_fields(id) ON DELETE CASCADE,
            value TEXT NOT NULL,
            source TEXT NOT NULL DEFAULT 'manual' CHECK (source IN ('manual', 'approved', 'auto')),
            proposal_id INTEGER,
            valid_from TEXT NOT NULL,
            valid_to TEXT
        );
        CREATE UNIQUE INDEX status_values_current ON status_values (field_id) WHERE valid_to IS NULL;
        CREATE INDEX status_values_field_time ON status_values (field_id, valid_from);

        -- Live context (LC1): one current row per thread; nudges (LC2) with a hidden marker.
        CREATE TABLE live_context (
            conversation_id INTEGER PRIMARY KEY REFERENCES conversations(id) ON DELETE CASCADE,
            user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            mood TEXT NOT NULL DEFAULT '',
            events TEXT NOT NULL DEFAULT '',
            needs TEXT NOT NULL DEFAULT '',
            summary TEXT NOT NULL DEFAULT '',
            source TEXT NOT NULL DEFAULT 'offline' CHECK (source IN ('offline', 'model', 'manual')),
            through_message_id INTEGER NOT NULL DEFAULT 0,
            updated_at TEXT NOT NULL
        );
        CREATE TABLE nudges (
            id INTEGER PRIMARY KEY,
            user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
            text TEXT NOT NULL,
            marker TEXT NOT NULL,
            source TEXT NOT NULL DEFAULT 'offline' CHECK (source IN ('offline', 'model', 'manual')),
            status TEXT NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'used', 'dropped')),
            created_at TEXT NOT NULL,
            used_at TEXT,
            used_message_id INTEGER,
            UNIQUE (conversation_id, marker)
        );
        CREATE INDEX nudges_open ON nudges (conversation_id, status);

        -- Rolling thread summaries (RS1), each tied to the message it was made at. Editing or
        -- deleting a chat message at or before that point invalidates it, so the layer falls back
        -- to the last summary that is still valid.
        CREATE TABLE thread_summaries (
            id INTEGER PRIMARY KEY,
            user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
            text TEXT NOT NULL,
            source TEXT NOT NULL CHECK (source IN ('offline', 'model')),
            through_message_id INTEGER NOT NULL,
            section_messages INTEGER NOT NULL,
            created_at TEXT NOT NULL,
            invalidated_at TEXT
        );
        CREATE INDEX thread_summaries_conversation ON thread_summaries (conversation_id, through_message_id);
        CREATE TRIGGER thread_summaries_invalidate_on_delete AFTER DELETE ON messages
        WHEN old.kind = 'chat'
        BEGIN
            UPDATE thread_summaries SET invalidated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now')
            WHERE conversation_id = old.conversation_id AND through_message_id >= old.id
              AND invalidated_at IS NULL;
        END;
        CREATE TRIGGER thread_summaries_invalidate_on_edit AFTER UPDATE OF content, role, kind ON messages
        WHEN old.kind = 'chat' AND (new.content IS NOT old.content OR new.role IS NOT old.role
                                    OR new.kind IS NOT old.kind)
        BEGIN
            UPDATE thread_summaries SET invalidated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now')
            WHERE conversation_id = old.conversation_id AND through_message_id >= old.id
              AND invalidated_at IS NULL;
        END;

        -- Memory fragments (F1): trigger-based stable profile context. The library version is
        -- bumped by every edit, so a compiled trigger index is rebuilt only after a change (F2).
        CREATE TABLE fragments (
            id INTEGER PRIMARY KEY,
            user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            category TEXT NOT NULL DEFAULT '',
            triggers TEXT NOT NULL CHECK (json_valid(triggers)),
            definition TEXT NOT NULL,
            all_of TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(all_of)),
            any_of TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(any_of)),
            none_of TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(none_of)),
            priority INTEGER NOT NULL DEFAULT 0,
            enabled INTEGER NOT NULL DEFAULT 1,
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL
        );
        CREATE INDEX fragments_user ON fragments (user_id, id);
        CREATE TABLE fragment_library (
            user_id INTEGER PRIMARY KEY REFERENCES users(id) ON DELETE CASCADE,
            version INTEGER NOT NULL
        );

        -- Review queue (F3, G4): suggestions wait for approval. A dismissed proposal's content
        -- hash keeps the same suggestion from coming back unchanged.
        CREATE TABLE proposals (
            id INTEGER PRIMARY KEY,
            user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            kind TEXT NOT NULL
                CHECK (kind IN ('fragment_add', 'fragment_update', 'status_change', 'memory_add')),
            conversation_id INTEGER REFERENCES conversations(id) ON DELETE SET NULL,
            payload TEXT NOT NULL CHECK (json_valid(payload)),
            reason TEXT NOT NULL,
            evidence TEXT NOT NULL DEFAULT '',
            source TEXT NOT NULL CHECK (source IN ('offline', 'model')),
            content_hash TEXT NOT NULL,
            status TEXT NOT NULL DEFAULT 'pending'
                CHECK (status IN ('pending', 'approved', 'dismissed')),
            decided_by TEXT,
            result_id INTEGER,
            created_at TEXT NOT NULL,
            decided_at TEXT
        );
        CREATE INDEX proposals_user_status ON proposals (user_id, status, id);
        CREATE INDEX proposals_user_hash ON proposals (user_id, content_hash, status);
        CREATE UNIQUE INDEX proposals_one_pending ON proposals (user_id, content_hash)
            WHERE status = 'pending';
        """,
    )


def m005_create_recall(conn: sqlite3.Connection) -> None:
    run_script(
        conn,
        """
        -- Deep archive (A1): documents and their labelled chunks. Content hashes make re-uploads
        -- add nothing; the embedding BLOB is the source of truth for the vector index (S7).
        CREATE TABLE archive_documents (
            id INTEGER PRIMARY KEY,
            user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            collection TEXT NOT NULL DEFAULT 'default',
            title TEXT NOT NULL,
            source TEXT NOT NULL DEFAULT '',
            document_date TEXT,
            content_hash TEXT NOT NULL,
            chunk_count INTEGER NOT NULL DEFAULT 0,
            metadata TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(metadata)),
            created_at TEXT NOT NULL,
            UNIQUE (user_id, content_hash)
        );
        CREATE INDEX archive_documents_user_collection ON archive_documents (user_id, collection);
        CREATE TABLE archive_chunks (
            id INTEGER PRIMARY KEY,
            user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            document_id INTEGER NOT NULL REFERENCES archive_documents(id) ON DELETE CASCADE,
            position INTEGER NOT NULL,
            text TEXT NOT NULL,
            speakers TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(speakers)),
            chunk_date TEXT,
            content_hash TEXT NOT NULL,
            embedding BLOB,
            embedding_model TEXT,
            UNIQUE (user_id, content_hash),
            UNIQUE (document_id, position)
        );
        CREATE INDEX archive_chunks_user_model ON archive_chunks (user_id, embedding_model);
        CREATE VIRTUAL TABLE archive_chunks_fts USING fts5(
            text, content='archive_chunks', content_rowid='id',
            tokenize='unicode61 remove_diacritics 2'
        );
        CREATE TRIGGER archive_chunks_fts_insert AFTER INSERT ON archive_chunks
        BEGIN
            INSERT INTO archive_chunks_fts (rowid, text) VALUES (new.id, new.text);
        END;
        CREATE TRIGGER archive_chunks_fts_delete AFTER DELETE ON archive_chunks
        BEGIN
            INSERT INTO archive_chunks_fts (archive_chunks_fts, rowid, text) VALUES ('delete', old.id, old.text);
        END;
        CREATE TRIGGER archive_chunks_fts_update AFTER UPDATE OF text ON archive_chunks
        BEGIN
            INSERT INTO archive_chunks_fts (archive_chunks_fts, rowid, text) VALUES ('delete', old.id, old.text);
            INSERT INTO archive_chunks_fts (rowid, text) VALUES (new.id, new.text);
        END;

        -- Message embeddings (S7), one row per embedded chat turn and model.
        CREATE TABLE message_embeddings (
            message_id INTEGER PRIMARY KEY REFERENCES messages(id) ON DELETE CASCADE,
            user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            model TEXT NOT NULL,
            embedding BLOB NOT NULL
        );
        CREATE INDEX message_embeddings_user_model ON message_embeddings (user_id, model, message_id);

        -- Document frequencies for query building: very common terms are dropped (K1 at scale).
        CREATE VIRTUAL TABLE messages_fts_vocab USING fts5vocab(messages_fts, 'row');
        CREATE VIRTUAL TABLE archive_chunks_fts_vocab USING fts5vocab(archive_chunks_fts, 'row');

        -- Search log (A3, G5): every automatic or deliberate search, visible to its owner.
        CREATE TABLE search_log (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            conversation_id INTEGER REFERENCES conversations(id) ON DELETE SET NULL,
            origin TEXT NOT NULL,
            query TEXT NOT NULL,
            variants TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(variants)),
            filters TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(filters)),
            results TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(results)),
            candidate_count INTEGER NOT NULL DEFAULT 0,
            result_count INTEGER NOT NULL DEFAULT 0,
            reliability TEXT NOT NULL CHECK (reliability IN ('high', 'medium', 'low', 'none')),
            duration_ms INTEGER NOT NULL DEFAULT 0,
            created_at TEXT NOT NULL
        );
        CREATE INDEX search_log_user_time ON search_log (user_id, created_at, id);
        """,
    )


def m006_count_vectors(conn: sqlite3.Connection) -> None:
    run_script(
        conn,
        """
        -- Per user, source and model: how many vectors, the highest id, and a revision that moves
        -- when a vector is removed, replaced or arrives out of id order. Kept by triggers so the
        -- in-process vector index can tell in one lookup whether it is current, and whether new
        -- rows can simply be added to it.
        CREATE TABLE vector_counts (
            user_id INTEGER NOT NULL,
            source TEXT NOT NULL,
            model TEXT NOT NULL,
            count INTEGER NOT NULL DEFAULT 0,
            max_id INTEGER NOT NULL DEFAULT 0,
            rev INTEGER NOT NULL DEFAULT 0,
            PRIMARY KEY (user_id, source, model)
        ) WITHOUT ROWID;
        INSERT INTO vector_counts (user_id, source, model, count, max_id)
            SELECT user_id, 'messages', model, count(*), max(message_id) FROM message_embeddings
            GROUP BY user_id, model;
        INSERT INTO vector_counts (user_id, source, model, count, max_id)
            SELECT user_id, 'chunks', embedding_model, count(*), max(id) FROM archive_chunks
            WHERE embedding_model IS NOT NULL GROUP BY user_id, embedding_model;

        CREATE TRIGGER message_vectors_insert AFTER INSERT ON message_embeddings
        BEGIN
            INSERT INTO vector_counts (user_id, source, model, count, max_id)
                VALUES (new.user_id, 'messages', new.model, 1, new.message_id)
            ON CONFLICT (user_id, source, model) DO UPDATE SET
                count = count + 1, rev = rev + (excluded.max_id < max_id), max_id = max(max_id, excluded.max_id);
        END;
        CREATE TRIGGER message_vectors_delete AFTER DELETE ON message_embeddings
        BEGIN
            UPDATE vector_counts SET count = count - 1, rev = rev + 1
            WHERE user_id = old.user_id AND source = 'messages' AND model = old.model;
        END;
        CREATE TRIGGER message_vectors_update AFTER UPDATE ON message_embeddings
        BEGIN
            UPDATE vector_counts SET count = count - 1, rev = rev + 1
            WHERE user_id = old.user_id AND source = 'messages' AND model = old.model;
            INSERT INTO vector_counts (user_id, source, model, count, max_id, rev)
                VALUES (new.user_id, 'messages', new.model, 1, new.message_id, 1)
            ON CONFLICT (user_id, source, model) DO UPDATE SET
                count = count + 1, rev = rev + 1, max_id = max(max_id, excluded.max_id);
        END;

        CREATE TRIGGER chunk_vectors_insert AFTER INSERT ON archive_chunks
        WHEN new.embedding_model IS NOT NULL
        BEGIN
            INSERT INTO vector_counts (user_id, source, model, count, max_id)
                VALUES (new.user_id, 'chunks', new.embedding_model, 1, new.id)
            ON CONFLICT (user_id, source, model) DO UPDATE SET
                count = count + 1, rev = rev + (excluded.max_id < max_id), max_id = max(max_id, excluded.max_id);
        END;
        CREATE TRIGGER chunk_vectors_delete AFTER DELETE ON archive_chunks
        WHEN old.embedding_model IS NOT NULL
        BEGIN
            UPDATE vector_counts SET count = count - 1, rev = rev + 1
            WHERE user_id = old.user_id AND source = 'chunks' AND model = old.embedding_model;
        END;
        CREATE TRIGGER chunk_vectors_update AFTER UPDATE OF embedding, embedding_model ON archive_chunks
        BEGIN
            UPDATE vector_counts SET count = count - 1, rev = rev + 1
            WHERE old.embedding_model IS NOT NULL
              AND user_id = old.user_id AND source = 'chunks' AND model = old.embedding_model;
            INSERT INTO vector_counts (user_id, source, model, count, max_id)
                SELECT new.user_id, 'chunks', new.embedding_model, 1, new.id
                WHERE new.embedding_model IS NOT NULL
            ON CONFLICT (user_id, source, model) DO UPDATE SET
                count = count + 1,
                rev = rev + (old.embedding_model IS NOT NULL OR excluded.max_id < max_id),
                max_id = max(max_id, excluded.max_id);
        END;
        """,
    )


def m007_add_memory_versions(conn: sqlite3.Connection) -> None:
    """Bi-temporal memories and household status (B1): versions with valid and recorded times.

    A memory keeps its stable id (snapshots hold it, M2); each meaning it has had is a row in
    ``memory_versions``. Existing memories become version 1, valid and recorded from their
    creation time (the only honest time there is for them).
    """
    run_script(
        conn,
        """
        ALTER TABLE memories ADD COLUMN valid_from TEXT;
        ALTER TABLE memories ADD COLUMN valid_until TEXT;
        ALTER TABLE memories ADD COLUMN recorded_at TEXT;
        ALTER TABLE memories ADD COLUMN retired_at TEXT;
        ALTER TABLE memories ADD COLUMN version INTEGER NOT NULL DEFAULT 1;
        UPDATE memories SET valid_from = created_at, recorded_at = created_at;

        -- One row per version of a memory. valid_from/valid_until: when it was true in the
        -- person's life; recorded_at/retired_at: when Hearth held it (a correction retires the
        -- corrected row); superseded_at: when its valid_until was recorded.
        CREATE TABLE memory_versions (
            id INTEGER PRIMARY KEY,
            memory_id INTEGER NOT NULL REFERENCES memories(id) ON DELETE CASCADE,
            user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            version INTEGER NOT NULL,
            text TEXT NOT NULL,
            category TEXT NOT NULL DEFAULT '',
            importance INTEGER NOT NULL DEFAULT 0,
            eligible INTEGER NOT NULL DEFAULT 1,
            valid_from TEXT NOT NULL,
            valid_until TEXT,
            recorded_at TEXT NOT NULL,
            retired_at TEXT,
            superseded_at TEXT,
            change TEXT NOT NULL,
            actor TEXT NOT NULL,
            proposal_id INTEGER,
            UNIQUE (memory_id, version)
        );
        CREATE INDEX memory_versions_user_time ON memory_versions (user_id, valid_from);
        INSERT INTO memory_versions (memory_id, user_id, version, text, category, importance, eligible,
                                     valid_from, recorded_at, change, actor)
            SELECT id, user_id, 1, text, category, importance, eligible, created_at, created_at,
                   'created', 'unknown' FROM memories;

        ALTER TABLE status_values ADD COLUMN recorded_at TEXT;
        ALTER TABLE status_values ADD COLUMN retired_at TEXT;
        ALTER TABLE status_values ADD COLUMN superseded_at TEXT;
        UPDATE status_values SET recorded_at = valid_from, superseded_at = valid_to;
        """
    )


def m008_add_interop(conn: sqlite3.Connection) -> None:
    """SillyTavern interop and richer imports (X3, X4).

    Personas gain a ``card`` (the character card fields that have no column of their own), an
    avatar table (one image per persona), fragments gain ``controls`` (lorebook activation
    controls) and ``import_key`` (where an imported fragment came from, so re-imports add nothing),
    per-conversation timers for sticky / cooldown entries, and a record of imported sources.
    """
    run_script(
        conn,
        """
        ALTER TABLE personas ADD COLUMN card TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(card));
        CREATE TABLE IF NOT EXISTS persona_avatars (
            persona_id INTEGER PRIMARY KEY REFERENCES personas(id) ON DELETE CASCADE,
            user_id INTEGER NOT NULL,
            mime TEXT NOT NULL,
            data BLOB NOT NULL,
            updated_at TEXT NOT NULL
        );
        ALTER TABLE fragments ADD COLUMN controls TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(controls));
        ALTER TABLE fragments ADD COLUMN import_key TEXT;
        CREATE UNIQUE INDEX fragments_import_key ON fragments (user_id, import_key) WHERE import_key IS NOT NULL;
        -- Lorebook timed effects, counted in user turns of one conversation.
        CREATE TABLE fragment_timers (
            conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
            fragment_id INTEGER NOT NULL REFERENCES fragments(id) ON DELETE CASCADE,
            sticky_until INTEGER NOT NULL DEFAULT 0,
            cooldown_until INTEGER NOT NULL DEFAULT 0,
            PRIMARY KEY (conversation_id, fragment_id)
        ) WITHOUT ROWID;
        -- What each import created, keyed by the source's own identity (a file or item hash), so
        -- importing the same thing again is recognised and skipped (S8).
        CREATE TABLE import_sources (
            user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            kind TEXT NOT NULL,
            source_key TEXT NOT NULL,
            target_id INTEGER,
            created_at TEXT NOT NULL,
            PRIMARY KEY (user_id, kind, source_key)
        ) WITHOUT ROWID;
        """,
    )


def m009_create_client_chats(conn: sqlite3.Connection) -> None:
    run_script(
        conn,
        """
        -- X1: which Hearth conversation a chat in an OpenAI-compatible client maps to. The key is
        -- 'header:' or 'first:' and a SHA-256 (of the client's conversation id header, or of the
        -- first user message), never the text itself.
        CREATE TABLE client_chats (
            id INTEGER PRIMARY KEY,
            user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            persona_id INTEGER NOT NULL REFERENCES personas(id) ON DELETE CASCADE,
            key TEXT NOT NULL,
            conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
            created_at TEXT NOT NULL
        );
        CREATE INDEX client_chats_key ON client_chats (user_id, persona_id, key, id);
        CREATE INDEX client_chats_conversation ON client_chats (conversation_id);
        -- A conversation's own custom instructions (a client's system prompt); NULL: the persona's.
        ALTER TABLE conversations ADD COLUMN custom_instructions TEXT;
        """,
    )


def m010_create_channels(conn: sqlite3.Connection) -> None:
    run_script(
        conn,
        """
        -- Who may reach a user on a messaging channel (E10): an address (a phone number, an email
        -- address) belongs to one user across the deployment, so inbound routing is one lookup.
        CREATE TABLE channel_contacts (
            id INTEGER PRIMARY KEY,
            user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            channel TEXT NOT NULL,
            address TEXT NOT NULL,
            persona_id INTEGER REFERENCES personas(id) ON DELETE SET NULL,
            created_at TEXT NOT NULL,
            UNIQUE (channel, address)
        );
        -- Every inbound and outbound channel message by its external id (Twilio SID, email
        -- Message-ID): a replayed webhook or a re-polled mailbox is recognised and never answered
        -- twice. No text is kept here; the conversation's messages hold it.
        CREATE TABLE channel_messages (
            id INTEGER PRIMARY KEY,
            user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            channel TEXT NOT NULL,
            direction TEXT NOT NULL CHECK (direction IN ('in', 'out')),
            external_id TEXT NOT NULL,
            conversation_id INTEGER REFERENCES conversations(id) ON DELETE CASCADE,
            message_id INTEGER,
            contact_id INTEGER REFERENCES channel_contacts(id) ON DELETE SET NULL,
            provider_ref TEXT,  -- the provider's id for what was sent (a Twilio SID, a Message-ID)
            status TEXT NOT NULL,
            created_at TEXT NOT NULL,
            UNIQUE (channel, direction, external_id)
        );
        CREATE INDEX channel_messages_message ON channel_messages (message_id);
        -- Which channels a persona answers on; a persona without a row answers on every channel.
        CREATE TABLE persona_channels (
            persona_id INTEGER NOT NULL REFERENCES personas(id) ON DELETE CASCADE,
            channel TEXT NOT NULL,
            answers INTEGER NOT NULL,
            PRIMARY KEY (persona_id, channel)
        ) WITHOUT ROWID;
        """,
    )


def m011_create_activations(conn: sqlite3.Connection) -> None:
    run_script(
        conn,
        """
        -- Autonomous activations (E11), off unless created: a recurrence rule (RFC 5545) or an
        -- idle period, the channel the message is delivered on, and when it is next due (UTC).
        CREATE TABLE activations (
            id INTEGER PRIMARY KEY,
            user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            persona_id INTEGER NOT NULL REFERENCES personas(id) ON DELETE CASCADE,
            kind TEXT NOT NULL CHECK (kind IN ('morning', 'reflection', 'checkins', 'checkin')),
            rule TEXT,
            idle_minutes INTEGER,
            note TEXT NOT NULL DEFAULT '',
            channel TEXT NOT NULL,
            enabled INTEGER NOT NULL DEFAULT 1,
            next_run_at TEXT,
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL
        );
        CREATE INDEX activations_due ON activations (user_id, next_run_at) WHERE enabled = 1;
        -- One row per fired occurrence; the unique key is what makes firing happen once.
        CREATE TABLE activation_runs (
            id INTEGER PRIMARY KEY,
            activation_id INTEGER NOT NULL REFERENCES activations(id) ON DELETE CASCADE,
            user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            due_at TEXT NOT NULL,
            status TEXT NOT NULL,
            conversation_id INTEGER,
            message_id INTEGER,
            created_at TEXT NOT NULL,
            UNIQUE (activation_id, due_at)
        );
        CREATE INDEX activation_runs_user ON activation_runs (user_id, created_at);
        CREATE TABLE activation_prefs (
            user_id INTEGER PRIMARY KEY REFERENCES users(id) ON DELETE CASCADE,
            timezone TEXT NOT NULL DEFAULT 'UTC',
            quiet_start TEXT NOT NULL DEFAULT '22:00',
            quiet_end TEXT NOT NULL DEFAULT '08:00',
            daily_limit INTEGER NOT NULL DEFAULT 3,
            stopped INTEGER NOT NULL DEFAULT 0
        );

        -- Review kinds are checked by the review module, so a new kind (here a proposed check-in)
        -- needs no table rebuild again: the kind list leaves the table.
        CREATE TABLE proposals_new (
            id INTEGER PRIMARY KEY,
            user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            kind TEXT NOT NULL,
            conversation_id INTEGER REFERENCES conversations(id) ON DELETE SET NULL,
            payload TEXT NOT NULL CHECK (json_valid(payload)),
            reason TEXT NOT NULL,
            evidence TEXT NOT NULL DEFAULT '',
            source TEXT NOT NULL CHECK (source IN ('offline', 'model')),
            content_hash TEXT NOT NULL,
            status TEXT NOT NULL DEFAULT 'pending'
                CHECK (status IN ('pending', 'approved', 'dismissed')),
            decided_by TEXT,
            result_id INTEGER,
            created_at TEXT NOT NULL,
            decided_at TEXT
        );
        INSERT INTO proposals_new SELECT * FROM proposals;
        DROP TABLE proposals;
        ALTER TABLE proposals_new RENAME TO proposals;
        CREATE INDEX proposals_user_status ON proposals (user_id, status, id);
        CREATE INDEX proposals_user_hash ON proposals (user_id, content_hash, status);
        CREATE UNIQUE INDEX proposals_one_pending ON proposals (user_id, content_hash)
            WHERE status = 'pending';
        """,
    )



def m012_add_item_versions(conn: sqlite3.Connection) -> None:
    """Version history of fragments, personas and status fields (B2); existing ones become version 1."""
    run_script(
        conn,
        """
        CREATE TABLE item_versions (
            id INTEGER PRIMARY KEY,
            user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            noun TEXT NOT NULL CHECK (noun IN ('fragment', 'persona', 'status_field')),
            item_id INTEGER NOT NULL,
            version INTEGER NOT NULL,
            data TEXT NOT NULL CHECK (json_valid(data)),
            change TEXT NOT NULL,
            actor TEXT NOT NULL,
            created_at TEXT NOT NULL,
            UNIQUE (noun, item_id, version)
        );
        INSERT INTO item_versions (user_id, noun, item_id, version, data, change, actor, created_at)
            SELECT user_id, 'fragment', id, 1,
                   json_object('category', category, 'triggers', json(triggers), 'definition', definition,
                               'all_of', json(all_of), 'any_of', json(any_of), 'none_of', json(none_of),
                               'priority', priority, 'enabled', json(CASE enabled WHEN 1 THEN 'true' ELSE 'false' END)),
                   'created', 'unknown', created_at FROM fragments;
        INSERT INTO item_versions (user_id, noun, item_id, version, data, change, actor, created_at)
            SELECT user_id, 'persona', id, 1,
                   json_object('name', name, 'display_name', display_name, 'identity', identity,
                               'user_label', user_label, 'assistant_label', assistant_label,
                               'legacy_labels', json(legacy_labels), 'tone', tone,
                               'custom_instructions', custom_instructions, 'sections', json(sections),
                               'characters', json(characters),
                               'auto_continuity', json(CASE auto_continuity WHEN 1 THEN 'true' ELSE 'false' END),
                               'archive_access', json(CASE archive_access WHEN 1 THEN 'true' ELSE 'false' END),
                               'web_search', json(CASE web_search WHEN 1 THEN 'true' ELSE 'false' END)),
                   'created', 'unknown', created_at FROM personas;
        INSERT INTO item_versions (user_id, noun, item_id, version, data, change, actor, created_at)
            SELECT user_id, 'status_field', id, 1,
                   json_object('name', name, 'options', json(options), 'aliases', json(aliases)),
                   'created', 'unknown', created_at FROM status_fields;
        """,
    )


def m013_create_timeline(conn: sqlite3.Connection) -> None:
    run_script(
        conn,
        """
        -- Activity spans (E1): containers in the relationship timeline, never chats. At most one
        -- open span per user and companion; its start is the (created_at, id) of its span.opened
        -- event, so a timeline page can reach back to it.
        CREATE TABLE spans (
            id INTEGER PRIMARY KEY,
            user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            persona_id INTEGER REFERENCES personas(id) ON DELETE SET NULL,
            kind TEXT NOT NULL CHECK (kind IN ('text', 'voice', 'inner', 'import')),
            channel TEXT NOT NULL,
            start_event_id INTEGER NOT NULL,
            started_at TEXT NOT NULL,
            last_at TEXT NOT NULL,
            closed_at TEXT,
            close_reason TEXT,
            checkpoint_event_id INTEGER
        );
        CREATE UNIQUE INDEX spans_one_open ON spans (user_id, persona_id) WHERE closed_at IS NULL;
        CREATE INDEX spans_user_start ON spans (user_id, started_at, start_event_id);

        -- The span an event happened in (NULL for events outside any burst of activity).
        ALTER TABLE events ADD COLUMN span_id INTEGER;

        -- Continuity capsules (E3): the text lives here, its context.capsule event in the ledger;
        -- the row id is the event id, as with messages.
        CREATE TABLE capsules (
            id INTEGER PRIMARY KEY REFERENCES events(id) ON DELETE CASCADE,
            user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
            text TEXT NOT NULL,
            source TEXT NOT NULL CHECK (source IN ('offline', 'model')),
            through_message_id INTEGER NOT NULL,
            created_at TEXT NOT NULL
        );
        CREATE INDEX capsules_conversation ON capsules (conversation_id, id);

        -- The Responses API working chain of a conversation (E7): the last response id, and the
        -- replacement input of a compaction, kept until the next successful turn.
        CREATE TABLE response_chains (
            conversation_id INTEGER PRIMARY KEY REFERENCES conversations(id) ON DELETE CASCADE,
            user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            response_id TEXT,
            replacement_input TEXT CHECK (replacement_input IS NULL OR json_valid(replacement_input)),
            compacted_at TEXT,
            updated_at TEXT NOT NULL
        );
        """,
    )


def m014_add_message_alternatives_and_persona_archive(conn: sqlite3.Connection) -> None:
    """Every version of a regenerated reply or an edited message (W2); archived personas (W3)."""
    run_script(
        conn,
        """
        CREATE TABLE message_alternatives (
            id INTEGER PRIMARY KEY,
            user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            message_id INTEGER NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
            position INTEGER NOT NULL CHECK (position >= 0),
            content TEXT NOT NULL,
            metadata TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(metadata)),
            created_at TEXT NOT NULL,
            UNIQUE (message_id, position)
        );
        CREATE INDEX message_alternatives_user ON message_alternatives (user_id);
        ALTER TABLE personas ADD COLUMN archived_at TEXT;
        """,
    )


def m015_create_message_branches(conn: sqlite3.Connection) -> None:
    """The turns after an edited message, kept when the thread continues from another version (W2).

    A branch is the continuation of one version of one message. Its turns leave ``messages`` (so
    every reader of the thread, the keyword and vector indexes included, sees only the chosen
    path) and wait here with their own ids, events and versions until that version is chosen again.
    ``message_id`` has no foreign key: a branch keeps existing while its message itself waits inside
    an earlier branch.
    """
    run_script(
        conn,
        """
        CREATE TABLE message_branches (
            id INTEGER PRIMARY KEY,
            user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
            message_id INTEGER NOT NULL,
            position INTEGER NOT NULL CHECK (position >= 0),
            created_at TEXT NOT NULL,
            UNIQUE (message_id, position)
        );
        CREATE INDEX message_branches_user ON message_branches (user_id);
        CREATE INDEX message_branches_conversation ON message_branches (conversation_id);
        CREATE TABLE branch_messages (
            id INTEGER PRIMARY KEY REFERENCES events(id) ON DELETE CASCADE,
            branch_id INTEGER NOT NULL REFERENCES message_branches(id) ON DELETE CASCADE,
            user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
            role TEXT NOT NULL,
            kind TEXT NOT NULL,
            content TEXT NOT NULL,
            channel TEXT NOT NULL,
            created_at TEXT NOT NULL,
            metadata TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(metadata)),
            alternatives TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(alternatives))
        );
        CREATE INDEX branch_messages_branch ON branch_messages (branch_id, id);
        CREATE INDEX branch_messages_user ON branch_messages (user_id);
        """,
    )


def m016_keep_keyword_totals(conn: sqlite3.Connection) -> None:
    """Each keyword index's row count and total length, kept as rows change (K1 at scale, S9).

    The common-term guard and BM25 need how many rows an index holds and their average length on
    every query. FTS5 keeps both itself (its totals record and docsize table), so on SQLite there
    is nothing to add; PostgreSQL's GIN index does not, and counting a million rows per query is
    what its twin in ``pg_migrations`` avoids."""
    del conn


def m017_fold_diacritics_in_keyword_search(conn: sqlite3.Connection) -> None:
    """Keyword search folds diacritics on PostgreSQL as it does here (S6). FTS5's tokenizer
    (``remove_diacritics``) has folded them on SQLite since the indexes were created, so there is
    nothing to add; the twin in ``pg_migrations`` rebuilds PostgreSQL's indexes over folded words."""
    del conn


# The events that give a saved turn another version; a continuity capsule is stale once one of
# them touches a turn it covers (``capsules.latest``, on every send).
TURN_VERSION_EVENTS = "('message.edited', 'message.regenerated', 'message.alternative_chosen')"


def m018_index_turn_version_events(conn: sqlite3.Connection) -> None:
    """A small partial index over the events that give a turn another version (E3, W2).

    Every send asks whether the thread's latest capsule is still current, which looked through
    every event of the thread (3.7 ms for 35,000 events on the 1M deployment); the partial index
    holds only those few events (0.003 ms; built in 0.7 s at 1M)."""
    conn.execute("CREATE INDEX events_turn_versions ON events (conversation_id, id)"
                 f" WHERE kind IN {TURN_VERSION_EVENTS}")


# Written as the searches state it (``retrieval.candidates.CHAT_TURN_SQL``): a partial index is used
# only for a query whose conditions include its own.
CHAT_TURN_TIME_INDEX = ("CREATE INDEX messages_chat_time ON messages (user_id, created_at)"
                        " WHERE kind = 'chat' AND role IN ('user', 'assistant')")


def m019_index_chat_turns_by_time(conn: sqlite3.Connection) -> None:
    """One user's chat turns by time (A2): a question that names a date ranks the turns of that
    range apart, and counts them first on this index to learn whether the range is narrow enough
    to read on a send."""
    conn.execute(CHAT_TURN_TIME_INDEX)


def m020_index_chat_turns_by_time_for_time_bounds_only(conn: sqlite3.Connection) -> None:
    """PostgreSQL's migration 20 narrows migration 19's index to queries that bound the time. Here
    migration 19's index stays: SQLite does not take "created_at IS NOT NULL" as implied by a
    range over a NOT NULL column, so the narrowed index would serve no query; its searches keep
    the user's term out of the choice of index instead ("+m.user_id", ``retrieval.candidates``).
    The version exists on both engines so their schema numbers agree."""


# Migration 21's tables, the same on both engines but for their integer types (the PostgreSQL
# twin fills in its identity column and BIGINT).
FRAGMENT_BOOKS = """
CREATE TABLE fragment_books (
    id {id},
    user_id {int} NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    scope TEXT NOT NULL DEFAULT 'all' CHECK (scope IN ('all', 'character', 'personas')),
    character_id {int} REFERENCES personas(id) ON DELETE SET NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    UNIQUE (user_id, name)
);
CREATE TABLE fragment_book_personas (
    book_id {int} NOT NULL REFERENCES fragment_books(id) ON DELETE CASCADE,
    persona_id {int} NOT NULL REFERENCES personas(id) ON DELETE CASCADE,
    PRIMARY KEY (book_id, persona_id)
);
"""


def scope_card_books(conn: Any) -> None:
    """Migration 21's data step, on either engine (``conn`` speaks SQLite's dialect): fragments a
    card's character book brought in (``import_key`` ``card:PERSONA:ID``) become that persona's
    book. A category they share with other fragments is split off under a name of its own, so
    the other fragments stay global as they were."""
    now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    groups: dict[tuple[int, str, int], list[int]] = {}
    for fid, user_id, category, key in conn.execute(
            "SELECT id, user_id, category, import_key FROM fragments WHERE import_key LIKE 'card:%' ORDER BY id"):
        head = key.split(":")
        if len(head) >= 3 and head[1].isdigit():
            groups.setdefault((user_id, category, int(head[1])), []).append(fid)
    for (user_id, category, persona_id), ids in groups.items():
        persona = conn.execute("SELECT display_name FROM personas WHERE id = ? AND user_id = ?",
                               (persona_id, user_id)).fetchone()
        if persona is None:
            continue
        in_category = conn.execute("SELECT count(*) FROM fragments WHERE user_id = ? AND category = ?",
                                   (user_id, category)).fetchone()[0]
        taken = conn.execute("SELECT 1 FROM fragment_books WHERE user_id = ? AND name = ?",
                             (user_id, category)).fetchone()
        name = category
        if not category or in_category != len(ids) or taken:
            base, n = (f"{category} ({persona[0]})" if category else persona[0]), 1
            while True:
                suffix = "" if n == 1 else f" {n}"
                name = " ".join((base[:60 - len(suffix)] + suffix).split())
                clash = conn.execute(
                    "SELECT 1 FROM fragments WHERE user_id = ? AND category = ?"
                    " UNION ALL SELECT 1 FROM fragment_books WHERE user_id = ? AND name = ?",
                    (user_id, name, user_id, name)).fetchone()
                if clash is None:
                    break
                n += 1
            conn.executemany("UPDATE fragments SET category = ? WHERE id = ?", [(name, fid) for fid in ids])
        conn.execute("INSERT INTO fragment_books (user_id, name, scope, character_id, created_at, updated_at)"
                     " VALUES (?, ?, 'character', ?, ?, ?)", (user_id, name, persona_id, now, now))
        book_id = conn.execute("SELECT id FROM fragment_books WHERE user_id = ? AND name = ?",
                               (user_id, name)).fetchone()[0]
        conn.execute("INSERT INTO fragment_book_personas (book_id, persona_id) VALUES (?, ?)", (book_id, persona_id))


def m021_scope_fragment_books(conn: sqlite3.Connection) -> None:
    """Lorebooks scoped as SillyTavern scopes them (X3, F1).

    A book is a fragment category. ``fragment_books`` gives one a scope: ``all`` personas (a World
    Info file's default; also every category without a row), its ``character`` (a card's own book,
    ``character_id``) or chosen ``personas``. ``fragment_book_personas`` lists who may see a book
    that is not for all, the character included, so the send path finds a persona's books with
    one indexed lookup. Books a card brought in before are given their character's scope."""
    run_script(conn, FRAGMENT_BOOKS.format(id="INTEGER PRIMARY KEY", int="INTEGER"))
    scope_card_books(conn)


def m023_add_persona_uuid(conn: sqlite3.Connection) -> None:
    """A stable identity for each persona (X3): a card exported from it carries the uuid, so
    importing that card again is recognised as the same character rather than a new one. Ids can
    be reused after a delete and mean nothing on another deployment; the uuid is neither."""
    run_script(
        conn,
        """
        ALTER TABLE personas ADD COLUMN uuid TEXT;
        UPDATE personas SET uuid = lower(hex(randomblob(16))) WHERE uuid IS NULL;
        CREATE UNIQUE INDEX personas_uuid ON personas (user_id, uuid);
        """,
    )


# What card imports before migration 22 baked into a persona: {{char}} as the card's name and
# {{user}} as "the person". Kept here as it was, so the migration recognises that text.
_BAKED_CHAR = ("{{char}}", "<BOT>", "{{Char}}")
_BAKED_USER = ("{{user}}", "<USER>", "{{User}}")


def _baked(text: str, name: str) -> str:
    for token in _BAKED_CHAR:
        text = text.replace(token, name)
    for token in _BAKED_USER:
        text = text.replace(token, "the person")
    return text


def _card_identity(fields: dict, name: str | None) -> str:
    """The identity a card gives, as imports wrote it before (``name``) or now (``None``: macros kept)."""
    parts = []
    if fields.get("description"):
        parts.append(fields["description"].strip())
    if fields.get("personality"):
        parts.append(f"{name or '{{char}}'}'s personality: {fields['personality'].strip()}")
    if fields.get("scenario"):
        parts.append(f"Scenario: {fields['scenario'].strip()}")
    text = "\n\n".join(parts)
    return (_baked(text, name) if name else text) or f"You are {name or '{{char}}'}."


def unbake_card_macros(conn: Any) -> None:
    """Migration 22's data step, on either engine (``conn`` speaks SQLite's dialect): a persona
    whose identity or custom instructions are still exactly what its card's import wrote gets the
    card's text back with its macros, to be filled when the prompt is built. Text the owner edited
    since is left as it is."""
    import json

    rows = conn.execute("SELECT id, display_name, identity, custom_instructions, card FROM personas"
                        " WHERE card != '{}' ORDER BY id").fetchall()
    for pid, name, identity, instructions, raw in rows:
        try:
            fields = json.loads(raw)
        except ValueError:
            continue
        if not isinstance(fields, dict) or not all(isinstance(fields.get(k, ""), str) for k in
                                                   ("description", "personality", "scenario", "system_prompt")):
            continue
        if identity == _card_identity(fields, name):
            conn.execute("UPDATE personas SET identity = ? WHERE id = ?", (_card_identity(fields, None), pid))
        system = fields.get("system_prompt", "")
        if system and instructions == _baked(system, name):
            conn.execute("UPDATE personas SET custom_instructions = ? WHERE id = ?", (system, pid))


def m022_add_user_display_name(conn: sqlite3.Connection) -> None:
    """What companions call the person (X3 macros): ``{{user}}`` in a card is filled with the user's
    display name when text is placed in a prompt, "the person" while none is set. Personas that
    card imports wrote with the macros already filled get their macros back."""
    conn.execute("ALTER TABLE users ADD COLUMN display_name TEXT")
    unbake_card_macros(conn)


# Migration 24's table, the same on both engines but for their integer types.
CONVERSATION_TAGS = """
CREATE TABLE conversation_tags (
    id {id},
    user_id {int} NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    conversation_id {int} NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
    tag TEXT NOT NULL,
    created_at TEXT NOT NULL,
    UNIQUE (conversation_id, tag)
);
CREATE INDEX conversation_tags_user_tag ON conversation_tags (user_id, tag, conversation_id);
CREATE INDEX conversations_user_pinned ON conversations (user_id, updated_at) WHERE pinned_at IS NOT NULL;
UPDATE conversations SET imported = 1 WHERE id IN
    (SELECT conversation_id FROM events WHERE kind = 'conversation.created' AND channel = 'import');
"""


def m024_add_thread_pins_tags_and_imported(conn: sqlite3.Connection) -> None:
    """Finding chats (W4): a thread can be pinned (``pinned_at``, listed first) and tagged.

    A thread's tags are kept twice, in one transaction: ``conversations.tags`` (a JSON list) so a
    thread read anywhere carries them at no extra query, and ``conversation_tags`` so ``tag:NAME``
    is one indexed lookup. ``imported`` marks a thread an import created (a SillyTavern chat): it
    is read only; threads imported before are found by their creation event's channel."""
    run_script(
        conn,
        """
        ALTER TABLE conversations ADD COLUMN pinned_at TEXT;
        ALTER TABLE conversations ADD COLUMN tags TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(tags));
        ALTER TABLE conversations ADD COLUMN imported INTEGER NOT NULL DEFAULT 0;
        """ + CONVERSATION_TAGS.format(id="INTEGER PRIMARY KEY", int="INTEGER"),
    )


# Migration 25's table, the same on both engines but for their integer types.
PROMPT_PRESETS = """
CREATE TABLE prompt_presets (
    id {id},
    user_id {int} NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    text TEXT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    UNIQUE (user_id, name)
);
"""


def m025_add_chat_models_and_prompt_presets(conn: sqlite3.Connection) -> None:
    """Per-chat model choice and prompt presets (W3, PR1, P5).

    ``conversations.model`` is the model a conversation asks for (NULL: the deployment's default).
    ``response_chains.model`` is the model whose response the chain continues from, so a chain is
    never continued with another model (NULL: a chain from before, made with the default).
    ``prompt_presets`` are a person's named texts, applied to a conversation as its custom
    instructions (a copy: editing a preset later changes no conversation)."""
    run_script(
        conn,
        """
        ALTER TABLE conversations ADD COLUMN model TEXT;
        ALTER TABLE response_chains ADD COLUMN model TEXT;
        """ + PROMPT_PRESETS.format(id="INTEGER PRIMARY KEY", int="INTEGER"),
    )


# Migration 26's tables, the same on both engines but for their integer and byte types.
FACTS = """
CREATE TABLE facts (
    id {id},
    user_id {int} NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    conversation_id {int} REFERENCES conversations(id) ON DELETE CASCADE,
    text TEXT NOT NULL,
    fact_date TEXT,
    source TEXT NOT NULL CHECK (source IN ('offline', 'model', 'import')),
    span_id {int},
    created_at TEXT NOT NULL,
    embedding {blob},
    embedding_model TEXT{vec}
);
CREATE INDEX facts_user_model ON facts (user_id, embedding_model);
CREATE TABLE fact_sources (
    fact_id {int} NOT NULL REFERENCES facts(id) ON DELETE CASCADE,
    message_id {int} NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
    PRIMARY KEY (fact_id, message_id)
);
CREATE INDEX fact_sources_message ON fact_sources (message_id, fact_id);
"""


def m026_create_facts(conn: sqlite3.Connection) -> None:
    """Facts written at ingestion (E2, A2): short dated statements, each citing the turns it came
    from (``fact_sources``). They are searched beside the turns (their own keyword index and
    vectors) and a hit returns its source turns, never the fact's own words. A fact goes with any
    turn it cites (B4): the trigger removes it when a source row goes, by cascade or otherwise."""
    run_script(
        conn,
        FACTS.format(id="INTEGER PRIMARY KEY AUTOINCREMENT", int="INTEGER", blob="BLOB", vec="") + """
        CREATE TRIGGER fact_sources_gone AFTER DELETE ON fact_sources
        BEGIN
            DELETE FROM facts WHERE id = old.fact_id;
        END;
        CREATE VIRTUAL TABLE facts_fts USING fts5(
            text, content='facts', content_rowid='id',
            tokenize='unicode61 remove_diacritics 2'
        );
        CREATE VIRTUAL TABLE facts_fts_vocab USING fts5vocab(facts_fts, 'row');
        CREATE TRIGGER facts_fts_insert AFTER INSERT ON facts
        BEGIN
            INSERT INTO facts_fts (rowid, text) VALUES (new.id, new.text);
        END;
        CREATE TRIGGER facts_fts_delete AFTER DELETE ON facts
        BEGIN
            INSERT INTO facts_fts (facts_fts, rowid, text) VALUES ('delete', old.id, old.text);
        END;
        CREATE TRIGGER facts_fts_update AFTER UPDATE OF text ON facts
        BEGIN
            INSERT INTO facts_fts (facts_fts, rowid, text) VALUES ('delete', old.id, old.text);
            INSERT INTO facts_fts (rowid, text) VALUES (new.id, new.text);
        END;
        CREATE TRIGGER fact_vectors_insert AFTER INSERT ON facts
        WHEN new.embedding_model IS NOT NULL
        BEGIN
            INSERT INTO vector_counts (user_id, source, model, count, max_id)
                VALUES (new.user_id, 'facts', new.embedding_model, 1, new.id)
            ON CONFLICT (user_id, source, model) DO UPDATE SET
                count = count + 1, rev = rev + (excluded.max_id < max_id), max_id = max(max_id, excluded.max_id);
        END;
        CREATE TRIGGER fact_vectors_delete AFTER DELETE ON facts
        WHEN old.embedding_model IS NOT NULL
        BEGIN
            UPDATE vector_counts SET count = count - 1, rev = rev + 1
            WHERE user_id = old.user_id AND source = 'facts' AND model = old.embedding_model;
        END;
        CREATE TRIGGER fact_vectors_update AFTER UPDATE OF embedding, embedding_model ON facts
        BEGIN
            UPDATE vector_counts SET count = count - 1, rev = rev + 1
            WHERE old.embedding_model IS NOT NULL
              AND user_id = old.user_id AND source = 'facts' AND model = old.embedding_model;
            INSERT INTO vector_counts (user_id, source, model, count, max_id)
                SELECT new.user_id, 'facts', new.embedding_model, 1, new.id
                WHERE new.embedding_model IS NOT NULL
            ON CONFLICT (user_id, source, model) DO UPDATE SET
                count = count + 1,
                rev = rev + (old.embedding_model IS NOT NULL OR excluded.max_id < max_id),
                max_id = max(max_id, excluded.max_id);
        END;
        """,
    )


# Migration 27's table, the same on both engines but for their integer types.
ARCHIVE_TURNS = """
CREATE TABLE archive_turns (
    id {id},
    user_id {int} NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    document_id {int} NOT NULL REFERENCES archive_documents(id) ON DELETE CASCADE,
    position {int} NOT NULL,
    role TEXT NOT NULL,
    label TEXT NOT NULL,
    text TEXT NOT NULL,
    created_at TEXT,
    UNIQUE (document_id, position)
);
ALTER TABLE conversation_summaries ADD COLUMN source_document_id {int} REFERENCES archive_documents(id) ON DELETE SET NULL;
ALTER TABLE branch_requests ADD COLUMN source_document_id {int} REFERENCES archive_documents(id) ON DELETE SET NULL;
"""


def m027_keep_archive_turns(conn: sqlite3.Connection) -> None:
    """An archive document's turns as they were imported (speaker, role, time, text), so an imported
    ChatGPT or Claude conversation opens as a read-only thread (A5, X4, W4). The chunks stay the
    one searchable copy: turns have no keyword index and no vectors. A continuation's handoff may
    come from a document (``source_document_id``): its source ids are then turn ids."""
    run_script(conn, ARCHIVE_TURNS.format(id="INTEGER PRIMARY KEY", int="INTEGER"))


MIGRATIONS: list[Callable[[sqlite3.Connection], None]] = [
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


def migrate(conn: sqlite3.Connection, *, upto: int | None = None) -> list[int]:
    """Apply missing migrations (up to version ``upto``, all by default) inside the caller's
    transaction; return the versions applied."""
    _ensure_table(conn)
    check_version(conn)
    done = {r[0] for r in conn.execute("SELECT version FROM schema_migrations")}
    applied = []
    for migration in sorted(MIGRATIONS, key=number):
        if number(migration) in done or (upto is not None and number(migration) > upto):
            continue
        migration(conn)
        conn.execute(
            "INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)",
            (number(migration), migration.__name__, datetime.now(timezone.utc).isoformat()),
        )
        applied.append(number(migration))
    return applied
