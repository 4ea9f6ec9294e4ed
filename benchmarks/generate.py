"""A deterministic synthetic deployment for the scale benchmarks, built through the library API.

    python benchmarks/generate.py --messages 1000000 --seed 1 --home ./bench-1m

Defaults: 1,000,000 archived chat messages over 5,000 conversations (log-normal lengths, alternating
turns, a Zipf vocabulary of 60,000 words with invented names in its tail), one active thread of
10,000 messages opened with New Chat (so it carries the last archived thread's final eight as its
handoff), 5,000 memory fragments, 2,000 memories added over time (so each conversation's snapshot
holds the memories that existed when it began), six household status fields, live context and a
rolling summary on the active thread, labelled archive documents cut into chunks, and one fact per
200 archived messages citing the turns it came from (``--facts``).

Everything is written through the public library (``Hearth.scope()`` and the layer objects) in bulk
mode: one ``store.write()`` transaction around each batch of about 10,000 messages, which the
library's own writes join. Vectors (``--vectors``): ``hashed`` (default) embeds every chat turn and
chunk through ``embed_pending`` with a hashed stand-in carrying the real model's id and dimension,
so the product's index holds one vector per turn in minutes; ``model`` uses the real embedder, as
the background job does (each turn with its speaker label and the previous turn; at the 25-30
texts a second the embedder gives on two shared cores, about an hour for 100k messages; measured
at 1.3 a second on a saturated machine, docs/benchmarks.md); ``none`` skips them. ``--vectors-only`` adds vectors to an existing
deployment. The same seed gives the same content. A ``bench.json`` manifest in the home directory
tells the other benchmarks which thread is active.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from contextlib import AbstractContextManager
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import HashedEmbedder, TextMaker, embedder_dim, load_embedder  # noqa: E402

from hearth import Hearth, Settings  # noqa: E402

BATCH = 10_000  # messages per write transaction
BASE = datetime(2022, 1, 3, 8, 0, tzinfo=timezone.utc)
SPAN_DAYS = 3 * 365
CONFIG = 'provider = "offline"\ninput_token_limit = 200000\n'
STATUS_FIELDS = (
    ("Location", ("home", "work", "travelling", "hospital"), "home"),
    ("Sleep", ("rested", "tired", "exhausted"), "tired"),
    ("Health", (), "recovering from a cold"),
    ("Work", ("on shift", "off", "on leave"), "off"),
    ("Mood", (), "quiet, a little low"),
    ("Kids", ("at school", "at home", "with their dad"), "at school"),
)
console = Console(stderr=True)


def stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class Batches:
    """Keeps one write transaction open across calls and commits it every ``size`` messages."""

    def __init__(self, store: Any, size: int = BATCH):
        self.store = store
        self.size = size
        self.count = 0
        self._open: AbstractContextManager | None = None

    def tick(self, n: int = 1) -> None:
        if self._open is None:
            self._open = self.store.write()
            self._open.__enter__()
        self.count += n
        if self.count >= self.size:
            self.flush()

    def flush(self) -> None:
        if self._open is not None:
            self._open.__exit__(None, None, None)
        self._open = None
        self.count = 0

    def abort(self, exc: BaseException) -> None:
        if self._open is not None:
            self._open.__exit__(type(exc), exc, exc.__traceback__)
        self._open = None


def conversation_sizes(rng: np.random.Generator, total: int, conversations: int) -> list[int]:
    """Log-normal lengths (many short threads, a few very long) summing exactly to ``total``."""
    if conversations <= 0:
        return []
    weights = rng.lognormal(0.0, 1.1, size=conversations)
    sizes = np.maximum(2, np.floor(weights / weights.sum() * total)).astype(np.int64)
    diff = total - int(sizes.sum())
    order = np.argsort(-sizes)
    i = 0
    while diff != 0:  # settle rounding on the longest threads
        j = order[i % conversations]
        step = 1 if diff > 0 else -1
        if sizes[j] + step >= 2:
            sizes[j] += step
            diff -= step
        i += 1
    return sizes.tolist()


def progress_bar() -> Progress:
    return Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                    TextColumn("{task.percentage:>3.0f}%"), TimeElapsedColumn(), TimeRemainingColumn(),
                    console=console)


def write_messages(scope: Any, batches: Batches, conversation_id: int, tm: TextMaker, count: int,
                   start: datetime, gap_seconds: float, advance) -> None:
    roles = ["user" if i % 2 == 0 else "assistant" for i in range(count)]
    texts = tm.messages(roles)
    for i, (role, text) in enumerate(zip(roles, texts)):
        batches.tick()
        scope.conversations.add_message(conversation_id, role, text,
                                        created_at=stamp(start + timedelta(seconds=gap_seconds * i)))
        if i % 500 == 499:
            advance(500)
    advance(count % 500)


def add_facts(hearth: Any, scope: Any, tm: TextMaker, rng: np.random.Generator, count: int) -> int:
    """``count`` facts as a model-backed helper writes them at checkpoints (E2): a short statement
    citing one or two neighbouring turns of the archive, so the send path's fact lists have an
    index and a vector graph of that size to search (embedded with the turns, below)."""
    if count <= 0:
        return 0
    from hearth.retrieval import facts as fact_store

    store = hearth.store
    ids = [r[0] for r in store.connection().execute(
        "SELECT id FROM messages WHERE user_id = ? AND kind = 'chat' AND role IN ('user', 'assistant') ORDER BY id",
        (scope.user_id,))]
    if not ids:
        return 0
    written = 0
    picks = rng.integers(0, len(ids), size=count)
    spans = rng.integers(1, 3, size=count)
    for start in range(0, count, BATCH):
        with store.write() as conn:
            for pick, span in zip(picks[start:start + BATCH], spans[start:start + BATCH]):
                cited = ids[int(pick):int(pick) + int(span)]
                if fact_store.add(conn, scope.user_id, tm.phrase(6, 16).capitalize() + ".", cited,
                                  source="model") is not None:
                    written += 1
    return written


def add_vectors(hearth: Any, scope: Any, kind: str, progress: Progress) -> dict[str, Any]:
    """Embed every chat turn and chunk; returns what was done (or why not)."""
    if kind == "none":
        return {"vectors": "none"}
    real, reason = load_embedder(hearth)
    if real is None:
        console.print(f"vectors: not available yet: {reason}")
        return {"vectors": "not available yet", "reason": reason}
    from hearth.retrieval.semantic import embed_pending, model_id

    embedder = real if kind == "model" else HashedEmbedder(model_id(real), embedder_dim(real))
    task = progress.add_task(f"vectors ({kind})", total=None)

    def report(done: int, total: int) -> None:
        progress.update(task, completed=done, total=total)

    started = time.perf_counter()
    result = embed_pending(hearth.store, embedder, user_id=scope.user_id, batch=4_096 if kind == "hashed" else 64,
                           progress=report)
    return {"vectors": kind, "model": model_id(real), "embedded_messages": result.messages,
            "embedded_chunks": result.chunks, "embedded_facts": result.facts, "vector_seconds": round(time.perf_counter() - started, 1)}


def archive_document(tm: TextMaker, rng: np.random.Generator, assistant: str) -> str:
    turns = int(rng.integers(6, 30))
    roles = ["user" if i % 2 == 0 else "assistant" for i in range(turns)]
    lines = []
    for role, text in zip(roles, tm.messages(roles)):
        lines.append(("User said:" if role == "user" else assistant) + "\n" + text)
    return "\n\n".join(lines)


def generate(args: argparse.Namespace) -> dict[str, Any]:
    home = Path(args.home).expanduser().resolve()
    if (home / "hearth.db").exists():
        if not args.force:
            raise SystemExit(f"{home} already holds a deployment; pass --force to replace it")
        shutil.rmtree(home)
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(CONFIG)
    tm = TextMaker(args.seed)
    rng = np.random.default_rng(args.seed + 2)
    timings: dict[str, float] = {}
    hearth = Hearth(Settings.resolve({"home": str(home)}, environ={}))
    scope = hearth.scope()
    store = hearth.store
    layers = scope.layers
    persona = scope.personas.create("companion", "Wren", identity="A warm, steady companion.",
                                    archive_access=True)
    assistant_label = persona.assistant_label

    with progress_bar() as progress:
        # Household status and fragments first: they are part of the profile every thread sees.
        t = time.perf_counter()
        for name, options, value in STATUS_FIELDS:
            layers.household.add_field(name, options=options or None, value=value)
        task = progress.add_task("fragments", total=args.fragments)
        tail = tm.words[3_000:]
        with store.write():
            for i in range(args.fragments):
                triggers = [tm.names[i % len(tm.names)] if i < len(tm.names) else tail[(i * 7) % len(tail)]]
                if i % 3 == 0:
                    triggers.append(f"{tail[(i * 11) % len(tail)]} {tail[(i * 13) % len(tail)]}")
                layers.fragments.add(triggers, tm.phrase(20, 60), category=("people", "places", "words")[i % 3])
                if i % 100 == 99:
                    progress.advance(task, 100)
        progress.update(task, completed=args.fragments)
        timings["fragments_s"] = time.perf_counter() - t

        # Archived conversations, with memories arriving over the same years.
        t = time.perf_counter()
        sizes = conversation_sizes(rng, args.messages, args.conversations)
        step = timedelta(days=SPAN_DAYS) / max(1, args.conversations)
        per_memory = args.conversations / max(1, args.memories)
        task = progress.add_task("archived messages", total=args.messages)
        batches = Batches(store)
        memories_added = 0
        try:
            for c, size in enumerate(sizes):
                while memories_added < args.memories and memories_added * per_memory <= c:
                    batches.tick()
                    scope.memories.add(f"Memory {memories_added + 1}: {tm.phrase(8, 16)}",
                                       category=("people", "health", "home", "work")[memories_added % 4])
                    memories_added += 1
                start = BASE + step * c
                batches.tick()
                conversation = scope.conversations.create(persona.id, title=tm.phrase(2, 5).capitalize(),
                                                          created_at=stamp(start))
                write_messages(scope, batches, conversation.id, tm, size, start, 75.0,
                               lambda n: progress.advance(task, n))
            while memories_added < args.memories:
                batches.tick()
                scope.memories.add(f"Memory {memories_added + 1}: {tm.phrase(8, 16)}")
                memories_added += 1
            batches.flush()
        except BaseException as exc:
            batches.abort(exc)
            raise
        timings["archived_messages_s"] = time.perf_counter() - t

        # The active thread: the newest conversation, where the sends happen.
        t = time.perf_counter()
        task = progress.add_task("active thread", total=args.active)
        start = BASE + timedelta(days=SPAN_DAYS + 1)
        # Opened with New Chat, as a person opens one: it carries the last archived thread's final
        # eight as its handoff (H6), which every send's stored prompt then holds.
        opened = scope.new_chat(persona.id, title="Today", channel="api")
        active = opened.conversation
        handoff = dict(opened.handoff)
        with store.write() as conn:
            conn.execute("UPDATE conversations SET created_at = ? WHERE id = ?", (stamp(start), active.id))
        batches = Batches(store)
        try:
            write_messages(scope, batches, active.id, tm, args.active, start, 40.0,
                           lambda n: progress.advance(task, n))
            batches.flush()
        except BaseException as exc:
            batches.abort(exc)
            raise
        if args.active:
            from hearth.memory.helpers import OfflineHelper

            layers.live_context.set(active.id, mood="tired but hopeful", events="dentist on Thursday",
                                    needs="a calm evening", summary="talking through the week")
            layers.live_context.add_nudge(active.id, "ask how the dentist visit went")
            layers.summaries.refresh(active.id, OfflineHelper(), force=True)
        timings["active_thread_s"] = time.perf_counter() - t

        # Imported archive documents (labelled transcripts), cut into chunks by the archive.
        t = time.perf_counter()
        from hearth.retrieval.archive import Archive

        archive = Archive(store, scope.user_id)
        task = progress.add_task("archive documents", total=args.documents)
        chunks = 0
        with store.write():
            for d in range(args.documents):
                day = (BASE - timedelta(days=int(rng.integers(30, 2_000)))).date().isoformat()
                result = archive.add_text(f"Old portal thread {d + 1}: {tm.phrase(2, 4)}",
                                          archive_document(tm, rng, assistant_label),
                                          collection=("portal", "letters", "journal")[d % 3], source="import",
                                          document_date=day)
                chunks += result.chunks_added
                progress.advance(task)
        timings["archive_s"] = time.perf_counter() - t

        t = time.perf_counter()
        facts = add_facts(hearth, scope, tm, rng, args.facts)
        timings["facts_s"] = time.perf_counter() - t

        vectors = add_vectors(hearth, scope, args.vectors, progress)

    conn = store.connection()
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    manifest = {
        "seed": args.seed, "messages": args.messages, "conversations": args.conversations,
        "active_messages": args.active, "active_conversation_id": active.id, "persona_id": persona.id,
        "user_id": scope.user_id, "fragments": args.fragments, "memories": args.memories,
        "documents": args.documents, "chunks": chunks, "facts": facts,
        "handoff": {"source_conversation_id": opened.source_conversation_id, **handoff}, **vectors,
        "timings_s": {k: round(v, 1) for k, v in timings.items()},
        "database_mib": round((home / "hearth.db").stat().st_size / 2**20, 1),
    }
    (home / "bench.json").write_text(json.dumps(manifest, indent=2))
    hearth.close()
    return manifest


def vectors_only(args: argparse.Namespace) -> dict[str, Any]:
    home = Path(args.home).expanduser().resolve()
    manifest_path = home / "bench.json"
    if not manifest_path.exists():
        raise SystemExit(f"{home} has no bench.json: generate the deployment first")
    manifest = json.loads(manifest_path.read_text())
    hearth = Hearth(Settings.resolve({"home": str(home)}, environ={}))
    with progress_bar() as progress:
        manifest.update(add_vectors(hearth, hearth.scope(manifest["user_id"]), args.vectors, progress))
    manifest["database_mib"] = round((home / "hearth.db").stat().st_size / 2**20, 1)
    manifest_path.write_text(json.dumps(manifest, indent=2))
    hearth.close()
    return manifest


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=1_000_000, help="archived chat messages")
    parser.add_argument("--conversations", type=int, default=5_000)
    parser.add_argument("--active", type=int, default=10_000, help="messages in the active thread")
    parser.add_argument("--fragments", type=int, default=5_000)
    parser.add_argument("--memories", type=int, default=2_000)
    parser.add_argument("--documents", type=int, default=600, help="imported archive documents")
    parser.add_argument("--facts", type=int, default=None,
                        help="facts citing archived turns, as a model-backed helper writes them (E2);"
                             " default one per 200 archived messages (5,000 at a million)")
    parser.add_argument("--vectors", choices=("hashed", "model", "none"), default="hashed")
    parser.add_argument("--vectors-only", action="store_true", help="add vectors to an existing deployment")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--home", default="bench-deployment")
    parser.add_argument("--force", action="store_true", help="replace an existing deployment")
    args = parser.parse_args(argv)
    if args.conversations < 1 or args.messages < 2 * args.conversations:
        parser.error("need at least one conversation and two messages per conversation")
    if args.facts is None:
        args.facts = args.messages // 200
    started = time.perf_counter()
    manifest = vectors_only(args) if args.vectors_only else generate(args)
    manifest["total_s"] = round(time.perf_counter() - started, 1)
    print(json.dumps(manifest, indent=2))


if __name__ == "__main__":
    main()
