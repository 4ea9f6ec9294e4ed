"""S7 vector index: exact search against brute force, id filters, the HNSW path's recall, and
saving beside a real SQLite database with a rebuild when the file is missing or stale."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from hearth.errors import InvalidInput, StoreError
from hearth.retrieval.vectors import VectorIndex, exact_top_k, from_blob, to_blob

DIM = 384


def unit(rows: np.ndarray) -> np.ndarray:
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


def embedding_like(n: int, seed: int, rank: int = 24, noise: float = 0.15) -> np.ndarray:
    """Unit vectors near a low-dimensional subspace, as sentence embeddings are.

    Isotropic random 384-d vectors have no neighbour structure at all (every point is nearly
    orthogonal to every other), which no graph index searches well; docs/embeddings.md has both.
    """
    rng = np.random.default_rng(seed)
    basis = rng.standard_normal((rank, DIM)).astype(np.float32)
    points = unit(rng.standard_normal((n, rank)).astype(np.float32) @ basis)
    return unit(points + rng.standard_normal((n, DIM)).astype(np.float32) * (noise / np.sqrt(DIM)))


def brute(matrix: np.ndarray, ids: np.ndarray, query: np.ndarray, k: int) -> list[int]:
    return [i for i, _ in exact_top_k(matrix, ids, query, k)]


def test_s7_blob_round_trip_and_size_check() -> None:
    vec = np.linspace(-1, 1, DIM, dtype=np.float32)
    blob = to_blob(vec)
    assert len(blob) == DIM * 4
    np.testing.assert_array_equal(from_blob(blob, DIM), vec)
    with pytest.raises(StoreError):
        from_blob(blob[:-2])
    with pytest.raises(StoreError):
        from_blob(blob, 128)


def test_s7_exact_top_k_matches_brute_force() -> None:
    data = embedding_like(6000, seed=1)
    ids = np.arange(10, 6010, dtype=np.int64) * 3
    index = VectorIndex(DIM)
    index.add(ids, data)
    assert index.mode == "exact" and len(index) == 6000
    for query in embedding_like(20, seed=2):
        got = index.search(query, 10)
        assert [i for i, _ in got] == brute(data, ids, query, 10)
        scores = [s for _, s in got]
        assert scores == sorted(scores, reverse=True)
        assert abs(scores[0] - float(data[list(ids).index(got[0][0])] @ query)) < 1e-5
    assert len(index.search(data[0], 10_000)) == 6000


def test_s7_exact_search_honours_allowed_ids() -> None:
    data = embedding_like(3000, seed=3)
    ids = np.arange(1, 3001, dtype=np.int64)
    index = VectorIndex(DIM)
    index.add(ids, data)
    rng = np.random.default_rng(4)
    query = data[17]
    for size in (5, 100, 2500):  # small sets score their rows; large ones mask the full product
        allowed = rng.choice(ids, size=size, replace=False)
        got = index.search(query, 10, allowed_ids=set(allowed.tolist()) | {999_999})
        mask = np.isin(ids, allowed)
        assert [i for i, _ in got] == brute(data[mask], ids[mask], query, 10)
        assert set(i for i, _ in got) <= set(allowed.tolist())
    assert index.search(query, 10, allowed_ids=[]) == []
    assert index.search(query, 10, allowed_ids=[424242]) == []


def test_s7_incremental_add_replace_and_remove() -> None:
    data = embedding_like(500, seed=5)
    index = VectorIndex(DIM)
    index.add(np.arange(250), data[:250])
    index.add(np.arange(250, 500), data[250:])
    assert len(index) == 500
    assert index.search(data[400], 1)[0][0] == 400
    index.add([400], data[3])  # replacing keeps one entry per id
    assert len(index) == 500
    top = index.search(data[3], 2)
    assert {top[0][0], top[1][0]} == {3, 400}
    assert index.remove([3, 400, 77777]) == 2
    assert 3 not in index and 400 not in index and 4 in index
    ids = index.ids()
    assert len(index) == 498 and sorted(ids.tolist()) == sorted(set(range(500)) - {3, 400})
    remaining = np.array(sorted(ids.tolist()))
    query = data[9]
    assert [i for i, _ in index.search(query, 10)] == brute(data[remaining], remaining, query, 10)
    with pytest.raises(InvalidInput):
        index.add([1, 2], data[:1])
    with pytest.raises(InvalidInput):
        index.add([-1], data[:1])


def test_s7_switches_to_ann_when_the_threshold_is_crossed() -> None:
    data = embedding_like(1200, seed=6)
    index = VectorIndex(DIM, ann_threshold=1000)
    index.add(np.arange(800), data[:800])
    assert index.mode == "exact"
    index.add(np.arange(800, 1200), data[800:])
    assert index.mode == "ann" and len(index) == 1200
    assert index.search(data[1100], 1)[0][0] == 1100
    assert index.search(data[5], 1)[0][0] == 5
    assert index.remove([5]) == 1 and 5 not in index and len(index) == 1199


@pytest.fixture(scope="module")
def ann_50k():
    data = embedding_like(50_000, seed=7)
    ids = np.arange(1, 50_001, dtype=np.int64)
    index = VectorIndex(DIM, ann_threshold=10_000)
    index.add(ids, data)
    return index, data, ids


def recall_at_10(index: VectorIndex, data: np.ndarray, ids: np.ndarray, queries: np.ndarray) -> float:
    hits = 0
    scores = queries @ data.T
    for q, row in zip(queries, scores):
        truth = set(ids[np.argpartition(-row, 10)[:10]].tolist())
        hits += len(truth & {i for i, _ in index.search(q, 10)})
    return hits / (10 * len(queries))


@pytest.mark.slow
def test_s7_ann_recall_at_10_on_50k_vectors(ann_50k) -> None:
    index, data, ids = ann_50k
    assert index.mode == "ann"
    queries = embedding_like(50_200, seed=7)[50_000:]  # same subspace, unseen points
    assert recall_at_10(index, data, ids, queries) >= 0.95


def test_s7_ann_filter_overfetch_and_exact_fallback(ann_50k) -> None:
    index, data, ids = ann_50k
    query = data[123]
    rng = np.random.default_rng(8)
    # Small allowed set (the over-fetch would be too wide): scored exactly from the index's copies.
    small = rng.choice(ids, 300, replace=False)
    mask = np.isin(ids, small)
    got = [i for i, _ in index.search(query, 10, allowed_ids=small)]
    assert got == brute(data[mask], ids[mask], query, 10)
    # Large allowed set: over-fetch from the graph, then filter.
    big = rng.choice(ids, 30_000, replace=False)
    got = index.search(query, 10, allowed_ids=big)
    assert len(got) == 10 and {i for i, _ in got} <= set(big.tolist())
    mask = np.isin(ids, big)
    assert len({i for i, _ in got} & set(brute(data[mask], ids[mask], query, 10))) >= 8
    # Allowed vectors that lie far from the query do not survive the over-fetch: exact fallback.
    far = ids[np.argsort(data @ query)[:200]]
    strict = VectorIndex(DIM, ann_threshold=10_000, max_fetch=100_000)
    strict._ann = index._ann  # the same graph, allowed to over-fetch for a small set
    mask = np.isin(ids, far)
    got = [i for i, _ in strict.search(query, 10, allowed_ids=far)]
    assert got == brute(data[mask], ids[mask], query, 10)


def make_db(path: Path, data: np.ndarray) -> sqlite3.Connection:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE vecs (id INTEGER PRIMARY KEY, embedding BLOB NOT NULL)")
    conn.executemany("INSERT INTO vecs VALUES (?, ?)", ((i + 1, to_blob(v)) for i, v in enumerate(data)))
    conn.commit()
    return conn


def fingerprint(conn: sqlite3.Connection) -> str:
    count, top = conn.execute("SELECT count(*), max(id) FROM vecs").fetchone()
    return f"minilm:{count}:{top}"


def test_s7_s8_rebuild_from_database_rows_reports_progress(tmp_path: Path) -> None:
    data = embedding_like(9000, seed=9)
    conn = make_db(tmp_path / "hearth.db", data)
    seen: list[tuple[int, int | None]] = []
    rows = conn.execute("SELECT id, embedding FROM vecs").fetchall()
    index = VectorIndex(DIM)
    index.rebuild(rows, progress=lambda done, total: seen.append((done, total)))
    assert len(index) == 9000 and index.mode == "exact"
    assert seen[-1] == (9000, 9000) and [d for d, _ in seen] == sorted(d for d, _ in seen)
    assert len(seen) >= 2
    assert index.search(data[42], 1)[0][0] == 43
    # A cursor has no length: progress then reports an unknown total.
    streamed: list[tuple[int, int | None]] = []
    index.rebuild(conn.execute("SELECT id, embedding FROM vecs"), progress=lambda d, t: streamed.append((d, t)))
    assert streamed[-1] == (9000, None) and len(index) == 9000
    conn.close()


def test_s7_save_load_round_trip_and_stale_file_rebuilds(tmp_path: Path) -> None:
    data = embedding_like(3000, seed=10)
    conn = make_db(tmp_path / "hearth.db", data)
    path = tmp_path / "hearth.db.vectors"
    reads = []

    def rows():
        reads.append(1)
        return conn.execute("SELECT id, embedding FROM vecs").fetchall()

    options = {"ann_threshold": 1000}
    first = VectorIndex(DIM, **options)
    assert first.load_or_rebuild(path, rows, fingerprint=fingerprint(conn)) is False  # no file yet
    sidecar = path.with_name(path.name + ".json")
    assert first.mode == "ann" and sidecar.is_file() and len(reads) == 1

    second = VectorIndex(DIM, **options)
    assert second.load_or_rebuild(path, rows, fingerprint=fingerprint(conn)) is True
    assert len(reads) == 1 and len(second) == 3000
    for q in data[:20]:
        assert second.search(q, 10) == first.search(q, 10)

    # New rows change the fingerprint: the old file is stale and the index is rebuilt.
    extra = embedding_like(10, seed=11)
    conn.executemany("INSERT INTO vecs VALUES (?, ?)", ((5000 + i, to_blob(v)) for i, v in enumerate(extra)))
    conn.commit()
    third = VectorIndex(DIM, **options)
    assert third.load_or_rebuild(path, rows, fingerprint=fingerprint(conn)) is False
    assert len(reads) == 2 and len(third) == 3010 and third.search(extra[3], 1)[0][0] == 5003

    # A damaged file is not trusted either.
    graph = path.with_name(json.loads(sidecar.read_text())["graph"])
    graph.write_bytes(b"not an index")
    assert VectorIndex(DIM, **options).load(path, fingerprint(conn)) is False
    graph.unlink()
    assert VectorIndex(DIM, **options).load(path, fingerprint(conn)) is False

    # A small index has nothing worth saving: the exact path rebuilds from rows in moments.
    small = VectorIndex(DIM)
    small.add([1, 2], data[:2])
    assert small.save(path, "x") is False and not sidecar.exists() and not list(tmp_path.glob("hearth.db.vectors.*"))
    conn.close()


def test_s7_a_save_stopped_halfway_leaves_the_previous_index_whole(tmp_path: Path, monkeypatch) -> None:
    """The server may stop while it saves a graph (a start-up save runs in a background thread):
    the sidecar is replaced last, so the pair on disk is the old one or the new one, never a mix."""
    from hearth.retrieval import vectors

    data = embedding_like(1500, seed=12)
    path = tmp_path / "hearth.db.vectors"
    old = VectorIndex(DIM, ann_threshold=1000)
    old.add(np.arange(1, 1201), data[:1200])
    assert old.save(path, "v1")
    new = VectorIndex(DIM, ann_threshold=1000)
    new.add(np.arange(1, 1501), data)

    def stopped(src, dst):
        raise OSError("stopped before the sidecar was replaced")

    monkeypatch.setattr(vectors.os, "replace", stopped)
    with pytest.raises(OSError):
        new.save(path, "v2")
    monkeypatch.undo()
    reloaded = VectorIndex(DIM, ann_threshold=1000)
    assert reloaded.load(path, "v1") and len(reloaded) == 1200
    assert not VectorIndex(DIM, ann_threshold=1000).load(path, "v2")
    assert new.save(path, "v2")  # the next save replaces the pair and leaves one graph
    assert VectorIndex(DIM, ann_threshold=1000).load(path, "v2")
    assert len(list(tmp_path.glob("hearth.db.vectors.*"))) == 2  # the graph and its sidecar
