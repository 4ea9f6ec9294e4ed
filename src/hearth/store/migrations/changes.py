"""Migrations 15 on, each run one by one on both engines. A schema change is the next number,
added at the end of this module and of ``MIGRATIONS`` in the package. Shipped ones are never edited."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from ..schema import Call, Migration, Operation, Sql, Step

migration = Migration


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


# Each keyword index on PostgreSQL: (index, table, text column, whether the old row was indexed,
# whether the new row is, which rows are), and the trigger function that keeps its totals.
_KEYWORD_INDEXES = (("messages_fts", "messages", "content", "hearth_message_indexed(OLD.kind, OLD.role)",
                     "hearth_message_indexed(NEW.kind, NEW.role)", "hearth_message_indexed(kind, role)"),
                    ("archive_chunks_fts", "archive_chunks", "text", "TRUE", "TRUE", "TRUE"),
                    ("facts_fts", "facts", "text", "TRUE", "TRUE", "TRUE"))
_TOTALS_FUNCTIONS = {"messages": "hearth_messages_keyword_totals", "archive_chunks": "hearth_chunks_keyword_totals",
                     "facts": "hearth_facts_keyword_totals"}


def _words_function(index: str, table: str, column: str, old_indexed: str, new_indexed: str,
                    vocabulary: bool) -> str:
    """The totals trigger's function: the index's totals, the row's stored words and (from
    migration 29) the index's vocabulary follow every write."""
    learn = (f"\n        INSERT INTO keyword_lexemes (name, lexeme) SELECT '{index}', unnest(tsvector_to_array(w))"
             "\n            ON CONFLICT DO NOTHING;") if vocabulary else ""
    return f"""CREATE OR REPLACE FUNCTION {_TOTALS_FUNCTIONS[table]}() RETURNS trigger LANGUAGE plpgsql AS $$
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
        INSERT INTO {table}_words (id, words) VALUES (NEW.id, w);{learn}
    END IF;
    RETURN NULL;
END $$;"""


def _stored_words_sql() -> str:
    """PostgreSQL's side tables of each keyword-indexed row's words, filled by the totals'
    triggers (which already fire on exactly the indexed rows) and from the rows already there."""
    out = []
    for index, table, column, old_indexed, new_indexed, indexed in _KEYWORD_INDEXES:
        out.append(f"""
CREATE TABLE {table}_words (
    id BIGINT PRIMARY KEY REFERENCES {table}(id) ON DELETE CASCADE,
    words tsvector NOT NULL
);
{_words_function(index, table, column, old_indexed, new_indexed, vocabulary=False)}
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


def _vocabulary_sql() -> str:
    """PostgreSQL's vocabulary of each keyword index, learnt by the totals' triggers from every
    indexed row they write and filled from the stored words already there."""
    out = ["""
CREATE TABLE keyword_lexemes (
    name TEXT NOT NULL,
    lexeme TEXT COLLATE "C" NOT NULL,
    PRIMARY KEY (name, lexeme)
);"""]
    for index, table, column, old_indexed, new_indexed, _indexed in _KEYWORD_INDEXES:
        out.append(f"""
{_words_function(index, table, column, old_indexed, new_indexed, vocabulary=True)}
INSERT INTO keyword_lexemes (name, lexeme)
    SELECT DISTINCT '{index}', unnest(tsvector_to_array(words)) FROM {table}_words;""")
    return "".join(out) + "\nANALYZE keyword_lexemes;\n"


VOCABULARY = Step(
    "keyword_vocabulary",  # FTS5 keeps its vocabulary in its index (read through fts5vocab)
    sqlite=None,
    postgresql=_vocabulary_sql,
)


@migration
def m029_keep_keyword_vocabulary() -> list[Operation]:
    """Each keyword index's words on PostgreSQL (``keyword_lexemes``), as FTS5 keeps its own: a
    prefix term (``garden*``) is turned into the index's words that start with it, so BM25 picks
    a match's terms out of its stored words in C instead of comparing every one of them with every
    query term. Learnt in the writing transaction by the totals' triggers, which already fire on
    exactly the indexed rows. A word whose last row is deleted or edited stays until compaction
    (as in an FTS5 index until it is merged): ``PgEngine.reclaim`` keeps only the words some
    indexed row still holds."""
    return [VOCABULARY]


UNCOMPRESSED_TEXTS = Step(
    "uncompressed_message_texts",  # SQLite never compresses a text
    sqlite=None,
    postgresql="ALTER TABLE messages ALTER COLUMN content SET STORAGE EXTERNAL;\n"
               # Rewritten now, not at their next rebuild (a new value, so stored the new way).
               "UPDATE messages SET content = content || '' WHERE kind = 'static_prompt';",
)


@migration
def m030_keep_message_texts_uncompressed() -> list[Operation]:
    """Long message texts kept uncompressed on PostgreSQL, as SQLite keeps every text. The stored
    prompt is read on every send, and with a large memory snapshot (200 KB) pglz's decompression
    was 0.7 ms of its read's 0.8; a long text still goes out of line (TOAST), so the rows stay
    small. Stored prompts are rewritten in this migration; other long texts are stored so as they
    are written."""
    return [UNCOMPRESSED_TEXTS]


def _postings_sql() -> str:
    """PostgreSQL's postings of each keyword index (``<table>_postings``: one row a word and indexed
    row, its term frequency and the row's length), kept by the totals' triggers and filled from the
    stored words they replace."""
    out = []
    for index, table, column, old_indexed, new_indexed, _indexed in _KEYWORD_INDEXES:
        out.append(f"""
CREATE TABLE {table}_postings (
    lexeme TEXT COLLATE "C" NOT NULL,
    id BIGINT NOT NULL,
    tf SMALLINT NOT NULL,
    dl INTEGER NOT NULL,
    PRIMARY KEY (lexeme, id) INCLUDE (tf, dl)
);
CREATE OR REPLACE FUNCTION {_TOTALS_FUNCTIONS[table]}() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    w tsvector;
BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') AND {old_indexed} THEN
        w := hearth_words(OLD.{column});
        PERFORM hearth_keyword_add('{index}', -1, -length(w));
        DELETE FROM {table}_postings WHERE lexeme = ANY(tsvector_to_array(w) COLLATE "C") AND id = OLD.id;
    END IF;
    IF TG_OP IN ('UPDATE', 'INSERT') AND {new_indexed} THEN
        w := hearth_words(NEW.{column});
        PERFORM hearth_keyword_add('{index}', 1, length(w));
        INSERT INTO {table}_postings (lexeme, id, tf, dl)
            SELECT l.lexeme, NEW.id, coalesce(array_length(l.positions, 1), 1), length(w) FROM unnest(w) AS l;
        INSERT INTO keyword_lexemes (name, lexeme) SELECT '{index}', unnest(tsvector_to_array(w))
            ON CONFLICT DO NOTHING;
    END IF;
    RETURN NULL;
END $$;
INSERT INTO {table}_postings (lexeme, id, tf, dl)
    SELECT l.lexeme, w.id, coalesce(array_length(l.positions, 1), 1), length(w.words)
    FROM {table}_words w, unnest(w.words) AS l;
DROP TABLE {table}_words;
ANALYZE {table}_postings;""")
    return "".join(out) + "\n"


POSTINGS = Step(
    "keyword_postings",  # FTS5's doclists are its postings already
    sqlite=None,
    postgresql=_postings_sql,
)


@migration
def m031_keep_keyword_postings() -> list[Operation]:
    """Each keyword index's postings on PostgreSQL, as FTS5 keeps doclists: ``<table>_postings``
    holds one row a word and indexed row (the word, the row's id, how often the word occurs in it
    and how many distinct words the row has), keyed by the word, so BM25 reads a query's postings
    in index order instead of reading each match's stored words and cutting them down to the
    query's. They replace the stored words of migration 28. Kept by the totals' triggers in the
    writing transaction: an edited or deleted row's postings are removed by its old words."""
    return [POSTINGS]


INLINE_VECTORS = Step(
    "inline_vectors",  # SQLite keeps a row's values in its own pages, however long
    sqlite=None,
    postgresql="".join(f"ALTER TABLE {table} ALTER COLUMN vec SET STORAGE MAIN,"
                       f" ALTER COLUMN embedding SET STORAGE EXTERNAL;\n"
                       for table in ("message_embeddings", "archive_chunks", "facts")),
)


@migration
def m032_keep_vectors_inline() -> list[Operation]:
    """pgvector's copy of each embedding kept inside its row on PostgreSQL, the float32 bytes moved
    out of it instead. A 384-number vector and its bytes make a row longer than TOAST's 2 KB, and
    pgvector's type goes out of line first, so every vector a search read (the score of each of the
    nearest rows, every turn of a dated range) cost a lookup in the TOAST table; the bytes are read
    only by export, ``migrate-store`` and the context vector. Rows written from now on are stored
    so. Rows already there move when their table is rewritten (``VACUUM FULL``), which rebuilds
    its HNSW index: not done here, since at a million vectors that would hold the first start for
    many minutes (docs/storage.md)."""
    return [INLINE_VECTORS]


@migration
def m033_add_model_connections_and_disabled_users() -> list[Operation]:
    """The model connection a person chose in the app (W10): provider, model, base URL and key, one
    row per user (a user without one uses the owner's). The key is kept here, on the server, and
    leaves it only in the requests to that provider: never exported, never shown whole. A user
    the owner disabled (``disabled_at``) can no longer log in or use an API token."""
    return [
        Sql("""
        CREATE TABLE model_connections (
            user_id {int} PRIMARY KEY REFERENCES users(id) ON DELETE CASCADE,
            provider TEXT NOT NULL CHECK (provider IN ('offline', 'openai', 'openai-chat', 'anthropic')),
            model TEXT NOT NULL DEFAULT '',
            base_url TEXT NOT NULL DEFAULT '',
            api_key TEXT NOT NULL DEFAULT '',
            updated_at TEXT NOT NULL
        );
        ALTER TABLE users ADD COLUMN disabled_at TEXT;
        """),
    ]


# Migration 34's table.
MESSAGE_ATTACHMENTS = """
CREATE TABLE message_attachments (
    id {key},
    user_id {int} NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    conversation_id {int} NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
    message_id {int} NOT NULL REFERENCES events(id) ON DELETE CASCADE,
    position {int} NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN ('text', 'image')),
    name TEXT NOT NULL,
    media_type TEXT NOT NULL,
    size {int} NOT NULL,
    text TEXT,
    data {blob},
    created_at TEXT NOT NULL,
    UNIQUE (message_id, position)
);
CREATE INDEX message_attachments_conversation ON message_attachments (conversation_id, message_id);
"""


@migration
def m034_create_message_attachments() -> list[Operation]:
    """Attachments of the person's messages (W14): text files (``text``) and images (``data``),
    each with its name, media type and size in bytes, in the order they were attached.

    A row belongs to the message's ledger event, not its ``messages`` row: a turn put away after an
    edited message (W2) leaves ``messages`` for ``branch_messages`` and comes back with the same id,
    and its attachments stay where they are meanwhile. Forgetting the message deletes its event, and
    the attachments go with it (B4)."""
    return [Sql(MESSAGE_ATTACHMENTS)]


# Migration 35's tables.
CONTACT_CLAIMS = """
ALTER TABLE channel_contacts ADD COLUMN verified_at TEXT;
UPDATE channel_contacts SET verified_at = created_at;
CREATE TABLE contact_claims (
    id {key},
    user_id {int} NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    channel TEXT NOT NULL,
    address TEXT NOT NULL,
    persona_id {int} REFERENCES personas(id) ON DELETE SET NULL,
    code_hash TEXT,
    code_salt TEXT,
    expires_at TEXT,
    attempts {int} NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL,
    UNIQUE (user_id, channel, address)
);
CREATE INDEX contact_claims_address ON contact_claims (channel, address);
CREATE TABLE contact_code_sends (
    id {key},
    user_id {int} NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    channel TEXT NOT NULL,
    address TEXT NOT NULL,
    sent_at TEXT NOT NULL
);
CREATE INDEX contact_code_sends_address ON contact_code_sends (channel, address, sent_at);
"""


@migration
def m035_verify_contact_addresses() -> list[Operation]:
    """Contact addresses that prove ownership (U9). ``channel_contacts`` now holds only verified
    addresses, the ones inbound messages route by; an address a user adds waits in
    ``contact_claims`` (any number of users may claim one address) until its owner enters the
    six-digit code sent to it, stored only as a salted hash. ``contact_code_sends`` counts the codes
    sent to each address for the hourly limit. Every address already a contact was added before
    codes existed: this one-time step marks it verified as of its creation (docs/channels.md)."""
    return [Sql(CONTACT_CLAIMS)]
