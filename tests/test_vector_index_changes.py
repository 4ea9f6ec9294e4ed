"""The in-process vector index survives deletions and restarts (S18): a forgotten vector is taken
out of the graph in place, a saved graph that is missing or stale is built again in the background
while searches compare every stored vector, and the search's record says which search ran."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest

from hearth.memory.helpers import OfflineHelper
from hearth.ops.jobs import Worker
from hearth.records.forget import CONFIRMATION_PHRASE
from hearth.retrieval import hybrid, semantic, vector_cache
from hearth.retrieval.semantic import ANN, EXACT_FALLBACK, IndexCache
from hearth.retrieval.vectors import from_blob, to_blob

DIM = 16
MODEL = "s18-model"
ROWS = 3_000
ANN_THRESHOLD = 500  # a graph from 500 vectors on, as a deployment's above 100,000
BACKGROUND_ABOVE = 100  # built in the background from 100 vectors on


class Embedder:
    """Texts stand for stored vectors: ``"#<id>"`` is the vector stored for message ``id``."""

    name = MODEL
    dim = DIM

    def __init__(self, conn):
        self.conn = conn

    def embed(self, texts):
        out = []
        for text in texts:
            row = self.conn.execute("SELECT embedding FROM message_embeddings WHERE message_id = ?",
                                    (int(text.split("#")[-1]),)).fetchone()
            out.append(from_blob(row[0], DIM))
        return np.stack(out)


def _add(hearth, me, conversation_id, rng, count):
    ids = []
    with hearth.store.write() as conn:
        for _ in range(count):
            message = me.conversations.add_message(conversation_id, "user", "text")
            vector = rng.standard_normal(DIM).astype(np.float32)
            conn.execute("INSERT INTO message_embeddings (message_id, user_id, model, embedding) VALUES (?, ?, ?, ?)",
                         (message.id, me.user_id, MODEL, to_blob(vector / np.linalg.norm(vector))))
            ids.append(message.id)
    return ids


def _cache():
    cache = IndexCache(ann_threshold=ANN_THRESHOLD)
    cache.background_above = BACKGROUND_ABOVE
    return cache


def _stored(conn, message_id):
    return from_blob(conn.execute("SELECT embedding FROM message_embeddings WHERE message_id = ?",
                                  (message_id,)).fetchone()[0], DIM)


def _search(hearth, me, message_id, k=5):
    """One vector search for message ``message_id``'s own vector: (hits, which search ran)."""
    conn = hearth.store.connection()
    modes: dict[str, str] = {}
    [hits] = semantic.vector_search(conn, str(hearth.store.path), "messages", me.user_id, Embedder(conn),
                                    _stored(conn, message_id)[None, :], k, modes)
    return hits, modes["messages"]


def _wait_built(cache, seconds=60):
    deadline = time.monotonic() + seconds
    while cache._building and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not cache._building


@pytest.fixture
def deployment(hearth, me, persona, monkeypatch):
    """A few thousand vectors in a graph (a small ``ann_threshold``), the process's cache fresh."""
    semantic.forget_queries()
    cache = _cache()
    monkeypatch.setattr(semantic, "INDEXES", cache)
    conversation = me.conversations.create(persona.id)
    ids = _add(hearth, me, conversation.id, np.random.default_rng(18), ROWS)
    index = cache.get(hearth.store.connection(), str(hearth.store.path), "messages", me.user_id, MODEL, DIM)
    assert index.mode == "ann" and len(index) == ROWS and cache.counts.builds == 1
    return cache, ids


@pytest.mark.sqlite_only
def test_s18_sqlite_recall_right_after_forgetting_a_message_needs_no_rebuild(hearth, me, deployment, monkeypatch):
    cache, ids = deployment
    known, forgotten = ids[1234], ids[10]
    index = cache.get(hearth.store.connection(), str(hearth.store.path), "messages", me.user_id, MODEL, DIM)
    forgotten_bytes = _stored(hearth.store.connection(), forgotten).astype(np.float16).tobytes()
    folder = hearth.store.path.with_name(hearth.store.path.name + ".vectors")
    assert any(forgotten_bytes in path.read_bytes() for path in folder.iterdir())  # the graph's f16 copy
    preview = me.forget.preview("message", forgotten)
    me.forget.apply("message", forgotten, token=preview.token, phrase=CONFIRMATION_PHRASE)

    # The next search, before any background job: the graph itself, the forgotten vector taken out.
    hits, mode = _search(hearth, me, known)
    assert mode == ANN and hits[0][0] == known and hits[0][1] > 0.99
    assert forgotten not in {i for i, _ in _search(hearth, me, ids[11], k=50)[0]}
    assert cache.counts.builds == 1 and cache.counts.removed == 1 and cache.counts.fallbacks == 0
    assert cache.get(hearth.store.connection(), str(hearth.store.path), "messages", me.user_id, MODEL,
                     DIM) is index and len(index) == ROWS - 1

    # The forget's compaction job saves the graph again without the forgotten vector's bytes,
    # and a restart loads it: no build, no exact search.
    worker = Worker(hearth, helper=OfflineHelper())
    while worker.run_once():
        pass
    assert list(folder.iterdir()), "the saved graph was replaced, not dropped"
    assert not any(forgotten_bytes in path.read_bytes() for path in folder.iterdir())
    monkeypatch.setattr(semantic, "INDEXES", _cache())
    hits, mode = _search(hearth, me, known)
    assert mode == ANN and hits[0][0] == known
    assert semantic.INDEXES.counts.builds == 0 and semantic.INDEXES.counts.loads == 1


@pytest.mark.sqlite_only
@pytest.mark.parametrize("damage", ["missing", "stale", "damaged"])
def test_s18_sqlite_after_a_restart_without_a_usable_saved_graph_search_falls_back_to_exact_then_uses_the_graph(
        hearth, me, deployment, monkeypatch, damage):
    cache, ids = deployment
    known = ids[2000]
    folder = hearth.store.path.with_name(hearth.store.path.name + ".vectors")
    sidecar = next(folder.glob("*.json"))
    if damage == "missing":
        for path in folder.iterdir():
            path.unlink()
    elif damage == "stale":
        # Saved from a newer copy of the database (this one restored from a backup since): it
        # holds rows the table never had.
        meta = json.loads(sidecar.read_text())
        model, count, highest, rev = meta["fingerprint"].rsplit(":", 3)
        meta["fingerprint"] = f"{model}:{int(count) + 50}:{int(highest) + 50}:{rev}"
        sidecar.write_text(json.dumps(meta))
    else:
        graph = folder / json.loads(sidecar.read_text())["graph"]
        graph.write_bytes(graph.read_bytes()[: graph.stat().st_size // 2])  # a disk that filled up

    restarted = _cache()
    monkeypatch.setattr(semantic, "INDEXES", restarted)
    built = restarted._cold_load

    def slow_build(*args):  # a large build takes minutes; the searches below arrive during it
        time.sleep(0.5)
        return built(*args)

    monkeypatch.setattr(restarted, "_cold_load", slow_build)
    hits, mode = _search(hearth, me, known)
    assert mode == EXACT_FALLBACK and hits[0][0] == known and hits[0][1] > 0.999
    assert restarted.counts.fallbacks == 1

    # The send's record of its search says which search ran.
    conn = hearth.store.connection()
    outcome = hybrid.search(conn, me.user_id, f"#{known}", embedder=Embedder(conn), db_key=str(hearth.store.path),
                            store=hearth.store, origin="owner")
    assert outcome.vector_index == {"messages": EXACT_FALLBACK}
    logged = conn.execute("SELECT filters FROM search_log WHERE id = ?", (outcome.log_id,)).fetchone()[0]
    assert json.loads(logged)["vector_index"] == {"messages": EXACT_FALLBACK}

    _wait_built(restarted)
    hits, mode = _search(hearth, me, known)
    assert mode == ANN and hits[0][0] == known and restarted.counts.builds == 1
    assert hybrid.search(conn, me.user_id, f"#{known}", embedder=Embedder(conn), db_key=str(hearth.store.path),
                         log=False).vector_index == {"messages": ANN}


@pytest.mark.sqlite_only
def test_s18_sqlite_a_graph_left_with_many_free_slots_is_compacted_in_the_background(hearth, me, deployment):
    cache, ids = deployment
    conn = hearth.store.connection()
    with hearth.store.write() as w:
        gone = ids[:1_200]
        for start in range(0, len(gone), 500):
            part = gone[start:start + 500]
            w.execute(f"DELETE FROM messages WHERE id IN ({', '.join('?' * len(part))})", part)
    hits, mode = _search(hearth, me, ids[2500])
    assert mode == ANN and hits[0][0] == ids[2500]  # removed in place, and answering meanwhile
    assert cache.counts.compactions == 1
    _wait_built(cache)
    index = cache.get(conn, str(hearth.store.path), "messages", me.user_id, MODEL, DIM)
    assert index.free_slots == 0 and len(index) == ROWS - 1_200 and cache.counts.builds == 2


@pytest.mark.sqlite_only
def test_s18_sqlite_the_ids_a_change_touched_are_found_by_counting_parts_of_the_id_range(
        hearth, me, deployment, monkeypatch):
    cache, ids = deployment
    monkeypatch.setattr(vector_cache, "_SPLIT", 4)
    monkeypatch.setattr(vector_cache, "_DIRECT_IDS", 16)  # many levels of parts on a few thousand ids
    rng = np.random.default_rng(2)
    deleted = sorted(rng.choice(ids, 30, replace=False).tolist())
    with hearth.store.write() as w:
        w.execute(f"DELETE FROM messages WHERE id IN ({', '.join('?' * len(deleted))})", deleted)
    unseen = sorted(rng.choice(sorted(set(ids) - set(deleted)), 40, replace=False).tolist())
    held = np.asarray(sorted(set(ids) - set(unseen)), dtype=np.int64)  # an index that lacks those 40
    removed, added = cache._differences(hearth.store.connection(), "messages", me.user_id, MODEL, held, max(ids))
    assert sorted(removed.tolist()) == deleted and sorted(added.tolist()) == unseen


@pytest.mark.sqlite_only
@pytest.mark.parametrize("restart", [False, True])
def test_s18_sqlite_a_vector_replaced_under_its_id_is_found_without_a_build(hearth, me, deployment, monkeypatch,
                                                                           restart):
    """No id changes: the revision says something changed, and the stored vectors are compared
    with the index's copies instead of building the graph again."""
    cache, ids = deployment
    known = ids[777]
    vector = np.random.default_rng(5).standard_normal(DIM).astype(np.float32)
    with hearth.store.write() as w:
        w.execute("UPDATE message_embeddings SET embedding = ? WHERE message_id = ?",
                  (to_blob(vector / np.linalg.norm(vector)), known))
    if restart:
        cache = _cache()
        monkeypatch.setattr(semantic, "INDEXES", cache)
    hits, mode = _search(hearth, me, known)
    assert mode == ANN and hits[0][0] == known and hits[0][1] > 0.99
    assert cache.counts.compared == 1 and cache.counts.builds == (0 if restart else 1)
    assert cache.counts.fallbacks == 0


def test_s18_the_send_records_which_vector_search_ran(hearth, me, provider, monkeypatch):
    """The send's archive recall keeps, in its search log row, which vector search answered:
    the exact search over the table while the graph is built, then the graph (pgvector's HNSW
    index on PostgreSQL)."""
    from hearth.retrieval import searchlog
    from hearth.retrieval.embedding_job import embed_job
    from hearth.store import is_postgres

    semantic.forget_queries()
    persona = me.personas.create("voice", "Elion", archive_access=True)
    older = me.conversations.create(persona.id, "Orchard")
    with hearth.store.write():
        me.conversations.add_message(older.id, "user", "We planted the quince tree by the wall.")
        me.conversations.add_message(older.id, "assistant", "The quince will fruit in autumn.")
    embed_job(hearth.context(me.user_id), {})
    postgres = is_postgres(hearth.store.connection())
    cache = IndexCache(ann_threshold=1)
    cache.background_above = 0  # every build in the background, as above 100,000 vectors
    monkeypatch.setattr(semantic, "INDEXES", cache)
    built = cache._cold_load

    def slow_build(*args):
        time.sleep(1.0)
        return built(*args)

    monkeypatch.setattr(cache, "_cold_load", slow_build)
    now = me.conversations.create(persona.id, "Now")
    me.send(now.id, "hello there, the garden looks lovely today")
    me.send(now.id, "Do you remember the quince tree?")
    conn = hearth.store.connection()
    entry = searchlog.entries(conn, me.user_id, origin="archive_recall")[0]
    assert entry.filters["vector_index"]["messages"] == (ANN if postgres else EXACT_FALLBACK)
    _wait_built(cache)
    me.send(now.id, "Do you remember the quince in autumn?")
    later = searchlog.entries(conn, me.user_id, origin="archive_recall")[0]
    assert later.id > entry.id
    entry = later
    assert entry.filters["vector_index"]["messages"] == ANN


@pytest.mark.sqlite_only
def test_s18_sqlite_a_graph_changed_in_place_is_saved_again_so_a_restart_needs_no_comparison(
        hearth, me, deployment, monkeypatch):
    """A turn whose chosen text changed (W2): its vector deleted, then embedded again under the
    same id. The running index takes both in place and saves itself again afterwards, so a restart
    loads that file and neither compares every vector nor builds."""
    cache, ids = deployment
    cache.save_delay = 0.0
    changed = ids[1500]
    with hearth.store.write() as w:
        row = w.execute("SELECT embedding FROM message_embeddings WHERE message_id = ?", (ids[1501],)).fetchone()
        w.execute("DELETE FROM message_embeddings WHERE message_id = ?", (changed,))
    assert changed not in {i for i, _ in _search(hearth, me, ids[1501], k=20)[0]}
    with hearth.store.write() as w:
        w.execute("INSERT INTO message_embeddings (message_id, user_id, model, embedding) VALUES (?, ?, ?, ?)",
                  (changed, me.user_id, MODEL, row[0]))  # its new vector: the next turn's, say
    hits, mode = _search(hearth, me, ids[1501], k=2)
    assert mode == ANN and {i for i, _ in hits} == {changed, ids[1501]}
    deadline = time.monotonic() + 30
    while (cache._saving or cache.counts.saves < 1) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert cache.counts.saves >= 1 and cache.counts.compared == 0 and cache.counts.builds == 1

    restarted = _cache()
    monkeypatch.setattr(semantic, "INDEXES", restarted)
    hits, mode = _search(hearth, me, ids[1501], k=2)
    assert mode == ANN and {i for i, _ in hits} == {changed, ids[1501]}
    assert restarted.counts.compared == 0 and restarted.counts.builds == 0 and restarted.counts.loads == 1
