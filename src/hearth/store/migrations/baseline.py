"""Migrations 1 to 14: the schema SQLite databases reached step by step before PostgreSQL was
supported, and which a blank PostgreSQL database takes folded into one script (see the package
docstring). Shipped: never edited."""

from __future__ import annotations

from ..schema import Migration, Operation, Sql
from .steps import (
    CHUNKS_KEYWORD_INDEX,
    KEYWORD_VOCABULARIES,
    LEDGER_APPEND_ONLY,
    MESSAGES_KEYWORD_INDEX,
    SUMMARIES_FOLLOW_EDITS,
    TURN_COUNTS,
    VECTOR_COUNTS,
)

migration = Migration


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
