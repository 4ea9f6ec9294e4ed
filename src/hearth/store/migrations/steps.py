"""The named steps of migrations 1 to 14: the pieces with no common form on the two engines
(FTS5 tables and SQLite triggers against GIN indexes and plpgsql). Shipped: never edited."""

from __future__ import annotations

from ..schema import Step

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
