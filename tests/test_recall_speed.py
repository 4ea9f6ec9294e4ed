"""Recall at speed (K1, A2, S7): the latency budget, the term-statistics cache, one query embedding
per send, the cursor-following embedding job and bounded after-reply counters."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict

import numpy as np
import pytest

from hearth.records.conversations import chat_turns_after
from hearth.retrieval import searchlog, semantic
from hearth.retrieval.archive import Archive
from hearth.retrieval.hybrid import Budget, Filters, Result, Tuning, feedback_step, search
from hearth.retrieval.semantic import embed_pending, embedded_through, pending_count, shared_embedder
from hearth.retrieval.terms import TermStats, indexed_rows


@pytest.fixture(scope="module")
def embedder():
    return shared_embedder()


@pytest.fixture
def archive_persona(me):
    return me.personas.create("voice", "Elion", user_label="AUMA said:", assistant_label="Elion Voicefire said:",
                              archive_access=True)


def _thread(hearth, me, persona, title, turns):
    c = me.conversations.create(persona.id, title)
    with hearth.store.write():
        for role, text in turns:
            me.conversations.add_message(c.id, role, text)
    return c


@pytest.mark.sqlite_only
def test_k1_sqlite_index_size_is_read_from_the_fts5_totals_record(hearth, me, persona):
    _thread(hearth, me, persona, "Count", [("user", f"line {i}") for i in range(37)])
    conn = hearth.store.connection()
    assert indexed_rows(conn, "messages_fts") == conn.execute("SELECT count(*) FROM messages_fts_docsize").fetchone()[0] == 37


def test_k1_term_statistics_are_kept_per_generation_and_unseen_words_read_again(hearth, me, persona):
    stats = TermStats(stable_df=20, drift=0.1, small_index=0)  # behave as a large index would
    _thread(hearth, me, persona, "Weather", [("user", f"weather talk number {i}") for i in range(40)])
    conn = hearth.store.connection()

    def read(*words):
        return stats.frequencies(conn, "messages_fts", "messages_fts_vocab", list(words))

    assert read("weather", "zephyr") == (40, {"weather": 40, "zephyr": 0}) and stats.lookups == 2
    assert read("weather", "zephyr") == (40, {"weather": 40, "zephyr": 0}) and stats.lookups == 2  # same generation
    # A new message with an unseen word: the word is read again at once, so the message can be found.
    _thread(hearth, me, persona, "Wind", [("user", "a zephyr and more weather")])
    assert read("weather", "zephyr") == (41, {"weather": 40, "zephyr": 1}) and stats.lookups == 3  # weather kept
    _thread(hearth, me, persona, "Calm", [("user", "a calm day")])
    assert read("weather", "zephyr") == (42, {"weather": 40, "zephyr": 1}) and stats.lookups == 3
    # Once the index has moved by more than the drift since a word was read, it is read again.
    _thread(hearth, me, persona, "More", [("user", f"weather again {i}") for i in range(5)])
    assert read("weather", "zephyr") == (47, {"weather": 46, "zephyr": 1}) and stats.lookups == 5
    # On a small index a rare word is read at every new generation (one row is a large share).
    small = TermStats(stable_df=20, drift=0.1)
    small.frequencies(conn, "messages_fts", "messages_fts_vocab", ["zephyr"])
    _thread(hearth, me, persona, "Gust", [("user", "another zephyr")])
    assert small.frequencies(conn, "messages_fts", "messages_fts_vocab", ["zephyr"]) == (48, {"zephyr": 2})
    assert small.lookups == 2


def test_a2_k1_budget_leaves_out_the_feedback_list_when_it_cannot_fit(hearth, me, persona, monkeypatch):
    _thread(hearth, me, persona, "Music", [("user", "I practised the saxophone for my conservatory audition.")])
    _thread(hearth, me, persona, "Later", [("user", "The conservatory audition went well, they liked my scales."),
                                   ("user", "My conservatory friends came too.")])
    conn = hearth.store.connection()
    query = "How is the saxophone going?"
    unbounded = search(conn, me.user_id, query, filters=Filters(sources=("messages",)), log=False)
    assert unbounded.skipped == ()
    assert "The conservatory audition went well, they liked my scales." in [r.text for r in unbounded.results]
    # The feedback step is expected to cost more than the whole budget: it is left out.
    monkeypatch.setattr(Budget, "_expected", {feedback_step(conn, ["saxophon*"]): 1_000.0})
    bounded = search(conn, me.user_id, query, filters=Filters(sources=("messages",)), log=False, budget_ms=40)
    assert bounded.skipped == ("feedback",)
    assert [r.text for r in bounded.results] == ["I practised the saxophone for my conservatory audition."]
    # Without a budget (the owner's search) it runs whatever it is expected to cost.
    again = search(conn, me.user_id, query, filters=Filters(sources=("messages",)), log=False)
    assert again.skipped == () and len(again.results) == len(unbounded.results)


def test_a2_only_a_feedback_run_that_asked_its_query_teaches_the_budget_its_cost(hearth, me, persona, monkeypatch):
    _thread(hearth, me, persona, "Music", [("user", "I practised the saxophone for my conservatory audition.")])
    _thread(hearth, me, persona, "Later", [("user", "The conservatory audition went well, they liked my scales."),
                                   ("user", "My conservatory friends came too.")])
    _thread(hearth, me, persona, "Coast", [("user", "The lighthouse keeper waved.")])
    conn = hearth.store.connection()
    monkeypatch.setattr(Budget, "_expected", {})

    def ask(query):
        return search(conn, me.user_id, query, filters=Filters(sources=("messages",)), log=False, budget_ms=1_000)

    # Its best hit holds no word to add: the list returns at once, and teaches the budget nothing.
    assert ask("the lighthouse keeper waved").skipped == ()
    assert Budget._expected == {}
    ask("How is the saxophone going?")  # adds "conservatory" and asks its query: measured
    assert list(Budget._expected) == [feedback_step(conn, ["saxophon*"])]


def test_a2_the_feedback_lists_cost_is_learned_apart_for_queries_of_rare_and_of_common_words(hearth, me, persona):
    _thread(hearth, me, persona, "Walks", [("user", f"We walked the dog again, walk number {i}.") for i in range(40)])
    _thread(hearth, me, persona, "Coast", [("user", "The lighthouse keeper waved.")])
    conn = hearth.store.connection()
    # A cue of a rare word and a question of a common one read rows of different orders of
    # magnitude, so a cheap run of the first is never the expected cost of the second.
    assert feedback_step(conn, ["lighthous*"]) != feedback_step(conn, ["walked"])
    assert feedback_step(conn, ["walked"]) == feedback_step(conn, ["dog"])


def test_a2_budget_learns_a_steps_cost():
    budget = Budget(40)
    budget.record("probe-step", 30.0)
    budget.record("probe-step", 80.0)
    assert budget.expected("probe-step") == pytest.approx(0.8 * 30 + 0.2 * 80)
    assert not Budget(5).allows("probe-step") and Budget(None).allows("probe-step")


def test_a2_send_path_embeds_one_query_and_repeats_come_from_the_cache(hearth, me, archive_persona, embedder, monkeypatch):
    Archive(hearth.store, me.user_id).add_text("Orchard", "AUMA said:\nThe quince tree was planted in 2017.\n",
                                           document_date="2017-05-01")
    embed_pending(hearth.store, embedder, user_id=me.user_id)
    c = me.conversations.create(archive_persona.id, "Now")
    me.send(c.id, "hello there, the garden looks lovely today")
    embedded: list[list[str]] = []
    inner = semantic.query_vectors
    monkeypatch.setattr(semantic, "query_vectors", lambda model, texts: embedded.append(list(texts)) or inner(model, texts))
    monkeypatch.setattr(semantic, "_QUERY_CACHE", OrderedDict())  # another test may have asked the same text
    me.send(c.id, "When did we plant the quince tree?")
    # One text for the whole search, and only the message: the recent context joins as the stored
    # vectors of its turns, never as text for the model.
    assert embedded == [["When did we plant the quince tree?"]]
    # The owner's search embeds the plain query; asking it twice reaches the model once.
    embedded.clear()
    for _ in range(2):
        me.search("quince tree planting")
    assert embedded == [["quince tree planting"]]


def test_a2_the_query_embedding_starts_when_the_message_arrives_before_it_is_saved(hearth, me, archive_persona, embedder,
                                                                                     monkeypatch):
    c = _thread(hearth, me, archive_persona, "Now", [("user", "hello"), ("assistant", "hello, love")])
    question = "Do you remember the harbour lamp?"
    started: list[tuple[str, int]] = []
    inner = semantic.prefetch_query

    def prefetch(model, text):
        saved = hearth.store.connection().execute("SELECT count(*) FROM messages WHERE content = ?", (question,))
        started.append((text, saved.fetchone()[0]))
        inner(model, text)

    monkeypatch.setattr(semantic, "prefetch_query", prefetch)
    me.send(c.id, question)
    # Started before the save, and again (found in flight or cached) when the layers prepare.
    assert started[0] == (question, 0) and me.conversations.messages(c.id)[-2].content == question
    started.clear()
    me.send(c.id, "good night")  # no recall cue: nothing is embedded for it
    assert started == []



@pytest.mark.sqlite_only
def test_a2_sqlite_trace_only_a_message_asking_for_old_memory_reads_its_persona_before_the_save(
        hearth, me, archive_persona, embedder):
    """The persona is read ahead of the save only to start the query's embedding, with its thread
    in one statement; a message that asks for no old memory has none to start, and on PostgreSQL
    each read is a round trip."""
    c = _thread(hearth, me, archive_persona, "Now", [("user", "hello"), ("assistant", "hello, love")])
    conn = hearth.store.connection()

    def reads_before_the_save(text: str) -> list[str]:
        statements: list[str] = []
        conn.set_trace_callback(statements.append)
        try:
            for _event in me.send_stream(c.id, text):
                pass
        finally:
            conn.set_trace_callback(None)
        return statements[:statements.index("BEGIN IMMEDIATE")]

    assert reads_before_the_save("good night, love") == []
    [read] = reads_before_the_save("Do you remember the harbour lamp?")
    assert "personas" in read and "conversations" in read

def test_a2_send_path_mixes_the_stored_vectors_of_recent_turns_into_the_query(hearth, me, archive_persona, embedder,
                                                                                 monkeypatch):
    from hearth.retrieval.candidates import vector_lists
    from hearth.retrieval.hybrid import SEND_PATH
    from hearth.retrieval.query import build_variants

    old = _thread(hearth, me, archive_persona, "Orchard", [("user", "We planted the quince tree by the wall."),
                                                   ("assistant", "It will flower in April.")])
    embed_pending(hearth.store, embedder, user_id=me.user_id)
    now = _thread(hearth, me, archive_persona, "Now", [("user", "The garden looks lovely today."),
                                               ("assistant", "The quince is in flower.")])
    recent = tuple(m.id for m in me.conversations.messages(now.id))
    conn = hearth.store.connection()
    variants = build_variants("When did we plant it?", "The garden looks lovely today.\nThe quince is in flower.")
    filters = Filters(exclude_conversation_ids=(now.id,))
    embedded: list[list[str]] = []
    inner = semantic.query_vectors
    monkeypatch.setattr(semantic, "query_vectors", lambda model, texts: embedded.append(list(texts)) or inner(model, texts))
    monkeypatch.setattr(semantic, "_QUERY_CACHE", OrderedDict())

    def lists():
        found, _ = vector_lists(conn, me.user_id, variants, filters, embedder, hearth.store.key, None, SEND_PATH,
                                recent)
        return found

    # Before the background job has embedded the recent turns: the message's own vector alone.
    assert set(lists()) == {"vector:query:messages"} and embedded == [["When did we plant it?"]]
    embed_pending(hearth.store, embedder, user_id=me.user_id)
    embedded.clear()
    found = lists()
    # The message's vector comes from the query cache: nothing reaches the model this time.
    assert set(found) == {"vector:with_context:messages"} and embedded == []
    # The context pulls the turn about the quince tree up: its similarity rises against the bare message.
    planted = me.conversations.messages(old.id)[0].id
    bare = dict(vector_lists(conn, me.user_id, variants, filters, embedder, hearth.store.key, None, SEND_PATH)[0]
                ["vector:query:messages"])
    assert dict(found["vector:with_context:messages"])[("message", planted)] > bare[("message", planted)]


def test_a2_query_embedding_starts_before_the_layers_run(me, archive_persona, embedder):
    c = me.conversations.create(archive_persona.id, "Now")
    me.send(c.id, "hello there, the garden looks lovely today")
    seen: list[bool] = []

    class Probe:
        name = "probe"

        def blocks(self, turn):
            # The first layer to run: the archive layer's query is already embedding (or done).
            key = (semantic.model_id(embedder), turn.text)
            with semantic._QUERY_LOCK:
                seen.append(key in semantic._IN_FLIGHT or key in semantic._QUERY_CACHE)
            return []

    me.dynamic.layers.insert(0, Probe())
    me.send(c.id, "Do you remember the lighthouse keeper?")
    me.send(c.id, "thanks, the soup was lovely")  # no recall cue: archive recall does not search
    assert seen == [True, False]


def test_a2_tuning_shortens_the_context_embedded_with_the_message():
    from hearth.retrieval.candidates import _vector_text
    from hearth.retrieval.query import build_variants

    variants = build_variants("Where is the key?", "x" * 50 + " the brass key is under the mat")
    text = _vector_text(variants[1], variants[0], Tuning(vector_context_chars=30))
    assert text == "Where is the key?\n" + "the brass key is under the mat"[-30:]


@pytest.mark.sqlite_only
def test_s7_sqlite_plan_embedding_job_follows_a_cursor_instead_of_scanning(hearth, me, archive_persona, embedder):
    from hearth.retrieval.embedding_job import embed_job

    c = _thread(hearth, me, archive_persona, "Chat", [("user", f"line {i}") for i in range(4)])
    embed_job(hearth.context(me.user_id), {"limit": 100})
    conn = hearth.store.connection()
    through = embedded_through(conn, embedder.name, me.user_id)
    assert through["messages"] == conn.execute("SELECT max(id) FROM messages").fetchone()[0]
    # The pending read is a range on the primary key from the cursor, not a scan of every row.
    plan = " ".join(r[3] for r in conn.execute(
        "EXPLAIN QUERY PLAN SELECT m.id FROM messages m LEFT JOIN message_embeddings e ON e.message_id = m.id"
        " AND e.model = ? WHERE m.id > ? AND e.message_id IS NULL AND m.kind = 'chat'"
        " AND m.role IN ('user', 'assistant') AND +m.user_id = ? ORDER BY m.id LIMIT 10",
        (embedder.name, through["messages"], me.user_id)))
    assert "INTEGER PRIMARY KEY (rowid>?)" in plan
    # A row below the cursor that lost its vector is not the job's business: reindex finds it.
    first = conn.execute("SELECT min(message_id) FROM message_embeddings").fetchone()[0]
    with hearth.store.write() as w:
        w.execute("DELETE FROM message_embeddings WHERE message_id = ?", (first,))
    me.conversations.add_message(c.id, "user", "a new line after the cursor")
    embed_job(hearth.context(me.user_id), {"limit": 100})
    assert pending_count(conn, embedder.name, me.user_id)["messages"] == 1  # only the old gap is left
    report = embed_pending(hearth.store, embedder, user_id=me.user_id)
    assert report.messages == 1 and report.remaining == 0


@pytest.mark.sqlite_only
def test_k1_sqlite_plan_after_reply_counters_stop_at_their_threshold(hearth, me, persona):
    c = _thread(hearth, me, persona, "Long", [("user" if i % 2 else "assistant", f"turn {i}") for i in range(50)])
    conn = hearth.store.connection()
    assert chat_turns_after(conn, c.id, 0) == 50
    assert chat_turns_after(conn, c.id, 0, 12) == 12
    plan = " ".join(r[3] for r in conn.execute(
        "EXPLAIN QUERY PLAN SELECT count(*) FROM (SELECT 1 FROM messages WHERE conversation_id = ? AND id > ?"
        " AND kind = 'chat' AND role IN ('user', 'assistant') LIMIT ?)", (c.id, 0, 12)))
    assert "messages_conversation" in plan


def test_k1_send_path_asks_each_index_once(hearth, me, persona):
    from hearth.retrieval.candidates import keyword_lists
    from hearth.retrieval.query import build_variants
    from hearth.retrieval.tuning import SEND_PATH

    _thread(hearth, me, persona, "Boats", [("user", "Mira painted the rowing boat green."),
                                   ("assistant", "The harbour looked lovely with Mira there.")])
    conn = hearth.store.connection()
    variants = build_variants("Did Mira finish painting the boat?", "we talked about the harbour")
    filters = Filters(sources=("messages", "chunks"))
    per_variant, _, _ = keyword_lists(conn, me.user_id, variants, filters, set())
    assert len(per_variant) > 1  # the owner's search: one list per distinct word set
    lists, weights, query_words = keyword_lists(conn, me.user_id, variants, filters, set(), SEND_PATH)
    assert list(lists) == ["keyword:all:messages"] and weights == {"keyword:all:messages": 1.0}
    assert {key[1] for key, _ in lists["keyword:all:messages"]} == {
        r[0] for r in conn.execute("SELECT id FROM messages WHERE kind = 'chat'")}
    assert "harbour" not in query_words and "boat" in query_words


def test_a2_send_path_loads_the_best_candidates_first_and_enough_of_them(hearth, me, persona):
    turns = [("user", f"the lantern festival story number {i}") for i in range(30)]
    _thread(hearth, me, persona, "Lanterns", turns)
    hidden = _thread(hearth, me, persona, "Hidden", [("user", f"the lantern festival secret {i}") for i in range(30)])
    me.conversations.set_shielded(hidden.id, True)
    conn = hearth.store.connection()
    full = search(conn, me.user_id, "lantern festival", filters=Filters(sources=("messages",)), log=False, limit=5)
    # Slices of 4: shielded turns among the best candidates are filtered out, so more slices are read.
    sliced = search(conn, me.user_id, "lantern festival", filters=Filters(sources=("messages",)), log=False,
                    limit=5, tuning=Tuning(load_limit=4))
    assert len(sliced.results) == 5 and all("secret" not in r.text for r in sliced.results)
    assert [r.id for r in sliced.results] == [r.id for r in full.results]
    assert sliced.candidates < full.candidates  # only the slices needed were read


def test_s7_exact_searches_run_on_one_blas_thread_whatever_their_size(monkeypatch):
    import numpy as np
    from threadpoolctl import threadpool_info

    from hearth.retrieval import vectors

    def blas_threads() -> list[int]:
        return [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]

    rng = np.random.default_rng(3)
    seen: list[int] = []
    inner = vectors._top_k

    def spy(keys, scores, k):
        seen.extend(blas_threads())
        return inner(keys, scores, k)

    monkeypatch.setattr(vectors, "_top_k", spy)
    # 40,000 rows: searched exactly (under ann_threshold), where two threads once ran the product and
    # OpenBLAS kept the second spinning for about 100 ms after it.
    rows = 40_000
    index = vectors.VectorIndex(8)
    index.add(list(range(1, rows + 1)), rng.standard_normal((rows, 8)).astype(np.float32))
    assert index.search(rng.standard_normal(8), 3)[0][0] in range(1, rows + 1)
    assert seen and set(seen) == {1}
    seen.clear()
    # The dated list's exact comparison too.
    vectors.exact_top_k(rng.standard_normal((500, 8)).astype(np.float32), list(range(500)), rng.standard_normal(8), 3)
    assert seen and set(seen) == {1}
    seen.clear()
    # And a graph's exact scoring of a small allowed set (the graph search itself asks no BLAS).
    graph = vectors.VectorIndex(8, ann_threshold=100)
    graph.add(list(range(1, 301)), rng.standard_normal((300, 8)).astype(np.float32))
    assert graph.search(rng.standard_normal(8), 3, allowed_ids=[5, 6, 7, 8])[0][0] in (5, 6, 7, 8)
    assert seen and set(seen) == {1}


def _heron_search(hearth, me, excluded: int | None) -> tuple[list, list[str]]:
    """The hits for "heron" outside ``excluded``, and the ranked FTS5 statements that found them."""
    from hearth.retrieval.keyword import search_messages

    conn = hearth.store.connection()
    asked: list[str] = []
    conn.set_trace_callback(lambda sql: asked.append(sql) if "messages_fts MATCH" in sql else None)
    try:
        hits = search_messages(conn, me.user_id, ["heron"], limit=10,
                               exclude_conversation_ids=() if excluded is None else (excluded,))
    finally:
        conn.set_trace_callback(None)
    return hits, asked


@pytest.mark.sqlite_only
def test_k1_sqlite_trace_a_long_current_thread_does_not_crowd_the_bounded_keyword_list(hearth, me, persona):
    from hearth.retrieval.keyword import CROWDED_FIRST

    current = _thread(hearth, me, persona, "Now", [("user", f"the heron by the pond, note {i}") for i in range(CROWDED_FIRST + 50)])
    older = _thread(hearth, me, persona, "Before", [("user", "we watched a heron fishing at dawn")])
    hits, asked = _heron_search(hearth, me, current.id)
    # The current thread's matches crowd the bounded list; it is asked again with them left out
    # inside the FTS5 query, and the older conversation's turn is found without widening to 5,000.
    assert [h.conversation_id for h in hits] == [older.id]
    assert len(asked) == 2 and "NOT IN" not in asked[0] and "NOT IN" in asked[1]
    assert "5000" not in " ".join(asked)
    # An uncrowded list is asked once, without the exclusion.
    _, asked = _heron_search(hearth, me, older.id)
    assert len(asked) == 1 and "NOT IN" not in asked[0]
    # A search that leaves no conversation out asks the short first list, and once.
    _, asked = _heron_search(hearth, me, None)
    assert len(asked) == 1 and asked[0].rstrip().endswith("LIMIT 200"), asked


@pytest.mark.sqlite_only
def test_k1_sqlite_trace_a_current_thread_of_a_few_hundred_matches_costs_one_ranked_query(hearth, me, persona):
    """The first bounded list holds a few hundred matches of the current thread and still reaches
    past them: one ranked FTS5 query, not a second one that ranks every match again."""
    current = _thread(hearth, me, persona, "Now", [("user", f"the heron by the pond, note {i}") for i in range(250)])
    older = _thread(hearth, me, persona, "Before", [("user", "we watched a heron fishing at dawn")])
    hits, asked = _heron_search(hearth, me, current.id)
    assert [h.conversation_id for h in hits] == [older.id]
    assert len(asked) == 1 and "NOT IN" not in asked[0]


@pytest.mark.sqlite_only
def test_k1_sqlite_trace_the_current_threads_turns_are_left_out_before_any_row_is_checked(hearth, me, persona):
    """The current thread's matches are dropped from the ranked list in memory, so the filters
    check only the other conversations' rows; the thread's ids follow its new turns."""
    from hearth.retrieval.keyword import search_messages

    current = _thread(hearth, me, persona, "Now", [("user", f"the heron by the pond, note {i}") for i in range(250)])
    older = _thread(hearth, me, persona, "Before", [("user", "we watched a heron fishing at dawn")])
    conn = hearth.store.connection()

    def checked() -> tuple[list, list[int]]:
        asked: list[str] = []
        conn.set_trace_callback(lambda sql: asked.append(sql) if "WHERE m.id IN (" in sql else None)
        try:
            hits = search_messages(conn, me.user_id, ["heron"], limit=10, exclude_conversation_ids=(current.id,))
        finally:
            conn.set_trace_callback(None)
        ids = [int(x) for sql in asked for x in sql.split("WHERE m.id IN (", 1)[1].split(")", 1)[0].split(",")]
        return hits, ids

    hits, ids = checked()
    assert [h.conversation_id for h in hits] == [older.id]
    first = hits[0].message_id
    assert sorted(set(ids)) == [first]  # not one of the thread's 250 rows was read to be checked
    with hearth.store.write():
        me.conversations.add_message(current.id, "user", "another heron today")
        newer = me.conversations.add_message(older.id, "user", "the heron came back")
    hits, ids = checked()
    assert sorted(h.message_id for h in hits) == sorted([first, newer.id])
    assert sorted(set(ids)) == sorted([first, newer.id])


@pytest.mark.sqlite_only
def test_k1_sqlite_thread_ids_are_bounded_and_a_thread_beyond_the_bound_is_not_read_again(hearth, me, persona):
    from hearth.retrieval.keyword import ThreadIds

    a = _thread(hearth, me, persona, "A", [("user", f"turn {i}") for i in range(30)])
    b = _thread(hearth, me, persona, "B", [("user", f"turn {i}") for i in range(20)])
    huge = _thread(hearth, me, persona, "Huge", [("user", f"turn {i}") for i in range(60)])
    conn = hearth.store.connection()
    held = ThreadIds(size=8, max_ids=50)
    assert [len(ids) for ids in held.sets(conn, (a.id, b.id))] == [30, 20]
    # A third conversation pushes the total past the bound: the least recently used goes.
    c = _thread(hearth, me, persona, "C", [("user", f"turn {i}") for i in range(10)])
    assert [len(ids) for ids in held.sets(conn, (c.id,))] == [10]
    assert sorted(key[1] for key in held._held) == [b.id, c.id] and held._count == 30
    # Longer than the whole bound: not held, and not read again on the next search.
    assert held.sets(conn, (huge.id,)) == []
    asked: list[str] = []
    conn.set_trace_callback(asked.append)
    try:
        assert held.sets(conn, (huge.id,)) == []
    finally:
        conn.set_trace_callback(None)
    assert not [sql for sql in asked if "FROM messages" in sql]


def test_a2_budget_runs_an_optional_step_only_within_the_median_share_and_probes_a_step_it_keeps_leaving_out(
        monkeypatch):
    monkeypatch.setattr(Budget, "_expected", {"step": 4.0})
    monkeypatch.setattr(Budget, "_skipped", {})
    monkeypatch.setattr(Budget, "_interval", {})

    def spent(ms):
        return Budget(40, started=time.monotonic() - ms / 1000)

    assert spent(9).allows("step")  # 9 + 4 ms fits in the 15 of 40 a median send may take
    # Counted from the send's start: with 12 ms spent, the step would end the send at 16 ms.
    assert not spent(12).allows("step")
    # An optional step adds at most half of what the send has spent: 4 ms is too much after 6.
    assert not spent(6).allows("step") and spent(8).allows("step")
    Budget._expected["step"], Budget._skipped["step"] = 25.0, 0
    answers = [spent(9).allows("step") for _ in range(Budget.PROBE_EVERY + 1)]
    # Left out PROBE_EVERY times in a row, the step runs once to be measured again.
    assert answers == [False] * Budget.PROBE_EVERY + [True]
    # Still too slow: the next probe waits twice as long.
    answers = [spent(9).allows("step") for _ in range(2 * Budget.PROBE_EVERY + 1)]
    assert answers == [False] * (2 * Budget.PROBE_EVERY) + [True]
    # A step that fits again is probed at the first interval once more.
    Budget._expected["step"] = 1.0
    assert spent(9).allows("step") and Budget._interval["step"] == Budget.PROBE_EVERY
    Budget._expected["step"] = 25.0
    Budget(40).record("step", 5.0)
    assert Budget._expected["step"] == pytest.approx(0.8 * 25 + 0.2 * 5) and Budget._skipped["step"] == 0


@pytest.mark.sqlite_only
def test_a2_sqlite_trace_neighbours_are_walked_only_for_the_scored_candidates(hearth, me, persona):
    from hearth.retrieval.fusion import neighbours

    a = _thread(hearth, me, persona, "A", [("user", "the lighthouse"), ("assistant", "yes, in May")])
    b = _thread(hearth, me, persona, "B", [("user", "a kettle")])
    first, reply = (m.id for m in me.conversations.messages(a.id))
    alone = me.conversations.messages(b.id)[0].id
    conn = hearth.store.connection()
    statements: list[str] = []
    conn.set_trace_callback(lambda sql: statements.append(sql) if "FROM messages" in sql else None)
    try:
        # The reply next to a strong match shares its score; a turn with no candidate beside it
        # scores 0. Only the scored candidates are read: one statement, none for the others.
        fused = {("message", first): {"rrf": 0.5}, ("message", reply): {"rrf": 0.1}, ("message", alone): {"rrf": 0.2}}
        assert neighbours(conn, fused, [("message", reply), ("message", alone)]) == {
            ("message", reply): 0.5, ("message", alone): 0.0}
        assert len(statements) == 1 and statements[0].endswith(f"IN ({reply},{alone})"), statements
        assert neighbours(conn, fused, list(fused)) == {
            ("message", first): 0.1, ("message", reply): 0.5, ("message", alone): 0.0}
        statements.clear()
        assert neighbours(conn, fused, [("chunk", 1)]) == {} and statements == []
    finally:
        conn.set_trace_callback(None)


def test_k1_a2_keyword_and_archive_recall_share_one_pass_over_the_messages_index(hearth, me, archive_persona, embedder,
                                                                                 provider, monkeypatch):
    from hearth.retrieval import candidates

    older = _thread(hearth, me, archive_persona, "Orchard", [("user", "We planted the quince tree by the wall."),
                                                     ("assistant", "The quince will fruit in autumn.")])
    c = me.conversations.create(archive_persona.id, "Now")
    me.send(c.id, "hello there, the garden looks lovely today")
    asked: list[tuple[str, ...]] = []
    inner = candidates.search_messages
    monkeypatch.setattr(candidates, "search_messages",
                        lambda conn, user_id, words, **kw: asked.append(tuple(words)) or inner(conn, user_id, words, **kw))
    me.send(c.id, "Do you remember the quince tree?")
    # Keyword recall asked the messages index; archive recall found the same list in the send's memo
    # (a feedback list, when the budget allows it, asks other words).
    assert asked and asked.count(asked[0]) == 1 and any(w.startswith("quinc") for w in asked[0])
    # Keyword recall's block holds the turns; archive recall found them too (its own block leaves
    # out what the request already quotes, K4).
    assert "AUTO-RECALLED CONTEXT" in " ".join(m.content for m in provider.requests[-1].messages)
    conn = hearth.store.connection()
    for origin in ("keyword_recall", "archive_recall"):
        entry = searchlog.entries(conn, me.user_id, origin=origin)[0]
        assert older.id in {r["source_id"] for r in entry.results}


def test_k1_a2_send_path_keyword_query_leaves_the_context_words_to_the_vectors():
    from hearth.retrieval.candidates import one_pass_terms
    from hearth.retrieval.query import build_variants
    from hearth.retrieval.tuning import DEFAULT, SEND_PATH

    variants = build_variants("Did Mira finish the boat?", "we talked about the harbour and the lighthouse")
    def bare(tuning):
        return {term.rstrip("*") for term in one_pass_terms(variants, set(), tuning)}

    assert "harbour" not in bare(SEND_PATH) and {"mira", "boat"} <= bare(SEND_PATH)
    assert "harbour" in bare(DEFAULT.with_changes(keyword_one_pass=True))


def test_a2_query_embedding_reads_at_most_its_first_tokens(embedder):
    from hearth.retrieval.semantic import QUERY_MAX_TOKENS, embed_queries

    long = "the quince tree by the old stone wall " * 60  # far beyond the model's 256 tokens
    head = " ".join(long.split()[:QUERY_MAX_TOKENS - 8])
    assert len(embedder._tokenizer.encode(long).ids) > QUERY_MAX_TOKENS
    cut = embedder.embed_queries([long], max_tokens=QUERY_MAX_TOKENS)[0]
    assert cut @ embedder.embed_queries([long])[0] < 0.9999  # the whole text reads differently
    assert cut @ embed_queries(embedder, [long])[0] > 0.9999  # queries are read up to the cap
    assert cut @ embedder.embed_queries([head])[0] > 0.95  # about the same words as the head alone
    short = "When did we plant the quince tree?"
    assert embed_queries(embedder, [short])[0] @ embedder.embed_queries([short])[0] > 0.9999


def test_s7_a2_background_embedding_waits_while_a_send_assembles(me, hearth, archive_persona):
    from hearth.retrieval.embedding_job import embed_job

    calls: list[float] = []

    class Letters:
        """Unit vectors of letter counts; notes when the model is reached."""

        name = "recording-letters"
        dim = 26

        def embed(self, texts):
            calls.append(time.monotonic())
            rows = np.array([[t.lower().count(chr(97 + i)) + 0.1 for i in range(26)] for t in texts], dtype=np.float32)
            return rows / np.linalg.norm(rows, axis=1, keepdims=True)

    hearth._embedder = Letters()  # the deployment's embedder, as Hearth.embedder would create it
    c = _thread(hearth, me, archive_persona, "Chat", [("user", f"line {i} about the garden") for i in range(40)])

    class Probe:
        name = "probe"
        seen: list[object] = []

        def blocks(self, turn):
            # A send is assembling: the background job started now must not reach the model yet.
            self.seen.append(hearth.activity.wait_quiet(0))
            self.worker = threading.Thread(target=embed_job, args=(hearth.context(me.user_id), {"limit": 100}))
            self.worker.start()
            time.sleep(0.3)
            self.seen.append(len(calls))
            self.released = time.monotonic()
            return []

    probe = Probe()
    me.dynamic.layers.insert(0, probe)
    me.send(c.id, "hello, the soup was lovely")
    probe.worker.join(10)
    assert probe.seen == [False, 0]
    assert calls and min(calls) >= probe.released  # it ran once the send had assembled
    assert hearth.activity.wait_quiet(0)
    embedded = hearth.store.connection().execute(
        "SELECT count(*) FROM message_embeddings WHERE model = 'recording-letters'").fetchone()[0]
    assert embedded >= 41  # the thread's 40 turns and the message sent (the reply may come after the job)


def test_a2_send_path_feedback_reads_few_frequencies_and_stays_within_the_postings_budget(hearth, me, persona, monkeypatch):
    from hearth.retrieval import fusion, terms
    from hearth.retrieval.hybrid import SEND_PATH

    rare = [f"zq{chr(97 + i)}{chr(97 + j)}velorin" for i in range(5) for j in range(6)]  # 30 words, each in 2 rows
    best = _thread(hearth, me, persona, "Best", [("user", "lighthouse " + " ".join(rare))])
    _thread(hearth, me, persona, "Echo", [("user", " ".join(rare))] + [("user", "lighthouse glimmerstone")] * 12)
    best_id = hearth.store.connection().execute(
        "SELECT id FROM messages WHERE conversation_id = ?", (best.id,)).fetchone()[0]
    read: list[str] = []
    asked: list[list[str]] = []
    chosen_after: list[int] = []
    real_read, real_keyword = terms._read_frequencies, fusion.keyword_messages

    def counting_read(conn, vocab, words):
        read.extend(words)
        return real_read(conn, vocab, words)

    def recording_keyword(conn, user_id, words, f, limit=60, memo=None):
        asked.append(list(words))
        chosen_after.append(len(read))  # PostgreSQL's BM25 reads the final query's frequencies too
        return real_keyword(conn, user_id, words, f, limit, memo)

    monkeypatch.setattr(terms, "_read_frequencies", counting_read)
    monkeypatch.setattr(fusion, "keyword_messages", recording_keyword)
    monkeypatch.setattr(terms, "STATS", terms.TermStats())  # nothing cached from other tests
    conn = hearth.store.connection()
    fused = {("message", best_id): {"rrf": 1.0}}
    filters = Filters(sources=("messages",))

    # The send path reads the frequencies of 24 candidate words, the query's own beside them.
    assert fusion.feedback_list(conn, me.user_id, filters, fused, ["lighthous*"], set(), SEND_PATH)
    assert len([w for w in read[:chosen_after[-1]] if w != "lighthous*"]) == SEND_PATH.feedback_candidates == 24
    # The owner's search reads every word of the best turns.
    read.clear()
    monkeypatch.setattr(terms, "STATS", terms.TermStats())
    fusion.feedback_list(conn, me.user_id, filters, fused, ["lighthous*"], set(), Tuning())
    assert len([w for w in read[:chosen_after[-1]] if w != "lighthous*"]) == 30
    # The words it adds keep the query within the postings budget the query's own words left.
    asked.clear()
    fusion.feedback_list(conn, me.user_id, filters, fused, ["lighthous*"], set(), SEND_PATH.with_changes(
        postings_budget=13 + 2 * 2))
    [words] = asked
    assert words[0] == "lighthous*" and len(words) == 3  # 13 rows for the query's word, 2 for each added word


@pytest.mark.sqlite_only
def test_s7_sqlite_the_embedding_job_adds_new_vectors_to_the_loaded_index_so_the_next_search_adds_none(
        hearth, me, archive_persona, embedder, monkeypatch):
    from hearth.retrieval.embedding_job import embed_job

    old = _thread(hearth, me, archive_persona, "Old", [("user", "the lighthouse keeper's cat"), ("assistant", "Juniper!")])
    embed_job(hearth.context(me.user_id), {})
    conn = hearth.store.connection()
    db_key, model = str(hearth.store.key), semantic.model_id(embedder)
    index = semantic.INDEXES.get(conn, db_key, "messages", me.user_id, model, embedder.dim)
    loaded = len(index)
    me.conversations.add_message(old.id, "user", "the harbour lamp was lit at dusk")
    embed_job(hearth.context(me.user_id), {})  # as the worker runs it after a reply
    assert len(index) == loaded + 1

    def no_add(*args, **kwargs):
        raise AssertionError("the search should find its index current")

    monkeypatch.setattr(semantic.IndexCache, "_add_rows", staticmethod(no_add))
    hits = semantic.vector_search(conn, db_key, "messages", me.user_id, embedder,
                                  semantic.embed_queries(embedder, ["harbour lamp at dusk"]), 3)
    assert hits[0][0][0] == me.conversations.messages(old.id)[-1].id


@pytest.mark.sqlite_only
def test_a2_k1_sqlite_plan_send_path_reads_the_index_of_turns_by_time_only_for_a_date_range(
        hearth, me, archive_persona, embedder):
    """Without table statistics SQLite takes a user's term on the index of chat turns by time
    (user_id, created_at) for a narrow one, and read the candidates behind a recall through it
    instead of their primary keys (150 ms a send at 1M). Only the statements that bound the time
    may use that index."""
    old = me.conversations.create(archive_persona.id, "Spring")
    with hearth.store.write():
        for i in range(6):
            me.conversations.add_message(old.id, "user" if i % 2 else "assistant",
                                         f"the lantern by the harbour, evening {i}",
                                         created_at=f"2023-05-0{i + 1}T20:00:00.000000+00:00")
    embed_pending(hearth.store, embedder, user_id=me.user_id)
    now = me.conversations.create(archive_persona.id, "Now")
    me.send(now.id, "hello")
    conn = hearth.store.connection()
    asked: list[str] = []
    conn.set_trace_callback(asked.append)
    try:
        me.send(now.id, "Do you remember the lantern we talked about in May 2023?")
    finally:
        conn.set_trace_callback(None)
    plans = {sql: " ".join(r[3] for r in conn.execute(f"EXPLAIN QUERY PLAN {sql}"))
             for sql in asked if sql.lstrip().upper().startswith(("SELECT", "WITH"))}
    by_time = [sql for sql, plan in plans.items() if "messages_chat_time" in plan]
    assert by_time, "the date question counts the turns of its range on the index of turns by time"
    assert all("created_at >=" in sql for sql in by_time), [s for s in by_time if "created_at >=" not in s]
    assert any("m.id IN (" in sql for sql in plans)  # the candidates were loaded, by primary key


def test_a2_scoring_breaks_down_only_the_results_it_returns_and_counts_every_candidate():
    from hearth.retrieval.fusion import fuse, score
    from hearth.retrieval.query import mentions_time

    def result(i: int, text: str) -> Result:
        return Result("message", i, 1, "t", "2023-05-0%d" % (i % 9 + 1), text, "user")

    texts = ["We met in May.", "A quiet day.", "LAST WEEK we walked.", "A quiet day.", "Tea", "The harbour"]
    lists = {"keyword:all:messages": [(("message", i), 10.0 - i) for i in range(6)],
             "vector:with_context:messages": [(("message", i), 0.9 - i / 10) for i in (5, 2, 0)]}
    fused = fuse(lists)
    loaded = {("message", i): result(i, t) for i, t in enumerate(texts)}
    every, counted = score(fused, loaded, {}, hint=None, named_roles=set(), asks_when=True)
    best, scored = score(fused, {k: result(k[1], r.text) for k, r in loaded.items()}, {}, hint=None,
                         named_roles=set(), asks_when=True, limit=2)
    assert counted == scored == 6  # every candidate is scored
    # The repeated "A quiet day." is dropped from what is returned: only the better-scored copy stays.
    assert len(every) == 5 and [r.text for r in every].count("A quiet day.") == 1
    assert next(r.id for r in every if r.text == "A quiet day.") == 1
    assert [r.id for r in best] == [r.id for r in every[:2]]
    assert [r.scores for r in best] == [r.scores for r in every[:2]]  # the same breakdown, key for key
    assert list(best[0].scores) == ["rrf", "keyword_rank", "keyword", "vector_rank", "vector", "signals",
                                    "boost", "neighbour", "fused", "session"]
    # A time phrase in any case lifts a "when" question's result.
    assert mentions_time("LAST WEEK we walked.") and mentions_time("in May") and not mentions_time("Tea")
    assert {r.id: r.scores["boost"] for r in every}[2] == Tuning().time_boost


def test_a2_a_running_worker_collects_the_youngest_generation_less_often_and_restores_it(hearth):
    import gc

    from hearth.ops.jobs import YOUNG_THRESHOLD, Worker

    before = gc.get_threshold()
    worker = Worker(hearth, handlers={}, poll_seconds=0.01, settle_every_seconds=3600.0)
    worker.start()
    try:
        deadline = time.monotonic() + 5
        while gc.get_threshold()[0] != YOUNG_THRESHOLD and time.monotonic() < deadline:
            time.sleep(0.01)
        assert gc.get_threshold() == (YOUNG_THRESHOLD, *before[1:])
    finally:
        worker.stop()
    assert gc.get_threshold() == before
    # A library user may keep the interpreter's own setting.
    kept = Worker(hearth, handlers={}, poll_seconds=0.01, young_threshold=None)
    kept.start()
    time.sleep(0.05)
    assert gc.get_threshold() == before
    kept.stop()


def test_a2_worker_collects_garbage_between_sends_and_freezes_what_is_left(hearth):
    import gc
    import weakref

    from hearth.ops.jobs import Worker

    class Node:
        pass

    worker = Worker(hearth, handlers={}, poll_seconds=0.01, settle_every_seconds=0.0)
    gc.unfreeze()
    gc.disable()  # only the settle step may collect the cycles below, not an automatic collection
    try:
        node = Node()
        node.self = node  # type: ignore[attr-defined]  # a cycle: only a collection frees it
        alive = weakref.ref(node)
        del node
        with hearth.activity.assembling():
            assert worker.settle_memory() is False  # never while a send assembles
        assert gc.get_freeze_count() == 0 and alive() is not None
        assert worker.settle_memory() is True
        assert alive() is None and gc.get_freeze_count() > 0
        # What the last settle froze is unfrozen first, so a cycle among it is still freed.
        frozen = Node()
        frozen.self = frozen  # type: ignore[attr-defined]
        still = weakref.ref(frozen)
        gc.freeze()
        del frozen
        assert worker.settle_memory() is True and still() is None
        # The loop settles on its own once idle.
        gc.enable()
        gc.unfreeze()
        worker.start()
        deadline = time.monotonic() + 5
        while gc.get_freeze_count() == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        worker.stop()
        assert gc.get_freeze_count() > 0
    finally:
        worker.stop()
        gc.enable()
        gc.unfreeze()


class SearchesAheadRun:
    """A first layer: by the end of the layers before archive recall the searches ahead have run
    (on a busy machine a search that finds its job still queued takes it back and searches itself)."""

    name = "probe"

    def blocks(self, turn):
        with semantic._QUERY_LOCK:
            ahead = list(semantic._AHEAD.values())
        for future in ahead:
            future.result()
        return []


@pytest.mark.sqlite_only
def test_s7_sqlite_a_recall_send_searches_the_vector_indexes_ahead_on_the_prefetch_thread(hearth, me, archive_persona,
                                                                                         embedder, monkeypatch):
    from hearth.retrieval.vectors import VectorIndex

    _thread(hearth, me, archive_persona, "Harbour", [("user", "The harbour lamp was lit at dusk."),
                                             ("assistant", "It guided the boats home.")])
    c = _thread(hearth, me, archive_persona, "Now", [("user", "hello"), ("assistant", "hello, love")])
    embed_pending(hearth.store, embedder, user_id=me.user_id)
    monkeypatch.setattr(semantic.INDEXES, "ann_threshold", 1)  # a graph, as a large deployment's is
    semantic.INDEXES.clear()
    # Loaded, as a server's warm-up leaves it: a search ahead never loads an index itself.
    semantic.INDEXES.get(hearth.store.connection(), hearth.store.key, "messages", me.user_id, semantic.model_id(embedder),
                         embedder.dim)
    searched_on: list[str] = []
    inner = VectorIndex.search

    def search(index, query, k=10, allowed_ids=None):
        searched_on.append(threading.current_thread().name)
        return inner(index, query, k, allowed_ids)

    monkeypatch.setattr(VectorIndex, "search", search)

    me.dynamic.layers.insert(0, SearchesAheadRun())
    me.send(c.id, "Do you remember the harbour lamp?")
    # The chat turns' index (no archive chunks here) was searched once, behind the query's
    # embedding on the prefetch thread, and the send's own search took those hits.
    assert len(searched_on) == 1 and searched_on[0].startswith("hearth-query-embed")


@pytest.mark.sqlite_only
def test_s7_sqlite_a_search_ahead_is_taken_only_for_the_same_vector_and_an_unchanged_index(hearth, me, archive_persona,
                                                                                         embedder, monkeypatch):
    _thread(hearth, me, archive_persona, "Garden", [("user", f"The quince tree flowered in week {i}.") for i in range(12)])
    embed_pending(hearth.store, embedder, user_id=me.user_id)
    conn, key = hearth.store.connection(), hearth.store.key
    model = semantic.model_id(embedder)
    # A small exact index is searched where it is asked, never ahead.
    assert semantic.INDEXES.get(conn, key, "messages", me.user_id, model, embedder.dim).mode == "exact"
    semantic.search_ahead(conn, key, ("messages",), me.user_id, embedder, "when did the quince flower", 5)
    assert (key, "messages", me.user_id, model, 5) not in semantic._AHEAD
    monkeypatch.setattr(semantic.INDEXES, "ann_threshold", 1)
    semantic.INDEXES.clear()
    # Nor is an index that is not loaded: loading it is the search's to start.
    semantic.search_ahead(conn, key, ("messages",), me.user_id, embedder, "when did the quince flower", 5)
    assert (key, "messages", me.user_id, model, 5) not in semantic._AHEAD
    assert semantic.INDEXES.loaded_for_ahead(conn, key, "messages", me.user_id, model, embedder.dim) is None
    index = semantic.INDEXES.get(conn, key, "messages", me.user_id, model, embedder.dim)
    assert index.mode == "ann"

    def ahead(text):
        semantic.search_ahead(conn, key, ("messages",), me.user_id, embedder, text, 5)
        future = semantic._AHEAD[(key, "messages", me.user_id, model, 5)]
        future.result()
        return future

    def asked(text):
        return semantic.vector_search(conn, key, "messages", me.user_id, embedder,
                                      semantic.embed_queries(embedder, [text]), 5)[0]

    # The same vector: the hits searched ahead are the ones returned, and they are taken once.
    future = ahead("when did the quince flower")
    assert asked("when did the quince flower") == future.result()[3] == index.search(
        semantic.embed_queries(embedder, ["when did the quince flower"])[0], 5)
    assert (key, "messages", me.user_id, model, 5) not in semantic._AHEAD
    # Another message's vector: searched again, so its own nearest turns come back.
    ahead("when did the quince flower")
    other = semantic.embed_queries(embedder, ["a storm at sea"])[0]
    assert asked("a storm at sea") == index.search(other, 5) != ahead("when did the quince flower").result()[3]
    # The index changed after the search ahead: a vector added since is found.
    ahead("when did the quince flower")
    index.add([10_000_000], semantic.embed_queries(embedder, ["when did the quince flower"]))
    assert asked("when did the quince flower")[0][0] == 10_000_000


@pytest.mark.sqlite_only
def test_s7_sqlite_a_large_exact_index_is_searched_ahead_and_a_small_one_is_not(hearth, me, archive_persona,
                                                                              embedder, monkeypatch):
    """An exact index of ``AHEAD_EXACT_ROWS`` vectors or more is searched on the prefetch thread, as
    a graph is (its product leaves the interpreter lock to the layers' reads); a smaller one holds
    the lock for most of its short search, so it stays in the search."""
    from hearth.retrieval import vector_cache

    _thread(hearth, me, archive_persona, "Garden", [("user", f"The quince tree flowered in week {i}.") for i in range(12)])
    embed_pending(hearth.store, embedder, user_id=me.user_id)
    conn, key = hearth.store.connection(), hearth.store.key
    model = semantic.model_id(embedder)
    index = semantic.INDEXES.get(conn, key, "messages", me.user_id, model, embedder.dim)
    assert index.mode == "exact" and len(index) == 12
    ahead_key = (key, "messages", me.user_id, model, 5)

    monkeypatch.setattr(vector_cache, "AHEAD_EXACT_ROWS", 13)
    semantic.search_ahead(conn, key, ("messages",), me.user_id, embedder, "when did the quince flower", 5)
    assert ahead_key not in semantic._AHEAD

    monkeypatch.setattr(vector_cache, "AHEAD_EXACT_ROWS", 12)
    semantic.search_ahead(conn, key, ("messages",), me.user_id, embedder, "when did the quince flower", 5)
    future = semantic._AHEAD[ahead_key]
    vector = semantic.embed_queries(embedder, ["when did the quince flower"])
    assert future.result()[3] == index.search(vector[0], 5)
    # The send's search takes those hits, and they are taken once.
    assert semantic.vector_search(conn, key, "messages", me.user_id, embedder, vector, 5)[0] == future.result()[3]
    assert ahead_key not in semantic._AHEAD


@pytest.mark.sqlite_only
def test_a2_sqlite_the_dated_list_scores_the_exact_indexs_rows_instead_of_reading_stored_vectors(
        hearth, me, archive_persona, embedder):
    """On SQLite, while the turns' index is exact (float32 copies of the stored vectors), the dated
    list reads only the range's ids and scores those rows of the index: the same hits as scoring
    the stored bytes, without reading them."""
    from hearth.retrieval.candidates import Filters, dated_vector_hits
    from hearth.retrieval.tuning import DEFAULT
    from hearth.retrieval.vectors import exact_top_k, from_blob

    spring = me.conversations.create(archive_persona.id, "Spring", created_at="2022-04-02T10:00:00.000000Z")
    inside = [me.conversations.add_message(spring.id, "user", f"The quince flowered on day {i}.",
                                           created_at=f"2022-04-{3 + i:02d}T10:00:00.000000Z").id for i in range(8)]
    embed_pending(hearth.store, embedder, user_id=me.user_id)
    conn, key = hearth.store.connection(), hearth.store.key
    model = semantic.model_id(embedder)
    assert semantic.INDEXES.get(conn, key, "messages", me.user_id, model, embedder.dim).mode == "exact"
    vector = semantic.embed_queries(embedder, ["How was the quince in April?"])[0]
    statements: list[str] = []
    conn.set_trace_callback(statements.append)
    try:
        hits = dated_vector_hits(conn, key, me.user_id, Filters(), ("2022-04-01", "2022-04-30"), embedder, vector,
                                 DEFAULT.with_changes(candidates=5))
    finally:
        conn.set_trace_callback(None)
    assert statements and not any("message_embeddings" in sql for sql in statements)
    stored = conn.execute(f"SELECT message_id, embedding FROM message_embeddings WHERE message_id IN"
                          f" ({','.join('?' * len(inside))})", inside).fetchall()
    expected = exact_top_k(np.vstack([from_blob(b) for _, b in stored]), [i for i, _ in stored], vector, 5)
    assert [h[0] for h in hits] == [h[0] for h in expected]
    np.testing.assert_allclose([h[1] for h in hits], [h[1] for h in expected], atol=1e-6)

def test_k1_keyword_hits_of_equal_score_come_in_the_order_the_turns_were_saved(hearth, me, persona):
    """Turns with the same words score the same: they are listed oldest first, however the list is
    ranked inside the index (SQLite asks bm25() with the row id breaking ties; PostgreSQL sums each
    row's postings in word order and breaks ties by id)."""
    from hearth.retrieval.keyword import search_messages

    c = _thread(hearth, me, persona, "Pond", [("user", "the heron by the pond") for _ in range(30)]
                + [("user", "a heron, a heron by the pond")])
    conn = hearth.store.connection()
    hits = search_messages(conn, me.user_id, ["heron", "pond"], limit=20)
    ids = [h.message_id for h in hits]
    assert ids[0] == max(ids)  # the turn that says it twice ranks first
    tied = ids[1:]
    assert tied == sorted(tied) and len({h.score for h in hits[1:]}) == 1
    assert all(h.conversation_id == c.id for h in hits)
