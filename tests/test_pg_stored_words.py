"""PostgreSQL keyword search reads each index's postings and vocabulary (S6, S9, migrations 28,
29 and 31), message texts are stored uncompressed (migration 30) and vectors inside their rows
(migration 32).

A database at version 27 ranked by tokenising every match's text; migration 28 stored each indexed
row's words beside it, migration 29 keeps each index's vocabulary, through which a prefix term
becomes the words it stands for, and migration 31 turns the stored words into postings (one row a
word and indexed row) that BM25 reads by word. A database upgraded from 27 and one created at the
latest version with the same rows return the same hits with the same scores, and those are the
scores the ranking gave before the migrations.
"""

from __future__ import annotations

import itertools
import os
import random

import pytest

from hearth.retrieval import pgsearch
from hearth.retrieval.terms import STATS, tsquery
from hearth.store import PgStore, migrations
from hearth.store.migrations import POSTGRESQL

_names = itertools.count(1)
NOW = "2026-01-01T00:00:00+00:00"
VOCABULARY = ["lantern", "lanterns", "harbour", "crème", "creme", "brûlée", "anna", "tea", "the", "and",
              "garden", "gardening", "rain", "river", "Zoë", "zoe", "bread", "winter", "lake", "song"]
QUERIES = [["lantern"], ["creme", "harbour"], ["lan*", "rain"], ["zoe", "the", "garden*"], ["brulee"],
           ["nothing"], ["song", "lake", "winter", "bread", "river", "tea"]]
# Every third row is filtered out, so the walk in score order must pass over rows that score well.
INDEXES = {"messages_fts": ("m", ["m.user_id = ?", "m.id % 3 <> 0"]),
           "archive_chunks_fts": ("k", ["k.user_id = ?", "k.id % 3 <> 0"]),
           "facts_fts": ("f", ["f.user_id = ?", "f.id % 3 <> 0"])}

# BM25 as ranked before migration 28: each match's words tokenised again from its text.
BEFORE = ("SELECT {a}.id, s.score FROM {table} {a} CROSS JOIN LATERAL (SELECT coalesce(sum(q.w * l.tf * 2.2"
          " / (l.tf + 1.2 * (0.25 + 0.75 * l.dl / ?::float8))), 0) AS score FROM (SELECT lexeme,"
          " coalesce(array_length(positions, 1), 1) AS tf, count(*) OVER () AS dl"
          " FROM unnest(hearth_words({a}.{column}))) l JOIN unnest(?::text[], ?::float8[]) AS q(term, w)"
          " ON CASE WHEN right(q.term, 1) = '*' THEN starts_with(l.lexeme, hearth_fold(rtrim(q.term, '*')))"
          " ELSE l.lexeme = hearth_fold(q.term) END) s"
          " WHERE hearth_words({a}.{column}) @@ to_tsquery('simple', hearth_fold(?)) AND {indexed}"
          " AND {a}.user_id = ? AND {a}.id % 3 <> 0 ORDER BY s.score DESC, {a}.id LIMIT ?")


@pytest.fixture
def pg_databases(request):
    if os.environ.get("HEARTH_TEST_ENGINE") != "postgres":
        pytest.skip("PostgreSQL lane only")
    pg_server = request.getfixturevalue("pg_server")
    names = [f"words{os.getpid()}_{next(_names)}" for _ in range(2)]
    for name in names:
        pg_server.admin(f"CREATE DATABASE {name}")
    yield [pg_server.url(name) for name in names]
    for name in names:
        pg_server.drop_database(pg_server.url(name))


def since(version: int) -> list[int]:
    """The migrations from ``version`` on, as ``migrate`` applies them."""
    return sorted(n for n in map(migrations.number, migrations.MIGRATIONS) if n >= version)


def _fill(conn) -> None:
    """One user's chat turns (some not indexed), archive chunks and facts, the same every time."""
    rng = random.Random(28)

    def text() -> str:
        return " ".join(rng.choice(VOCABULARY) for _ in range(rng.randint(1, 30)))

    conn.execute("INSERT INTO users (name, created_at) VALUES ('owner', ?)", (NOW,))
    conn.execute("INSERT INTO personas (user_id, name, display_name, user_label, assistant_label, created_at,"
                 " updated_at) VALUES (1, 'p', 'P', 'U', 'A', ?, ?)", (NOW, NOW))
    conn.execute("INSERT INTO conversations (user_id, persona_id, title, created_at, updated_at)"
                 " VALUES (1, 1, 'c', ?, ?)", (NOW, NOW))
    for i in range(1, 301):
        role, kind = rng.choice([("user", "chat"), ("assistant", "chat"), ("system", "chat")])
        conn.execute("INSERT INTO events (id, user_id, conversation_id, kind, created_at)"
                     " VALUES (?, 1, 1, 'message', ?)", (i, NOW))
        conn.execute("INSERT INTO messages (id, user_id, conversation_id, role, kind, content, created_at)"
                     " VALUES (?, 1, 1, ?, ?, ?, ?)", (i, role, kind, text(), NOW))
    conn.execute("INSERT INTO archive_documents (user_id, title, content_hash, created_at)"
                 " VALUES (1, 'd', 'h', ?)", (NOW,))
    for i in range(60):
        conn.execute("INSERT INTO archive_chunks (user_id, document_id, position, text, content_hash)"
                     " VALUES (1, 1, ?, ?, ?)", (i, text(), f"h{i}"))
    for _ in range(40):
        conn.execute("INSERT INTO facts (user_id, text, source, created_at) VALUES (1, ?, 'offline', ?)",
                     (text(), NOW))
    # Edits and deletions after the fact: the stored words follow the rows.
    conn.execute("UPDATE messages SET content = 'lantern lantern harbour' WHERE id = 7")
    conn.execute("UPDATE messages SET kind = 'handoff_artifact' WHERE id = 8")
    conn.execute("DELETE FROM messages WHERE id = 9")
    conn.execute("UPDATE archive_chunks SET text = 'crème brûlée by the lake' WHERE position = 3")


def _ranked(conn) -> dict:
    """Both ways ``ranked`` finds its rows (scores first, or the GIN matches first for narrow
    filters), which must agree to the last bit of every score."""
    STATS.clear()
    out = {}
    for fts, (alias, where) in INDEXES.items():
        for words in QUERIES:
            both = [[(r[0], r["score"]) for r in pgsearch.ranked(conn, fts, alias, f"{alias}.id", "", where, [1],
                                                                 words, 20, narrow=narrow)] for narrow in (False, True)]
            assert both[0] == both[1], (fts, words)
            out[(fts, tuple(words))] = both[0]
    return out


def _ranked_before(conn) -> dict:
    """The ranking before migration 28, each word's rows counted by the GIN match itself (the
    definition the postings' counts must equal)."""
    out = {}
    for fts, (alias, _where) in INDEXES.items():
        table, column, indexed = pgsearch.INDEXES[fts]
        sql = BEFORE.format(a=alias, table=table, column=column, indexed=indexed.format(a=alias))
        total = conn.execute(f"SELECT count(*) FROM {table} WHERE {indexed.format(a=table)}").fetchone()[0]
        avg = pgsearch.average_length(conn, fts)
        for words in QUERIES:
            query = tsquery(words)
            weights = [pgsearch.idf(max(total, 1), conn.execute(
                f"SELECT count(*) FROM {table} WHERE hearth_words({column}) @@ to_tsquery('simple', hearth_fold(?))"
                f" AND {indexed.format(a=table)}", (tsquery([word]),)).fetchone()[0]) for word in words]
            rows = conn.execute(sql, (avg, [w.casefold() for w in words], weights, query, 1, 20)).fetchall()
            out[(fts, tuple(words))] = [(r[0], r[1]) for r in rows]
    return out


def _vocabulary(conn) -> set[tuple[str, str]]:
    return {(r[0], r[1]) for r in conn.execute("SELECT name, lexeme FROM keyword_lexemes")}


def _held(conn) -> set[tuple[str, str]]:
    """Each index's words as its indexed rows hold them now."""
    out = set()
    for fts, (table, _column, _indexed) in pgsearch.INDEXES.items():
        out |= {(fts, r[0]) for r in conn.execute(f"SELECT DISTINCT lexeme FROM {table}_postings")}
    return out


def _same(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for key in a:
        assert [i for i, _ in a[key]] == [i for i, _ in b[key]], key
        assert [s for _, s in a[key]] == pytest.approx([s for _, s in b[key]], rel=1e-12), key


def test_s9_a_database_upgraded_from_27_searches_as_one_created_at_the_latest_version(pg_databases):
    upgraded_url, fresh_url = pg_databases
    upgraded = PgStore(upgraded_url, migrate=False)
    fresh = PgStore(fresh_url)
    try:
        conn = upgraded.connection()
        with upgraded.write():
            migrations.migrate(conn, POSTGRESQL, upto=27)
            _fill(conn)
        before = _ranked_before(conn)
        with upgraded.write():
            assert migrations.migrate(conn, POSTGRESQL) == since(28)
        after_upgrade = _ranked(conn)
        with fresh.write():
            _fill(fresh.connection())
        created = _ranked(fresh.connection())

        assert any(len(hits) > 3 for hits in before.values())
        _same(after_upgrade, before)
        _same(created, before)
        # The postings are exactly the words of the rows the index covers, as each text now reads,
        # with each word's count in its row and the row's count of distinct words.
        for store in (upgraded, fresh):
            c = store.connection()
            for table, column, indexed in pgsearch.INDEXES.values():
                held = {tuple(r) for r in c.execute(f"SELECT lexeme, id, tf, dl FROM {table}_postings")}
                read = {tuple(r) for r in c.execute(
                    f"SELECT l.lexeme, a.id, coalesce(array_length(l.positions, 1), 1), length(hearth_words(a.{column}))"
                    f" FROM {table} a, unnest(hearth_words(a.{column})) l WHERE {indexed.format(a='a')}")}
                assert held == read and held, table
        # The vocabulary holds every word an indexed row holds; an edited row's old words stay in
        # it until compaction, which keeps exactly the words still held.
        for store in (upgraded, fresh):
            assert _vocabulary(store.connection()) >= _held(store.connection())
        with fresh.write() as c:  # a word whose only row is deleted
            c.execute("INSERT INTO events (id, user_id, conversation_id, kind, created_at)"
                      " VALUES (999, 1, 1, 'message', ?)", (NOW,))
            c.execute("INSERT INTO messages (id, user_id, conversation_id, role, kind, content, created_at)"
                      " VALUES (999, 1, 1, 'user', 'chat', 'a quernstone by the lantern', ?)", (NOW,))
            c.execute("DELETE FROM messages WHERE id = 999")
        assert ("messages_fts", "quernstone") in _vocabulary(fresh.connection()) - _held(fresh.connection())
        _checked, found, terms = fresh.engine.find_text(fresh, "quernstone", ["quernstone"])
        assert found == ["keyword_lexemes.lexeme"] and terms == 1  # the canary check sees it (B4)
        for store in (upgraded, fresh):
            store.engine.reclaim(store, ())
            assert _vocabulary(store.connection()) == _held(store.connection())
        assert fresh.engine.find_text(fresh, "quernstone", ["quernstone"])[1:] == ([], 0)
        _same(_ranked(fresh.connection()), before)
    finally:
        upgraded.close()
        fresh.close()


def test_s10_stored_prompts_are_kept_uncompressed_from_migration_30(pg_databases):
    """A stored prompt is read on every send; pglz's decompression of a large one cost most of its
    read, so message texts are kept uncompressed (as SQLite keeps them), and the prompts already
    there are rewritten by the migration, their text unchanged."""
    url, _ = pg_databases
    store = PgStore(url, migrate=False)
    snapshot = "\n".join(f"- Memory {i}: the quince by the fence flowered in week {i % 52}." for i in range(3000))

    def prompt(message_id: int) -> None:
        with store.write() as c:
            c.execute("INSERT INTO events (id, user_id, conversation_id, kind, created_at)"
                      " VALUES (?, 1, 1, 'message', ?)", (message_id, NOW))
            c.execute("INSERT INTO conversations (id, user_id, persona_id, title, created_at, updated_at)"
                      " VALUES (?, 1, 1, 'c', ?, ?)", (message_id, NOW, NOW))
            c.execute("INSERT INTO messages (id, user_id, conversation_id, role, kind, content, created_at)"
                      " VALUES (?, 1, ?, 'system', 'static_prompt', ?, ?)", (message_id, message_id, snapshot, NOW))

    def compression(message_id: int) -> str | None:
        return store.connection().execute("SELECT pg_column_compression(content) FROM messages WHERE id = ?",
                                          (message_id,)).fetchone()[0]

    try:
        conn = store.connection()
        with store.write():
            migrations.migrate(conn, POSTGRESQL, upto=29)
            _fill(conn)
        prompt(991)
        assert compression(991) == "pglz"
        with store.write():
            assert migrations.migrate(conn, POSTGRESQL, upto=30) == [30]
        prompt(992)
        assert compression(991) is None and compression(992) is None
        texts = conn.execute("SELECT content FROM messages WHERE id IN (991, 992)").fetchall()
        assert [t[0] for t in texts] == [snapshot, snapshot]
    finally:
        store.close()


def test_s7_s9_vectors_are_kept_inside_their_rows_from_migration_32(pg_databases):
    """A search reads the pgvector copy of every row it scores, so from migration 32 that copy stays
    in the row and the float32 bytes (read by export and migrate-store) go out of line instead.
    Rows written before keep their place until a rewrite of the table moves them; they are read the
    same either way, and every score stays the same."""
    import numpy as np

    from hearth.retrieval import pgvectors
    from hearth.retrieval.semantic import _write_pg

    url, _ = pg_databases
    store = PgStore(url, migrate=False)
    vectors = np.random.default_rng(32).normal(size=(6, 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    sources = {"messages": ("message_embeddings", "message_id"), "chunks": ("archive_chunks", "id"),
               "facts": ("facts", "id")}

    def write(first: int) -> None:  # one vector in each table, to a row the fill made
        with store.write() as c:
            for offset, source in enumerate(sources):
                _write_pg(c, source, first + offset, 1, "m", vectors[first + offset - 1])

    def out_of_line(source: str, row_id: int) -> tuple[bool, bool]:
        """Whether the row's vector, and its bytes, are held in the TOAST table."""
        table, key = sources[source]
        return tuple(store.connection().execute(
            f"SELECT pg_column_toast_chunk_id(vec) IS NOT NULL, pg_column_toast_chunk_id(embedding) IS NOT NULL"
            f" FROM {table} WHERE {key} = ?", (row_id,)).fetchone())

    def scores() -> dict:
        conn = store.connection()
        return {source: pgvectors.search(conn, source, 1, "m", vectors, 6) for source in sources}

    try:
        conn = store.connection()
        with store.write():
            migrations.migrate(conn, POSTGRESQL, upto=31)
            _fill(conn)
            for source in sources:
                pgvectors.ensure_index(conn, source, 384)
        write(1)
        assert [out_of_line(source, 1 + i) for i, source in enumerate(sources)] == [(True, False)] * 3
        before = scores()
        with store.write():
            assert migrations.migrate(conn, POSTGRESQL) == since(32)
        write(4)
        assert [out_of_line(source, 4 + i) for i, source in enumerate(sources)] == [(False, True)] * 3
        assert [out_of_line(source, 1 + i) for i, source in enumerate(sources)] == [(True, False)] * 3
        after = scores()
        for table, _key in sources.values():  # the rewrite docs/storage.md describes
            conn.execute(f"VACUUM FULL {table}")
        assert [out_of_line(source, 1 + i) for i, source in enumerate(sources)] == [(False, True)] * 3
        rewritten = scores()
        old_ids = {source: {1 + i} for i, source in enumerate(sources)}
        for i, source in enumerate(sources):
            # The row written before reads the same, to the last bit of every score.
            assert [[h for h in hits if h[0] in old_ids[source]] for hits in after[source]] == before[source]
            assert before[source][i][0][0] == 1 + i and after[source][3 + i][0][0] == 4 + i
            assert rewritten[source] == after[source]
    finally:
        store.close()
