"""PostgreSQL at scale (S9, S11, K1): the keyword totals its triggers keep in place of counting
rows per query, one statement per saved message, and migrate-store's vectors built into the
HNSW index once, the copy then vacuumed and analysed."""

from __future__ import annotations

import numpy as np

from hearth import Hearth, Settings
from hearth.ops.backup import backup, restore_deployment
from hearth.records import ledger
from hearth.retrieval import pgsearch, pgvectors
from hearth.retrieval.archive import Archive
from hearth.retrieval.semantic import embed_pending, shared_embedder
from hearth.retrieval.terms import indexed_rows
from hearth.store import PgStore, open_store

TRANSCRIPT = """AUMA said:
We planted the apple tree by the north fence.
Elion said:
I remember. You called it the Grandmother Tree.
"""


def _recount(conn) -> dict[str, tuple[int, int]]:
    """Each keyword index's rows and total length, counted the slow way."""
    messages = conn.execute("SELECT count(*), coalesce(sum(length(hearth_words(content))), 0)"
                            " FROM messages WHERE kind = 'chat' AND role IN ('user', 'assistant')").fetchone()
    chunks = conn.execute("SELECT count(*), coalesce(sum(length(hearth_words(text))), 0)"
                          " FROM archive_chunks").fetchone()
    return {"messages_fts": (int(messages[0]), int(messages[1])),
            "archive_chunks_fts": (int(chunks[0]), int(chunks[1]))}


def _kept(conn) -> dict[str, tuple[int, int]]:
    return {r[0]: (int(r[1]), int(r[2])) for r in conn.execute("SELECT name, rows, lengths FROM keyword_totals")}


def test_s9_keyword_totals_follow_every_insert_edit_and_delete_postgres(tmp_path, pg_url):
    hearth = Hearth(Settings.resolve({"home": str(tmp_path), "provider": "offline", "database_url": pg_url},
                                     environ={}))
    try:
        me = hearth.scope()
        persona = me.personas.create("elion", "Elion", user_label="AUMA said:", assistant_label="Elion said:",
                                     archive_access=True)
        conv = me.conversations.create(persona.id, "Garden")
        first = me.conversations.add_message(conv.id, "user", "the apple tree by the north fence")
        me.conversations.add_message(conv.id, "assistant", "the Grandmother Tree, yes, the tree")
        me.conversations.add_message(conv.id, "user", "a note not in the index", kind="static_prompt")
        archive = Archive(hearth.store, me.user_id)
        document = archive.add_text("Garden notes", TRANSCRIPT).document
        conn = hearth.store.connection()
        assert _kept(conn) == _recount(conn)
        assert _recount(conn)["messages_fts"][0] == 2

        with hearth.store.write() as w:
            w.execute("UPDATE messages SET content = ? WHERE id = ?", ("plums that never fruited at all", first.id))
        assert _kept(conn) == _recount(conn)
        with hearth.store.write() as w:  # leaves the index: its words leave the totals
            w.execute("UPDATE messages SET kind = 'tool_result' WHERE id = ?", (first.id,))
        assert _kept(conn) == _recount(conn)
        archive.delete(document.id)
        me.conversations.add_message(conv.id, "user", "more about the orchard and the orchard gate")
        kept = _kept(conn)
        assert kept == _recount(conn)

        # The search reads them: the row count of the common-term guard, BM25's average length.
        rows, lengths = kept["messages_fts"]
        assert indexed_rows(conn, "messages_fts") == rows == 2
        assert pgsearch.average_length(conn, "messages_fts") == lengths / rows
        assert any("orchard" in r.text for r in me.search("orchard").results)
    finally:
        hearth.close()


def test_s4_restore_rebuilds_the_keyword_totals_and_postings_postgres(tmp_path, pg_url):
    settings = Settings.resolve({"home": str(tmp_path), "provider": "offline", "database_url": pg_url}, environ={})
    hearth = Hearth(settings)
    try:
        me = hearth.scope()
        conv = me.conversations.create(me.personas.create("elion", "Elion").id, "Garden")
        me.conversations.add_message(conv.id, "user", "the apple tree by the north fence")
        report = backup(hearth.store, tmp_path / "b.db")
        me.conversations.add_message(conv.id, "user", "said after the backup, gone after the restore")
    finally:
        hearth.close()
    restore_deployment(report.path, settings)
    store = PgStore(pg_url)
    try:
        conn = store.connection()
        kept, recount = _kept(conn), _recount(conn)  # a total never written reads as zero
        assert {name: kept.get(name, (0, 0)) for name in recount} == recount
        assert recount["messages_fts"][0] == 1
        # "the apple tree by the north fence": six words, "the" twice
        assert sorted(tuple(r) for r in conn.execute("SELECT lexeme, tf FROM messages_postings")) == [
            ("apple", 1), ("by", 1), ("fence", 1), ("north", 1), ("the", 2), ("tree", 1)]
    finally:
        store.close()


def test_s9_a_saved_message_is_one_statement_and_keeps_the_ledger_postgres(tmp_path, pg_url):
    hearth = Hearth(Settings.resolve({"home": str(tmp_path), "provider": "offline", "database_url": pg_url},
                                     environ={}))
    try:
        me = hearth.scope()
        persona = me.personas.create("elion", "Elion")
        conv = me.conversations.create(persona.id, "Garden")
        conn = hearth.store.connection()
        seen: list[str] = []
        execute = type(conn).execute

        def counting(self, sql, parameters=()):
            seen.append(sql)
            return execute(self, sql, parameters)

        type(conn).execute = counting  # type: ignore[method-assign]
        try:
            with hearth.store.write() as w:
                message_id = ledger.append_message(w, user_id=me.user_id, conversation_id=conv.id, role="user",
                                                   content="the apple tree", created_at="2030-01-01T00:00:00.000000Z")
        finally:
            type(conn).execute = execute  # type: ignore[method-assign]
        assert len([s for s in seen if not s.startswith(("BEGIN", "COMMIT"))]) == 1
        event = conn.execute("SELECT kind, payload FROM events WHERE id = ?", (message_id,)).fetchone()
        assert event["kind"] == "message" and '"chars":14' in event["payload"]
        assert conn.execute("SELECT updated_at, turn_count FROM conversations WHERE id = ?",
                            (conv.id,)).fetchone()[:] == ("2030-01-01T00:00:00.000000Z", 1)
        assert ledger.verify(conn).problems == []
    finally:
        hearth.close()


def test_s11_migrate_store_builds_the_hnsw_index_over_the_copied_vectors_postgres(tmp_path, pg_url, monkeypatch):
    from hearth.ops.migrate_store import copy_store

    monkeypatch.delenv("HEARTH_DATABASE_URL", raising=False)
    home = tmp_path / "home"
    hearth = Hearth(Settings.resolve({"home": str(home), "provider": "offline", "database_url": ""}, environ={}))
    me = hearth.scope()
    persona = me.personas.create("elion", "Elion")
    conv = me.conversations.create(persona.id, "Garden")
    texts = ["we planted the apple tree by the north fence", "the plums never fruited",
             "a storm took the old barn roof", "the kettle whistles every morning at seven"]
    for text in texts:
        me.conversations.add_message(conv.id, "user", text)
    embedder = shared_embedder()
    embed_pending(hearth.store, embedder, user_id=me.user_id)
    wanted = hearth.store.connection().execute(
        "SELECT m.id, e.model FROM messages m JOIN message_embeddings e ON e.message_id = m.id"
        " WHERE m.content = ?", (texts[2],)).fetchone()
    hearth.close()

    source = open_store("", home / "hearth.db")
    target = PgStore(pg_url)
    try:
        report = copy_store(source, target, batch=3)
        assert report.ok, report.problems
        conn = target.connection()
        dim = int(embedder.dim)
        assert conn.execute("SELECT count(*) FROM message_embeddings WHERE vec IS NULL").fetchone()[0] == 0
        assert conn.execute("SELECT 1 FROM pg_indexes WHERE indexname = ?",
                            (f"message_embeddings_hnsw_{dim}",)).fetchone()
        query = np.asarray(embedder.embed([texts[2]]), dtype=np.float32)
        hits = pgvectors.search(conn, "messages", 1, wanted[1], query, 1)
        assert hits[0][0][0] == wanted[0]
        # Planned and searched as a database in use: statistics gathered, GIN pending lists merged.
        settled = {r[0] for r in conn.execute(
            "SELECT relname FROM pg_stat_user_tables WHERE last_vacuum IS NOT NULL AND last_analyze IS NOT NULL")}
        assert {"messages", "message_embeddings", "archive_chunks", "conversations"} <= settled
    finally:
        source.close()
        target.close()
