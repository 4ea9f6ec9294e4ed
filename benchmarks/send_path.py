"""Send-path assembly time: everything before the provider call.

Two modes:

    python benchmarks/send_path.py [--sizes 1000 10000 100000] [--sends 50]
    python benchmarks/send_path.py --deployment DIR [--sends 200] [--profile] [--database-url URL]

``--sizes``: for each size, builds a thread of that many saved messages through the library (one
bulk transaction), then times ``send()`` from the call until the provider receives the request:
saving the user message, the stored prompt, every dynamic layer, history trimming and assembly.

``--deployment``: on a deployment made by ``generate.py``, sends varied messages (everyday turns,
recall cues, date questions, names that trigger fragments, short affectionate turns) to its active
thread with every layer on, keyword and semantic recall included, and times each the same way. In
the same run it measures the floor directly, for each message just before its send: one FTS5 BM25
top-10 query, one vector top-10 query and one query embedding, and prints assembly / floor per
kind of message. ``--profile`` adds a cProfile of the sends. ``--database-url`` runs on a PostgreSQL
copy of the deployment (``hearth migrate-store --to URL``): the floor is then the same three
primitives on that engine (the GIN match ranked by BM25, the pgvector HNSW top-10, the embedding).

Prints the median and p99 in milliseconds, and per kind the CPU of the send's threads beside the
floor's (with the database server's, when it runs on this machine).

A run cannot flatter (S16): every measured text is distinct, drawn from the deployment's own
vocabulary and dates with a seeded generator, and a repeated one is refused before anything is
sent unless the run asks for repeats (``--repeat-pool N``, ``--allow-repeats``), when the report
counts the repeats and their query-cache hits; the page-cache state is an input the report
prints (``--cold`` evicts the deployment's files first; nothing is locked in memory unless
``--lock-cache`` asks); the mode says how the sends met the background worker (``--pace worker``,
back to back, or ``--overlap JOBS_PER_S`` with real jobs queued at that rate meanwhile); and
per kind of message the report counts the sends whose recall budget dropped a step, by step, as
archive recall's search-log rows record it.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import json
import os
import pstats
import random
import statistics
import sys
import tempfile
import threading
import time
from datetime import date, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (  # noqa: E402
    Overlap,
    StopwatchProvider,
    TextMaker,
    budget_record,
    load_embedder,
    machine,
    page_cache,
    page_cache_end,
    page_cache_line,
    refuse_repeats,
    summary,
)

from hearth import Hearth, Settings  # noqa: E402
from hearth.errors import HearthError  # noqa: E402
from hearth.ops.jobs import JobQueue  # noqa: E402
from hearth.store import is_postgres  # noqa: E402

WORDS = ("tea garden rain letter harbour morning cat music bread window river lamp story walk "
         "winter friend book kitchen train market sea song quiet light").split()


# -- thread-length mode --------------------------------------------------------------------------------
def build_thread(hearth, scope, persona_id: int, size: int, rng: random.Random) -> int:
    conversation = scope.conversations.create(persona_id, f"Thread of {size}")
    with hearth.store.write():
        for i in range(size):
            text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 60)))
            scope.conversations.add_message(conversation.id, "user" if i % 2 == 0 else "assistant", text)
    return conversation.id


def run_sizes(args: argparse.Namespace) -> dict[str, Any]:
    rng = random.Random(7)
    results = {}
    with tempfile.TemporaryDirectory() as home:
        provider = StopwatchProvider()
        hearth = Hearth(Settings.resolve({"home": home, "input_token_limit": 128_000}, environ={}), provider=provider)
        scope = hearth.scope()
        persona = scope.personas.create("bench", "Bench", identity="A benchmark companion.")
        scope.memories.import_many([{"text": f"memory {i} " + " ".join(rng.sample(WORDS, 6))} for i in range(200)])
        for size in args.sizes:
            conversation_id = build_thread(hearth, scope, persona.id, size, rng)
            samples = []
            texts = [" ".join(rng.choice(WORDS) for _ in range(12)) for _ in range(args.sends)]
            refuse_repeats(texts)  # distinct texts, as in the deployment mode
            for text in texts:
                start = time.perf_counter()
                scope.send(conversation_id, text)
                samples.append((provider.arrival() - start) * 1000)
            results[size] = summary(samples)
            if not args.json:
                r = results[size]
                print(f"thread of {size:>7} messages: assembly median {r['median_ms']:.2f} ms, p99 {r['p99_ms']:.2f} ms")
        hearth.close()
    return results


# -- deployment mode -----------------------------------------------------------------------------------
MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September",
          "October", "November", "December")
KINDS = ("everyday", "recall", "date", "fragment", "short")
# Short relational turns: every opening with every ending, so a run of a few hundred has no repeat.
SHORT_OPENINGS = ("love you", "good night", "morning", "thank you", "I'm here", "miss you", "okay", "hugs",
                  "sleep well", "I'm back home", "night night", "home now", "see you soon", "all good",
                  "sweet dreams", "just woke up", "on my way", "thinking of you", "made it", "so tired",
                  "back from work", "can't sleep", "good morning", "here again")
SHORT_ENDINGS = ("", ", sweetheart", ", love", " too", " so much", ", dear", " again", ", darling", " x", " :)",
                 "!", ", see you tomorrow", ", my dear", " tonight", " already", ", you", "...", " <3",
                 ", really", " now", ", honestly", ", as always", ", hon", " again today", ", friend")
# Sends before the measured ones (the cold start): never among the measured texts.
WARM_UP = ("Good evening, I'm back. How was your day?", "Do you remember what we talked about last winter?")


class MessageMaker:
    """The five kinds of message, each text distinct from every other in the run: drawn with a
    seeded generator from the deployment's own vocabulary (its rare words and names, TextMaker with
    the deployment's seed) and its own dates (the archive's first and last day), so that no send
    finds its query vector, its terms or its keyword lists cached by an earlier one."""

    def __init__(self, tm: TextMaker, seed: int, first_day: date, last_day: date):
        self.tm = tm
        self.rng = random.Random(seed)
        self.first_day, self.days = first_day, max(1, (last_day - first_day).days)
        self.seen: set[str] = set(" ".join(t.split()) for t in WARM_UP)

    def _day(self) -> date:
        return self.first_day + timedelta(days=self.rng.randrange(self.days))

    def draw(self, kind: str) -> str:
        rng, tm = self.rng, self.tm
        if kind == "everyday":
            return tm.messages(["user"])[0]
        if kind == "recall":
            return rng.choice((
                f"Do you remember when we talked about {tm.rare_word()} and {rng.choice(tm.names)}?",
                f"What did you tell me last time about the {tm.rare_word()}?",
                f"Earlier you said something about {tm.rare_word()}, what was it?",
                f"You mentioned {rng.choice(tm.names)} before, remind me what happened with the {tm.rare_word()}.",
                f"Remember the {tm.rare_word()} {rng.choice(tm.names)} brought up? What was that about?",
            ))
        if kind == "date":
            day = self._day()
            month = f"{MONTHS[day.month - 1]} {day.year}"
            r = rng.random()
            if r < 0.7:  # a month: the common question, and the range every earlier figure used
                return rng.choice((
                    f"What were we talking about in {month}?",
                    f"What did I tell you about the {tm.rare_word()} in {month}?",
                    f"What happened with {rng.choice(tm.names)} in {month}?",
                    f"Back in {month} we talked about {tm.rare_word()}, what did I say?",
                    f"Do you remember {month}, when I was worried about {tm.rare_word()}?",
                ))
            if r < 0.9:  # a day
                return rng.choice((
                    f"What did we talk about on {day.day} {month}?",
                    f"What did I say on {day.day} {month} about {tm.rare_word()}?",
                ))
            return f"What was on my mind during {day.year} about {tm.rare_word()}?"  # a year
        if kind == "fragment":
            return f"I saw {rng.choice(tm.names)} today near the {tm.rare_word()}, {tm.phrase(4, 10)}."
        return rng.choice(SHORT_OPENINGS) + rng.choice(SHORT_ENDINGS)

    def distinct(self, kind: str) -> str:
        """A text of this kind not drawn before in the run."""
        for _ in range(1_000):
            text = self.draw(kind)
            key = " ".join(text.split())
            if key not in self.seen:
                self.seen.add(key)
                return text
        raise SystemExit(f"no distinct {kind} message left after {len(self.seen)} texts: send fewer, or ask for"
                         " repeats with --repeat-pool N")


def deployment_days(conn: Any, user_id: int, active_id: int) -> tuple[date, date]:
    """The first and last day of the deployment's archived conversations (the dates its date
    questions name)."""
    low, high = conn.execute("SELECT min(created_at), max(created_at) FROM conversations WHERE user_id = ? AND id <> ?",
                             (user_id, active_id)).fetchone()
    if not low:
        today = date.today()
        return today - timedelta(days=365), today
    return date.fromisoformat(str(low)[:10]), date.fromisoformat(str(high)[:10])


def varied_messages(maker: MessageMaker, count: int, balanced: bool = False,
                    repeat_pool: int = 0) -> list[tuple[str, str]]:
    """(kind, text) pairs: everyday, recall cue, date question, fragment name, short relational,
    every text distinct. ``balanced``: the five kinds in turn, so each gets a fifth of the sends.
    ``repeat_pool`` N: each kind's texts are drawn from its first N, so texts repeat (a run that
    asks to measure the caches, and reports their hits)."""
    rng = random.Random(maker.rng.random())
    pools: dict[str, list[str]] = {}
    out = []
    for i in range(count):
        r = rng.random()
        if balanced:
            r = (0.0, 0.4, 0.6, 0.7, 0.9)[i % 5]
        kind = ("everyday" if r < 0.35 else "recall" if r < 0.55 else "date" if r < 0.65
                else "fragment" if r < 0.85 else "short")
        if repeat_pool:
            pool = pools.setdefault(kind, [])
            if len(pool) < repeat_pool:
                pool.append(maker.distinct(kind))
                out.append((kind, pool[-1]))
            else:
                out.append((kind, rng.choice(pool)))
        else:
            out.append((kind, maker.distinct(kind)))
    return out


def read_texts(path: str) -> list[tuple[str, str]]:
    """``kind<TAB>text`` per line (a run that replays chosen messages)."""
    out = []
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        kind, sep, text = line.partition("\t")
        if not sep or kind not in KINDS or not text.strip():
            raise SystemExit(f"{path}, line {number}: expected a kind ({', '.join(KINDS)}), a tab and a text")
        out.append((kind, text))
    return out


class LayerClock:
    """Wraps each dynamic layer's ``blocks`` to record its time per send, overall and by the kind of
    message being sent (benchmark-side only)."""

    def __init__(self, scope: Any):
        self.samples: dict[str, list[float]] = {}
        self.by_kind: dict[str, dict[str, list[float]]] = {}
        self.outside: dict[str, list[float]] = {}  # kind -> a send's milliseconds outside the layers
        self.current: dict[str, float] = {}  # layer -> milliseconds, in the send under way
        for layer in scope.dynamic.layers:
            self._wrap(layer)

    def _wrap(self, layer: Any) -> None:
        inner = layer.blocks
        name = getattr(layer, "name", type(layer).__name__)
        bucket = self.samples.setdefault(name, [])

        def timed(turn):
            t = time.perf_counter()
            try:
                return inner(turn)
            finally:
                ms = (time.perf_counter() - t) * 1000
                bucket.append(ms)
                self.current[name] = self.current.get(name, 0.0) + ms

        layer.blocks = timed

    def clear(self) -> None:
        for bucket in self.samples.values():
            bucket.clear()

    def keep(self, kind: str, elapsed: float) -> None:
        """Record the send just timed (``elapsed`` ms) under its kind."""
        layers = self.by_kind.setdefault(kind, {})
        for name, ms in self.current.items():
            layers.setdefault(name, []).append(ms)
        self.outside.setdefault(kind, []).append(elapsed - sum(self.current.values()))


class StepClock:
    """Wraps the steps of one hybrid search (keyword lists, vector lists, fusion, feedback, loading
    the candidates' rows, neighbours, scoring) to record each one's time per send, by the kind of
    message being sent, and the garbage collections during the send (benchmark-side only: the
    product's functions are replaced on the module)."""

    STEPS = ("keyword_lists", "vector_lists", "fuse", "feedback_list", "load_messages", "load_chunks",
             "neighbours", "score", "build_variants")

    def __init__(self) -> None:
        from hearth.retrieval import hybrid

        self.kind = ""
        self.samples: dict[str, dict[str, list[float]]] = {}
        self._open: dict[str, float] = {}
        self._gc_started = 0.0
        for step in self.STEPS:
            self._wrap(hybrid, step)
        # The interpreter's garbage collections during a send, by generation: a pause of the whole
        # process that no step owns.
        gc.callbacks.append(self._gc)

    def _gc(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._gc_started = time.perf_counter()
        else:
            step = f"gc generation {info['generation']}"
            self._open[step] = self._open.get(step, 0.0) + (time.perf_counter() - self._gc_started) * 1000

    def _wrap(self, module: Any, step: str) -> None:
        inner = getattr(module, step)

        def timed(*args, **kwargs):
            t = time.perf_counter()
            try:
                return inner(*args, **kwargs)
            finally:
                self._open[step] = self._open.get(step, 0.0) + (time.perf_counter() - t) * 1000

        setattr(module, step, timed)

    def start(self, kind: str) -> None:
        self.kind = kind
        self._open = {}

    def keep(self) -> None:
        """Record the steps of the send just timed (a cold send is left out)."""
        bucket = self.samples.setdefault(self.kind, {})
        for step, ms in self._open.items():
            bucket.setdefault(step, []).append(ms)

    def report(self) -> dict[str, dict[str, Any]]:
        return {kind: {step: summary(v) for step, v in steps.items()} for kind, steps in sorted(self.samples.items())}


class ThreadClock:
    """The send's two threads (benchmark-side only, with ``--steps``): when, counted from the send's
    start, the prefetch thread ends the query's embedding and the index search ahead, and when the
    send's own thread starts archive recall, asks for the hits searched ahead on the chat turns'
    index, has them, and ends archive recall. The gap between asking and having is the send's wait
    for the other thread."""

    MARKS = ("embedding ends", "search ahead ends", "archive recall starts", "search asks for its hits",
             "search has its hits", "archive recall ends")

    def __init__(self, scope: Any) -> None:
        from hearth.retrieval import semantic

        self.kind = ""
        self.started = 0.0
        self.marks: dict[str, float] = {}
        self.samples: dict[str, dict[str, list[float]]] = {}
        self._wrap(semantic, "_embed_in_flight", None, "embedding ends")
        self._wrap(semantic, "_search_ahead", None, "search ahead ends")
        # Its first argument is the index's key (db_key, source, ...): only the chat turns' index is timed.
        self._wrap(semantic, "taken_ahead", "search asks for its hits", "search has its hits",
                   lambda key, *_: key[1] == "messages")
        for layer in scope.dynamic.layers:
            if getattr(layer, "name", "") == "archive_recall":
                self._wrap(layer, "blocks", "archive recall starts", "archive recall ends")

    def _wrap(self, owner: Any, attr: str, start: str | None, end: str, only: Any = None) -> None:
        inner = getattr(owner, attr)

        def marked(*args, **kwargs):
            if only is not None and not only(*args):
                return inner(*args, **kwargs)
            if start:
                self.marks.setdefault(start, time.perf_counter())
            try:
                return inner(*args, **kwargs)
            finally:
                self.marks.setdefault(end, time.perf_counter())

        setattr(owner, attr, marked)

    def start(self, kind: str, started: float) -> None:
        self.kind, self.started, self.marks = kind, started, {}

    def keep(self) -> None:
        bucket = self.samples.setdefault(self.kind, {})
        for name, at in self.marks.items():
            bucket.setdefault(name, []).append((at - self.started) * 1000)
        if "search asks for its hits" in self.marks and "search has its hits" in self.marks:
            bucket.setdefault("waited for the hits", []).append(
                (self.marks["search has its hits"] - self.marks["search asks for its hits"]) * 1000)

    def report(self) -> dict[str, dict[str, Any]]:
        return {kind: {name: summary(marks[name]) for name in (*self.MARKS, "waited for the hits") if name in marks}
                for kind, marks in sorted(self.samples.items()) if "archive recall starts" in marks}


class Floor:
    """The three primitives the send path builds on (FTS5 BM25 top-10 with the terms the product
    selects, one query embedding straight from the model, one vector top-10), timed directly for a
    message. Measured just before that message's send, so floor and send see the same moment of a
    shared, noisy machine."""

    def __init__(self, hearth: Any, scope: Any, embedder: Any):
        self.conn = hearth.store.connection()
        self.embedder = embedder
        self.fts: list[float] = []
        self.vec: list[float] = []
        self.emb: list[float] = []
        self.index = None
        self.pg = is_postgres(self.conn)
        self.user_id = scope.user_id
        self.pg_vectors = 0
        if embedder is not None:
            from hearth.retrieval.semantic import INDEXES, embed_queries, model_id

            self.model = model_id(embedder)
            if self.pg:
                # PostgreSQL: the HNSW index in the database is the index (nothing to load).
                self.pg_vectors = int(self.conn.execute(
                    "SELECT coalesce(sum(count), 0) FROM vector_counts WHERE user_id = ? AND source = 'messages'"
                    " AND model = ?", (self.user_id, self.model)).fetchone()[0])
            else:
                probe = embed_queries(embedder, ["probe"])
                self.index = INDEXES.get(self.conn, str(hearth.store.path), "messages", scope.user_id,
                                         self.model, int(probe.shape[1]))

    def measure(self, text: str) -> float:
        from hearth.retrieval.keyword import match_query, terms
        from hearth.retrieval.semantic import query_vectors
        from hearth.retrieval.terms import select_terms

        spent = 0.0
        words = select_terms(self.conn, terms(text)) or terms(text)[:3]
        if words:
            t = time.perf_counter()
            if self.pg:
                # The engine's BM25 top-10: GIN match, BM25 from the kept totals and frequencies.
                from hearth.retrieval import pgsearch

                pgsearch.ranked(self.conn, "messages_fts", "m", "m.id", "", ["TRUE"], [], words, 10)
            else:
                self.conn.execute("SELECT rowid, bm25(messages_fts) AS s FROM messages_fts WHERE messages_fts MATCH ?"
                                  " ORDER BY s LIMIT 10", (match_query(words),)).fetchall()
            self.fts.append((time.perf_counter() - t) * 1000)
            spent += self.fts[-1]
        if self.embedder is not None:
            t = time.perf_counter()
            # Straight to the model (its query graph): the product's query cache must not make the
            # floor look cheaper.
            vector = query_vectors(self.embedder, [text])
            self.emb.append((time.perf_counter() - t) * 1000)
            spent += self.emb[-1]
            if self.pg and self.pg_vectors:
                from hearth.retrieval import pgvectors

                t = time.perf_counter()
                pgvectors.search(self.conn, "messages", self.user_id, self.model, vector, 10)
                self.vec.append((time.perf_counter() - t) * 1000)
                spent += self.vec[-1]
            elif self.index is not None and len(self.index):
                t = time.perf_counter()
                self.index.search(vector[0], 10)
                self.vec.append((time.perf_counter() - t) * 1000)
                spent += self.vec[-1]
        return spent

    def report(self) -> dict[str, Any]:
        out: dict[str, Any] = {"fts_top10": summary(self.fts)}
        out["vector_top10"] = summary(self.vec) if self.vec else "not available yet"
        out["query_embedding"] = summary(self.emb) if self.emb else "not available yet"
        out["vectors_indexed"] = len(self.index) if self.index is not None else self.pg_vectors
        medians = [v["median_ms"] for v in (out["fts_top10"], out["vector_top10"], out["query_embedding"])
                   if isinstance(v, dict)]
        out["floor_median_ms"] = round(sum(medians), 3)
        return out


class ServerCpu:
    """CPU seconds the PostgreSQL server has used, when it runs on this machine and its files can be
    read (Linux): the postmaster's own and its reaped children's, plus each live backend's, from
    /proc. Counted in clock ticks (10 ms): only a mean over many sends means anything."""

    def __init__(self, conn: Any) -> None:
        self.pid: int | None = None
        try:
            folder = conn.execute("SHOW data_directory").fetchone()[0]
            self.pid = int(Path(folder, "postmaster.pid").read_text().split()[0])
            self()
        except (OSError, ValueError, IndexError, HearthError):
            self.pid = None  # a server elsewhere, or files this user may not read: not measured

    def __call__(self) -> float:
        def ticks(pid: str, fields: slice) -> int:
            try:
                values = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[fields]
            except OSError:
                return 0  # a backend that ended meanwhile: the postmaster's reaped time has it
            return sum(int(v) for v in values)

        children = Path(f"/proc/{self.pid}/task/{self.pid}/children").read_text().split()
        # stat fields 14-17 (utime, stime, cutime, cstime) are 11-14 after the name and state.
        total = ticks(str(self.pid), slice(11, 15)) + sum(ticks(child, slice(11, 13)) for child in children)
        return total / os.sysconf("SC_CLK_TCK")


class SendCpu:
    """CPU clocks of the threads a send runs on (the caller's and the query threads that embed and
    search ahead; not the background worker's), exact per thread, and the database server's
    (``ServerCpu``) when it can be read."""

    def __init__(self, server: ServerCpu | None) -> None:
        self.server = server if server is not None and server.pid is not None else None

    readable = hasattr(time, "pthread_getcpuclockid")  # another thread's clock: Linux and most Unixes

    def __call__(self) -> tuple[dict[int, float], float | None]:
        clocks = {}
        for thread in threading.enumerate() if self.readable else ():
            if thread.ident and (thread is threading.main_thread() or thread.name.startswith("hearth-query")):
                clocks[thread.ident] = time.clock_gettime(time.pthread_getcpuclockid(thread.ident))
        return clocks, self.server() if self.server else None

    @staticmethod
    def spent(start: tuple[dict[int, float], float | None],
              end: tuple[dict[int, float], float | None]) -> tuple[float, float | None]:
        """Milliseconds between two readings: the threads' (a thread new since counts from zero), the server's."""
        threads = sum(at - start[0].get(ident, 0.0) for ident, at in end[0].items())
        server = (end[1] - start[1]) * 1000 if start[1] is not None and end[1] is not None else None
        return threads * 1000, server


def cache_state(args: argparse.Namespace) -> str:
    """The page-cache state the run asked for (``page_cache``)."""
    if args.cold:
        return "cold"
    if args.drop_caches:
        return "dropped"
    if args.database_url:
        return "as found"
    return "locked" if args.lock_cache else "warm"


def plan_messages(args: argparse.Namespace, manifest: dict[str, Any], conn: Any) -> tuple[list[tuple[str, str]], int]:
    """The run's (kind, text) sends and how many repeat an earlier text; a repeat the run did not
    ask for is refused here, before anything is sent (``refuse_repeats``)."""
    if args.texts:
        messages = read_texts(args.texts)
    else:
        first, last = deployment_days(conn, manifest["user_id"], manifest["active_conversation_id"])
        maker = MessageMaker(TextMaker(manifest["seed"] + 100), manifest["seed"] + 101, first, last)
        messages = varied_messages(maker, args.sends, balanced=args.per_class is not None,
                                   repeat_pool=args.repeat_pool)
    if args.kinds:
        messages = [(kind, text) for kind, text in messages if kind in args.kinds]
    repeats = refuse_repeats([*WARM_UP, *(text for _, text in messages)], allow=args.allow_repeats or bool(args.repeat_pool))
    return messages, repeats


def query_key(embedder: Any, text: str, speaker_names: dict[str, str]) -> tuple[str, str]:
    """The query cache's key for a message (``semantic.embed_queries``)."""
    from hearth.retrieval.candidates import query_vector_text
    from hearth.retrieval.semantic import model_id

    return model_id(embedder), " ".join(query_vector_text(text, speaker_names).split())


def run_mode(args: argparse.Namespace, worker: bool) -> str:
    """How the sends met the background work, in words for the report."""
    if args.overlap:
        return (f"overlap: another thread queued {args.overlap:g} background jobs a second while the sends ran"
                + (f" {args.pause_ms:.0f} ms apart" if args.pause_ms else " back to back"))
    if not worker:
        return "no worker: nothing ran in the background"
    if args.pace == "worker":
        return "paced: each send once the worker had run the last reply's jobs (sends never overlap them)"
    if args.pause_ms:
        return f"paused: {args.pause_ms:.0f} ms between sends, the worker running the replies' jobs meanwhile"
    return "back to back: the worker running the replies' jobs beside the next sends"


def run_deployment(args: argparse.Namespace) -> dict[str, Any]:
    home = Path(args.deployment).expanduser().resolve()
    manifest = json.loads((home / "bench.json").read_text())
    cache = page_cache(home, cache_state(args), database_url=args.database_url)
    replies = TextMaker(manifest["seed"] + 102)
    # Replies of a realistic length (about 60 words, log-normal), as a model would write them.
    provider = StopwatchProvider(replies=lambda: replies.messages(["assistant"])[0])
    values: dict[str, Any] = {"home": str(home)}
    if args.database_url:
        # The same deployment copied to PostgreSQL (``hearth migrate-store``); the home keeps bench.json.
        values["database_url"] = args.database_url
    if args.recall_budget_ms is not None:
        values["recall_budget_ms"] = args.recall_budget_ms
    hearth = Hearth(Settings.resolve(values, environ={}), provider=provider)
    try:
        messages, repeated = plan_messages(args, manifest, hearth.store.connection())
    except BaseException:
        hearth.close()
        raise
    scope = hearth.scope(manifest["user_id"])
    meter = SendCpu(ServerCpu(hearth.store.connection()) if args.database_url else None)
    provider.meter = meter
    conversation_id = manifest["active_conversation_id"]
    notes: list[str] = []
    embedder, reason = load_embedder(hearth)
    if embedder is None:
        # Semantic recall cannot run yet: the archive layer searches by keyword alone meanwhile.
        notes.append(f"semantic recall: not available yet ({reason}); archive recall ran keyword-only")
        for layer in scope.dynamic.layers:
            if getattr(layer, "name", "") == "archive_recall" and hasattr(layer, "embedder"):
                layer.embedder = None
    from hearth.prompt.layers import archive_recall

    def parsed(key: str, value: str) -> Any:
        current = getattr(archive_recall.SEND_PATH, key)
        if isinstance(current, bool):  # bool("False") is True
            return value.strip().lower() in ("1", "true", "yes", "on")
        return type(current)(value)

    if args.send_tuning:
        # Archive recall with other settings (an experiment beside the shipped ``SEND_PATH``).
        changes = {k: parsed(k, v) for k, v in (item.split("=", 1) for item in args.send_tuning)}
        archive_recall.SEND_PATH = archive_recall.SEND_PATH.with_changes(**changes)  # type: ignore[attr-defined]
        notes.append(f"archive recall tuning changed: {changes}")
    # Every other send of each kind with one setting changed, reported as a kind of its own: a
    # before and after in one run, under the same load.
    arms: tuple[Any, Any, str] | None = None
    if args.alternate:
        key, value = args.alternate.split("=", 1)
        arms = (archive_recall.SEND_PATH, archive_recall.SEND_PATH.with_changes(**{key: parsed(key, value)}),
                f"{key}={value}")
        notes.append(f"every other send of each kind with archive recall's {arms[2]}, reported apart")
    sent_of_kind: dict[str, int] = {}
    # As `hearth serve` does once its port is open: load (or build and save) the vector indexes, so
    # the timed sends measure a running deployment rather than a cold start.
    t = time.perf_counter()
    if embedder is not None:
        from hearth.retrieval.semantic import warm

        warm(hearth)
    warm_s = time.perf_counter() - t
    notes.append(f"vector indexes warmed in {warm_s:.1f} s before the timed sends")
    worker = None
    if not args.no_worker:
        from hearth.ops.jobs import Worker

        # As `hearth serve` runs it: summaries, live context, review and the embedding of new turns.
        # Paced by the worker, it looks for new jobs every 50 ms instead of every 2 s when idle, so
        # the wait measures its work rather than its polling.
        worker = Worker(hearth, poll_seconds=0.05 if args.pace == "worker" else 2.0)
        if args.worker_ignores_sends:
            # As before the background job waited for sends: it reaches the model whenever it runs.
            hearth.activity.wait_quiet = lambda limit=2.0: True  # type: ignore[method-assign]
        worker.start()
    clock = LayerClock(scope)
    steps = StepClock() if args.steps else None
    threads = ThreadClock(scope) if args.steps else None
    # Cold sends, reported apart: the first builds the stored prompt and reads the history; the
    # first with a recall cue loads the embedding model and builds the vector index.
    t = time.perf_counter()
    scope.send(conversation_id, WARM_UP[0])
    cold_ms = (provider.arrival() - t) * 1000
    t = time.perf_counter()
    scope.send(conversation_id, WARM_UP[1])
    cold_recall_ms = (provider.arrival() - t) * 1000
    clock.clear()

    floor_meter = Floor(hearth, scope, embedder)
    floor_by_kind: dict[str, list[float]] = {}
    # CPU milliseconds by kind: (send, floor) of the send's threads, and of the server (a mean).
    cpu_by_kind: dict[str, list[tuple[float, float]]] = {}
    server_by_kind: dict[str, list[tuple[float, float]]] = {}
    cold_by_kind: dict[str, list[float]] = {}
    # On a shared machine the wall clock counts other processes' time; the thread's CPU clock
    # counts only the send's own work (on the calling thread).
    profiler = ((cProfile.Profile(time.thread_time) if args.profile_clock == "cpu" else cProfile.Profile())
                if args.profile else None)
    samples: list[float] = []
    saved: list[float] = []
    by_kind: dict[str, list[float]] = {}
    queue = JobQueue(hearth.store)
    waited: list[float] = []
    conn = hearth.store.connection()
    # What the recall budget dropped, read from each send's search-log rows after the send.
    log_after = int(conn.execute("SELECT coalesce(max(id), 0) FROM search_log").fetchone()[0])
    budget: dict[str, dict[str, Any]] = {}
    speaker_names = {}
    if embedder is not None:
        from hearth.prompt.layers.archive_recall import speakers
        from hearth.retrieval import semantic

        speaker_names = speakers(scope.personas.get(scope.conversations.get(conversation_id).persona_id))
    query_hits = 0
    overlap = None
    if args.overlap:
        overlap = Overlap(hearth, scope.user_id, scope.conversations.get(conversation_id).persona_id,
                          args.overlap, manifest["seed"] + 103).start()
    for kind, text in messages:
        if arms is not None:
            turn = sent_of_kind.get(kind, 0)
            sent_of_kind[kind] = turn + 1
            archive_recall.SEND_PATH = arms[turn % 2]  # type: ignore[attr-defined]
            if turn % 2:
                kind = f"{kind} ({arms[2]})"
        if args.pause_ms:
            time.sleep(args.pause_ms / 1000)  # the person reading the reply and typing the next message
        if args.pace == "worker" and worker is not None:
            # A person types slower than the worker embeds the last reply: the send finds it done.
            started = time.perf_counter()
            while not queue.idle() and time.perf_counter() - started < 10:
                time.sleep(0.005)
            waited.append((time.perf_counter() - started) * 1000)
        before_floor = meter()
        floor_by_kind.setdefault(kind, []).append(floor_meter.measure(text))
        before_send = meter()
        clock.current = {}
        if steps:
            steps.start(kind)
        if profiler:
            profiler.enable()
        t = time.perf_counter()
        if threads:
            threads.start(kind, t)
        # A query vector cached by an earlier send (only a run that asked for repeats has one).
        hit = embedder is not None and query_key(embedder, text, speaker_names) in semantic._QUERY_CACHE
        saved_at = None
        for event in scope.send_stream(conversation_id, text):
            if event.type == "saved":
                saved_at = time.perf_counter()
        if profiler:
            profiler.disable()
        elapsed = (provider.arrival() - t) * 1000
        log_after, searched, dropped = budget_record(conn, conversation_id, log_after)
        if len(cold_by_kind.setdefault(kind, [])) < args.cold_sends:
            # The first sends of each kind in a fresh process: SQLite's page cache, the term cache
            # and the query cache start empty (the operating system's file cache may not).
            cold_by_kind[kind].append(elapsed)
            floor_by_kind[kind].pop()
            continue
        samples.append(elapsed)
        query_hits += hit
        tally = budget.setdefault(kind, {"sends": 0, "archive_recall_searches": 0, "sends_with_a_drop": 0,
                                         "dropped": {}})
        tally["sends"] += 1
        tally["archive_recall_searches"] += searched
        tally["sends_with_a_drop"] += bool(dropped)
        for step, n in dropped.items():
            tally["dropped"][step] = tally["dropped"].get(step, 0) + n
        clock.keep(kind, elapsed)
        if steps and threads:
            steps.keep()
            threads.keep()
        saved.append(((saved_at or t) - t) * 1000)
        by_kind.setdefault(kind, []).append(elapsed)
        (send_cpu, send_server), (floor_cpu, floor_server) = (SendCpu.spent(before_send, provider.reading()),
                                                              SendCpu.spent(before_floor, before_send))
        if meter.readable:
            cpu_by_kind.setdefault(kind, []).append((send_cpu, floor_cpu))
        if send_server is not None and floor_server is not None:
            server_by_kind.setdefault(kind, []).append((send_server, floor_server))

    if arms is not None:
        archive_recall.SEND_PATH = arms[0]  # type: ignore[attr-defined]
    overlap_report = overlap.stop() if overlap is not None else None
    page_cache_end(cache, home)
    if worker is not None:
        worker.stop(timeout=300)  # an embedding slice in flight finishes before the process exits
    floor = floor_meter.report()
    assembly = summary(samples)
    result = {
        "machine": machine(),
        "engine": hearth.store.engine.name,
        "load_average": [round(x, 1) for x in os.getloadavg()],
        "deployment": {k: manifest.get(k) for k in ("messages", "conversations", "active_messages", "fragments",
                                                    "memories", "chunks", "vectors")},
        "first_send_cold_ms": round(cold_ms, 1),
        "first_recall_send_cold_ms": round(cold_recall_ms, 1),
        "assembly": assembly,
        "save_and_prompt": summary(saved),
        "by_kind": {k: {**summary(v), "floor_median_ms": summary(floor_by_kind[k])["median_ms"],
                        "ratio_median": round(summary(v)["median_ms"] / max(summary(floor_by_kind[k])["median_ms"], 1e-9), 2)}
                    for k, v in sorted(by_kind.items())},
        "cpu_by_kind": {k: {"send_median_ms": round(statistics.median(s for s, _ in v), 3),
                            "floor_median_ms": round(statistics.median(f for _, f in v), 3),
                            **({"server_send_mean_ms": round(statistics.mean(s for s, _ in server_by_kind[k]), 2),
                                "server_floor_mean_ms": round(statistics.mean(f for _, f in server_by_kind[k]), 2)}
                               if server_by_kind.get(k) else {})}
                        for k, v in sorted(cpu_by_kind.items())},
        "worker": ("off" if worker is None else "running, as in hearth serve"
                   + (", not waiting for sends" if args.worker_ignores_sends else "")),
        "pause_ms": args.pause_ms,
        "pace": args.pace,
        "waited_for_worker": summary(waited) if waited else None,
        "cold_by_kind": {k: summary(v) for k, v in sorted(cold_by_kind.items()) if v},
        "layers": {k: summary(v) for k, v in clock.samples.items() if v},
        "floor": floor,
        "ratio_median": round(assembly["median_ms"] / floor["floor_median_ms"], 2) if floor["floor_median_ms"] else None,
        "notes": notes,
        "page_cache": cache,
        "texts": {"measured": len(samples), "distinct": not repeated, "repeated_sends": repeated,
                  "repeats_allowed": bool(args.allow_repeats or args.repeat_pool), "repeat_pool": args.repeat_pool,
                  "query_cache_hits": query_hits if embedder is not None else None},
        "mode": run_mode(args, worker is not None),
        "overlap": overlap_report,
        "recall_budget_ms": hearth.settings.recall_budget_ms,
        "budget_drops": dict(sorted(budget.items())),
    }
    if steps and threads:
        result["steps"] = steps.report()
        result["threads"] = threads.report()
        result["layers_by_kind"] = {kind: {"outside the layers": summary(clock.outside[kind]),
                                           **{name: summary(v) for name, v in layers.items()}}
                                    for kind, layers in sorted(clock.by_kind.items())}
    if profiler:
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats(args.profile_sort).print_stats(args.profile_lines)
        result["profile"] = out.getvalue()
        if args.profile_out:
            profiler.dump_stats(args.profile_out)
    hearth.close()
    return result


def print_deployment(r: dict[str, Any]) -> None:
    d = r["deployment"]
    print(f"machine: {r['machine']}; engine: {r['engine']}; load average at the end: {r['load_average']}")
    print(f"deployment: {d['messages']:,} archived messages in {d['conversations']:,} conversations, active thread "
          f"{d['active_messages']:,}, {d['fragments']:,} fragments, {d['memories']:,} memories, "
          f"{d['chunks']:,} chunks, vectors: {d['vectors']}")
    for note in r["notes"]:
        print(f"note: {note}")
    print(page_cache_line(r["page_cache"]))
    t = r["texts"]
    if t["distinct"]:
        print(f"texts: all {t['measured']} measured texts distinct (none repeats an earlier send)")
    else:
        hits = "not measured (no embedder)" if t["query_cache_hits"] is None else t["query_cache_hits"]
        print(f"texts: REPEATS ASKED FOR (pool {t['repeat_pool'] or 'from the file'}): {t['repeated_sends']} sends repeat"
              f" an earlier text; query-vector cache hits among the measured sends: {hits}")
    print(f"mode: {r['mode']}")
    if r.get("overlap"):
        o = r["overlap"]
        print(f"  background jobs over {o['seconds']} s: {o['ticks']} queued ({', '.join(f'{k} {v}' for k, v in o['queued'].items())}),"
              f" {o['done']} done while the sends ran, {o['pending_at_end']} still waiting at the end,"
              f" {o['late_ticks']} late ticks")
    print(f"recall budget {r['recall_budget_ms']} ms: sends whose budget dropped a step, by kind")
    for kind, b in r["budget_drops"].items():
        steps = ", ".join(f"{step} {n}" for step, n in sorted(b["dropped"].items())) or "none"
        print(f"  {kind:<9} {b['sends_with_a_drop']} of {b['sends']} sends ({b['archive_recall_searches']} archive"
              f" recall searches); dropped: {steps}")
    print(f"first send (cold: stored prompt, history): {r['first_send_cold_ms']:.1f} ms; first send with a recall "
          f"cue (cold: embedding model, vector index): {r['first_recall_send_cold_ms']:.1f} ms")
    a = r["assembly"]
    print(f"send-path assembly over {a['n']} sends: median {a['median_ms']:.2f} ms, p99 {a['p99_ms']:.2f} ms "
          f"(of which saving the message and prompt: median {r['save_and_prompt']['median_ms']:.2f} ms)")
    spacing = f"{r['pause_ms']:.0f} ms apart" if r["pause_ms"] else "back to back"
    if r["pace"] == "worker" and r["waited_for_worker"]:
        w = r["waited_for_worker"]
        spacing = (f"each after the worker finished the last reply's jobs (waited median {w['median_ms']:.0f} ms,"
                   f" p99 {w['p99_ms']:.0f} ms)")
    print(f"background worker: {r['worker']}; sends {spacing}")
    for kind, s in r["by_kind"].items():
        print(f"  {kind:<9} median {s['median_ms']:7.2f} ms  p99 {s['p99_ms']:7.2f} ms  (n={s['n']});"
              f" floor for these messages {s['floor_median_ms']:.2f} ms, ratio {s['ratio_median']:.2f}")
    for kind, c in r.get("cpu_by_kind", {}).items():
        server = (f"; the database server, mean {c['server_send_mean_ms']:.1f} ms (floor"
                  f" {c['server_floor_mean_ms']:.1f} ms)" if "server_send_mean_ms" in c else "")
        print(f"  {kind:<9} CPU of the send's threads, median {c['send_median_ms']:.2f} ms (floor"
              f" {c['floor_median_ms']:.2f} ms){server}")
    for kind, s in r.get("cold_by_kind", {}).items():
        print(f"  cold: first {s['n']} {kind} sends of the process: median {s['median_ms']:7.2f} ms,"
              f" p99 {s['p99_ms']:7.2f} ms")
    print("per layer:")
    for name, s in r["layers"].items():
        print(f"  {name:<15} median {s['median_ms']:7.2f} ms  p99 {s['p99_ms']:7.2f} ms")
    f = r["floor"]
    print("floor, measured directly:")
    keyword = "GIN + BM25 top-10" if r["engine"] == "postgresql" else "FTS5 BM25 top-10"
    for key, label in (("fts_top10", keyword), ("vector_top10", f"vector top-10 ({f['vectors_indexed']:,} vectors)"),
                       ("query_embedding", "query embedding")):
        v = f[key]
        print(f"  {label:<34} " + (f"median {v['median_ms']:.2f} ms, p99 {v['p99_ms']:.2f} ms"
                                   if isinstance(v, dict) else v))
    print(f"  floor (sum of medians): {f['floor_median_ms']:.2f} ms")
    if r["ratio_median"] is not None:
        print(f"ratio assembly / floor (medians): {r['ratio_median']:.2f}")
    for kind, layers in r.get("layers_by_kind", {}).items():
        # Layers that never reach half a millisecond are left out of the line.
        parts = [f"{name} {s['median_ms']:.2f}/{s['p99_ms']:.2f}" for name, s in layers.items() if s["p99_ms"] >= 0.5]
        print(f"layers, {kind} sends (median/p99 ms): " + ", ".join(parts))
    for kind, by_step in r.get("steps", {}).items():
        print(f"hybrid search steps, {kind} sends (sends that ran the step):")
        for step, s in sorted(by_step.items(), key=lambda item: -item[1]["median_ms"]):
            print(f"  {step:<15} median {s['median_ms']:7.2f} ms  p99 {s['p99_ms']:7.2f} ms  (n={s['n']})")
    for kind, marks in r.get("threads", {}).items():
        print(f"the send's two threads, {kind} sends (ms from the send's start; median, p99, sends):")
        for name, s in marks.items():
            print(f"  {name:<25} median {s['median_ms']:7.2f}  p99 {s['p99_ms']:7.2f}  (n={s['n']})")
    if "profile" in r:
        print(r["profile"])


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line, checked; ``sends`` settled for the mode."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000, 100_000])
    parser.add_argument("--sends", type=int, default=None, help="sends per size (50) or on the deployment (200)")
    parser.add_argument("--deployment", help="a home made by generate.py")
    parser.add_argument("--profile", action="store_true", help="cProfile the deployment sends")
    parser.add_argument("--no-worker", action="store_true", help="do not run the background worker during the sends")
    parser.add_argument("--pace", choices=("none", "worker"), default="none",
                        help="worker: each send waits until the worker has run the last reply's jobs, as"
                             " when a person reads and types (default none: back to back)")
    parser.add_argument("--pause-ms", type=float, default=0.0,
                        help="pause before each send, as a person reads and types (default 0: back to back, the"
                             " previous reply's embedding may still be running)")
    parser.add_argument("--alternate", metavar="KEY=VALUE",
                        help="every other send of each kind with this Tuning field of archive recall changed,"
                             " reported as a kind of its own (a before and after in one run)")
    parser.add_argument("--send-tuning", action="append", default=[], metavar="KEY=VALUE",
                        help="archive recall with this Tuning field changed (repeatable), e.g. feedback_candidates=0")
    parser.add_argument("--worker-ignores-sends", action="store_true",
                        help="the background worker's embedding does not wait while a send assembles (the old way)")
    parser.add_argument("--cold-sends", type=int, default=0,
                        help="deployment mode: report the first N sends of each kind apart, as cold")
    parser.add_argument("--cold", action="store_true",
                        help="deployment mode: evict the deployment's files from the page cache first"
                             " (posix_fadvise DONTNEED on each); without it they are read in first, not locked")
    parser.add_argument("--lock-cache", action="store_true",
                        help="deployment mode: read the files in and lock them in memory with mlock (root or"
                             " CAP_IPC_LOCK); reported, never the default")
    parser.add_argument("--drop-caches", action="store_true",
                        help="deployment mode: empty the whole machine's file cache first (Linux, root)")
    parser.add_argument("--allow-repeats", action="store_true",
                        help="accept repeated texts (from --texts); the report counts them and their cache hits")
    parser.add_argument("--repeat-pool", type=int, default=0, metavar="N",
                        help="draw each kind's texts from N distinct ones, so they repeat (measures the caches;"
                             " reported with the cache hits)")
    parser.add_argument("--texts", help="send these messages instead: one 'kind<TAB>text' per line")
    parser.add_argument("--overlap", type=float, default=0.0, metavar="JOBS_PER_S",
                        help="deployment mode: another thread queues this many real background jobs a second"
                             " while the sends run (not with --pace worker)")
    parser.add_argument("--recall-budget-ms", type=int, default=None,
                        help="deployment mode: the recall latency budget (default: the setting, 40)")
    parser.add_argument("--per-class", type=int, default=None,
                        help="deployment mode: this many sends of each of the five kinds, in turn")
    parser.add_argument("--database-url", default="",
                        help="deployment mode: run on this PostgreSQL copy of the deployment (hearth migrate-store)")
    parser.add_argument("--steps", action="store_true", help="time each step of the hybrid search, by kind")
    parser.add_argument("--kinds", nargs="+", choices=("everyday", "recall", "date", "fragment", "short"),
                        help="send only these kinds of message (to profile one kind)")
    parser.add_argument("--profile-lines", type=int, default=40)
    parser.add_argument("--profile-out", help="also save the profile's statistics to this file (pstats)")
    parser.add_argument("--profile-sort", default="cumulative", choices=("cumulative", "tottime"))
    parser.add_argument("--profile-clock", default="wall", choices=("wall", "cpu"),
                        help="the profile's clock: wall time, or the calling thread's CPU time")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.deployment:
        if args.overlap and args.pace == "worker":
            parser.error("--overlap and --pace worker exclude each other: paced sends wait for the jobs")
        if args.overlap < 0 or args.repeat_pool < 0 or [args.cold, args.drop_caches, args.lock_cache].count(True) > 1:
            parser.error("--overlap and --repeat-pool take positive numbers; --cold, --drop-caches and --lock-cache"
                         " exclude each other")
        args.sends = (args.per_class + args.cold_sends) * 5 if args.per_class else (args.sends or 200)
    else:
        args.sends = args.sends or 50
    return args


def main() -> None:
    args = parse()
    if args.deployment:
        try:
            result = run_deployment(args)
        except HearthError as error:
            sys.exit(f"send_path.py: {error}")
        if args.json:
            print(json.dumps(result))
        else:
            print_deployment(result)
        return
    results = run_sizes(args)
    if args.json:
        print(json.dumps(results))


if __name__ == "__main__":
    main()
