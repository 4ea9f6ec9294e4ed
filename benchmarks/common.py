"""Shared helpers for the benchmark scripts: timing statistics, a provider that marks the moment the
send path hands the request over, a deterministic synthetic-text maker with a Zipf vocabulary, a
hashed stand-in embedder for bulk vectors, and small probes of the machine and of optional parts."""

from __future__ import annotations

import importlib
import os
import re
import statistics
import threading
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from hearth.providers.base import StreamEvent, Usage


def summary(samples_ms: list[float]) -> dict[str, float]:
    ordered = sorted(samples_ms)
    p99 = ordered[min(len(ordered) - 1, int(round(0.99 * (len(ordered) - 1))))]
    return {"median_ms": round(statistics.median(ordered), 3), "p99_ms": round(p99, 3), "n": len(ordered)}


@dataclass
class StopwatchProvider:
    """Answers instantly and records when each request arrived (perf_counter seconds), per thread
    (a background worker may call it too). ``replies`` gives reply text of a realistic length (a
    reply is embedded and indexed like any turn); without it the answer is "ok"."""

    name: str = "stopwatch"
    model: str = "stopwatch"
    arrivals: list[float] = field(default_factory=list)
    replies: Any = None  # a callable returning the next reply text
    meter: Any = None  # a callable read as each request arrives (``reading()``), e.g. CPU clocks
    _by_thread: dict[int, float] = field(default_factory=dict)
    _readings: dict[int, Any] = field(default_factory=dict)

    def stream(self, request):
        now = time.perf_counter()
        if self.meter is not None:
            self._readings[threading.get_ident()] = self.meter()
        self._by_thread[threading.get_ident()] = now
        if threading.current_thread() is threading.main_thread():
            self.arrivals.append(now)
        yield StreamEvent("text", text=self.replies() if self.replies else "ok")
        yield StreamEvent("usage", usage=Usage(1, 1))

    def arrival(self) -> float:
        """When the calling thread's last request arrived."""
        return self._by_thread[threading.get_ident()]

    def reading(self) -> Any:
        """What ``meter`` read when the calling thread's last request arrived."""
        return self._readings[threading.get_ident()]


# -- the machine ---------------------------------------------------------------------------------------
def machine() -> str:
    """``2 cores, <CPU model>`` as /proc/cpuinfo names it (empty model where it cannot be read)."""
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{os.cpu_count()} cores, {model or 'unknown CPU'}"


def rss_mib(pid: int | str = "self") -> dict[str, float]:
    """Resident memory now (VmRSS) and at its peak (VmHWM) of a process, in MiB."""
    out: dict[str, float] = {}
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return out  # the process has gone
    for line in text.splitlines():
        key = line.split(":", 1)[0]
        if key in ("VmRSS", "VmHWM"):
            out[key] = round(int(line.split()[1]) / 1024, 1)
    return out


# -- the deployment in the operating system's file cache (page-cache state is an input of a run) -
def database_files(home: str | Path) -> list[Path]:
    """The SQLite files of a deployment's home (the database and its write-ahead log)."""
    return [p for p in sorted(Path(home).glob("hearth.db*")) if p.is_file()]


def deployment_files(home: str | Path) -> list[Path]:
    """Every file of a deployment's home: the database and its log, the saved vector indexes, the
    caches; what a cold start reads from disk."""
    return [p for p in sorted(Path(home).rglob("*")) if p.is_file()]


def evict_file_cache(paths: list[Path]) -> tuple[float, int]:
    """Drop ``paths`` from the operating system's file cache, file by file, with
    ``posix_fadvise(POSIX_FADV_DONTNEED)`` after writing back their dirty pages (no privileges
    needed, other files untouched): the next read of a file comes from disk. Returns the seconds
    taken and the bytes advised. Where the call is missing (not Linux) nothing is evicted and the
    resident share the report prints says so."""
    started = time.perf_counter()
    advised = 0
    advise = getattr(os, "posix_fadvise", None)
    for path in paths:
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            continue  # a file removed meanwhile (the log after a checkpoint)
        try:
            os.fsync(fd)  # dirty pages are not dropped: write them back first
            if advise is not None:
                advise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                advised += os.fstat(fd).st_size
        finally:
            os.close(fd)
    return time.perf_counter() - started, advised


def warm_file_cache(paths: list[Path], hold: bool = False) -> tuple[float, bool]:
    """Read ``paths`` into the operating system's file cache. With ``hold`` (an explicit choice of
    the run, reported as such) also lock them there until the process exits, where it may (Linux,
    as root or with CAP_IPC_LOCK): a read-only shared mapping of each file held with mlock(2).
    Locked pages cannot be evicted, so a run that holds them measures a deployment whose files
    never leave memory, which no server guarantees: off by default. Returns the seconds taken and
    whether the files are held."""
    import ctypes
    import mmap

    started = time.perf_counter()
    held = hold
    if hold:
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.mmap.restype = ctypes.c_void_p
            libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                                  ctypes.c_long]
            libc.mlock.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        except (OSError, AttributeError):
            held = False
    for path in paths:
        size = path.stat().st_size
        if held and size:
            fd = os.open(path, os.O_RDONLY)
            try:  # the mapping outlives the descriptor
                address = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
            finally:
                os.close(fd)
            held = address not in (None, ctypes.c_void_p(-1).value) and libc.mlock(address, size) == 0
        if not held:
            with open(path, "rb", buffering=0) as f:
                while f.read(8 << 20):
                    pass
    return time.perf_counter() - started, held


def cached_share(paths: list[Path]) -> float | None:
    """The share of ``paths`` held in the file cache now (util-linux ``fincore``), or None where it
    cannot be read. Some virtual machines drop clean cached pages within minutes even with memory
    free, so a run that began warm can end partly cold: this says how far."""
    import shutil
    import subprocess

    if not paths or shutil.which("fincore") is None:
        return None
    try:
        out = subprocess.run(["fincore", "--bytes", "--noheadings", "--output", "RES,SIZE", *map(str, paths)],
                             capture_output=True, text=True, timeout=30, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    resident = size = 0
    for line in out.split("\n"):
        parts = line.split()
        if len(parts) == 2:
            resident, size = resident + int(parts[0]), size + int(parts[1])
    return round(resident / size, 3) if size else None


def page_cache(home: str | Path, state: str, *, database_url: str = "") -> dict[str, Any]:
    """Set the deployment's files' page-cache state before a run and say what it is: ``cold``
    (evicted, ``evict_file_cache``), ``warm`` (read in, not locked), ``locked`` (read in and held
    with mlock, the old default), ``dropped`` (the whole machine's cache emptied, as root) or
    ``as found`` (left alone; PostgreSQL's files are the server's, so only the home is touched).
    The returned dict is the report's ``page_cache`` entry; ``at_end`` is filled by ``page_cache_end``."""
    files = deployment_files(home)
    out: dict[str, Any] = {"state": state, "files": len(files),
                           "mib": round(sum(p.stat().st_size for p in files) / 2**20, 1)}
    if database_url:
        out["note"] = "the database is a PostgreSQL server's: its own cache is not touched"
    if state == "cold":
        seconds, advised = evict_file_cache(files)
        out["evicted_mib"] = round(advised / 2**20, 1)
        out["seconds"] = round(seconds, 2)
    elif state in ("warm", "locked"):
        seconds, held = warm_file_cache(files, hold=state == "locked")
        out["seconds"] = round(seconds, 1)
        if state == "locked" and not held:
            out["state"] = "warm"
            out["note"] = "the files could not be locked (mlock needs root or CAP_IPC_LOCK): read in only"
    elif state == "dropped":
        try:
            os.sync()
            Path("/proc/sys/vm/drop_caches").write_text("3\n")
        except OSError as error:
            out["state"] = "as found"
            out["note"] = f"the file cache could not be dropped ({error.strerror})"
    out["resident_at_start"] = cached_share(files)
    return out


def page_cache_end(entry: dict[str, Any], home: str | Path) -> dict[str, Any]:
    entry["resident_at_end"] = cached_share(deployment_files(home))
    return entry


def page_cache_line(entry: dict[str, Any]) -> str:
    """One line for a report: the state, and how much of the files was resident at each end."""
    def share(value: Any) -> str:
        return "unknown" if value is None else f"{value:.0%}"

    text = {"cold": "cold (the deployment's files evicted from the page cache before the run)",
            "warm": "warm (the files read into the page cache first, not locked)",
            "locked": "warm and locked (the files read in and held with mlock for the run)",
            "dropped": "cold (the whole machine's page cache dropped first)",
            "as found": "as found (not touched)"}.get(entry.get("state", ""), str(entry.get("state")))
    line = (f"page cache: {text}; {entry.get('files', 0)} files, {entry.get('mib', 0)} MiB; resident when the"
            f" sends began {share(entry.get('resident_at_start'))}, when they ended {share(entry.get('resident_at_end'))}")
    return line + (f" ({entry['note']})" if entry.get("note") else "")


# -- what a run measures: distinct texts, and background jobs beside the sends ---------------------
def refuse_repeats(texts: list[str], allow: bool = False) -> int:
    """Every measured text distinct (compared as the query cache compares them: spaces folded), or
    a clear error before anything is sent: a repeated text finds its query vector, terms and
    keyword lists cached and measures the cache rather than the work. With ``allow`` (a run that
    asks to measure repeats) the count of repeated sends is returned for the report instead."""
    from hearth.errors import InvalidInput

    seen: dict[str, int] = {}
    for text in texts:
        key = " ".join(text.split())
        seen[key] = seen.get(key, 0) + 1
    repeats = sum(n - 1 for n in seen.values())
    if repeats and not allow:
        worst = max(seen.items(), key=lambda item: item[1])
        raise InvalidInput(f"{repeats} of {len(texts)} measured texts repeat an earlier one (the most repeated,"
                           f" {worst[1]} times: {worst[0][:60]!r}); every measured send must be distinct, or the"
                           " run must ask for repeats (--allow-repeats or --repeat-pool N) and report its cache hits")
    return repeats


class Overlap:
    """Background jobs arriving at a stated rate while the sends run, as they do in a server whose
    other threads (another device, an import, a channel) keep the worker busy. A thread of its
    own writes, ``rate`` times a second, one turn into another conversation of the same persona and
    queues one real job for it, the kinds a reply queues in turn (the embedding of new turns every
    other time; household detection, the rolling summary and live context between), without a
    dedupe key, so every tick is one job. The worker runs them as ``hearth serve`` does. ``report``
    counts the jobs queued and the jobs the worker finished while the thread ran, by kind."""

    KINDS = ("recall.embed", "status.detect", "recall.embed", "summary.refresh", "recall.embed",
             "live_context.refresh")

    def __init__(self, hearth: Any, user_id: int, persona_id: int, rate: float, seed: int):
        from hearth.store import utcnow

        self.hearth = hearth
        self.user_id = user_id
        self.rate = rate
        self.tm = TextMaker(seed)
        self.scope = hearth.scope(user_id)
        self.conversation_id = self.scope.conversations.create(persona_id, "Another device").id
        self.queued: dict[str, int] = {}
        self.ticks = 0
        self.late = 0  # ticks that fell behind the stated rate (the writer waited for the lock)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.started_at = utcnow()
        self.first_job = 0
        self.seconds = 0.0

    def start(self) -> "Overlap":
        from hearth.store import utcnow

        conn = self.hearth.store.connection()
        self.first_job = int(conn.execute("SELECT coalesce(max(id), 0) FROM jobs").fetchone()[0]) + 1
        self.started_at = utcnow()
        self._began = time.monotonic()
        self._thread = threading.Thread(target=self._run, name="bench-overlap", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        interval = 1.0 / self.rate
        due = time.monotonic()
        while not self._stop.wait(max(0.0, due - time.monotonic())):
            self.tick()
            due += interval
            if time.monotonic() > due + interval:
                self.late += 1
                due = time.monotonic()  # no burst to catch up: the rate stays the stated one at most

    def tick(self) -> None:
        from hearth.ops.jobs import enqueue

        role = "user" if self.ticks % 2 == 0 else "assistant"
        kind = self.KINDS[self.ticks % len(self.KINDS)]
        payload: dict[str, Any] = ({"limit": 500} if kind == "recall.embed"
                                   else {"conversation_id": self.conversation_id})
        text = self.tm.messages([role])[0]
        with self.hearth.store.write() as conn:
            self.scope.conversations.add_message(self.conversation_id, role, text)
            enqueue(conn, self.user_id, kind, payload)
        self.queued[kind] = self.queued.get(kind, 0) + 1
        self.ticks += 1

    def stop(self) -> dict[str, Any]:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(30)
        self.seconds = time.monotonic() - getattr(self, "_began", time.monotonic())
        return self.report()

    def report(self) -> dict[str, Any]:
        conn = self.hearth.store.connection()
        done: dict[str, int] = {}
        pending = 0
        for kind, status, count in conn.execute(
                "SELECT kind, status, count(*) FROM jobs WHERE id >= ? GROUP BY kind, status", (self.first_job,)):
            if status == "done":
                done[kind] = done.get(kind, 0) + int(count)
            elif status in ("pending", "running"):
                pending += int(count)
        return {"jobs_per_s": self.rate, "seconds": round(self.seconds, 1), "ticks": self.ticks, "late_ticks": self.late,
                "queued": dict(sorted(self.queued.items())), "done_by_kind": dict(sorted(done.items())),
                "done": sum(done.values()), "pending_at_end": pending}


def budget_record(conn: Any, conversation_id: int, after_id: int) -> tuple[int, int, dict[str, int]]:
    """What the recall budget did on the sends since search-log row ``after_id`` of a conversation:
    (the newest row's id, archive recall searches, steps dropped by name). Archive recall writes
    the optional steps its latency budget left out into its search-log row (``budget_dropped``),
    numbers and fixed names only."""
    import json

    newest, searched, dropped = after_id, 0, {}
    for row_id, filters in conn.execute(
            "SELECT id, filters FROM search_log WHERE conversation_id = ? AND id > ? AND origin = 'archive_recall'"
            " ORDER BY id", (conversation_id, after_id)):
        newest = max(newest, int(row_id))
        searched += 1
        for step in json.loads(filters or "{}").get("budget_dropped", []):
            dropped[step] = dropped.get(step, 0) + 1
    return newest, searched, dropped


# -- optional parts: the embedder and the vector index arrive in their own time ----------------------
def vectors_missing() -> str:
    """Why stored vectors cannot be written or searched yet ("" once they can)."""
    try:
        for name in ("hearth.retrieval.semantic", "hearth.retrieval.vectors"):
            importlib.import_module(name)
    except ImportError as exc:
        return f"semantic retrieval not available yet: {exc}"
    return ""


def load_embedder(hearth: Any) -> tuple[Any | None, str]:
    """The deployment's embedder, or (None, reason) while the semantic layer is not available."""
    missing = vectors_missing()
    if missing:
        return None, missing
    from hearth.retrieval import semantic
    factory = getattr(semantic, "shared_embedder", None)
    if factory is None:
        try:
            from hearth.retrieval import embedder as embedder_module
        except ImportError:
            return None, "no shared_embedder yet"
        factory = getattr(embedder_module, "shared_embedder", None)
        if factory is None:
            return None, "no shared_embedder yet"
    try:
        return factory(hearth), ""
    except (ImportError, OSError, RuntimeError, ValueError) as exc:
        return None, f"embedder could not start ({type(exc).__name__})"


def embedder_dim(embedder: Any) -> int:
    dim = getattr(embedder, "dim", None) or getattr(embedder, "dimension", None)
    if dim:
        return int(dim)
    return int(np.asarray(embedder.embed(["dimension probe"])).shape[1])


# -- synthetic text -------------------------------------------------------------------------------------
COMMON = (
    "the i you and to a it of that is in my was me we but so just it's not have for be on this with "
    "what do know like think really about if all been can at out they had would get one are he she "
    "when there how your time because feel today yeah good more going then now want little day back "
    "still too much some also said something things remember again work home night morning tired "
    "happy okay love talk walk sleep tea coffee rain garden kitchen music book friend week later "
    "maybe tomorrow yesterday thought felt made went came told asked"
).split()
SYLLABLES = ("ka lo mi ren tos va quin del bar sy op ith ul zen mar eli nor ash bel tor wyn dra fen "
             "hal cor mis pel tan bro vik sel om ard lin gar rus").split()


class TextMaker:
    """Deterministic chat-like text: everyday words at the top of a Zipf vocabulary, invented words
    (names, places, private vocabulary) in the long tail, lengths drawn per role.

    Word indices are drawn with numpy (fast enough for tens of millions of words), so a message is
    also available as its vocabulary indices for the hashed vectors.
    """

    def __init__(self, seed: int, vocabulary: int = 60_000, exponent: float = 1.07):
        self.rng = np.random.default_rng(seed)
        words = list(dict.fromkeys(COMMON))
        seen = set(words)
        gen = np.random.default_rng(seed + 1)
        while len(words) < vocabulary:
            parts = gen.integers(0, len(SYLLABLES), size=int(gen.integers(2, 5)))
            word = "".join(SYLLABLES[p] for p in parts)
            if word not in seen:
                seen.add(word)
                words.append(word)
        self.words = words
        self.vocab = np.array(words, dtype=object)
        ranks = np.arange(1, len(words) + 1, dtype=np.float64)
        weights = ranks ** -exponent
        self.cdf = np.cumsum(weights / weights.sum())
        # A few invented words are names: capitalised, so entity variants have something to find.
        self.names = [w.title() for w in words[len(COMMON) + 40: len(COMMON) + 240]]

    def lengths(self, roles: list[str]) -> np.ndarray:
        """Words per message: short user turns, longer replies (log-normal, capped)."""
        user = self.rng.lognormal(2.6, 0.8, size=len(roles))
        reply = self.rng.lognormal(4.0, 0.6, size=len(roles))
        out = np.where(np.array([r == "user" for r in roles]), user, reply)
        return np.clip(out.astype(np.int64), 1, 600)

    def indices(self, count: int) -> np.ndarray:
        return np.minimum(np.searchsorted(self.cdf, self.rng.random(count)), len(self.words) - 1)

    def messages(self, roles: list[str]) -> list[str]:
        """One text per role, as chat turns: capitalised, with a name now and then, ending in a stop."""
        lengths = self.lengths(roles)
        flat = self.vocab[self.indices(int(lengths.sum()))].tolist()
        name_draws = self.rng.random(len(roles))
        name_picks = self.rng.integers(0, len(self.names), size=len(roles))
        out = []
        pos = 0
        for i, n in enumerate(lengths.tolist()):
            words = flat[pos:pos + n]
            pos += n
            if name_draws[i] < 0.15 and n > 3:
                words[n // 2] = self.names[name_picks[i]]
            text = " ".join(words)
            out.append(text[0].upper() + text[1:] + ".")
        return out

    def phrase(self, low: int, high: int) -> str:
        n = int(self.rng.integers(low, high + 1))
        return " ".join(self.vocab[self.indices(n)].tolist())

    def rare_word(self) -> str:
        """A long-tail word (rank a few thousand on), the kind keyword recall keys on."""
        return self.words[int(self.rng.integers(2_000, len(self.words)))]


# -- a hashed stand-in embedder --------------------------------------------------------------------------
_TOKEN = re.compile(r"[^\W_]+", re.UNICODE)


class HashedEmbedder:
    """Unit vectors from hashed word vectors: a fixed random vector per word, summed and normalised.

    Used to give a large synthetic deployment one vector per message in minutes (the real model
    takes hours for a million texts on two cores). It carries the real embedder's model id and
    dimension, so the product's index loads and searches these vectors exactly as it would real
    ones: latency and memory are those of the real index; only the similarity values differ.
    """

    def __init__(self, model_id: str, dim: int):
        self.model_id = model_id
        self.name = model_id
        self.dim = dim
        self._rows: dict[str, int] = {}
        self._table = np.zeros((0, dim), dtype=np.float32)
        self._pending: list[np.ndarray] = []

    def _row(self, word: str) -> int:
        row = self._rows.get(word)
        if row is None:
            row = len(self._rows)
            self._rows[word] = row
            seed = zlib.crc32(word.encode("utf-8"))
            self._pending.append(np.random.default_rng(seed).standard_normal(self.dim).astype(np.float32))
        return row

    def embed(self, texts: list[str]) -> np.ndarray:
        rows: list[int] = []
        starts: list[int] = []
        for text in texts:
            starts.append(len(rows))
            words = _TOKEN.findall(text.casefold())[:64] or ["empty"]
            rows.extend(self._row(w) for w in words)
        if self._pending:
            self._table = np.vstack([self._table, *self._pending])
            self._pending.clear()
        sums = np.add.reduceat(self._table[np.asarray(rows)], np.asarray(starts), axis=0)
        norms = np.linalg.norm(sums, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        return sums / norms
