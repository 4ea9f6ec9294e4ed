-- index conversation_memories_memory
CREATE INDEX conversation_memories_memory ON conversation_memories (memory_id, conversation_id);
-- index conversations_user_updated
CREATE INDEX conversations_user_updated ON conversations (user_id, updated_at);
-- index events_conversation_time
CREATE INDEX events_conversation_time ON events (conversation_id, created_at, id);
-- index events_user_time
CREATE INDEX events_user_time ON events (user_id, created_at, id);
-- index memories_user_position
CREATE INDEX memories_user_position ON memories (user_id, position);
-- index messages_conversation
CREATE INDEX messages_conversation ON messages (conversation_id, id);
-- index messages_one_static_prompt
CREATE UNIQUE INDEX messages_one_static_prompt ON messages (conversation_id)
            WHERE kind = 'static_prompt';
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
-- table auth_sessions
CREATE TABLE auth_sessions (
            id TEXT PRIMARY KEY,
            user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            csrf_token TEXT NOT NULL,
            created_at TEXT NOT NULL,
            expires_at TEXT NOT NULL
        );
-- table branch_requests
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
            ended_at TEXT
        , snapshot_provenance TEXT NOT NULL DEFAULT 'legacy', snapshot_captured_at TEXT, snapshot_refreshed_at TEXT, snapshot_backfilled INTEGER NOT NULL DEFAULT 0);
-- table events
CREATE TABLE events (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            conversation_id INTEGER REFERENCES conversations(id) ON DELETE CASCADE,
            kind TEXT NOT NULL,
            channel TEXT NOT NULL DEFAULT 'web',
            created_at TEXT NOT NULL,
            payload TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(payload))
        );
-- table folders
CREATE TABLE folders (
            id INTEGER PRIMARY KEY,
            user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            name TEXT NOT NULL,
            hidden INTEGER NOT NULL DEFAULT 0,
            created_at TEXT NOT NULL,
            UNIQUE (user_id, name)
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
            updated_at TEXT NOT NULL,
            UNIQUE (user_id, name)
        );
-- table schema_migrations
CREATE TABLE schema_migrations ( version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL);
-- table users
CREATE TABLE users (
            id INTEGER PRIMARY KEY,
            name TEXT NOT NULL UNIQUE,
            is_owner INTEGER NOT NULL DEFAULT 0,
            password_hash TEXT,
            created_at TEXT NOT NULL
        );
-- trigger events_append_only
CREATE TRIGGER events_append_only BEFORE UPDATE ON events
        BEGIN
            SELECT RAISE(ABORT, 'events are append-only');
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
