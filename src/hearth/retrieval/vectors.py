"""The in-process vector index (S7): exact numpy search, and an HNSW index (usearch) at scale.

Embeddings live in the database as float32 BLOBs; that table is the source of truth and this
index is only a cache built from it (``rebuild``), kept in step by ``add``/``remove``, and
optionally saved to a file beside the database so a restart need not rebuild it.

Two storage modes, chosen by size:

- exact (up to ``ann_threshold`` vectors, 100k by default): a float32 matrix of unit vectors;
  a query is one matrix-vector product and ``argpartition``. Results are exact and filters by
  allowed ids are applied exactly.
- ann (above the threshold): a usearch HNSW graph over float16 copies of the vectors, inner
  product metric. usearch holds the only in-memory copy of the vectors. A filtered search
  over-fetches and filters; when too few results survive, or when the allowed set is so small
  that the over-fetch would be wider than ``max_fetch``, the allowed vectors are scored exactly. The index stays in this mode until the next rebuild, even if removals shrink it.

Scores are cosine similarities (vectors are normalised on the way in). Ids are the database's
positive integer row ids.
"""

from __future__ import annotations

import json
import math
import os
import threading
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from ..errors import InvalidInput, StoreError
from ..text import unit_rows

ProgressCallback = Callable[[int, "int | None"], None]

# Every exact matrix-vector product runs on one BLAS thread. A second thread saves little on the
# sizes searched exactly (under ``ann_threshold``), and OpenBLAS keeps it spinning for about 100 ms
# after each product: 40,000 rows cost 106 ms of CPU that way against 2.4 ms on one thread, a core
# taken from the send's other thread, the background worker and a database server on the same
# machine (docs/benchmarks.md). On a busy two-core machine waking it also cost more than the
# product itself (2,217 rows: 101 ms median with two threads against 0.5 ms with one).
_BLAS: Any = None
_BLAS_LOCK = threading.Lock()


def one_blas_thread() -> Any:
    """A context in which numpy's BLAS runs one thread (threadpoolctl, set up on first use)."""
    global _BLAS
    with _BLAS_LOCK:
        if _BLAS is None:
            from threadpoolctl import ThreadpoolController

            _BLAS = ThreadpoolController()
    return _BLAS.limit(limits=1, user_api="blas")


DEFAULT_ANN_THRESHOLD = 100_000
# Measured on embedding-like data (docs/embeddings.md): recall@10 0.97-0.99 at 100k and at 1M.
DEFAULT_CONNECTIVITY = 16
DEFAULT_EXPANSION_ADD = 24
# expansion_search by index size: a bigger graph needs a wider search for the same recall.
_EXPANSION_BY_SIZE = ((250_000, 192), (2_000_000, 384))
_EXPANSION_LARGEST = 512
# The widest over-fetch for a filtered ann search; a smaller allowed set is scored exactly.
DEFAULT_MAX_FETCH = 2048
_CHUNK = 4096
_META_VERSION = 1
# Temporary keys for ``scrub``, far above any database row id.
_SCRUB_KEYS = 1 << 62


def to_blob(vec: Any) -> bytes:
    """A vector as the little-endian float32 bytes stored in the database."""
    arr = np.asarray(vec, dtype="<f4")
    if arr.ndim != 1:
        raise InvalidInput("to_blob takes one vector")
    return arr.tobytes()


def from_blob(blob: bytes | bytearray | memoryview, dim: int | None = None) -> np.ndarray:
    """The float32 vector stored in a BLOB; checks the size when ``dim`` is given."""
    if len(blob) % 4:
        raise StoreError(f"a vector BLOB of {len(blob)} bytes is not float32 data")
    vec = np.frombuffer(blob, dtype="<f4").astype(np.float32)
    if dim is not None and vec.shape[0] != dim:
        raise StoreError(f"a stored vector has {vec.shape[0]} dimensions, expected {dim}")
    return vec


def _as_ids(ids: Any) -> np.ndarray:
    arr = np.atleast_1d(np.asarray(ids))
    if arr.ndim != 1 or (arr.size and arr.dtype.kind not in "iu"):
        raise InvalidInput("vector ids must be integers")
    arr = arr.astype(np.int64, copy=False)
    if arr.size and int(arr.min()) < 0:
        raise InvalidInput("vector ids must not be negative")
    return arr


def _unit_rows(vectors: Any, dim: int) -> np.ndarray:
    arr = np.asarray(vectors, dtype=np.float32)
    if arr.ndim == 1:
        arr = arr[None, :]
    if arr.ndim != 2 or arr.shape[1] != dim:
        raise InvalidInput(f"vectors must have {dim} columns, got shape {arr.shape}")
    if not np.isfinite(arr).all():
        raise InvalidInput("vectors must be finite")
    return unit_rows(arr)


def _top_k(ids: np.ndarray, scores: np.ndarray, k: int) -> list[tuple[int, float]]:
    """Best ``k`` by score, ties broken by the smaller id so results are deterministic."""
    if k <= 0 or scores.size == 0:
        return []
    if scores.size > k:
        part = np.argpartition(-scores, k - 1)[:k]
        # Keep every candidate tied with the k-th score so the tie-break is stable.
        cutoff = scores[part].min()
        part = np.flatnonzero(scores >= cutoff)
        ids, scores = ids[part], scores[part]
    order = np.lexsort((ids, -scores))[:k]
    return list(zip(ids[order].tolist(), scores[order].tolist()))


class VectorIndex:
    """Top-k cosine search over unit vectors keyed by database row id; thread-safe."""

    def __init__(
        self,
        dim: int,
        *,
        ann_threshold: int = DEFAULT_ANN_THRESHOLD,
        connectivity: int = DEFAULT_CONNECTIVITY,
        expansion_add: int = DEFAULT_EXPANSION_ADD,
        expansion_search: int | None = None,
        ann_dtype: str = "f16",
        max_fetch: int = DEFAULT_MAX_FETCH,
    ) -> None:
        if dim < 1:
            raise InvalidInput("vector dimension must be at least 1")
        self.dim = dim
        self.ann_threshold = ann_threshold
        self.connectivity = connectivity
        self.expansion_add = expansion_add
        self.expansion_search = expansion_search
        self.ann_dtype = ann_dtype
        self.max_fetch = max_fetch
        self._lock = threading.RLock()
        # Held by every change (taken before ``_lock``) and by ``save`` while it writes, so a save
        # holds back changes but not searches, which take ``_lock`` alone.
        self._changing = threading.RLock()
        # Counts every change of contents: a search made ahead (``semantic.search_ahead``) is used
        # only if the index has not changed since.
        self.generation = 0
        self._reset()

    # -- state -----------------------------------------------------------------------------

    def _reset(self) -> None:
        self.generation += 1
        self._matrix = np.zeros((0, self.dim), dtype=np.float32)
        self._keys = np.zeros(0, dtype=np.int64)
        self._row: dict[int, int] = {}
        self._n = 0
        self._ann: Any = None  # usearch.index.Index once in ann mode
        # Free slots in the graph: a removal frees one, an addition of a new key takes one back.
        self._freed = 0
        self.viewed = False  # the graph is a saved file mapped read-only (``load(view=True)``)

    def _check_writable(self) -> None:
        if self.viewed:
            raise StoreError("a vector index mapped from its saved file cannot be changed")

    @property
    def mode(self) -> str:
        return "ann" if self._ann is not None else "exact"

    def __len__(self) -> int:
        return len(self._ann) if self._ann is not None else self._n

    def __contains__(self, vector_id: object) -> bool:
        if not isinstance(vector_id, (int, np.integer)) or int(vector_id) < 0:
            return False
        with self._lock:
            if self._ann is not None:
                return bool(self._ann.contains(int(vector_id)))
            return int(vector_id) in self._row

    def ids(self) -> np.ndarray:
        """Every id in the index (unordered)."""
        with self._lock:
            if self._ann is not None:
                return np.asarray(self._ann.keys, dtype=np.int64)
            return self._keys[: self._n].copy()

    def stored(self, ids: Any) -> tuple[np.ndarray, np.ndarray]:
        """(which of ``ids`` the index holds, their vectors as float32 rows; zeros where absent):
        the copies searches compare, float16 in ann mode."""
        keys = _as_ids(ids)
        out = np.zeros((keys.size, self.dim), dtype=np.float32)
        with self._lock:
            if self._ann is not None:
                present = np.asarray(self._ann.contains(keys), dtype=bool) if keys.size else np.zeros(0, bool)
                if present.any():
                    out[present] = np.asarray(self._ann.get(keys[present], dtype=np.float32),
                                              dtype=np.float32).reshape(-1, self.dim)
                return present, out
            rows = np.fromiter((self._row.get(key, -1) for key in keys.tolist()), dtype=np.int64, count=keys.size)
            present = rows >= 0
            out[present] = self._matrix[rows[present]]
            return present, out

    @property
    def free_slots(self) -> int:
        """Slots of removed vectors the graph still holds (usearch marks a removed node free and
        reuses it for a later addition); always 0 in exact mode, whose matrix stays dense."""
        return self._freed if self._ann is not None else 0

    @property
    def memory_bytes(self) -> int:
        """Approximate bytes held for vectors and graph."""
        if self._ann is not None:
            return int(self._ann.memory_usage)
        return int(self._matrix.nbytes + self._keys.nbytes + 100 * len(self._row))

    def effective_expansion(self, size: int) -> int:
        """The search width used for an ann index of ``size`` vectors (unless set explicitly)."""
        if self.expansion_search is not None:
            return self.expansion_search
        for limit, width in _EXPANSION_BY_SIZE:
            if size <= limit:
                return width
        return _EXPANSION_LARGEST

    def _new_ann(self) -> Any:
        Index = _usearch_index()

        return Index(
            ndim=self.dim,
            metric="ip",
            dtype=self.ann_dtype,
            connectivity=self.connectivity,
            expansion_add=self.expansion_add,
        )

    def _switch_to_ann(self) -> None:
        ann = self._new_ann()
        n = self._n
        if n:
            for start in range(0, n, _CHUNK * 4):
                stop = min(n, start + _CHUNK * 4)
                ann.add(self._keys[start:stop], self._matrix[start:stop])
        self._matrix = np.zeros((0, self.dim), dtype=np.float32)
        self._keys = np.zeros(0, dtype=np.int64)
        self._row = {}
        self._n = 0
        self._ann = ann

    # -- changes ---------------------------------------------------------------------------

    def add(self, ids: Any, vectors: Any) -> None:
        """Add or replace vectors; a vector whose id is already present replaces the old one."""
        keys = _as_ids(ids)
        rows = _unit_rows(vectors, self.dim)
        if keys.shape[0] != rows.shape[0]:
            raise InvalidInput(f"{keys.shape[0]} ids for {rows.shape[0]} vectors")
        if keys.size == 0:
            return
        # Within one call the last vector for an id wins.
        _, last = np.unique(keys[::-1], return_index=True)
        if last.size != keys.size:
            keep = np.sort(keys.size - 1 - last)
            keys, rows = keys[keep], rows[keep]
        with self._changing, self._lock:
            self._check_writable()
            self.remove(keys)
            self.generation += 1
            if self._ann is None and self._n + keys.size > self.ann_threshold:
                self._switch_to_ann()
            if self._ann is not None:
                self._ann.add(keys, rows)
                self._freed = max(0, self._freed - int(keys.size))
                return
            need = self._n + keys.size
            if need > self._matrix.shape[0]:
                capacity = max(need, int(self._matrix.shape[0] * 1.5), 1024)
                capacity = min(capacity, max(need, self.ann_threshold))
                matrix = np.empty((capacity, self.dim), dtype=np.float32)
                matrix[: self._n] = self._matrix[: self._n]
                key_arr = np.empty(capacity, dtype=np.int64)
                key_arr[: self._n] = self._keys[: self._n]
                self._matrix, self._keys = matrix, key_arr
            self._matrix[self._n : need] = rows
            self._keys[self._n : need] = keys
            for offset, key in enumerate(keys.tolist()):
                self._row[key] = self._n + offset
            self._n = need

    def remove(self, ids: Any) -> int:
        """Remove vectors by id; unknown ids are ignored. Returns how many were removed."""
        keys = _as_ids(ids)
        if keys.size == 0:
            return 0
        with self._changing, self._lock:
            self._check_writable()
            self.generation += 1
            if self._ann is not None:
                present = np.unique(keys[np.asarray(self._ann.contains(keys), dtype=bool)])
                if present.size:
                    self._ann.remove(present)
                    self._freed += int(present.size)
                return int(present.size)
            removed = 0
            for key in keys.tolist():
                row = self._row.pop(key, None)
                if row is None:
                    continue
                last = self._n - 1
                if row != last:
                    # Move the last row into the hole so the matrix stays dense.
                    moved = int(self._keys[last])
                    self._matrix[row] = self._matrix[last]
                    self._keys[row] = moved
                    self._row[moved] = row
                self._n = last
                removed += 1
            return removed

    def clear(self) -> None:
        with self._changing, self._lock:
            self._reset()

    def scrub(self) -> int:
        """Overwrite the vectors left in the graph's free slots (removed vectors keep their bytes
        until the slot is reused), so a file saved next holds none of them: each free slot takes
        a zero vector under a temporary key, removed again at once. Returns how many slots."""
        with self._changing, self._lock:
            free = self.free_slots
            if not free:
                return 0
            self._check_writable()
            keys = np.arange(_SCRUB_KEYS, _SCRUB_KEYS + free, dtype=np.uint64)
            self._ann.add(keys, np.zeros((free, self.dim), dtype=np.float32))
            self._ann.remove(keys)  # the slots are free again, holding zeros
            self.generation += 1
            return free

    def rebuild(
        self,
        rows: Iterable[tuple[int, Any]],
        *,
        total: int | None = None,
        progress: ProgressCallback | None = None,
    ) -> None:
        """Replace the contents with ``rows`` of (id, BLOB or vector), reporting progress.

        ``progress(done, total)`` is called after every chunk; ``total`` is ``len(rows)`` when
        known. The new index is built aside and swapped in at the end, so searches keep working
        on the old contents meanwhile.
        """
        if total is None and hasattr(rows, "__len__"):
            total = len(rows)  # type: ignore[arg-type]
        fresh = VectorIndex(
            self.dim,
            ann_threshold=self.ann_threshold,
            connectivity=self.connectivity,
            expansion_add=self.expansion_add,
            expansion_search=self.expansion_search,
            ann_dtype=self.ann_dtype,
            max_fetch=self.max_fetch,
        )
        if total is not None and total > self.ann_threshold:
            fresh._ann = fresh._new_ann()
        done = 0
        chunk_ids: list[int] = []
        chunk_vecs: list[np.ndarray] = []

        def flush() -> None:
            nonlocal done
            if not chunk_ids:
                return
            fresh.add(np.asarray(chunk_ids, dtype=np.int64), np.vstack(chunk_vecs))
            done += len(chunk_ids)
            chunk_ids.clear()
            chunk_vecs.clear()
            if progress is not None:
                progress(done, total)

        for vector_id, value in rows:
            if isinstance(value, (bytes, bytearray, memoryview)):
                vec = from_blob(value, self.dim)
            else:
                vec = np.asarray(value, dtype=np.float32).reshape(-1)
            chunk_ids.append(int(vector_id))
            chunk_vecs.append(vec)
            if len(chunk_ids) >= _CHUNK:
                flush()
        flush()
        if progress is not None and done == 0:
            progress(0, total)
        with self._changing, self._lock:
            self.generation += 1
            self._matrix, self._keys, self._row = fresh._matrix, fresh._keys, fresh._row
            self._n, self._ann, self._freed = fresh._n, fresh._ann, fresh._freed

    @classmethod
    def from_rows(cls, dim: int, rows: Iterable[tuple[int, Any]], **options: Any) -> "VectorIndex":
        progress = options.pop("progress", None)
        total = options.pop("total", None)
        index = cls(dim, **options)
        index.rebuild(rows, total=total, progress=progress)
        return index

    # -- search ----------------------------------------------------------------------------

    def search(
        self, query: Any, k: int = 10, allowed_ids: Iterable[int] | np.ndarray | None = None
    ) -> list[tuple[int, float]]:
        """The ``k`` nearest (id, cosine) pairs, best first, restricted to ``allowed_ids``."""
        q = _unit_rows(query, self.dim)
        if q.shape[0] != 1:
            raise InvalidInput("search takes one query vector")
        vec = q[0]
        if k < 1:
            return []
        allowed = None
        if allowed_ids is not None:
            if not isinstance(allowed_ids, np.ndarray):
                allowed_ids = np.fromiter(allowed_ids, dtype=np.int64)
            allowed = np.unique(_as_ids(allowed_ids))
            if allowed.size == 0:
                return []
        with self._lock:
            if self._ann is None:
                with one_blas_thread():
                    return self._search_exact(vec, k, allowed)
            return self._search_ann(vec, k, allowed)  # a graph search asks no BLAS; its exact fallback is limited

    def search_span(self, query: Any, k: int, lo: int, hi: int, fetch: int,
                    counts: dict[str, int] | None = None) -> list[tuple[int, float]]:
        """The ``k`` nearest (id, cosine) pairs among ids from ``lo`` to ``hi``: a filtered search
        whose work is bounded by ``fetch``, not by how many ids the span holds.

        A graph is searched for its ``fetch`` nearest and those inside the span are kept, so the
        nearest of the span are found as long as enough of them rank among those (the caller sizes
        ``fetch`` by the span's share of the index). An exact index scores only its rows inside the
        span (at most ``ann_threshold`` of them). ``counts["compared"]`` gets the vectors compared:
        the graph's own count of distances, or the rows scored."""
        vec = _unit_rows(query, self.dim)[0]
        if k < 1 or hi < lo:
            return []
        with self._lock:
            if self._ann is None:
                keys = self._keys[: self._n]
                rows = np.flatnonzero((keys >= lo) & (keys <= hi))
                if counts is not None:
                    counts["compared"] = counts.get("compared", 0) + int(rows.size)
                with one_blas_thread():
                    return _top_k(keys[rows], self._matrix[rows] @ vec, k) if rows.size else []
            ann, total = self._tuned_ann()
            if total == 0:
                return []
            matches = ann.search(vec, max(k, min(fetch, total)))
            if counts is not None:
                counts["compared"] = counts.get("compared", 0) + int(matches.computed_distances)
            found = matches.keys.astype(np.int64)
            keep = (found >= lo) & (found <= hi)
            return [(int(key), float(1.0 - dist))
                    for key, dist in zip(found[keep][:k], matches.distances[keep][:k])]

    def _search_exact(self, vec: np.ndarray, k: int, allowed: np.ndarray | None) -> list[tuple[int, float]]:
        n = self._n
        if n == 0:
            return []
        keys = self._keys[:n]
        if allowed is None:
            return _top_k(keys, self._matrix[:n] @ vec, k)
        if allowed.size * 4 < n:
            # A small allowed set: score only its rows.
            rows = np.fromiter((self._row.get(key, -1) for key in allowed.tolist()), dtype=np.int64,
                               count=allowed.size)
            rows = rows[rows >= 0]
            return _top_k(keys[rows], self._matrix[rows] @ vec, k)
        scores = self._matrix[:n] @ vec
        mask = np.isin(keys, allowed, assume_unique=True)
        return _top_k(keys[mask], scores[mask], k)

    def _exact_over(self, keys: np.ndarray, vec: np.ndarray, k: int) -> list[tuple[int, float]]:
        """Exact scores of ``keys`` (all present) from the copies the ann index holds."""
        if keys.size == 0:
            return []
        best_ids: list[int] = []
        best_scores: list[float] = []
        for start in range(0, keys.size, _CHUNK * 4):
            part = keys[start : start + _CHUNK * 4]
            vectors = np.asarray(self._ann.get(part, dtype=np.float32), dtype=np.float32)
            top = _top_k(part, vectors.reshape(part.size, self.dim) @ vec, k)
            best_ids.extend(i for i, _ in top)
            best_scores.extend(s for _, s in top)
        return _top_k(np.asarray(best_ids, dtype=np.int64), np.asarray(best_scores), k)

    def _tuned_ann(self) -> tuple[Any, int]:
        """The graph and its size, its search width set for that size."""
        ann = self._ann
        total = len(ann)
        width = self.effective_expansion(total)
        if total and ann.expansion_search != width:
            ann.expansion_search = width
        return ann, total

    def _search_ann(self, vec: np.ndarray, k: int, allowed: np.ndarray | None) -> list[tuple[int, float]]:
        ann, total = self._tuned_ann()
        if total == 0:
            return []
        if allowed is None:
            matches = ann.search(vec, min(k, total))
            return [(int(key), float(1.0 - dist)) for key, dist in zip(matches.keys, matches.distances)]
        # Expect a share allowed/total of the neighbours to be allowed; fetch twice what that needs.
        fetch = int(math.ceil(2 * k * total / allowed.size)) + k
        if fetch <= min(self.max_fetch, total):
            matches = ann.search(vec, fetch)
            keep = np.isin(matches.keys.astype(np.int64), allowed)
            if int(keep.sum()) >= k:
                keys = matches.keys[keep][:k]
                dists = matches.distances[keep][:k]
                return [(int(key), float(1.0 - dist)) for key, dist in zip(keys, dists)]
        # A small allowed set, or one whose members the graph search did not reach: score exactly.
        present = allowed[np.asarray(ann.contains(allowed), dtype=bool)]
        with one_blas_thread():
            return self._exact_over(present, vec, k)

    # -- files -----------------------------------------------------------------------------

    def _meta(self, fingerprint: str) -> dict[str, Any]:
        return {
            "version": _META_VERSION,
            "dim": self.dim,
            "dtype": self.ann_dtype,
            "connectivity": self.connectivity,
            "count": len(self),
            "fingerprint": fingerprint,
        }

    def save(self, path: str | os.PathLike[str], fingerprint: str = "") -> bool:
        """Write the ann index and its sidecar ``<path>.json``; exact mode writes nothing.

        ``fingerprint`` is the caller's summary of the vector table (for example row count,
        largest id and model name); ``load`` refuses a file saved under another fingerprint.
        Returns whether a file was written. The graph goes to a new file beside ``path`` and the
        sidecar, replaced last, names it: a save stopped halfway (the server shutting down while
        it writes) leaves the previous pair whole, never a graph and a sidecar that disagree.
        """
        path = Path(path)
        meta_path = path.with_name(path.name + ".json")
        with self._changing:
            with self._lock:
                if self._ann is None:
                    for stale in (meta_path, *_graph_files(path)):
                        stale.unlink(missing_ok=True)
                    return False
                self.scrub()  # a removed (perhaps forgotten) vector is never written to the file
            graph = path.with_name(f"{path.name}.{os.urandom(6).hex()}")
            # Changes wait; searches go on (writing the graph only reads it, as a search does):
            # a million vectors take seconds to write.
            self._ann.save(str(graph))
            meta = {**self._meta(fingerprint), "graph": graph.name}
        tmp_meta = meta_path.with_name(meta_path.name + ".tmp")
        tmp_meta.write_text(json.dumps(meta), encoding="utf-8")
        os.replace(tmp_meta, meta_path)
        for old in _graph_files(path):
            if old != graph:
                old.unlink(missing_ok=True)
        return True

    def load(self, path: str | os.PathLike[str], fingerprint: str = "", *, view: bool = False) -> bool:
        """Load a file written by ``save``; False (and no change) if it is missing or stale. With
        ``view`` the file is mapped, not read: a search pays only for the pages it touches (a
        short-lived process searching once), and the index cannot be changed."""
        path = Path(path)
        meta_path = path.with_name(path.name + ".json")
        try:
            meta = json.loads(meta_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return False
        expected = self._meta(fingerprint)
        for field in ("version", "dim", "dtype", "connectivity", "fingerprint"):
            if meta.get(field) != expected[field]:
                return False
        name = str(meta.get("graph", path.name))  # files saved before this had the one name
        if name != path.name and not (name.startswith(path.name + ".") and name.count("/") == 0):
            return False
        graph = path.with_name(name)
        Index = _usearch_index()

        try:
            ann = Index.restore(str(graph), view=view)
        except (OSError, RuntimeError, ValueError):
            return False
        if ann is None or ann.ndim != self.dim or len(ann) != meta.get("count"):
            return False
        with self._changing, self._lock:
            self._reset()
            self._ann = ann
            self._freed = int((meta_of(graph) or {}).get("count_deleted", 0))
            self.viewed = view
        return True

    def load_or_rebuild(
        self,
        path: str | os.PathLike[str],
        rows: Callable[[], Iterable[tuple[int, Any]]],
        *,
        fingerprint: str = "",
        total: int | None = None,
        progress: ProgressCallback | None = None,
    ) -> bool:
        """Load the saved index, or rebuild from ``rows()`` and save it. True if it was loaded.

        ``rows`` is a callable so the table is only read when the file cannot be used.
        """
        if self.load(path, fingerprint):
            return True
        self.rebuild(rows(), total=total, progress=progress)
        self.save(path, fingerprint)
        return False


def _graph_files(path: Path) -> list[Path]:
    """Every graph saved under ``path``: the one name files had before, and ``<path>.<token>``."""
    if not path.parent.is_dir():
        return []
    found = [f for f in path.parent.iterdir() if f.name.startswith(path.name + ".") and not f.name.startswith(
        path.name + ".json")]
    return [path, *found] if path.exists() else found


def meta_of(graph: Path) -> dict[str, Any] | None:
    """usearch's own header of a saved graph (counts of present and deleted vectors...)."""
    try:
        return dict(_usearch_index().metadata(str(graph)) or {})
    except (OSError, RuntimeError, ValueError):
        return None


def _usearch_index() -> Any:
    """usearch's Index class. onnxruntime is imported first on purpose: loading onnxruntime after
    usearch (which brings its numkong kernels) crashes the process, in either module's later use."""
    try:
        import onnxruntime  # noqa: F401
    except ImportError:
        pass  # no local embedder in this environment; nothing to order
    from usearch.index import Index

    return Index


def exact_top_k(
    matrix: np.ndarray, ids: Sequence[int] | np.ndarray, query: np.ndarray, k: int
) -> list[tuple[int, float]]:
    """Top ``k`` of ``matrix @ query``, ties to the smaller id, every row compared: the dated list
    over a range's stored vectors, and the reference for tests and benchmarks."""
    with one_blas_thread():
        return _top_k(np.asarray(ids, dtype=np.int64), np.asarray(matrix, dtype=np.float32) @ query, k)
