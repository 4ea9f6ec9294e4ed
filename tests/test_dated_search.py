"""The dated list (A2, S17): a question naming a date range searches the turns of that range, and
a range too large to compare turn by turn is a filtered search of the vector index whose work
follows the answer, not the number of turns the range holds."""

from __future__ import annotations

import zlib

import numpy as np
import pytest

from hearth.retrieval import semantic
from hearth.retrieval.candidates import Filters, dated_vector_hits
from hearth.retrieval.tuning import DEFAULT

DIM = 256
MONTHS = [f"2022-{m:02d}" for m in range(1, 13)]


class Words:
    """Unit sums of a fixed random vector per word: texts sharing words are close."""

    name = model_id = "dated-words"
    dim = DIM

    def embed(self, texts):
        rows = []
        for text in texts:
            words = [w.strip(".,!?:").lower() for w in text.split()]
            vec = sum((np.random.default_rng(zlib.crc32(w.encode())).standard_normal(DIM) for w in words if w),
                      np.zeros(DIM))
            rows.append(vec / (np.linalg.norm(vec) or 1.0))
        return np.asarray(rows, dtype=np.float32)


def _fill(hearth, scope, persona_id, per_month, seed, extra=(), topic=False):
    """``per_month`` filler turns in each month of 2022 (with ``topic``, one in ten about the quince
    or the fence: a topic that recurs, as topics do, which the graph reaches from the rest), and
    the ``extra`` (month, day, text) turns; returns the ids of the extra turns."""
    rng = np.random.default_rng(seed)
    vocabulary = [f"w{i}" for i in range(40)]
    ids = {}
    with hearth.store.write():
        for month in MONTHS:
            c = scope.conversations.create(persona_id, month, created_at=f"{month}-01T08:00:00.000000Z")
            for i in range(per_month):
                day, minute = 1 + i * 27 // per_month, i % 60
                text = " ".join(rng.choice(vocabulary, 8))
                if topic and i % 10 == 0:
                    text = f"{rng.choice(('quince', 'fence'))} {' '.join(rng.choice(vocabulary, 6))}"
                scope.conversations.add_message(c.id, "user" if i % 2 else "assistant", text,
                                                created_at=f"{month}-{day:02d}T09:{minute:02d}:00.000000Z")
            for m, day, text in extra:
                if m == month:
                    ids[text] = scope.conversations.add_message(
                        c.id, "user", text, created_at=f"{month}-{day:02d}T20:00:00.000000Z").id
    return ids


def _user(hearth, name):
    scope = hearth.scope(hearth.users.create(name).id)
    return scope, scope.personas.create("p", "P", user_label="U said:", assistant_label="P said:").id


TARGET = "the quince flowered by the old fence"
NEARER = "the quince flowered by the old fence again today"  # closer to the question, but in September
QUESTION = "the quince flowered by the old fence"


def _graph_index(hearth, scope, embedder, monkeypatch, width=None):
    monkeypatch.setattr(semantic.INDEXES, "ann_threshold", 50)  # a graph, as a large deployment's is
    index = semantic.INDEXES.get(hearth.store.connection(), hearth.store.key, "messages", scope.user_id,
                                 semantic.model_id(embedder), DIM)
    assert index.mode == "ann"
    index.expansion_search = width
    return index


@pytest.mark.sqlite_only
def test_s17_sqlite_the_dated_searchs_work_grows_far_less_than_the_turns_of_the_range(hearth, monkeypatch):
    """Two archives of the same twelve months, one with ten times the turns of the other: a
    question about June compares far fewer than ten times the vectors in the larger (the graph's
    own count of distances), where comparing every turn of the range compares ten times as many.
    Every hit is a turn of June, never one of the nearer turns of September. (How many of the
    nearest the graph finds is the graph's recall, measured on embedding-like data in
    docs/embeddings.md; random word vectors leave some turns unreachable in a small graph, so the
    right turns are asserted of the exact comparison here, and of the filtered search in the
    tests below.)"""
    embedder = Words()
    hearth._embedder = embedder
    semantic.INDEXES.clear()
    small, small_persona = _user(hearth, "small")
    large, large_persona = _user(hearth, "large")
    june = [("2022-06", 10 + i, f"{TARGET} w{i}") for i in range(4)]
    september = [("2022-09", 10 + i, f"{NEARER} w{i}") for i in range(4)]
    found = {"small": _fill(hearth, small, small_persona, 40, 1, june + september, topic=True),
             "large": _fill(hearth, large, large_persona, 400, 2, june + september, topic=True)}
    semantic.embed_pending(hearth.store, embedder)
    conn = hearth.store.connection()
    june_ids = {name: {row[0] for row in conn.execute(
        "SELECT id FROM messages WHERE user_id = ? AND created_at >= '2022-06-01' AND created_at < '2022-07-01'",
        (scope.user_id,))} for name, scope in (("small", small), ("large", large))}
    vector = semantic.embed_queries(embedder, [QUESTION])[0]
    filtered = DEFAULT.with_changes(candidates=6, dated_rows=20, dated_fetch=64, dated_days_after=0)
    exact = filtered.with_changes(dated_rows=10_000)
    compared = {}
    for name, scope in (("small", small), ("large", large)):
        _graph_index(hearth, scope, embedder, monkeypatch, width=64)  # the same search width at both sizes
        asked = {found[name][text] for _, _, text in june}
        later = {found[name][text] for _, _, text in september}
        for path, tuning in (("filtered", filtered), ("exact", exact)):
            trace: dict = {}
            hits = [i for i, _ in dated_vector_hits(conn, hearth.store.key, scope.user_id, Filters(),
                                                    ("2022-06-01", "2022-06-30"), embedder, vector, tuning, trace)]
            assert trace["path"] == path
            assert hits and set(hits) <= june_ids[name] and not later & set(hits), (name, path, hits)
            if path == "exact":
                assert hits[0] in asked and asked <= set(hits), (name, hits)
            compared[name, path] = trace["compared"]
    # Comparing every turn of June: ten times the turns, ten times the work.
    assert compared["large", "exact"] >= 9 * compared["small", "exact"], compared
    # The filtered search: far less than ten times (about 2.3 times at these small sizes, where the
    # graph's search still reaches a large share of its nodes).
    assert compared["large", "filtered"] < 4 * compared["small", "filtered"], compared


def test_a2_s17_the_dated_lists_hits_stay_inside_the_range_and_its_filters(hearth, me, monkeypatch):
    """Both ways of answering (turn by turn, and the index's filtered search: on SQLite here of an
    exact index, which scores the rows between the range's ids; on PostgreSQL the HNSW index's)
    return only turns of the range that the search's filters allow, and the turn asked about
    first: not the nearer turn of another month, nor one of an excluded thread."""
    embedder = Words()
    hearth._embedder = embedder
    semantic.INDEXES.clear()
    persona = me.personas.create("p", "P", user_label="U said:", assistant_label="P said:").id
    ids = _fill(hearth, me, persona, 60, 3, [("2022-06", 14, TARGET), ("2022-09", 14, NEARER)], topic=True)
    hidden = me.conversations.create(persona, "Hidden", created_at="2022-06-20T08:00:00.000000Z")
    excluded = me.conversations.add_message(hidden.id, "user", NEARER, created_at="2022-06-20T09:00:00.000000Z").id
    semantic.embed_pending(hearth.store, embedder)
    conn = hearth.store.connection()
    vector = semantic.embed_queries(embedder, [QUESTION])[0]
    filters = Filters(exclude_conversation_ids=(hidden.id,))
    june = ("2022-06-01", "2022-06-30")
    inside = {row[0] for row in conn.execute(
        "SELECT id FROM messages WHERE user_id = ? AND created_at >= '2022-06-01' AND created_at < '2022-07-01'"
        " AND conversation_id != ?", (me.user_id, hidden.id))}
    plans: list[str] = []
    if semantic.database_index(conn):
        conn.execute("ANALYZE")
        execute = conn.execute

        def explained(sql, args=()):
            if "ORDER BY e.vec" in sql:  # the filtered statement (pgvectors.dated_messages)
                plans.append(" ".join(r[0] for r in execute("EXPLAIN " + sql, args).fetchall()))
            return execute(sql, args)

        conn.execute = explained
    for path, rows in (("exact", 10_000), ("filtered", 20)):
        trace: dict = {}
        tuning = DEFAULT.with_changes(candidates=10, dated_rows=rows, dated_fetch=256, dated_days_after=0)
        hits = dated_vector_hits(conn, hearth.store.key, me.user_id, filters, june, embedder, vector, tuning, trace)
        assert trace["path"] == path
        assert len(hits) == 10 and {h[0] for h in hits} <= inside, path
        assert hits[0][0] == ids[TARGET] and excluded not in {h[0] for h in hits}, (path, hits, ids)
        assert [h[1] for h in hits] == sorted((h[1] for h in hits), reverse=True)
    if semantic.database_index(conn):
        del conn.execute
        # The HNSW index yields the nearest rows first and the range is a filter on them: no read
        # of every turn of June.
        assert len(plans) == 1 and "hnsw" in plans[0] and "messages_chat_time" not in plans[0], plans


@pytest.mark.sqlite_only
def test_a2_s17_sqlite_turns_saved_out_of_time_order_never_leave_the_range(hearth, me, monkeypatch):
    """An import of older chats gives later ids to older turns, so the ids between June's first
    and last turn also hold turns of other months: the filtered search drops those, whatever their
    closeness."""
    embedder = Words()
    hearth._embedder = embedder
    semantic.INDEXES.clear()
    persona = me.personas.create("p", "P", user_label="U said:", assistant_label="P said:").id
    june = me.conversations.create(persona, "June", created_at="2022-06-01T08:00:00.000000Z")
    with hearth.store.write():
        first = me.conversations.add_message(june.id, "user", "w1 w2 w3", created_at="2022-06-02T08:00:00.000000Z").id
        # Imported in the middle of June's turns: a chat of 2021, nearest to the question.
        old = me.conversations.create(persona, "Old", created_at="2021-03-01T08:00:00.000000Z")
        strays = [me.conversations.add_message(old.id, "user", NEARER, created_at="2021-03-01T09:00:00.000000Z").id
                  for _ in range(30)]
        target = me.conversations.add_message(june.id, "user", TARGET, created_at="2022-06-10T08:00:00.000000Z").id
        for i in range(40):
            me.conversations.add_message(june.id, "assistant", f"w{i} w{i + 1} w{i + 2}",
                                         created_at=f"2022-06-{11 + i // 3:02d}T08:00:00.000000Z")
    semantic.embed_pending(hearth.store, embedder)
    conn = hearth.store.connection()
    trace: dict = {}
    hits = dated_vector_hits(conn, hearth.store.key, me.user_id, Filters(), ("2022-06-01", "2022-06-30"), embedder,
                             semantic.embed_queries(embedder, [QUESTION])[0],
                             DEFAULT.with_changes(candidates=5, dated_rows=10, dated_fetch=256, dated_days_after=0),
                             trace)
    assert trace["path"] == "filtered" and first < strays[0] < target
    assert hits and hits[0][0] == target and not set(strays) & {h[0] for h in hits}


@pytest.mark.sqlite_only
def test_s17_sqlite_a_date_question_runs_the_dated_list_ahead_on_the_prefetch_thread_when_the_index_is_a_graph(
        hearth, me, monkeypatch):
    """With the turns' index a graph, the dated list (a graph search for a large range, which
    releases the interpreter lock) runs on the prefetch thread behind the query's embedding, while
    the layers before archive recall read on the send's; the send takes its hits."""
    import threading

    from hearth.retrieval import candidates
    from tests.test_recall_speed import SearchesAheadRun

    embedder = Words()
    hearth._embedder = embedder
    semantic.INDEXES.clear()
    persona = me.personas.create("voice", "Elion", user_label="U said:", assistant_label="Elion said:",
                                 archive_access=True)
    ids = _fill(hearth, me, persona.id, 30, 4, [("2022-06", 14, TARGET)])
    now = me.conversations.create(persona.id, "Now")
    with hearth.store.write():
        me.conversations.add_message(now.id, "user", "hello")
        me.conversations.add_message(now.id, "assistant", "hello, love")
    semantic.embed_pending(hearth.store, embedder)
    _graph_index(hearth, me, embedder, monkeypatch)  # loaded, as a server's warm-up leaves it
    ran_on: list[str] = []
    hits: list[list[int]] = []
    inner = candidates.dated_vector_hits

    def dated(*args, **kwargs):
        ran_on.append(threading.current_thread().name)
        found = inner(*args, **kwargs)
        hits.append([i for i, _ in found])
        return found

    monkeypatch.setattr(candidates, "dated_vector_hits", dated)
    me.dynamic.layers.insert(0, SearchesAheadRun())
    me.send(now.id, "What happened with the quince by the old fence in June 2022?")
    assert len(ran_on) == 1 and ran_on[0].startswith("hearth-query-embed"), ran_on
    june = {row[0] for row in hearth.store.connection().execute(
        "SELECT id FROM messages WHERE created_at >= '2022-06-01' AND created_at < '2022-07-04'")}
    assert hits[0] and set(hits[0]) <= june and ids[TARGET] in june


@pytest.mark.sqlite_only
def test_s17_sqlite_a_date_questions_top_k_search_after_its_range_search_walks_the_graph_once():
    """A range's filtered search of the graph, then the turns' own top-k search of the same query
    (as a date question's send runs them, the range first): the second takes the nearest of the
    first's wider answer, the same turns a search of that width finds, without walking the graph
    again; another query, or a change to the index in between, walks it as usual."""
    from hearth.retrieval.vectors import VectorIndex

    rng = np.random.default_rng(5)
    rows = rng.standard_normal((3_000, 32)).astype(np.float32)
    index = VectorIndex.from_rows(32, ((i + 1, row) for i, row in enumerate(rows)), ann_threshold=100)
    assert index.mode == "ann"
    walks: list[int] = []
    ann = index._ann
    search = ann.search

    class Counting:
        def __getattr__(self, name):
            return getattr(ann, name)

        def __setattr__(self, name, value):
            setattr(ann, name, value)

        def __len__(self):
            return len(ann)

        def search(self, vector, count, **kwargs):
            walks.append(count)
            return search(vector, count, **kwargs)

    index._ann = Counting()
    query = rows[10] + 0.1 * rng.standard_normal(32).astype(np.float32)
    counts: dict[str, int] = {}
    span = index.search_span(query, 20, 1_000, 1_400, 400, counts)
    assert span and all(1_000 <= i <= 1_400 for i, _ in span) and counts["compared"] > 0
    top = index.search(query, 60)
    assert walks == [400]  # the top 60 came from the span search's answer
    unit = query / np.linalg.norm(query)
    assert [i for i, _ in top] == [int(i) for i in search(unit, 400).keys[:60]]  # the graph's own, as wide
    assert [s for _, s in top] == sorted((s for _, s in top), reverse=True)
    walks.clear()
    index.search(rows[20], 60)  # another query
    index.search_span(query, 20, 1_000, 1_400, 400)
    index.add(9_999, rows[30])  # a change between the two
    index.search(query, 60)
    assert walks == [60, 400, 60], walks
