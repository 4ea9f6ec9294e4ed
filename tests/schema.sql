-- index activation_runs_user
CREATE INDEX activation_runs_user ON activation_runs (user_id, created_at);
-- index activations_due
CREATE INDEX activations_due ON activations (user_id, next_run_at) WHERE enabled = 1;
-- index archive_chunks_user_model
CREATE INDEX archive_chunks_user_model ON archive_chunks (user_id, embedding_model);
-- index archive_documents_user_collection
CREATE INDEX archive_documents_user_collection ON archive_documents (user_id, collection);
-- index branch_messages_branch
CREATE INDEX branch_messages_branch ON branch_messages (branch_id, id);
-- index branch_messages_user
CREATE INDEX branch_messages_user ON branch_messages (user_id);
-- index capsules_conversation
CREATE INDEX capsules_conversation ON capsules (conversation_id, id);
-- index channel_messages_message
CREATE INDEX channel_messages_message ON channel_messages (message_id);
-- index client_chats_conversation
CREATE INDEX client_chats_conversation ON client_chats (conversation_id);
-- index client_chats_key
CREATE INDEX client_chats_key ON client_chats (user_id, persona_id, key, id);
-- index contact_claims_address
CREATE INDEX contact_claims_address ON contact_claims (channel, address);
-- index contact_code_sends_address
CREATE INDEX contact_code_sends_address ON contact_code_sends (channel, address, sent_at);
-- index conversation_memories_memory
CREATE INDEX conversation_memories_memory ON conversation_memories (memory_id, conversation_id);
-- index conversation_tags_user_tag
CREATE INDEX conversation_tags_user_tag ON conversation_tags (user_id, tag, conversation_id);
-- index conversations_user_pinned
CREATE INDEX conversations_user_pinned ON conversations (user_id, updated_at) WHERE pinned_at IS NOT NULL;
-- index conversations_user_updated
CREATE INDEX conversations_user_updated ON conversations (user_id, updated_at);
-- index events_conversation_time
CREATE INDEX events_conversation_time ON events (conversation_id, created_at, id);
-- index events_turn_versions
CREATE INDEX events_turn_versions ON events (conversation_id, id) WHERE kind IN ('message.edited', 'message.regenerated', 'message.alternative_chosen');
-- index events_user_time
CREATE INDEX events_user_time ON events (user_id, created_at, id);
-- index fact_sources_message
CREATE INDEX fact_sources_message ON fact_sources (message_id, fact_id);
-- index facts_user_model
CREATE INDEX facts_user_model ON facts (user_id, embedding_model);
-- index fragments_import_key
CREATE UNIQUE INDEX fragments_import_key ON fragments (user_id, import_key) WHERE import_key IS NOT NULL;
-- index fragments_user
CREATE INDEX fragments_user ON fragments (user_id, id);
-- index jobs_due
CREATE INDEX jobs_due ON jobs (status, run_after, id);
-- index jobs_one_pending
CREATE UNIQUE INDEX jobs_one_pending ON jobs (user_id, kind, dedupe_key)
            WHERE status = 'pending' AND dedupe_key IS NOT NULL;
-- index memories_user_position
CREATE INDEX memories_user_position ON memories (user_id, position);
-- index memory_versions_user_time
CREATE INDEX memory_versions_user_time ON memory_versions (user_id, valid_from);
-- index message_alternatives_user
CREATE INDEX message_alternatives_user ON message_alternatives (user_id);
-- index message_attachments_conversation
CREATE INDEX message_attachments_conversation ON message_attachments (conversation_id, message_id);
-- index message_branches_conversation
CREATE INDEX message_branches_conversation ON message_branches (conversation_id);
-- index message_branches_user
CREATE INDEX message_branches_user ON message_branches (user_id);
-- index message_embeddings_user_model
CREATE INDEX message_embeddings_user_model ON message_embeddings (user_id, model, message_id);
-- index messages_chat_time
CREATE INDEX messages_chat_time ON messages (user_id, created_at) WHERE kind = 'chat' AND role IN ('user', 'assistant');
-- index messages_conversation
CREATE INDEX messages_conversation ON messages (conversation_id, id);
-- index messages_one_static_prompt
CREATE UNIQUE INDEX messages_one_static_prompt ON messages (conversation_id)
            WHERE kind = 'static_prompt';
-- index nudges_open
CREATE INDEX nudges_open ON nudges (conversation_id, status);
-- index personas_uuid
CREATE UNIQUE INDEX personas_uuid ON personas (user_id, uuid);
-- index proposals_one_pending
CREATE UNIQUE INDEX proposals_one_pending ON proposals (user_id, content_hash)
            WHERE status = 'pending';
-- index proposals_user_hash
CREATE INDEX proposals_user_hash ON proposals (user_id, content_hash, status);
-- index proposals_user_status
CREATE INDEX proposals_user_status ON proposals (user_id, status, id);
-- index search_log_user_time
CREATE INDEX search_log_user_time ON search_log (user_id, created_at, id);
-- index spans_one_open
CREATE UNIQUE INDEX spans_one_open ON spans (user_id, persona_id) WHERE closed_at IS NULL;
-- index spans_user_start
CREATE INDEX spans_user_start ON spans (user_id, started_at, start_event_id);
-- index status_fields_active_name
CREATE UNIQUE INDEX status_fields_active_name ON status_fields (user_id, name COLLATE NOCASE)
            WHERE retired_at IS NULL;
-- index status_values_current
CREATE UNIQUE INDEX status_values_current ON status_values (field_id) WHERE valid_to IS NULL;
-- index status_values_field_time
CREATE INDEX status_values_field_time ON status_values (field_id, valid_from);
-- index thread_summaries_conversation
CREATE INDEX thread_summaries_conversation ON thread_summaries (conversation_id, through_message_id);
-- table activation_prefs
CREATE TABLE activation_prefs (
            user_id INTEGER PRIMARY KEY REFERENCES users(id) ON DELETE CASCADE,
            timezone TEXT NOT NULL DEFAULT 'UTC',
            quiet_start TEXT NOT NULL DEFAULT '22:00',
            quiet_end TEXT NOT NULL DEFAULT '08:00',
            daily_limit INTEGER NOT NULL DEFAULT 3,
            stopped INTEGER NOT NULL DEFAULT 0
        );
-- table activation_runs
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
-- table activations
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
-- table api_tokens
CREATE TABLE api_tokens (
            id INTEGER PRIMARY KEY,
            user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            name TEXT NOT NULL,
            token_hash TEXT NOT NULL UNIQUE,
            created_at TEXT NOT NULL,
            last_used_at TEXT,
            revoked_at TEXT
        );
-- table app_state
CREATE TABLE app_state (
            key TEXT PRIMARY KEY,
            value TEXT NOT NULL CHECK (json_valid(value))
        );
-- table archive_chunks
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
-- table archive_chunks_fts
CREATE VIRTUAL TABLE archive_chunks_fts USING fts5(
            text, content='archive_chunks', content_rowid='id',
            tokenize='unicode61 remove_diacritics 2'
        );
-- table archive_chunks_fts_config
CREATE TABLE 'archive_chunks_fts_config'(k PRIMARY KEY, v) WITHOUT ROWID;
-- table archive_chunks_fts_data
CREATE TABLE 'archive_chunks_fts_data'(id INTEGER PRIMARY KEY, block BLOB);
-- table archive_chunks_fts_docsize
CREATE TABLE 'archive_chunks_fts_docsize'(id INTEGER PRIMARY KEY, sz BLOB);
-- table archive_chunks_fts_idx
CREATE TABLE 'archive_chunks_fts_idx'(segid, term, pgno, PRIMARY KEY(segid, term)) WITHOUT ROWID;
-- table archive_chunks_fts_vocab
CREATE VIRTUAL TABLE archive_chunks_fts_vocab USING fts5vocab(archive_chunks_fts, 'row');
-- table archive_documents
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
-- table archive_turns
CREATE TABLE archive_turns (
    id INTEGER PRIMARY KEY,
    user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    document_id INTEGER NOT NULL REFERENCES archive_documents(id) ON DELETE CASCADE,
    position INTEGER NOT NULL,
    role TEXT NOT NULL,
    label TEXT NOT NULL,
    text TEXT NOT NULL,
    created_at TEXT,
    UNIQUE (document_id, position)
);
-- table auth_sessions
CREATE TABLE auth_sessions (
            id TEXT PRIMARY KEY,
            user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            csrf_token TEXT NOT NULL,
            created_at TEXT NOT NULL,
            expires_at TEXT NOT NULL
        );
-- table branch_messages
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
-- table branch_requests
CREATE TABLE branch_requests (
            id INTEGER PRIMARY KEY,
            user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            retry_key TEXT NOT NULL,
            source_conversation_id INTEGER REFERENCES conversations(id) ON DELETE SET NULL,
            destination_conversation_id INTEGER NOT NULL
                REFERENCES conversations(id) ON DELETE CASCADE,
            created_at TEXT NOT NULL, source_document_id INTEGER REFERENCES archive_documents(id) ON DELETE SET NULL,
            UNIQUE (user_id, retry_key)
        );
-- table capsules
CREATE TABLE capsules (
            id INTEGER PRIMARY KEY REFERENCES events(id) ON DELETE CASCADE,
            user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
            text TEXT NOT NULL,
            source TEXT NOT NULL CHECK (source IN ('offline', 'model')),
            through_message_id INTEGER NOT NULL,
            created_at TEXT NOT NULL
        );
-- table channel_contacts
CREATE TABLE channel_contacts (
            id INTEGER PRIMARY KEY,
            user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            channel TEXT NOT NULL,
            address TEXT NOT NULL,
            persona_id INTEGER REFERENCES personas(id) ON DELETE SET NULL,
            created_at TEXT NOT NULL, verified_at TEXT,
            UNIQUE (channel, address)
        );
-- table channel_messages
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
-- table client_chats
CREATE TABLE client_chats (
            id INTEGER PRIMARY KEY,
            user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            persona_id INTEGER NOT NULL REFERENCES personas(id) ON DELETE CASCADE,
            key TEXT NOT NULL,
            conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
            created_at TEXT NOT NULL
        );
-- table contact_claims
CREATE TABLE contact_claims (
    id INTEGER PRIMARY KEY,
    user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    channel TEXT NOT NULL,
    address TEXT NOT NULL,
    persona_id INTEGER REFERENCES personas(id) ON DELETE SET NULL,
    code_hash TEXT,
    code_salt TEXT,
    expires_at TEXT,
    attempts INTEGER NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL,
    UNIQUE (user_id, channel, address)
);
-- table contact_code_sends
CREATE TABLE contact_code_sends (
    id INTEGER PRIMARY KEY,
    user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    channel TEXT NOT NULL,
    address TEXT NOT NULL,
    sent_at TEXT NOT NULL
);
-- table conversation_memories
CREATE TABLE conversation_memories (
            conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
            memory_id INTEGER NOT NULL REFERENCES memories(id) ON DELETE CASCADE,
            PRIMARY KEY (conversation_id, memory_id)
        ) WITHOUT ROWID;
-- table conversation_summaries
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
        , source_document_id INTEGER REFERENCES archive_documents(id) ON DELETE SET NULL);
-- table conversation_tags
CREATE TABLE conversation_tags (
    id INTEGER PRIMARY KEY,
    user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
    tag TEXT NOT NULL,
    created_at TEXT NOT NULL,
    UNIQUE (conversation_id, tag)
);
-- table conversations
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
        , snapshot_provenance TEXT NOT NULL DEFAULT 'legacy', snapshot_captured_at TEXT, snapshot_refreshed_at TEXT, snapshot_backfilled INTEGER NOT NULL DEFAULT 0, custom_instructions TEXT, pinned_at TEXT, tags TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(tags)), imported INTEGER NOT NULL DEFAULT 0, model TEXT);
-- table events
CREATE TABLE events (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            conversation_id INTEGER REFERENCES conversations(id) ON DELETE CASCADE,
            kind TEXT NOT NULL,
            channel TEXT NOT NULL DEFAULT 'web',
            created_at TEXT NOT NULL,
            payload TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(payload))
        , span_id INTEGER);
-- table fact_sources
CREATE TABLE fact_sources (
    fact_id INTEGER NOT NULL REFERENCES facts(id) ON DELETE CASCADE,
    message_id INTEGER NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
    PRIMARY KEY (fact_id, message_id)
);
-- table facts
CREATE TABLE facts (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    conversation_id INTEGER REFERENCES conversations(id) ON DELETE CASCADE,
    text TEXT NOT NULL,
    fact_date TEXT,
    source TEXT NOT NULL CHECK (source IN ('offline', 'model', 'import')),
    span_id INTEGER,
    created_at TEXT NOT NULL,
    embedding BLOB,
    embedding_model TEXT
);
-- table facts_fts
CREATE VIRTUAL TABLE facts_fts USING fts5(
            text, content='facts', content_rowid='id',
            tokenize='unicode61 remove_diacritics 2'
        );
-- table facts_fts_config
CREATE TABLE 'facts_fts_config'(k PRIMARY KEY, v) WITHOUT ROWID;
-- table facts_fts_data
CREATE TABLE 'facts_fts_data'(id INTEGER PRIMARY KEY, block BLOB);
-- table facts_fts_docsize
CREATE TABLE 'facts_fts_docsize'(id INTEGER PRIMARY KEY, sz BLOB);
-- table facts_fts_idx
CREATE TABLE 'facts_fts_idx'(segid, term, pgno, PRIMARY KEY(segid, term)) WITHOUT ROWID;
-- table facts_fts_vocab
CREATE VIRTUAL TABLE facts_fts_vocab USING fts5vocab(facts_fts, 'row');
-- table folders
CREATE TABLE folders (
            id INTEGER PRIMARY KEY,
            user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            name TEXT NOT NULL,
            hidden INTEGER NOT NULL DEFAULT 0,
            created_at TEXT NOT NULL,
            UNIQUE (user_id, name)
        );
-- table fragment_book_personas
CREATE TABLE fragment_book_personas (
    book_id INTEGER NOT NULL REFERENCES fragment_books(id) ON DELETE CASCADE,
    persona_id INTEGER NOT NULL REFERENCES personas(id) ON DELETE CASCADE,
    PRIMARY KEY (book_id, persona_id)
);
-- table fragment_books
CREATE TABLE fragment_books (
    id INTEGER PRIMARY KEY,
    user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    scope TEXT NOT NULL DEFAULT 'all' CHECK (scope IN ('all', 'character', 'personas')),
    character_id INTEGER REFERENCES personas(id) ON DELETE SET NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    UNIQUE (user_id, name)
);
-- table fragment_library
CREATE TABLE fragment_library (
            user_id INTEGER PRIMARY KEY REFERENCES users(id) ON DELETE CASCADE,
            version INTEGER NOT NULL
        );
-- table fragment_timers
CREATE TABLE fragment_timers (
            conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
            fragment_id INTEGER NOT NULL REFERENCES fragments(id) ON DELETE CASCADE,
            sticky_until INTEGER NOT NULL DEFAULT 0,
            cooldown_until INTEGER NOT NULL DEFAULT 0,
            PRIMARY KEY (conversation_id, fragment_id)
        ) WITHOUT ROWID;
-- table fragments
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
        , controls TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(controls)), import_key TEXT);
-- table import_sources
CREATE TABLE import_sources (
            user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            kind TEXT NOT NULL,
            source_key TEXT NOT NULL,
            target_id INTEGER,
            created_at TEXT NOT NULL,
            PRIMARY KEY (user_id, kind, source_key)
        ) WITHOUT ROWID;
-- table item_versions
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
-- table jobs
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
-- table layer_cursors
CREATE TABLE layer_cursors (
            conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
            layer TEXT NOT NULL,
            user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            message_id INTEGER NOT NULL,
            updated_at TEXT NOT NULL,
            PRIMARY KEY (conversation_id, layer)
        ) WITHOUT ROWID;
-- table layer_settings
CREATE TABLE layer_settings (
            user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            key TEXT NOT NULL,
            value TEXT NOT NULL CHECK (json_valid(value)),
            PRIMARY KEY (user_id, key)
        ) WITHOUT ROWID;
-- table live_context
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
-- table memories
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
        , valid_from TEXT, valid_until TEXT, recorded_at TEXT, retired_at TEXT, version INTEGER NOT NULL DEFAULT 1);
-- table memory_versions
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
-- table message_alternatives
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
-- table message_attachments
CREATE TABLE message_attachments (
    id INTEGER PRIMARY KEY,
    user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
    message_id INTEGER NOT NULL REFERENCES events(id) ON DELETE CASCADE,
    position INTEGER NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN ('text', 'image')),
    name TEXT NOT NULL,
    media_type TEXT NOT NULL,
    size INTEGER NOT NULL,
    text TEXT,
    data BLOB,
    created_at TEXT NOT NULL,
    UNIQUE (message_id, position)
);
-- table message_branches
CREATE TABLE message_branches (
            id INTEGER PRIMARY KEY,
            user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
            message_id INTEGER NOT NULL,
            position INTEGER NOT NULL CHECK (position >= 0),
            created_at TEXT NOT NULL,
            UNIQUE (message_id, position)
        );
-- table message_embeddings
CREATE TABLE message_embeddings (
            message_id INTEGER PRIMARY KEY REFERENCES messages(id) ON DELETE CASCADE,
            user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            model TEXT NOT NULL,
            embedding BLOB NOT NULL
        );
-- table messages
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
-- table messages_fts
CREATE VIRTUAL TABLE messages_fts USING fts5(
            content, content='messages', content_rowid='id',
            tokenize='unicode61 remove_diacritics 2'
        );
-- table messages_fts_config
CREATE TABLE 'messages_fts_config'(k PRIMARY KEY, v) WITHOUT ROWID;
-- table messages_fts_data
CREATE TABLE 'messages_fts_data'(id INTEGER PRIMARY KEY, block BLOB);
-- table messages_fts_docsize
CREATE TABLE 'messages_fts_docsize'(id INTEGER PRIMARY KEY, sz BLOB);
-- table messages_fts_idx
CREATE TABLE 'messages_fts_idx'(segid, term, pgno, PRIMARY KEY(segid, term)) WITHOUT ROWID;
-- table messages_fts_vocab
CREATE VIRTUAL TABLE messages_fts_vocab USING fts5vocab(messages_fts, 'row');
-- table model_connections
CREATE TABLE model_connections (
            user_id INTEGER PRIMARY KEY REFERENCES users(id) ON DELETE CASCADE,
            provider TEXT NOT NULL CHECK (provider IN ('offline', 'openai', 'openai-chat', 'anthropic')),
            model TEXT NOT NULL DEFAULT '',
            base_url TEXT NOT NULL DEFAULT '',
            api_key TEXT NOT NULL DEFAULT '',
            updated_at TEXT NOT NULL
        );
-- table nudges
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
-- table persona_avatars
CREATE TABLE persona_avatars (
            persona_id INTEGER PRIMARY KEY REFERENCES personas(id) ON DELETE CASCADE,
            user_id INTEGER NOT NULL,
            mime TEXT NOT NULL,
            data BLOB NOT NULL,
            updated_at TEXT NOT NULL
        );
-- table persona_channels
CREATE TABLE persona_channels (
            persona_id INTEGER NOT NULL REFERENCES personas(id) ON DELETE CASCADE,
            channel TEXT NOT NULL,
            answers INTEGER NOT NULL,
            PRIMARY KEY (persona_id, channel)
        ) WITHOUT ROWID;
-- table personas
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
            updated_at TEXT NOT NULL, card TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(card)), archived_at TEXT, uuid TEXT,
            UNIQUE (user_id, name)
        );
-- table prompt_presets
CREATE TABLE prompt_presets (
    id INTEGER PRIMARY KEY,
    user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    text TEXT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    UNIQUE (user_id, name)
);
-- table proposals
CREATE TABLE "proposals" (
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
-- table response_chains
CREATE TABLE response_chains (
            conversation_id INTEGER PRIMARY KEY REFERENCES conversations(id) ON DELETE CASCADE,
            user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            response_id TEXT,
            replacement_input TEXT CHECK (replacement_input IS NULL OR json_valid(replacement_input)),
            compacted_at TEXT,
            updated_at TEXT NOT NULL
        , model TEXT);
-- table schema_migrations
CREATE TABLE schema_migrations ( version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL);
-- table search_log
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
-- table spans
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
-- table status_fields
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
-- table status_values
CREATE TABLE status_values (
            id INTEGER PRIMARY KEY,
            user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            field_id INTEGER NOT NULL REFERENCES status_fields(id) ON DELETE CASCADE,
            value TEXT NOT NULL,
            source TEXT NOT NULL DEFAULT 'manual' CHECK (source IN ('manual', 'approved', 'auto')),
            proposal_id INTEGER,
            valid_from TEXT NOT NULL,
            valid_to TEXT
        , recorded_at TEXT, retired_at TEXT, superseded_at TEXT);
-- table thread_summaries
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
-- table users
CREATE TABLE users (
            id INTEGER PRIMARY KEY,
            name TEXT NOT NULL UNIQUE,
            is_owner INTEGER NOT NULL DEFAULT 0,
            password_hash TEXT,
            created_at TEXT NOT NULL
        , display_name TEXT, disabled_at TEXT);
-- table vector_counts
CREATE TABLE vector_counts (
            user_id INTEGER NOT NULL,
            source TEXT NOT NULL,
            model TEXT NOT NULL,
            count INTEGER NOT NULL DEFAULT 0,
            max_id INTEGER NOT NULL DEFAULT 0,
            rev INTEGER NOT NULL DEFAULT 0,
            PRIMARY KEY (user_id, source, model)
        ) WITHOUT ROWID;
-- trigger archive_chunks_fts_delete
CREATE TRIGGER archive_chunks_fts_delete AFTER DELETE ON archive_chunks
        BEGIN
            INSERT INTO archive_chunks_fts (archive_chunks_fts, rowid, text) VALUES ('delete', old.id, old.text);
        END;
-- trigger archive_chunks_fts_insert
CREATE TRIGGER archive_chunks_fts_insert AFTER INSERT ON archive_chunks
        BEGIN
            INSERT INTO archive_chunks_fts (rowid, text) VALUES (new.id, new.text);
        END;
-- trigger archive_chunks_fts_update
CREATE TRIGGER archive_chunks_fts_update AFTER UPDATE OF text ON archive_chunks
        BEGIN
            INSERT INTO archive_chunks_fts (archive_chunks_fts, rowid, text) VALUES ('delete', old.id, old.text);
            INSERT INTO archive_chunks_fts (rowid, text) VALUES (new.id, new.text);
        END;
-- trigger chunk_vectors_delete
CREATE TRIGGER chunk_vectors_delete AFTER DELETE ON archive_chunks
        WHEN old.embedding_model IS NOT NULL
        BEGIN
            UPDATE vector_counts SET count = count - 1, rev = rev + 1
            WHERE user_id = old.user_id AND source = 'chunks' AND model = old.embedding_model;
        END;
-- trigger chunk_vectors_insert
CREATE TRIGGER chunk_vectors_insert AFTER INSERT ON archive_chunks
        WHEN new.embedding_model IS NOT NULL
        BEGIN
            INSERT INTO vector_counts (user_id, source, model, count, max_id)
                VALUES (new.user_id, 'chunks', new.embedding_model, 1, new.id)
            ON CONFLICT (user_id, source, model) DO UPDATE SET
                count = count + 1, rev = rev + (excluded.max_id < max_id), max_id = max(max_id, excluded.max_id);
        END;
-- trigger chunk_vectors_update
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
-- trigger events_append_only
CREATE TRIGGER events_append_only BEFORE UPDATE ON events
        BEGIN
            SELECT RAISE(ABORT, 'events are append-only');
        END;
-- trigger fact_sources_gone
CREATE TRIGGER fact_sources_gone AFTER DELETE ON fact_sources
        BEGIN
            DELETE FROM facts WHERE id = old.fact_id;
        END;
-- trigger fact_vectors_delete
CREATE TRIGGER fact_vectors_delete AFTER DELETE ON facts
        WHEN old.embedding_model IS NOT NULL
        BEGIN
            UPDATE vector_counts SET count = count - 1, rev = rev + 1
            WHERE user_id = old.user_id AND source = 'facts' AND model = old.embedding_model;
        END;
-- trigger fact_vectors_insert
CREATE TRIGGER fact_vectors_insert AFTER INSERT ON facts
        WHEN new.embedding_model IS NOT NULL
        BEGIN
            INSERT INTO vector_counts (user_id, source, model, count, max_id)
                VALUES (new.user_id, 'facts', new.embedding_model, 1, new.id)
            ON CONFLICT (user_id, source, model) DO UPDATE SET
                count = count + 1, rev = rev + (excluded.max_id < max_id), max_id = max(max_id, excluded.max_id);
        END;
-- trigger fact_vectors_update
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
-- trigger facts_fts_delete
CREATE TRIGGER facts_fts_delete AFTER DELETE ON facts
        BEGIN
            INSERT INTO facts_fts (facts_fts, rowid, text) VALUES ('delete', old.id, old.text);
        END;
-- trigger facts_fts_insert
CREATE TRIGGER facts_fts_insert AFTER INSERT ON facts
        BEGIN
            INSERT INTO facts_fts (rowid, text) VALUES (new.id, new.text);
        END;
-- trigger facts_fts_update
CREATE TRIGGER facts_fts_update AFTER UPDATE OF text ON facts
        BEGIN
            INSERT INTO facts_fts (facts_fts, rowid, text) VALUES ('delete', old.id, old.text);
            INSERT INTO facts_fts (rowid, text) VALUES (new.id, new.text);
        END;
-- trigger message_vectors_delete
CREATE TRIGGER message_vectors_delete AFTER DELETE ON message_embeddings
        BEGIN
            UPDATE vector_counts SET count = count - 1, rev = rev + 1
            WHERE user_id = old.user_id AND source = 'messages' AND model = old.model;
        END;
-- trigger message_vectors_insert
CREATE TRIGGER message_vectors_insert AFTER INSERT ON message_embeddings
        BEGIN
            INSERT INTO vector_counts (user_id, source, model, count, max_id)
                VALUES (new.user_id, 'messages', new.model, 1, new.message_id)
            ON CONFLICT (user_id, source, model) DO UPDATE SET
                count = count + 1, rev = rev + (excluded.max_id < max_id), max_id = max(max_id, excluded.max_id);
        END;
-- trigger message_vectors_update
CREATE TRIGGER message_vectors_update AFTER UPDATE ON message_embeddings
        BEGIN
            UPDATE vector_counts SET count = count - 1, rev = rev + 1
            WHERE user_id = old.user_id AND source = 'messages' AND model = old.model;
            INSERT INTO vector_counts (user_id, source, model, count, max_id, rev)
                VALUES (new.user_id, 'messages', new.model, 1, new.message_id, 1)
            ON CONFLICT (user_id, source, model) DO UPDATE SET
                count = count + 1, rev = rev + 1, max_id = max(max_id, excluded.max_id);
        END;
-- trigger messages_fts_delete
CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages
        WHEN old.kind = 'chat' AND old.role IN ('user', 'assistant')
        BEGIN
            INSERT INTO messages_fts (messages_fts, rowid, content) VALUES ('delete', old.id, old.content);
        END;
-- trigger messages_fts_insert
CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages
        WHEN new.kind = 'chat' AND new.role IN ('user', 'assistant')
        BEGIN
            INSERT INTO messages_fts (rowid, content) VALUES (new.id, new.content);
        END;
-- trigger messages_fts_update
CREATE TRIGGER messages_fts_update AFTER UPDATE OF content, kind, role ON messages
        BEGIN
            INSERT INTO messages_fts (messages_fts, rowid, content)
                SELECT 'delete', old.id, old.content
                WHERE old.kind = 'chat' AND old.role IN ('user', 'assistant');
            INSERT INTO messages_fts (rowid, content)
                SELECT new.id, new.content
                WHERE new.kind = 'chat' AND new.role IN ('user', 'assistant');
        END;
-- trigger messages_turn_delete
CREATE TRIGGER messages_turn_delete AFTER DELETE ON messages
        WHEN old.kind IN ('chat', 'handoff_artifact') AND old.role IN ('user', 'assistant')
        BEGIN
            UPDATE conversations SET turn_count = turn_count - 1, history_rev = history_rev + 1
            WHERE id = old.conversation_id;
        END;
-- trigger messages_turn_insert
CREATE TRIGGER messages_turn_insert AFTER INSERT ON messages
        WHEN new.kind IN ('chat', 'handoff_artifact') AND new.role IN ('user', 'assistant')
        BEGIN
            UPDATE conversations SET turn_count = turn_count + 1 WHERE id = new.conversation_id;
        END;
-- trigger messages_turn_update
CREATE TRIGGER messages_turn_update AFTER UPDATE OF content, kind, role ON messages
        WHEN old.kind IN ('chat', 'handoff_artifact') OR new.kind IN ('chat', 'handoff_artifact')
        BEGIN
            UPDATE conversations SET history_rev = history_rev + 1,
                turn_count = turn_count
                    - (old.kind IN ('chat', 'handoff_artifact') AND old.role IN ('user', 'assistant'))
                    + (new.kind IN ('chat', 'handoff_artifact') AND new.role IN ('user', 'assistant'))
            WHERE id = new.conversation_id;
        END;
-- trigger thread_summaries_invalidate_on_delete
CREATE TRIGGER thread_summaries_invalidate_on_delete AFTER DELETE ON messages
        WHEN old.kind = 'chat'
        BEGIN
            UPDATE thread_summaries SET invalidated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now')
            WHERE conversation_id = old.conversation_id AND through_message_id >= old.id
              AND invalidated_at IS NULL;
        END;
-- trigger thread_summaries_invalidate_on_edit
CREATE TRIGGER thread_summaries_invalidate_on_edit AFTER UPDATE OF content, role, kind ON messages
        WHEN old.kind = 'chat' AND (new.content IS NOT old.content OR new.role IS NOT old.role
                                    OR new.kind IS NOT old.kind)
        BEGIN
            UPDATE thread_summaries SET invalidated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now')
            WHERE conversation_id = old.conversation_id AND through_message_id >= old.id
              AND invalidated_at IS NULL;
        END;
