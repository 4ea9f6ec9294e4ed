"""The in-process vector index follows its table: additions are added, deletions are removed in
place, and a large index is saved beside the database and reloaded after a restart (S7, S18)."""

from __future__ import annotations

import numpy as np
import pytest

from hearth.retrieval import vectors
from hearth.retrieval.semantic import IndexCache
from hearth.retrieval.vectors import to_blob

DIM = 16


def _add(hearth, me, conversation_id, rng, count):
    ids = []
    with hearth.store.write() as conn:
        for _ in range(count):
            message = me.conversations.add_message(conversation_id, "user", "text")
            vector = rng.standard_normal(DIM).astype(np.float32)
            conn.execute("INSERT INTO message_embeddings (message_id, user_id, model, embedding) VALUES (?, ?, 'm', ?)",
                         (message.id, me.user_id, to_blob(vector / np.linalg.norm(vector))))
            ids.append(message.id)
    return ids


@pytest.mark.sqlite_only
def test_s7_sqlite_in_process_index_adds_new_rows_removes_deletions_and_reloads_after_restart(hearth, me, persona, monkeypatch):
    rng = np.random.default_rng(3)
    conversation = me.conversations.create(persona.id)
    db_key = str(hearth.store.path)
    conn = hearth.store.connection()
    cache = IndexCache(ann_threshold=50)

    ids = _add(hearth, me, conversation.id, rng, 60)
    first = cache.get(conn, db_key, "messages", me.user_id, "m", DIM)
    assert first.mode == "ann" and len(first) == 60
    saved = cache._file(db_key, "messages", me.user_id, "m")
    assert saved.with_name(saved.name + ".json").is_file()

    ids += _add(hearth, me, conversation.id, rng, 5)
    grown = cache.get(conn, db_key, "messages", me.user_id, "m", DIM)
    assert grown is first and len(grown) == 65  # added in place, no rebuild

    with hearth.store.write() as w:
        w.execute("DELETE FROM messages WHERE id = ?", (ids[0],))
    shrunk = cache.get(conn, db_key, "messages", me.user_id, "m", DIM)
    assert shrunk is first and len(shrunk) == 64 and cache.counts.builds == 1  # removed in place (S18)
    assert ids[0] not in {i for i, _ in shrunk.search(rng.standard_normal(DIM).astype(np.float32), 64)}

    # A restart: a new cache loads the saved graph, takes out the row deleted since it was saved
    # and adds only the rows that arrived since.
    newest = _add(hearth, me, conversation.id, rng, 2)

    def no_rebuild(self, *args, **kwargs):
        raise AssertionError("the saved index should have been loaded, not rebuilt")

    monkeypatch.setattr(vectors.VectorIndex, "rebuild", no_rebuild)
    restarted = IndexCache(ann_threshold=50).get(conn, db_key, "messages", me.user_id, "m", DIM)
    assert restarted.mode == "ann" and len(restarted) == 66
    row = conn.execute("SELECT embedding FROM message_embeddings WHERE message_id = ?", (newest[-1],)).fetchone()
    assert restarted.search(vectors.from_blob(row[0], DIM), 1)[0][0] == newest[-1]


@pytest.mark.sqlite_only
def test_s7_s18_sqlite_a_saved_index_file_is_brought_up_to_date_with_a_deletion_below_its_highest_id(
        hearth, me, persona):
    rng = np.random.default_rng(4)
    conversation = me.conversations.create(persona.id)
    db_key = str(hearth.store.path)
    conn = hearth.store.connection()
    ids = _add(hearth, me, conversation.id, rng, 60)
    IndexCache(ann_threshold=50).get(conn, db_key, "messages", me.user_id, "m", DIM)
    with hearth.store.write() as w:  # a deletion below the saved highest id: the file holds it still
        w.execute("DELETE FROM messages WHERE id = ?", (ids[5],))
    cache = IndexCache(ann_threshold=50)
    index = cache.get(conn, db_key, "messages", me.user_id, "m", DIM)
    assert len(index) == 59 and cache.counts.loads == 1 and cache.counts.builds == 0
    assert ids[5] not in {i for i, _ in index.search(rng.standard_normal(DIM).astype(np.float32), 59)}


def test_s7_the_ann_index_and_the_local_model_can_load_in_either_order(tmp_path):
    import subprocess
    import sys

    code = ("from hearth.retrieval.vectors import VectorIndex\n"
            "import numpy as np\n"
            "index = VectorIndex(8, ann_threshold=2)\n"
            "index.add([1, 2, 3], np.eye(3, 8, dtype=np.float32))\n"
            "assert index.mode == 'ann'\n"
            "from hearth.retrieval.embedder import LocalEmbedder\n"
            "print(LocalEmbedder().embed(['hello']).shape)\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "(1, 384)" in result.stdout


@pytest.mark.sqlite_only
def test_s7_sqlite_a_large_cold_in_process_index_builds_in_the_background_without_blocking_a_search(hearth, me, persona):
    import time

    rng = np.random.default_rng(5)
    conversation = me.conversations.create(persona.id)
    _add(hearth, me, conversation.id, rng, 30)
    cache = IndexCache(ann_threshold=1_000)
    cache.background_above = 10
    conn = hearth.store.connection()
    db_key = str(hearth.store.path)
    assert cache.get(conn, db_key, "messages", me.user_id, "m", DIM, wait=False) is None  # not yet built
    deadline = time.monotonic() + 30
    index = None
    while index is None and time.monotonic() < deadline:
        time.sleep(0.05)
        index = cache.get(conn, db_key, "messages", me.user_id, "m", DIM, wait=False)
    assert index is not None and len(index) == 30


@pytest.mark.sqlite_only
def test_s7_sqlite_the_start_up_warm_and_a_first_search_load_one_index_not_two(hearth, me, persona):
    """A search arriving while the start-up warm loads the index waits for that load instead of
    starting a second one beside it (at a million vectors each load holds about a gigabyte)."""
    import sqlite3
    import threading
    import time

    class CountingCache(IndexCache):
        loads = 0

        def _cold_load(self, *args):
            self.loads += 1
            time.sleep(0.3)  # a large load takes seconds; the search arrives during it
            return super()._cold_load(*args)

    rng = np.random.default_rng(6)
    conversation = me.conversations.create(persona.id)
    _add(hearth, me, conversation.id, rng, 30)
    cache = CountingCache(ann_threshold=1_000)
    cache.background_above = 10
    db_key = str(hearth.store.path)

    def warm():
        conn = sqlite3.connect(f"file:{db_key}?mode=ro", uri=True)
        try:
            cache.get(conn, db_key, "messages", me.user_id, "m", DIM)
        finally:
            conn.close()

    warming = threading.Thread(target=warm)
    warming.start()
    time.sleep(0.05)
    conn = hearth.store.connection()
    assert cache.get(conn, db_key, "messages", me.user_id, "m", DIM, wait=False) is None  # still loading
    warming.join()
    deadline = time.monotonic() + 10
    while cache._building and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not cache._building
    index = cache.get(conn, db_key, "messages", me.user_id, "m", DIM, wait=False)
    assert index is not None and len(index) == 30
    assert cache.loads == 1


@pytest.mark.sqlite_only
def test_s7_sqlite_a_vector_written_between_two_reads_is_an_addition_not_a_rebuild(hearth, me, persona):
    """The embedding job commits while a search brings the index up to date: the rows read are
    bounded by the signature read just before, so the new row is not taken for a deletion."""
    rng = np.random.default_rng(7)
    conversation = me.conversations.create(persona.id)
    _add(hearth, me, conversation.id, rng, 60)

    class RacedCache(IndexCache):
        loads = 0
        race = False

        def _cold_load(self, *args):
            self.loads += 1
            return super()._cold_load(*args)

        def _rows(self, *args, **kwargs):
            if self.race:
                self.race = False
                _add(hearth, me, conversation.id, rng, 1)  # committed after the signature was read
            return super()._rows(*args, **kwargs)

    cache = RacedCache(ann_threshold=50)
    conn = hearth.store.connection()
    db_key = str(hearth.store.path)
    first = cache.get(conn, db_key, "messages", me.user_id, "m", DIM)
    _add(hearth, me, conversation.id, rng, 2)
    cache.race = True
    grown = cache.get(conn, db_key, "messages", me.user_id, "m", DIM)
    assert grown is first and len(grown) == 62 and cache.loads == 1
    assert len(cache.get(conn, db_key, "messages", me.user_id, "m", DIM)) == 63 and cache.loads == 1


@pytest.mark.sqlite_only
def test_s7_sqlite_a_saved_index_far_behind_its_table_is_saved_again_once_loaded(hearth, me, persona, monkeypatch):
    from hearth.retrieval import vector_cache as semantic

    rng = np.random.default_rng(8)
    conversation = me.conversations.create(persona.id)
    _add(hearth, me, conversation.id, rng, 60)
    conn = hearth.store.connection()
    db_key = str(hearth.store.path)
    IndexCache(ann_threshold=50).get(conn, db_key, "messages", me.user_id, "m", DIM)
    path = IndexCache._file(db_key, "messages", me.user_id, "m")
    assert semantic._saved_signature(path)[0] == 60
    monkeypatch.setattr(semantic, "RESAVE_AFTER", 3)
    _add(hearth, me, conversation.id, rng, 2)
    IndexCache(ann_threshold=50).get(conn, db_key, "messages", me.user_id, "m", DIM)
    assert semantic._saved_signature(path)[0] == 60  # two rows behind: not worth a save
    newest = _add(hearth, me, conversation.id, rng, 1)
    IndexCache(ann_threshold=50).get(conn, db_key, "messages", me.user_id, "m", DIM)
    assert semantic._saved_signature(path)[:2] == (63, newest[-1])
