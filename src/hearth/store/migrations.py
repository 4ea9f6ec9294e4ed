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

from ..errors import SchemaError
from .schema import POSTGRESQL, SQLITE, Call, Migration, Operation, Renderer, Sql, Step, ensure_vector, fold

__all__ = ["LATEST_VERSION", "MIGRATIONS", "POSTGRESQL", "SQLITE", "check_version", "current_version",
           "ensure_vector", "migrate", "number"]

migration = Migration


# -- Steps of migrations 1 to 14 ---------------------------------------------------------------

LEDGER_APPEND_ONLY = Step(
    "ledger_append_only",  # the ledger (S2) refuses any change to an event
    sqlite="""
        CREATE TRIGGER events_append_only BEFORE UPDATE ON events
        BEGIN
            SELECT RAISE(ABORT, 'events are append-only');
        END;
        """,
    postgresql="""
-- The ledger is append-only (S2): a trigger refuses any change to an event.
CREATE FUNCTION hearth_events_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'events are append-only' USING ERRCODE = 'integrity_constraint_violation';
END $$;
CREATE TRIGGER events_append_only BEFORE UPDATE ON events
    FOR EACH ROW EXECUTE FUNCTION hearth_events_append_only();
""",
)

MESSAGES_KEYWORD_INDEX = Step(
    "messages_keyword_index",  # S6: FTS5 kept by triggers; PostgreSQL's GIN index is part of the table
    sqlite="""
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
        """,
    postgresql="""
-- Keyword search (S6, S9): an expression GIN index over the same rows FTS5 indexes on SQLite.
-- The index is part of the table, so it is in step with every insert, edit and delete.
CREATE INDEX messages_search ON messages USING gin (to_tsvector('simple', content))
    WHERE kind = 'chat' AND role IN ('user', 'assistant');
""",
)

TURN_COUNTS = Step(
    "turn_counts",  # conversations.turn_count and history_rev, kept in the writing transaction
    sqlite="""
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
        """,
    # One function keeps the counts and invalidates rolling summaries (migration 4's step).
    postgresql=r"""
-- Visible turns and the history revision of each conversation, kept in the same transaction.
CREATE FUNCTION hearth_is_turn(kind TEXT, role TEXT) RETURNS BIGINT LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN kind IN ('chat', 'handoff_artifact') AND role IN ('user', 'assistant') THEN 1 ELSE 0 END
$$;
CREATE FUNCTION hearth_utcnow() RETURNS TEXT LANGUAGE sql AS $$
    SELECT to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')
$$;
CREATE FUNCTION hearth_messages_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        IF hearth_is_turn(NEW.kind, NEW.role) = 1 THEN
            UPDATE conversations SET turn_count = turn_count + 1 WHERE id = NEW.conversation_id;
        END IF;
        RETURN NULL;
    END IF;
    IF TG_OP = 'DELETE' THEN
        IF hearth_is_turn(OLD.kind, OLD.role) = 1 THEN
            UPDATE conversations SET turn_count = turn_count - 1, history_rev = history_rev + 1
            WHERE id = OLD.conversation_id;
        END IF;
        IF OLD.kind = 'chat' THEN
            UPDATE thread_summaries SET invalidated_at = hearth_utcnow()
            WHERE conversation_id = OLD.conversation_id AND through_message_id >= OLD.id
              AND invalidated_at IS NULL;
        END IF;
        RETURN NULL;
    END IF;
    IF OLD.kind IN ('chat', 'handoff_artifact') OR NEW.kind IN ('chat', 'handoff_artifact') THEN
        UPDATE conversations SET history_rev = history_rev + 1,
            turn_count = turn_count - hearth_is_turn(OLD.kind, OLD.role) + hearth_is_turn(NEW.kind, NEW.role)
        WHERE id = NEW.conversation_id;
    END IF;
    IF OLD.kind = 'chat' AND (NEW.content IS DISTINCT FROM OLD.content OR NEW.role IS DISTINCT FROM OLD.role
                              OR NEW.kind IS DISTINCT FROM OLD.kind) THEN
        UPDATE thread_summaries SET invalidated_at = hearth_utcnow()
        WHERE conversation_id = OLD.conversation_id AND through_message_id >= OLD.id
          AND invalidated_at IS NULL;
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER messages_changed_insert AFTER INSERT ON messages
    FOR EACH ROW EXECUTE FUNCTION hearth_messages_changed();
CREATE TRIGGER messages_changed_delete AFTER DELETE ON messages
    FOR EACH ROW EXECUTE FUNCTION hearth_messages_changed();
CREATE TRIGGER messages_changed_update AFTER UPDATE OF content, kind, role ON messages
    FOR EACH ROW EXECUTE FUNCTION hearth_messages_changed();
""",
)

SUMMARIES_FOLLOW_EDITS = Step(
    "summaries_follow_edits",  # RS1: editing or deleting a summarised chat turn invalidates it
    sqlite="""
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
""",
    postgresql=None,  # hearth_messages_changed (TURN_COUNTS) does it
)

CHUNKS_KEYWORD_INDEX = Step(
    "chunks_keyword_index",  # A1, S6: archive chunks searched by keyword
    sqlite="""
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
""",
    postgresql="""
CREATE INDEX archive_chunks_search ON archive_chunks USING gin (to_tsvector('simple', text));
""",
)

KEYWORD_VOCABULARIES = Step(
    "keyword_vocabularies",  # K1 at scale: document frequencies, to drop very common terms
    sqlite="""
        -- Document frequencies for query building: very common terms are dropped (K1 at scale).
        CREATE VIRTUAL TABLE messages_fts_vocab USING fts5vocab(messages_fts, 'row');
        CREATE VIRTUAL TABLE archive_chunks_fts_vocab USING fts5vocab(archive_chunks_fts, 'row');
""",
    postgresql=None,  # retrieval/pgsearch.py reads frequencies from the GIN index's statistics
)

VECTOR_COUNTS = Step(
    "vector_counts",  # vector_counts kept by triggers as embeddings come and go
    sqlite="""
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
    postgresql=r"""
-- Vector counts per (user, source, model): the revision tells cached indexes they are stale.
CREATE FUNCTION hearth_vector_added(u BIGINT, src TEXT, m TEXT, item BIGINT, bump BOOLEAN) RETURNS void
LANGUAGE sql AS $$
    INSERT INTO vector_counts AS v (user_id, source, model, count, max_id, rev)
        VALUES (u, src, m, 1, item, CASE WHEN bump THEN 1 ELSE 0 END)
    ON CONFLICT (user_id, source, model) DO UPDATE SET
        count = v.count + 1,
        rev = v.rev + CASE WHEN bump OR excluded.max_id < v.max_id THEN 1 ELSE 0 END,
        max_id = GREATEST(v.max_id, excluded.max_id)
$$;
CREATE FUNCTION hearth_vector_removed(u BIGINT, src TEXT, m TEXT) RETURNS void LANGUAGE sql AS $$
    UPDATE vector_counts SET count = count - 1, rev = rev + 1
    WHERE user_id = u AND source = src AND model = m
$$;
CREATE FUNCTION hearth_message_vectors_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        PERFORM hearth_vector_removed(OLD.user_id, 'messages', OLD.model);
    END IF;
    IF TG_OP IN ('UPDATE', 'INSERT') THEN
        PERFORM hearth_vector_added(NEW.user_id, 'messages', NEW.model, NEW.message_id, TG_OP = 'UPDATE');
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER message_vectors_changed AFTER INSERT OR UPDATE OR DELETE ON message_embeddings
    FOR EACH ROW EXECUTE FUNCTION hearth_message_vectors_changed();
CREATE FUNCTION hearth_chunk_vectors_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') AND OLD.embedding_model IS NOT NULL THEN
        PERFORM hearth_vector_removed(OLD.user_id, 'chunks', OLD.embedding_model);
    END IF;
    IF TG_OP IN ('UPDATE', 'INSERT') AND NEW.embedding_model IS NOT NULL THEN
        PERFORM hearth_vector_added(NEW.user_id, 'chunks', NEW.embedding_model, NEW.id,
                                    TG_OP = 'UPDATE' AND OLD.embedding_model IS NOT NULL);
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER chunk_vectors_insert_delete AFTER INSERT OR DELETE ON archive_chunks
    FOR EACH ROW EXECUTE FUNCTION hearth_chunk_vectors_changed();
CREATE TRIGGER chunk_vectors_update AFTER UPDATE OF embedding, embedding_model ON archive_chunks
    FOR EACH ROW EXECUTE FUNCTION hearth_chunk_vectors_changed();
""",
)


@migration
def m001_create_foundation() -> list[Operation]:
    return [
        Sql("""
        CREATE TABLE users (
            id {key},
            name TEXT NOT NULL UNIQUE,
            is_owner {int} NOT NULL DEFAULT 0,
            password_hash TEXT,
            created_at TEXT NOT NULL
        );
        CREATE TABLE api_tokens (
            id {key},
            user_id {int} NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            name TEXT NOT NULL,
            token_hash TEXT NOT NULL UNIQUE,
            created_at TEXT NOT NULL,
            last_used_at TEXT,
            revoked_at TEXT
        );
        CREATE TABLE auth_sessions (
            id TEXT PRIMARY KEY,
            user_id {int} NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            csrf_token TEXT NOT NULL,
            created_at TEXT NOT NULL,
            expires_at TEXT NOT NULL
        );
        CREATE TABLE app_state (
            key TEXT PRIMARY KEY,
            value TEXT NOT NULL CHECK ({json:value})
        );
        CREATE TABLE personas (
            id {key},
            user_id {int} NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            name TEXT NOT NULL,
            display_name TEXT NOT NULL,
            identity TEXT NOT NULL DEFAULT '',
            user_label TEXT NOT NULL,
            assistant_label TEXT NOT NULL,
            legacy_labels TEXT NOT NULL DEFAULT '[]' CHECK ({json:legacy_labels}),
            tone TEXT NOT NULL DEFAULT 'Natural',
            custom_instructions TEXT NOT NULL DEFAULT '',
            sections TEXT NOT NULL DEFAULT '{}' CHECK ({json:sections}),
            characters TEXT NOT NULL DEFAULT '[]' CHECK ({json:characters}),
            auto_continuity {int} NOT NULL DEFAULT 1,
            archive_access {int} NOT NULL DEFAULT 0,
            web_search {int} NOT NULL DEFAULT 0,
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            UNIQUE (user_id, name)
        );
        CREATE TABLE folders (
            id {key},
            user_id {int} NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            name TEXT NOT NULL,
            hidden {int} NOT NULL DEFAULT 0,
            created_at TEXT NOT NULL,
            UNIQUE (user_id, name)
        );
        CREATE TABLE conversations (
            id {key},
            user_id {int} NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            persona_id {int} NOT NULL REFERENCES personas(id),
            folder_id {int} REFERENCES folders(id) ON DELETE SET NULL,
            title TEXT NOT NULL DEFAULT '',
            state TEXT NOT NULL DEFAULT 'open' CHECK (state IN ('open', 'ended')),
            trashed_at TEXT,
            continuity_shielded {int} NOT NULL DEFAULT 0,
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            ended_at TEXT,
            -- Kept by triggers on messages: visible turns, and a revision bumped whenever an
            -- existing turn changes or goes, so cached history knows when it is stale.
            turn_count {int} NOT NULL DEFAULT 0,
            history_rev {int} NOT NULL DEFAULT 0
        );
        CREATE INDEX conversations_user_updated ON conversations (user_id, updated_at);

        -- The ledger (S2): append-only; ordered by (created_at, id).
        CREATE TABLE events (
            id {serial},
            user_id {int} NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            conversation_id {int} REFERENCES conversations(id) ON DELETE CASCADE,
            kind TEXT NOT NULL,
            channel TEXT NOT NULL DEFAULT 'web',
            created_at TEXT NOT NULL,
            payload TEXT NOT NULL DEFAULT '{}' CHECK ({json:payload})
        );
        CREATE INDEX events_user_time ON events (user_id, created_at, id);
        CREATE INDEX events_conversation_time ON events (conversation_id, created_at, id);
        """),
        LEDGER_APPEND_ONLY,
        Sql("""

        -- A message is an event with a row here: messages.id is its event's id, so the two are
        -- written in one transaction and can never drift apart.
        CREATE TABLE messages (
            id {int} PRIMARY KEY REFERENCES events(id) ON DELETE CASCADE,
            user_id {int} NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            conversation_id {int} NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
            role TEXT NOT NULL CHECK (role IN ('system', 'user', 'assistant', 'tool')),
            kind TEXT NOT NULL DEFAULT 'chat'
                CHECK (kind IN ('chat', 'static_prompt', 'handoff_artifact', 'tool_result')),
            content TEXT NOT NULL,
            channel TEXT NOT NULL DEFAULT 'web',
            created_at TEXT NOT NULL,
            metadata TEXT NOT NULL DEFAULT '{}' CHECK ({json:metadata})
        );
        CREATE INDEX messages_conversation ON messages (conversation_id, id);
        -- Exactly one stored static prompt per conversation (P2).
        CREATE UNIQUE INDEX messages_one_static_prompt ON messages (conversation_id)
            WHERE kind = 'static_prompt';

        """),
        MESSAGES_KEYWORD_INDEX,
        TURN_COUNTS,
    ]


@migration
def m002_create_memories_and_continuity() -> list[Operation]:
    return [
        Sql("""
        -- Long-term memories (M1). AUTOINCREMENT: a deleted id is never handed out again (M7).
        CREATE TABLE memories (
            id {serial},
            user_id {int} NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            text TEXT NOT NULL,
            category TEXT NOT NULL DEFAULT '',
            importance {int} NOT NULL DEFAULT 0,
            position {int} NOT NULL,
            eligible {int} NOT NULL DEFAULT 1,
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL
        );
        CREATE INDEX memories_user_position ON memories (user_id, position);

        -- Snapshot membership (M2): which memory ids a conversation may carry.
        CREATE TABLE conversation_memories (
            conversation_id {int} NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
            memory_id {int} NOT NULL REFERENCES memories(id) ON DELETE CASCADE,
            PRIMARY KEY (conversation_id, memory_id)
        ) {without_rowid};
        CREATE INDEX conversation_memories_memory ON conversation_memories (memory_id, conversation_id);

        -- Snapshot metadata (M5): timestamps and provenance only. Rows that predate snapshots keep
        -- provenance 'legacy' and no invented capture time.
        ALTER TABLE conversations ADD COLUMN snapshot_provenance TEXT NOT NULL DEFAULT 'legacy';
        ALTER TABLE conversations ADD COLUMN snapshot_captured_at TEXT;
        ALTER TABLE conversations ADD COLUMN snapshot_refreshed_at TEXT;
        ALTER TABLE conversations ADD COLUMN snapshot_backfilled {int} NOT NULL DEFAULT 0;

        -- Continuity rows (H10): the historical table name and its retired columns are kept; the
        -- runtime reads and writes only handoff and the structured source columns.
        CREATE TABLE conversation_summaries (
            id {key},
            user_id {int} NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            conversation_id {int} NOT NULL UNIQUE REFERENCES conversations(id) ON DELETE CASCADE,
            source_conversation_id {int} REFERENCES conversations(id) ON DELETE SET NULL,
            source_message_ids TEXT NOT NULL DEFAULT '[]' CHECK ({json:source_message_ids}),
            handoff TEXT NOT NULL DEFAULT '',
            summary TEXT NOT NULL DEFAULT '',
            recent_raw TEXT NOT NULL DEFAULT '',
            created_at TEXT NOT NULL
        );
        """),
    ]


@migration
def m003_create_branch_requests() -> list[Operation]:
    return [
        Sql("""
        -- Branch idempotency (H8): one destination per client retry key and user.
        CREATE TABLE branch_requests (
            id {key},
            user_id {int} NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            retry_key TEXT NOT NULL,
            source_conversation_id {int} REFERENCES conversations(id) ON DELETE SET NULL,
            destination_conversation_id {int} NOT NULL
                REFERENCES conversations(id) ON DELETE CASCADE,
            created_at TEXT NOT NULL,
            UNIQUE (user_id, retry_key)
        );
        """),
    ]


@migration
def m004_create_layers() -> list[Operation]:
    return [
        Sql("""
        -- Background jobs: a durable queue, so a restart resumes pending work. last_error holds an
        -- error class or kind only, never content. One pending job per (user, kind, dedupe key).
        CREATE TABLE jobs (
            id {key},
            user_id {int} NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            kind TEXT NOT NULL,
            payload TEXT NOT NULL DEFAULT '{}' CHECK ({json:payload}),
            dedupe_key TEXT,
            status TEXT NOT NULL DEFAULT 'pending'
                CHECK (status IN ('pending', 'running', 'done', 'dead')),
            attempts {int} NOT NULL DEFAULT 0,
            max_attempts {int} NOT NULL DEFAULT 5,
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
            user_id {int} NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            key TEXT NOT NULL,
            value TEXT NOT NULL CHECK ({json:value}),
            PRIMARY KEY (user_id, key)
        ) {without_rowid};

        -- How far a background layer has read a conversation (status detection, review).
        CREATE TABLE layer_cursors (
            conversation_id {int} NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
            layer TEXT NOT NULL,
            user_id {int} NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            message_id {int} NOT NULL,
            updated_at TEXT NOT NULL,
            PRIMARY KEY (conversation_id, layer)
        ) {without_rowid};

        -- Household status (HS1): named fields; a value is retired (valid_to), never overwritten.
        CREATE TABLE status_fields (
            id {key},
            user_id {int} NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            name TEXT NOT NULL,
            options TEXT NOT NULL DEFAULT '[]' CHECK ({json:options}),
            aliases TEXT NOT NULL DEFAULT '[]' CHECK ({json:aliases}),
            position {int} NOT NULL,
            created_at TEXT NOT NULL,
            retired_at TEXT
        );
        CREATE UNIQUE INDEX status_fields_active_name ON status_fields (user_id, {nocase:name})
            WHERE retired_at IS NULL;
        CREATE TABLE status_values (
            id {key},
            user_id {int} NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            field_id {int} NOT NULL REFERENCES status_fields(id) ON DELETE CASCADE,
            value TEXT NOT NULL,
            source TEXT NOT NULL DEFAULT 'manual' CHECK (source IN ('manual', 'approved', 'auto')),
            proposal_id {int},
            valid_from TEXT NOT NULL,
            valid_to TEXT
        );
        CREATE UNIQUE INDEX status_values_current ON status_values (field_id) WHERE valid_to IS NULL;
        CREATE INDEX status_values_field_time ON status_values (field_id, valid_from);

        -- Live context (LC1): one current row per thread; nudges (LC2) with a hidden marker.
        CREATE TABLE live_context (
            conversation_id {int} PRIMARY KEY REFERENCES conversations(id) ON DELETE CASCADE,
            user_id {int} NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            mood TEXT NOT NULL DEFAULT '',
            events TEXT NOT NULL DEFAULT '',
            needs TEXT NOT NULL DEFAULT '',
            summary TEXT NOT NULL DEFAULT '',
            source TEXT NOT NULL DEFAULT 'offline' CHECK (source IN ('offline', 'model', 'manual')),
            through_message_id {int} NOT NULL DEFAULT 0,
            updated_at TEXT NOT NULL
        );
        CREATE TABLE nudges (
            id {key},
            user_id {int} NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            conversation_id {int} NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
            text TEXT NOT NULL,
            marker TEXT NOT NULL,
            source TEXT NOT NULL DEFAULT 'offline' CHECK (source IN ('offline', 'model', 'manual')),
            status TEXT NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'used', 'dropped')),
            created_at TEXT NOT NULL,
            used_at TEXT,
            used_message_id {int},
            UNIQUE (conversation_id, marker)
        );
        CREATE INDEX nudges_open ON nudges (conversation_id, status);

        -- Rolling thread summaries (RS1), each tied to the message it was made at. Editing or
        -- deleting a chat message at or before that point invalidates it, so the layer falls back
        -- to the last summary that is still valid.
        CREATE TABLE thread_summaries (
            id {key},
            user_id {int} NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            conversation_id {int} NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
            text TEXT NOT NULL,
            source TEXT NOT NULL CHECK (source IN ('offline', 'model')),
            through_message_id {int} NOT NULL,
            section_messages {int} NOT NULL,
            created_at TEXT NOT NULL,
            invalidated_at TEXT
        );
        CREATE INDEX thread_summaries_conversation ON thread_summaries (conversation_id, through_message_id);
        """),
        SUMMARIES_FOLLOW_EDITS,
        Sql("""
        -- Memory fragments (F1): trigger-based stable profile context. The library version is
        -- bumped by every edit, so a compiled trigger index is rebuilt only after a change (F2).
        CREATE TABLE fragments (
            id {key},
            user_id {int} NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            category TEXT NOT NULL DEFAULT '',
            triggers TEXT NOT NULL CHECK ({json:triggers}),
            definition TEXT NOT NULL,
            all_of TEXT NOT NULL DEFAULT '[]' CHECK ({json:all_of}),
            any_of TEXT NOT NULL DEFAULT '[]' CHECK ({json:any_of}),
            none_of TEXT NOT NULL DEFAULT '[]' CHECK ({json:none_of}),
            priority {int} NOT NULL DEFAULT 0,
            enabled {int} NOT NULL DEFAULT 1,
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL
        );
        CREATE INDEX fragments_user ON fragments (user_id, id);
        CREATE TABLE fragment_library (
            user_id {int} PRIMARY KEY REFERENCES users(id) ON DELETE CASCADE,
            version {int} NOT NULL
        );

        -- Review queue (F3, G4): suggestions wait for approval. A dismissed proposal's content
        -- hash keeps the same suggestion from coming back unchanged.
        CREATE TABLE proposals (
            id {key},
            user_id {int} NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            kind TEXT NOT NULL
                CHECK (kind IN ('fragment_add', 'fragment_update', 'status_change', 'memory_add')),
            conversation_id {int} REFERENCES conversations(id) ON DELETE SET NULL,
            payload TEXT NOT NULL CHECK ({json:payload}),
            reason TEXT NOT NULL,
            evidence TEXT NOT NULL DEFAULT '',
            source TEXT NOT NULL CHECK (source IN ('offline', 'model')),
            content_hash TEXT NOT NULL,
            status TEXT NOT NULL DEFAULT 'pending'
                CHECK (status IN ('pending', 'approved', 'dismissed')),
            decided_by TEXT,
            result_id {int},
            created_at TEXT NOT NULL,
            decided_at TEXT
        );
        CREATE INDEX proposals_user_status ON proposals (user_id, status, id);
        CREATE INDEX proposals_user_hash ON proposals (user_id, content_hash, status);
        CREATE UNIQUE INDEX proposals_one_pending ON proposals (user_id, content_hash)
            WHERE status = 'pending';
        """),
    ]


@migration
def m005_create_recall() -> list[Operation]:
    return [
        Sql("""
        -- Deep archive (A1): documents and their labelled chunks. Content hashes make re-uploads
        -- add nothing; the embedding BLOB is the source of truth for the vector index (S7).
        CREATE TABLE archive_documents (
            id {key},
            user_id {int} NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            collection TEXT NOT NULL DEFAULT 'default',
            title TEXT NOT NULL,
            source TEXT NOT NULL DEFAULT '',
            document_date TEXT,
            content_hash TEXT NOT NULL,
            chunk_count {int} NOT NULL DEFAULT 0,
            metadata TEXT NOT NULL DEFAULT '{}' CHECK ({json:metadata}),
            created_at TEXT NOT NULL,
            UNIQUE (user_id, content_hash)
        );
        CREATE INDEX archive_documents_user_collection ON archive_documents (user_id, collection);
        CREATE TABLE archive_chunks (
            id {key},
            user_id {int} NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            document_id {int} NOT NULL REFERENCES archive_documents(id) ON DELETE CASCADE,
            position {int} NOT NULL,
            text TEXT NOT NULL,
            speakers TEXT NOT NULL DEFAULT '[]' CHECK ({json:speakers}),
            chunk_date TEXT,
            content_hash TEXT NOT NULL,
            embedding {blob},
            embedding_model TEXT{vec},
            UNIQUE (user_id, content_hash),
            UNIQUE (document_id, position)
        );
        CREATE INDEX archive_chunks_user_model ON archive_chunks (user_id, embedding_model);
        """),
        CHUNKS_KEYWORD_INDEX,
        Sql("""
        -- Message embeddings (S7), one row per embedded chat turn and model.
        CREATE TABLE message_embeddings (
            message_id {int} PRIMARY KEY REFERENCES messages(id) ON DELETE CASCADE,
            user_id {int} NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            model TEXT NOT NULL,
            embedding {blob} NOT NULL{vec}
        );
        CREATE INDEX message_embeddings_user_model ON message_embeddings (user_id, model, message_id);

        """),
        KEYWORD_VOCABULARIES,
        Sql("""
        -- Search log (A3, G5): every automatic or deliberate search, visible to its owner.
        CREATE TABLE search_log (
            id {serial},
            user_id {int} NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            conversation_id {int} REFERENCES conversations(id) ON DELETE SET NULL,
            origin TEXT NOT NULL,
            query TEXT NOT NULL,
            variants TEXT NOT NULL DEFAULT '[]' CHECK ({json:variants}),
            filters TEXT NOT NULL DEFAULT '{}' CHECK ({json:filters}),
            results TEXT NOT NULL DEFAULT '[]' CHECK ({json:results}),
            candidate_count {int} NOT NULL DEFAULT 0,
            result_count {int} NOT NULL DEFAULT 0,
            reliability TEXT NOT NULL CHECK (reliability IN ('high', 'medium', 'low', 'none')),
            duration_ms {int} NOT NULL DEFAULT 0,
            created_at TEXT NOT NULL
        );
        CREATE INDEX search_log_user_time ON search_log (user_id, created_at, id);
        """),
    ]


@migration
def m006_count_vectors() -> list[Operation]:
    return [
        Sql("""
        -- Per user, source and model: how many vectors, the highest id, and a revision that moves
        -- when a vector is removed, replaced or arrives out of id order. Kept by triggers so the
        -- in-process vector index can tell in one lookup whether it is current, and whether new
        -- rows can simply be added to it.
        CREATE TABLE vector_counts (
            user_id {int} NOT NULL,
            source TEXT NOT NULL,
            model TEXT NOT NULL,
            count {int} NOT NULL DEFAULT 0,
            max_id {int} NOT NULL DEFAULT 0,
            rev {int} NOT NULL DEFAULT 0,
            PRIMARY KEY (user_id, source, model)
        ) {without_rowid};
        INSERT INTO vector_counts (user_id, source, model, count, max_id)
            SELECT user_id, 'messages', model, count(*), max(message_id) FROM message_embeddings
            GROUP BY user_id, model;
        INSERT INTO vector_counts (user_id, source, model, count, max_id)
            SELECT user_id, 'chunks', embedding_model, count(*), max(id) FROM archive_chunks
            WHERE embedding_model IS NOT NULL GROUP BY user_id, embedding_model;
        """),
        VECTOR_COUNTS,
    ]


@migration
def m007_add_memory_versions() -> list[Operation]:
    """Bi-temporal memories and household status (B1): versions with valid and recorded times.

    A memory keeps its stable id (snapshots hold it, M2); each meaning it has had is a row in
    ``memory_versions``. Existing memories become version 1, valid and recorded from their
    creation time (the only honest time there is for them).
    """
    return [
        Sql("""
        ALTER TABLE memories ADD COLUMN valid_from TEXT;
        ALTER TABLE memories ADD COLUMN valid_until TEXT;
        ALTER TABLE memories ADD COLUMN recorded_at TEXT;
        ALTER TABLE memories ADD COLUMN retired_at TEXT;
        ALTER TABLE memories ADD COLUMN version {int} NOT NULL DEFAULT 1;
        UPDATE memories SET valid_from = created_at, recorded_at = created_at;

        -- One row per version of a memory. valid_from/valid_until: when it was true in the
        -- person's life; recorded_at/retired_at: when Hearth held it (a correction retires the
        -- corrected row); superseded_at: when its valid_until was recorded.
        CREATE TABLE memory_versions (
            id {key},
            memory_id {int} NOT NULL REFERENCES memories(id) ON DELETE CASCADE,
            user_id {int} NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            version {int} NOT NULL,
            text TEXT NOT NULL,
            category TEXT NOT NULL DEFAULT '',
            importance {int} NOT NULL DEFAULT 0,
            eligible {int} NOT NULL DEFAULT 1,
            valid_from TEXT NOT NULL,
            valid_until TEXT,
            recorded_at TEXT NOT NULL,
            retired_at TEXT,
            superseded_at TEXT,
            change TEXT NOT NULL,
            actor TEXT NOT NULL,
            proposal_id {int},
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
        """),
    ]


@migration
def m008_add_interop() -> list[Operation]:
    """SillyTavern interop and richer imports (X3, X4).

    Personas gain a ``card`` (the character card fields that have no column of their own), an
    avatar table (one image per persona), fragments gain ``controls`` (lorebook activation
    controls) and ``import_key`` (where an imported fragment came from, so re-imports add nothing),
    per-conversation timers for sticky / cooldown entries, and a record of imported sources.
    """
    return [
        Sql("""
        ALTER TABLE personas ADD COLUMN card TEXT NOT NULL DEFAULT '{}' CHECK ({json:card});
        CREATE TABLE IF NOT EXISTS persona_avatars (
            persona_id {int} PRIMARY KEY REFERENCES personas(id) ON DELETE CASCADE,
            user_id {int} NOT NULL,
            mime TEXT NOT NULL,
            data {blob} NOT NULL,
            updated_at TEXT NOT NULL
        );
        ALTER TABLE fragments ADD COLUMN controls TEXT NOT NULL DEFAULT '{}' CHECK ({json:controls});
        ALTER TABLE fragments ADD COLUMN import_key TEXT;
        CREATE UNIQUE INDEX fragments_import_key ON fragments (user_id, import_key) WHERE import_key IS NOT NULL;
        -- Lorebook timed effects, counted in user turns of one conversation.
        CREATE TABLE fragment_timers (
            conversation_id {int} NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
            fragment_id {int} NOT NULL REFERENCES fragments(id) ON DELETE CASCADE,
            sticky_until {int} NOT NULL DEFAULT 0,
            cooldown_until {int} NOT NULL DEFAULT 0,
            PRIMARY KEY (conversation_id, fragment_id)
        ) {without_rowid};
        -- What each import created, keyed by the source's own identity (a file or item hash), so
        -- importing the same thing again is recognised and skipped (S8).
        CREATE TABLE import_sources (
            user_id {int} NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            kind TEXT NOT NULL,
            source_key TEXT NOT NULL,
            target_id {int},
            created_at TEXT NOT NULL,
            PRIMARY KEY (user_id, kind, source_key)
        ) {without_rowid};
        """),
    ]


@migration
def m009_create_client_chats() -> list[Operation]:
    return [
        Sql("""
        -- X1: which Hearth conversation a chat in an OpenAI-compatible client maps to. The key is
        -- 'header:' or 'first:' and a SHA-256 (of the client's conversation id header, or of the
        -- first user message), never the text itself.
        CREATE TABLE client_chats (
            id {key},
            user_id {int} NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            persona_id {int} NOT NULL REFERENCES personas(id) ON DELETE CASCADE,
            key TEXT NOT NULL,
            conversation_id {int} NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
            created_at TEXT NOT NULL
        );
        CREATE INDEX client_chats_key ON client_chats (user_id, persona_id, key, id);
        CREATE INDEX client_chats_conversation ON client_chats (conversation_id);
        -- A conversation's own custom instructions (a client's system prompt); NULL: the persona's.
        ALTER TABLE conversations ADD COLUMN custom_instructions TEXT;
        """),
    ]


@migration
def m010_create_channels() -> list[Operation]:
    return [
        Sql("""
        -- Who may reach a user on a messaging channel (E10): an address (a phone number, an email
        -- address) belongs to one user across the deployment, so inbound routing is one lookup.
        CREATE TABLE channel_contacts (
            id {key},
            user_id {int} NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            channel TEXT NOT NULL,
            address TEXT NOT NULL,
            persona_id {int} REFERENCES personas(id) ON DELETE SET NULL,
            created_at TEXT NOT NULL,
            UNIQUE (channel, address)
        );
        -- Every inbound and outbound channel message by its external id (Twilio SID, email
        -- Message-ID): a replayed webhook or a re-polled mailbox is recognised and never answered
        -- twice. No text is kept here; the conversation's messages hold it.
        CREATE TABLE channel_messages (
            id {key},
            user_id {int} NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            channel TEXT NOT NULL,
            direction TEXT NOT NULL CHECK (direction IN ('in', 'out')),
            external_id TEXT NOT NULL,
            conversation_id {int} REFERENCES conversations(id) ON DELETE CASCADE,
            message_id {int},
            contact_id {int} REFERENCES channel_contacts(id) ON DELETE SET NULL,
            provider_ref TEXT,  -- the provider's id for what was sent (a Twilio SID, a Message-ID)
            status TEXT NOT NULL,
            created_at TEXT NOT NULL,
            UNIQUE (channel, direction, external_id)
        );
        CREATE INDEX channel_messages_message ON channel_messages (message_id);
        -- Which channels a persona answers on; a persona without a row answers on every channel.
        CREATE TABLE persona_channels (
            persona_id {int} NOT NULL REFERENCES personas(id) ON DELETE CASCADE,
            channel TEXT NOT NULL,
            answers {int} NOT NULL,
            PRIMARY KEY (persona_id, channel)
        ) {without_rowid};
        """),
    ]


@migration
def m011_create_activations() -> list[Operation]:
    return [
        Sql("""
        -- Autonomous activations (E11), off unless created: a recurrence rule (RFC 5545) or an
        -- idle period, the channel the message is delivered on, and when it is next due (UTC).
        CREATE TABLE activations (
            id {key},
            user_id {int} NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            persona_id {int} NOT NULL REFERENCES personas(id) ON DELETE CASCADE,
            kind TEXT NOT NULL CHECK (kind IN ('morning', 'reflection', 'checkins', 'checkin')),
            rule TEXT,
            idle_minutes {int},
            note TEXT NOT NULL DEFAULT '',
            channel TEXT NOT NULL,
            enabled {int} NOT NULL DEFAULT 1,
            next_run_at TEXT,
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL
        );
        CREATE INDEX activations_due ON activations (user_id, next_run_at) WHERE enabled = 1;
        -- One row per fired occurrence; the unique key is what makes firing happen once.
        CREATE TABLE activation_runs (
            id {key},
            activation_id {int} NOT NULL REFERENCES activations(id) ON DELETE CASCADE,
            user_id {int} NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            due_at TEXT NOT NULL,
            status TEXT NOT NULL,
            conversation_id {int},
            message_id {int},
            created_at TEXT NOT NULL,
            UNIQUE (activation_id, due_at)
        );
        CREATE INDEX activation_runs_user ON activation_runs (user_id, created_at);
        CREATE TABLE activation_prefs (
            user_id {int} PRIMARY KEY REFERENCES users(id) ON DELETE CASCADE,
            timezone TEXT NOT NULL DEFAULT 'UTC',
            quiet_start TEXT NOT NULL DEFAULT '22:00',
            quiet_end TEXT NOT NULL DEFAULT '08:00',
            daily_limit {int} NOT NULL DEFAULT 3,
            stopped {int} NOT NULL DEFAULT 0
        );

        -- Review kinds are checked by the review module, so a new kind (here a proposed check-in)
        -- needs no table rebuild again: the kind list leaves the table.
        CREATE TABLE proposals_new (
            id {key},
            user_id {int} NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            kind TEXT NOT NULL,
            conversation_id {int} REFERENCES conversations(id) ON DELETE SET NULL,
            payload TEXT NOT NULL CHECK ({json:payload}),
            reason TEXT NOT NULL,
            evidence TEXT NOT NULL DEFAULT '',
            source TEXT NOT NULL CHECK (source IN ('offline', 'model')),
            content_hash TEXT NOT NULL,
            status TEXT NOT NULL DEFAULT 'pending'
                CHECK (status IN ('pending', 'approved', 'dismissed')),
            decided_by TEXT,
            result_id {int},
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
        """),
    ]



@migration
def m012_add_item_versions() -> list[Operation]:
    """Version history of fragments, personas and status fields (B2); existing ones become version 1."""
    return [
        Sql("""
        CREATE TABLE item_versions (
            id {key},
            user_id {int} NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            noun TEXT NOT NULL CHECK (noun IN ('fragment', 'persona', 'status_field')),
            item_id {int} NOT NULL,
            version {int} NOT NULL,
            data TEXT NOT NULL CHECK ({json:data}),
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
        """),
    ]


@migration
def m013_create_timeline() -> list[Operation]:
    return [
        Sql("""
        -- Activity spans (E1): containers in the relationship timeline, never chats. At most one
        -- open span per user and companion; its start is the (created_at, id) of its span.opened
        -- event, so a timeline page can reach back to it.
        CREATE TABLE spans (
            id {key},
            user_id {int} NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            persona_id {int} REFERENCES personas(id) ON DELETE SET NULL,
            kind TEXT NOT NULL CHECK (kind IN ('text', 'voice', 'inner', 'import')),
            channel TEXT NOT NULL,
            start_event_id {int} NOT NULL,
            started_at TEXT NOT NULL,
            last_at TEXT NOT NULL,
            closed_at TEXT,
            close_reason TEXT,
            checkpoint_event_id {int}
        );
        CREATE UNIQUE INDEX spans_one_open ON spans (user_id, persona_id) WHERE closed_at IS NULL;
        CREATE INDEX spans_user_start ON spans (user_id, started_at, start_event_id);

        -- The span an event happened in (NULL for events outside any burst of activity).
        ALTER TABLE events ADD COLUMN span_id {int};

        -- Continuity capsules (E3): the text lives here, its context.capsule event in the ledger;
        -- the row id is the event id, as with messages.
        CREATE TABLE capsules (
            id {int} PRIMARY KEY REFERENCES events(id) ON DELETE CASCADE,
            user_id {int} NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            conversation_id {int} NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
            text TEXT NOT NULL,
            source TEXT NOT NULL CHECK (source IN ('offline', 'model')),
            through_message_id {int} NOT NULL,
            created_at TEXT NOT NULL
        );
        CREATE INDEX capsules_conversation ON capsules (conversation_id, id);

        -- The Responses API working chain of a conversation (E7): the last response id, and the
        -- replacement input of a compaction, kept until the next successful turn.
        CREATE TABLE response_chains (
            conversation_id {int} PRIMARY KEY REFERENCES conversations(id) ON DELETE CASCADE,
            user_id {int} NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            response_id TEXT,
            replacement_input TEXT CHECK (replacement_input IS NULL OR {json:replacement_input}),
            compacted_at TEXT,
            updated_at TEXT NOT NULL
        );
        """),
    ]


@migration
def m014_add_message_alternatives_and_persona_archive() -> list[Operation]:
    """Every version of a regenerated reply or an edited message (W2); archived personas (W3)."""
    return [
        Sql("""
        CREATE TABLE message_alternatives (
            id {key},
            user_id {int} NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            message_id {int} NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
            position {int} NOT NULL CHECK (position >= 0),
            content TEXT NOT NULL,
            metadata TEXT NOT NULL DEFAULT '{}' CHECK ({json:metadata}),
            created_at TEXT NOT NULL,
            UNIQUE (message_id, position)
        );
        CREATE INDEX message_alternatives_user ON message_alternatives (user_id);
        ALTER TABLE personas ADD COLUMN archived_at TEXT;
        """),
    ]


@migration
def m015_create_message_branches() -> list[Operation]:
    """The turns after an edited message, kept when the thread continues from another version (W2).

    A branch is the continuation of one version of one message. Its turns leave ``messages`` (so
    every reader of the thread, the keyword and vector indexes included, sees only the chosen
    path) and wait here with their own ids, events and versions until that version is chosen again.
    ``message_id`` has no foreign key: a branch keeps existing while its message itself waits inside
    an earlier branch.
    """
    return [
        Sql("""
        CREATE TABLE message_branches (
            id {key},
            user_id {int} NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            conversation_id {int} NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
            message_id {int} NOT NULL,
            position {int} NOT NULL CHECK (position >= 0),
            created_at TEXT NOT NULL,
            UNIQUE (message_id, position)
        );
        CREATE INDEX message_branches_user ON message_branches (user_id);
        CREATE INDEX message_branches_conversation ON message_branches (conversation_id);
        CREATE TABLE branch_messages (
            id {int} PRIMARY KEY REFERENCES events(id) ON DELETE CASCADE,
            branch_id {int} NOT NULL REFERENCES message_branches(id) ON DELETE CASCADE,
            user_id {int} NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            conversation_id {int} NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
            role TEXT NOT NULL,
            kind TEXT NOT NULL,
            content TEXT NOT NULL,
            channel TEXT NOT NULL,
            created_at TEXT NOT NULL,
            metadata TEXT NOT NULL DEFAULT '{}' CHECK ({json:metadata}),
            alternatives TEXT NOT NULL DEFAULT '[]' CHECK ({json:alternatives})
        );
        CREATE INDEX branch_messages_branch ON branch_messages (branch_id, id);
        CREATE INDEX branch_messages_user ON branch_messages (user_id);
        """),
    ]



KEYWORD_TOTALS = r"""
-- Rows and total length (distinct words, as BM25 scores them) of each keyword index, kept by
-- triggers in the writing transaction: reading them is one primary-key lookup, where counting the
-- indexed rows took a scan per query (100 ms at a million messages). An upsert, so a table
-- emptied by hand starts again from zero.
CREATE TABLE keyword_totals (
    name TEXT PRIMARY KEY,
    rows BIGINT NOT NULL DEFAULT 0,
    lengths BIGINT NOT NULL DEFAULT 0
);
CREATE FUNCTION hearth_keyword_add(idx TEXT, n BIGINT, len BIGINT) RETURNS void LANGUAGE sql AS $$
    INSERT INTO keyword_totals AS k (name, rows, lengths) VALUES (idx, n, len)
    ON CONFLICT (name) DO UPDATE SET rows = k.rows + excluded.rows, lengths = k.lengths + excluded.lengths
$$;
CREATE FUNCTION hearth_message_indexed(kind TEXT, role TEXT) RETURNS BOOLEAN LANGUAGE sql IMMUTABLE AS $$
    SELECT kind = 'chat' AND role IN ('user', 'assistant')
$$;
CREATE FUNCTION hearth_messages_keyword_totals() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') AND hearth_message_indexed(OLD.kind, OLD.role) THEN
        PERFORM hearth_keyword_add('messages_fts', -1, -length(to_tsvector('simple', OLD.content)));
    END IF;
    IF TG_OP IN ('UPDATE', 'INSERT') AND hearth_message_indexed(NEW.kind, NEW.role) THEN
        PERFORM hearth_keyword_add('messages_fts', 1, length(to_tsvector('simple', NEW.content)));
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER messages_keyword_totals AFTER INSERT OR DELETE OR UPDATE OF content, kind, role ON messages
    FOR EACH ROW EXECUTE FUNCTION hearth_messages_keyword_totals();
CREATE FUNCTION hearth_chunks_keyword_totals() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        PERFORM hearth_keyword_add('archive_chunks_fts', -1, -length(to_tsvector('simple', OLD.text)));
    END IF;
    IF TG_OP IN ('UPDATE', 'INSERT') THEN
        PERFORM hearth_keyword_add('archive_chunks_fts', 1, length(to_tsvector('simple', NEW.text)));
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER archive_chunks_keyword_totals AFTER INSERT OR DELETE OR UPDATE OF text ON archive_chunks
    FOR EACH ROW EXECUTE FUNCTION hearth_chunks_keyword_totals();
INSERT INTO keyword_totals (name, rows, lengths)
    SELECT 'messages_fts', count(*), coalesce(sum(length(to_tsvector('simple', content))), 0)
    FROM messages WHERE hearth_message_indexed(kind, role);
INSERT INTO keyword_totals (name, rows, lengths)
    SELECT 'archive_chunks_fts', count(*), coalesce(sum(length(to_tsvector('simple', text))), 0)
    FROM archive_chunks;

"""

# The totals' triggers again, counting the folded words the indexes now hold (migration 17).
KEYWORD_TOTALS_FOLDED = r"""
CREATE OR REPLACE FUNCTION hearth_messages_keyword_totals() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') AND hearth_message_indexed(OLD.kind, OLD.role) THEN
        PERFORM hearth_keyword_add('messages_fts', -1, -length(hearth_words(OLD.content)));
    END IF;
    IF TG_OP IN ('UPDATE', 'INSERT') AND hearth_message_indexed(NEW.kind, NEW.role) THEN
        PERFORM hearth_keyword_add('messages_fts', 1, length(hearth_words(NEW.content)));
    END IF;
    RETURN NULL;
END $$;
CREATE OR REPLACE FUNCTION hearth_chunks_keyword_totals() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        PERFORM hearth_keyword_add('archive_chunks_fts', -1, -length(hearth_words(OLD.text)));
    END IF;
    IF TG_OP IN ('UPDATE', 'INSERT') THEN
        PERFORM hearth_keyword_add('archive_chunks_fts', 1, length(hearth_words(NEW.text)));
    END IF;
    RETURN NULL;
END $$;
DELETE FROM keyword_totals;
INSERT INTO keyword_totals (name, rows, lengths)
    SELECT 'messages_fts', count(*), coalesce(sum(length(hearth_words(content))), 0)
    FROM messages WHERE hearth_message_indexed(kind, role);
INSERT INTO keyword_totals (name, rows, lengths)
    SELECT 'archive_chunks_fts', count(*), coalesce(sum(length(hearth_words(text))), 0)
    FROM archive_chunks;

"""


@migration
def m016_keep_keyword_totals() -> list[Operation]:
    """Each keyword index's row count and total length, kept as rows change (K1 at scale, S9).

    The common-term guard and BM25 need how many rows an index holds and their average length on
    every query. FTS5 keeps both itself (its totals record and docsize table), so on SQLite there
    is nothing to add; PostgreSQL's GIN index does not, and counting a million rows per query is
    what ``keyword_totals`` avoids."""
    return [Step("keyword_totals", sqlite=None, postgresql=KEYWORD_TOTALS)]


def _fold_table() -> tuple[str, str]:
    """The Latin letters with diacritics and their plain letters, one for one, for ``translate``:
    what FTS5's ``remove_diacritics`` folds on SQLite. Letters that decompose to more than one
    letter (æ, ß) stay as they are."""
    import unicodedata

    accented, plain = [], []
    for code in range(0xC0, 0x250):
        char = chr(code)
        if char != char.lower():
            continue  # lower() runs first
        base = "".join(c for c in unicodedata.normalize("NFKD", char) if not unicodedata.combining(c))
        base = {"ø": "o", "đ": "d", "ł": "l", "ħ": "h", "ŧ": "t", "ı": "i"}.get(char, base)
        if len(base) == 1 and base.isascii() and base.isalpha() and base != char:
            accented.append(char)
            plain.append(base)
    return "".join(accented), "".join(plain)


def _folded_keyword_indexes() -> str:
    accented, plain = _fold_table()
    return f"""
CREATE FUNCTION hearth_fold(t TEXT) RETURNS TEXT LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT translate(lower(t), '{accented}', '{plain}')
$$;
CREATE FUNCTION hearth_words(t TEXT) RETURNS tsvector LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT to_tsvector('simple', translate(lower(t), '{accented}', '{plain}'))
$$;
DROP INDEX messages_search;
DROP INDEX archive_chunks_search;
CREATE INDEX messages_search ON messages USING gin (hearth_words(content))
    WHERE kind = 'chat' AND role IN ('user', 'assistant');
CREATE INDEX archive_chunks_search ON archive_chunks USING gin (hearth_words(text));
""" + KEYWORD_TOTALS_FOLDED


@migration
def m017_fold_diacritics_in_keyword_search() -> list[Operation]:
    """Keyword search folds diacritics on PostgreSQL as it does on SQLite (S6): "creme" finds
    "crème". FTS5's tokenizer (``remove_diacritics``) has folded them on SQLite since the indexes
    were created, so there is nothing to add there. On PostgreSQL the indexes and the totals'
    lengths are rebuilt over ``hearth_words``, and queries fold their words with ``hearth_fold``,
    so both sides of a match see the same letters. ``hearth_words`` calls only built-in functions:
    PostgreSQL builds indexes with a search path of ``pg_catalog`` alone, where ``hearth_fold``
    cannot be found."""
    return [Step("fold_diacritics", sqlite=None, postgresql=_folded_keyword_indexes)]


# The events that give a saved turn another version; a continuity capsule is stale once one of
# them touches a turn it covers (``capsules.latest``, on every send).
TURN_VERSION_EVENTS = "('message.edited', 'message.regenerated', 'message.alternative_chosen')"


@migration
def m018_index_turn_version_events() -> list[Operation]:
    """A small partial index over the events that give a turn another version (E3, W2).

    Every send asks whether the thread's latest capsule is still current, which looked through
    every event of the thread (3.7 ms for 35,000 events on the 1M deployment); the partial index
    holds only those few events (0.003 ms; built in 0.7 s at 1M)."""
    return [Sql("CREATE INDEX events_turn_versions ON events (conversation_id, id)"
                f" WHERE kind IN {TURN_VERSION_EVENTS}")]


# Written as the searches state it (``retrieval.candidates.CHAT_TURN_SQL``): a partial index is used
# only for a query whose conditions include its own.
CHAT_TURN_TIME_INDEX = ("CREATE INDEX messages_chat_time ON messages (user_id, created_at)"
                        " WHERE kind = 'chat' AND role IN ('user', 'assistant')")


@migration
def m019_index_chat_turns_by_time() -> list[Operation]:
    """One user's chat turns by time (A2): a question that names a date ranks the turns of that
    range apart, and counts them first on this index to learn whether the range is narrow enough
    to read on a send."""
    return [Sql(CHAT_TURN_TIME_INDEX)]


@migration
def m020_index_chat_turns_by_time_for_time_bounds_only() -> list[Operation]:
    """Migration 19's index, on PostgreSQL, for queries that bound the time only. A partial index
    is used only for a query whose conditions imply its own, and migration 19's were those of every
    search over chat turns: with no statistics yet (a new or freshly imported table), the planner
    walked this index for keyword searches too and re-tokenised every turn (1.4 s for one common
    word over 5,000 turns). "created_at IS NOT NULL" is implied only by a query that bounds the
    time, as the dated list does.

    On SQLite migration 19's index stays: SQLite does not take "created_at IS NOT NULL" as implied
    by a range over a NOT NULL column, so the narrowed index would serve no query; its searches
    keep the user's term out of the choice of index instead ("+m.user_id", ``retrieval.candidates``)."""
    return [Step("chat_time_index_for_time_bounds", sqlite=None,
                 postgresql=f"DROP INDEX messages_chat_time;\n{CHAT_TURN_TIME_INDEX} AND created_at IS NOT NULL;")]


# Migration 21's tables.
FRAGMENT_BOOKS = """
CREATE TABLE fragment_books (
    id {key},
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


@migration
def m021_scope_fragment_books() -> list[Operation]:
    """Lorebooks scoped as SillyTavern scopes them (X3, F1).

    A book is a fragment category. ``fragment_books`` gives one a scope: ``all`` personas (a World
    Info file's default; also every category without a row), its ``character`` (a card's own book,
    ``character_id``) or chosen ``personas``. ``fragment_book_personas`` lists who may see a book
    that is not for all, the character included, so the send path finds a persona's books with
    one indexed lookup. Books a card brought in before are given their character's scope."""
    return [Sql(FRAGMENT_BOOKS), Call(scope_card_books)]


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


@migration
def m022_add_user_display_name() -> list[Operation]:
    """What companions call the person (X3 macros): ``{{user}}`` in a card is filled with the user's
    display name when text is placed in a prompt, "the person" while none is set. Personas that
    card imports wrote with the macros already filled get their macros back."""
    return [Sql("ALTER TABLE users ADD COLUMN display_name TEXT"), Call(unbake_card_macros)]


@migration
def m023_add_persona_uuid() -> list[Operation]:
    """A stable identity for each persona (X3): a card exported from it carries the uuid, so
    importing that card again is recognised as the same character rather than a new one. Ids can
    be reused after a delete and mean nothing on another deployment; the uuid is neither. Each
    engine fills it from its own random source (32 hex digits)."""
    return [
        Sql("""
        ALTER TABLE personas ADD COLUMN uuid TEXT;
        """),
        Step("persona_uuids",
             sqlite="""
        UPDATE personas SET uuid = lower(hex(randomblob(16))) WHERE uuid IS NULL;
        """,
             postgresql="UPDATE personas SET uuid = replace(gen_random_uuid()::text, '-', '') WHERE uuid IS NULL;"),
        Sql("""
        CREATE UNIQUE INDEX personas_uuid ON personas (user_id, uuid);
        """),
    ]


# Migration 24's table.
CONVERSATION_TAGS = """
CREATE TABLE conversation_tags (
    id {key},
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


@migration
def m024_add_thread_pins_tags_and_imported() -> list[Operation]:
    """Finding chats (W4): a thread can be pinned (``pinned_at``, listed first) and tagged.

    A thread's tags are kept twice, in one transaction: ``conversations.tags`` (a JSON list) so a
    thread read anywhere carries them at no extra query, and ``conversation_tags`` so ``tag:NAME``
    is one indexed lookup. ``imported`` marks a thread an import created (a SillyTavern chat): it
    is read only; threads imported before are found by their creation event's channel."""
    return [
        Sql("""
        ALTER TABLE conversations ADD COLUMN pinned_at TEXT;
        ALTER TABLE conversations ADD COLUMN tags TEXT NOT NULL DEFAULT '[]' CHECK ({json:tags});
        ALTER TABLE conversations ADD COLUMN imported {int} NOT NULL DEFAULT 0;
        """ + CONVERSATION_TAGS),
    ]


# Migration 25's table.
PROMPT_PRESETS = """
CREATE TABLE prompt_presets (
    id {key},
    user_id {int} NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    text TEXT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    UNIQUE (user_id, name)
);
"""


@migration
def m025_add_chat_models_and_prompt_presets() -> list[Operation]:
    """Per-chat model choice and prompt presets (W3, PR1, P5).

    ``conversations.model`` is the model a conversation asks for (NULL: the deployment's default).
    ``response_chains.model`` is the model whose response the chain continues from, so a chain is
    never continued with another model (NULL: a chain from before, made with the default).
    ``prompt_presets`` are a person's named texts, applied to a conversation as its custom
    instructions (a copy: editing a preset later changes no conversation)."""
    return [
        Sql("""
        ALTER TABLE conversations ADD COLUMN model TEXT;
        ALTER TABLE response_chains ADD COLUMN model TEXT;
        """ + PROMPT_PRESETS),
    ]


# Migration 26's tables.
FACTS = """
CREATE TABLE facts (
    id {serial},
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

FACT_GOES_WITH_ITS_SOURCES = Step(
    "fact_goes_with_its_sources",  # B4: a fact goes when any turn it cites goes
    sqlite="""
        CREATE TRIGGER fact_sources_gone AFTER DELETE ON fact_sources
        BEGIN
            DELETE FROM facts WHERE id = old.fact_id;
        END;
        """,
    postgresql=r"""
CREATE FUNCTION hearth_fact_sources_gone() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM facts WHERE id = OLD.fact_id;
    RETURN NULL;
END $$;
CREATE TRIGGER fact_sources_gone AFTER DELETE ON fact_sources
    FOR EACH ROW EXECUTE FUNCTION hearth_fact_sources_gone();
""",
)

FACTS_KEYWORD_INDEX = Step(
    "facts_keyword_index",  # their own keyword index (and, on PostgreSQL, its totals)
    sqlite="""
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
        """,
    postgresql=r"""
CREATE FUNCTION hearth_facts_keyword_totals() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        PERFORM hearth_keyword_add('facts_fts', -1, -length(hearth_words(OLD.text)));
    END IF;
    IF TG_OP IN ('UPDATE', 'INSERT') THEN
        PERFORM hearth_keyword_add('facts_fts', 1, length(hearth_words(NEW.text)));
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER facts_keyword_totals AFTER INSERT OR DELETE OR UPDATE OF text ON facts
    FOR EACH ROW EXECUTE FUNCTION hearth_facts_keyword_totals();
INSERT INTO keyword_totals (name, rows, lengths) VALUES ('facts_fts', 0, 0);
CREATE INDEX facts_search ON facts USING gin (hearth_words(text));
""",
)

FACT_VECTOR_COUNTS = Step(
    "fact_vector_counts",  # vector_counts for facts' embeddings
    sqlite="""
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
    postgresql=r"""
CREATE FUNCTION hearth_fact_vectors_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') AND OLD.embedding_model IS NOT NULL THEN
        PERFORM hearth_vector_removed(OLD.user_id, 'facts', OLD.embedding_model);
    END IF;
    IF TG_OP IN ('UPDATE', 'INSERT') AND NEW.embedding_model IS NOT NULL THEN
        PERFORM hearth_vector_added(NEW.user_id, 'facts', NEW.embedding_model, NEW.id,
                                    TG_OP = 'UPDATE' AND OLD.embedding_model IS NOT NULL);
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER fact_vectors_insert_delete AFTER INSERT OR DELETE ON facts
    FOR EACH ROW EXECUTE FUNCTION hearth_fact_vectors_changed();
CREATE TRIGGER fact_vectors_update AFTER UPDATE OF embedding, embedding_model ON facts
    FOR EACH ROW EXECUTE FUNCTION hearth_fact_vectors_changed();
""",
)


@migration
def m026_create_facts() -> list[Operation]:
    """Facts written at ingestion (E2, A2): short dated statements, each citing the turns it came
    from (``fact_sources``). They are searched beside the turns (their own keyword index and
    vectors) and a hit returns its source turns, never the fact's own words. A fact goes with any
    turn it cites (B4): the trigger removes it when a source row goes, by cascade or otherwise."""
    return [Sql(FACTS), FACT_GOES_WITH_ITS_SOURCES, FACTS_KEYWORD_INDEX, FACT_VECTOR_COUNTS]


# Migration 27's table.
ARCHIVE_TURNS = """
CREATE TABLE archive_turns (
    id {key},
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


@migration
def m027_keep_archive_turns() -> list[Operation]:
    """An archive document's turns as they were imported (speaker, role, time, text), so an imported
    ChatGPT or Claude conversation opens as a read-only thread (A5, X4, W4). The chunks stay the
    one searchable copy: turns have no keyword index and no vectors. A continuation's handoff may
    come from a document (``source_document_id``): its source ids are then turn ids."""
    return [Sql(ARCHIVE_TURNS)]


def _stored_words_sql() -> str:
    """PostgreSQL's side tables of each keyword-indexed row's words, filled by the totals'
    triggers (which already fire on exactly the indexed rows) and from the rows already there."""
    tables = (("messages_fts", "messages", "content", "hearth_message_indexed(OLD.kind, OLD.role)",
               "hearth_message_indexed(NEW.kind, NEW.role)", "hearth_message_indexed(kind, role)"),
              ("archive_chunks_fts", "archive_chunks", "text", "TRUE", "TRUE", "TRUE"),
              ("facts_fts", "facts", "text", "TRUE", "TRUE", "TRUE"))
    functions = {"messages": "hearth_messages_keyword_totals", "archive_chunks": "hearth_chunks_keyword_totals",
                 "facts": "hearth_facts_keyword_totals"}
    out = []
    for index, table, column, old_indexed, new_indexed, indexed in tables:
        out.append(f"""
CREATE TABLE {table}_words (
    id BIGINT PRIMARY KEY REFERENCES {table}(id) ON DELETE CASCADE,
    words tsvector NOT NULL
);
CREATE OR REPLACE FUNCTION {functions[table]}() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    w tsvector;
BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') AND {old_indexed} THEN
        PERFORM hearth_keyword_add('{index}', -1, -length(hearth_words(OLD.{column})));
        IF TG_OP = 'UPDATE' THEN
            DELETE FROM {table}_words WHERE id = OLD.id;
        END IF;
    END IF;
    IF TG_OP IN ('UPDATE', 'INSERT') AND {new_indexed} THEN
        w := hearth_words(NEW.{column});
        PERFORM hearth_keyword_add('{index}', 1, length(w));
        INSERT INTO {table}_words (id, words) VALUES (NEW.id, w);
    END IF;
    RETURN NULL;
END $$;
INSERT INTO {table}_words (id, words) SELECT id, hearth_words({column}) FROM {table} WHERE {indexed};
ANALYZE {table}_words;""")
    return "".join(out) + "\n"


STORED_WORDS = Step(
    "stored_words",  # FTS5 stores each row's terms in its index already
    sqlite=None,
    postgresql=_stored_words_sql,
)


@migration
def m028_store_keyword_words() -> list[Operation]:
    """Each keyword-indexed row's words stored beside it on PostgreSQL (``messages_words``,
    ``archive_chunks_words``, ``facts_words``: the row's ``hearth_words`` tsvector), written by the
    keyword totals' triggers in the writing transaction, so BM25 reads a match's term frequencies
    and length instead of tokenising its text again on every query. A side table rather than a
    column, so the many readers of whole rows never carry it. SQLite's FTS5 index already stores
    its terms: nothing to do there."""
    return [STORED_WORDS]


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
