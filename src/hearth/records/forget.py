"""Delete forever, with everything derived from it (B4), and retention (B5).

Trash keeps a conversation; *forgetting* removes it and every place its words travelled:

- the messages and their ledger events; FTS rows (triggers) and embeddings (cascade);
- facts written at ingestion that cite any of them (E2: a trigger removes a fact with a source
  turn), with their keyword rows and vectors;
- verbatim handoffs that quoted them: the stored handoff record and the visible handoff bubble
  in the destination thread are rendered again from what remains (or removed), and the
  destination's stored prompt is rebuilt;
- rolling summaries, live context, open nudges and continuity capsules built from them (rebuilt
  later by durable jobs), and a Responses API chain or compaction input that may carry them;
- search-log entries whose query came from them or whose results cite them;
- suggestions (pending or decided) whose evidence quotes them or that came from a forgotten thread;
- for a memory: its versions, snapshots and stored prompts (M2), and suggestions that proposed it;
- for an archive document: its chunks, their FTS rows and embeddings, its kept turns (the
  thread view), and the handoffs of chats that continued it (record and visible bubble removed,
  the stored prompt rebuilt).

Where each of these lives, and how its rows go, is not listed here: every table that can hold
text has an entry in the store's registry (``hearth.store.stored``, S14); :func:`purge` resolves
which messages a scope covers and walks that registry.

The removal is one write transaction. The ledger keeps a receipt with counts only. Afterwards a
durable ``forget.compact`` job merges the full-text indexes so no term of the forgotten text
survives in an FTS segment, truncates the WAL and drops saved vector-index files that still held
the forgotten vectors. ``PRAGMA secure_delete`` is on for every connection, so freed pages and cells
are zeroed rather than left in the file. :func:`verify` reads the raw bytes of the database file,
its WAL and the vector files and reports whether a canary string is still present anywhere.

Forgetting conversations and folders follows the owner confirmation pattern of Continuity
Cleanup: :meth:`Forgetting.preview` returns counts and a scope token; :meth:`Forgetting.apply`
needs that token and the exact phrase, recomputes the scope inside its transaction and removes
nothing if it changed. Another user's item answers exactly like an unknown one.

Backups are out of reach by design: a backup written before forgetting still holds the text.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import unicodedata
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from hearth.errors import Conflict, InvalidInput, NotFound
from hearth.ops.jobs import enqueue
from hearth.prompt import prepared
from hearth.prompt.prepared import Ready
from hearth.records import ledger
from hearth.records.temporal import parse_moment
from hearth.store import Connection, versions
from hearth.store.queries import forget as stored
from hearth.store.stored import REGISTRY, Doomed
from hearth.text import STOPWORDS, WORD_RE

if TYPE_CHECKING:
    from hearth.memory.helpers.base import Helper
    from hearth.memory.memories import Memories
    from hearth.records.context import Context
    from hearth.store import Store

CONFIRMATION_PHRASE = "FORGET FOREVER"
TARGETS = ("message", "conversation", "folder", "document", "memory", "trash", "range")
COMPACT_JOB = "forget.compact"
_REBUILD_KINDS = ("summary.refresh", "live_context.refresh")


@dataclass(frozen=True)
class ForgetPreview:
    """What would be removed, in counts only, and the token :meth:`Forgetting.apply` needs."""

    target: str
    counts: dict[str, int]
    token: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class ForgetReceipt:
    """Counts of what was removed or rebuilt; the same numbers the ledger records."""

    target: str
    counts: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class _Scope:
    conversations: list[int] = field(default_factory=list)
    messages: list[int] = field(default_factory=list)  # single messages outside whole conversations
    folders: list[int] = field(default_factory=list)
    documents: list[int] = field(default_factory=list)
    memories: list[int] = field(default_factory=list)
    search_log: list[int] = field(default_factory=list)  # entries forgotten by date (range)
    proposals: list[int] = field(default_factory=list)  # suggestions forgotten by date (range)

    def key(self) -> dict[str, list[int]]:
        return {k: sorted(v) for k, v in asdict(self).items()}


class Forgetting:
    def __init__(self, ctx: "Context", memories: "Memories"):
        self._ctx = ctx
        self._memories = memories
        self.store = ctx.store
        self.user_id = ctx.user_id

    # -- what a target covers ----------------------------------------------------------------------
    def _resolve(self, conn: Connection, target: str, ident: int | None,
                 start: str | None, end: str | None) -> _Scope:
        u = self.user_id
        s = _Scope()
        if target not in TARGETS:
            raise InvalidInput(f"target must be one of {', '.join(TARGETS)}")
        if target in ("message", "conversation", "folder", "document", "memory"):
            if isinstance(ident, bool) or not isinstance(ident, int) or ident < 1:
                raise InvalidInput(f"forgetting a {target} needs its id")
        if target == "message":
            kind = stored.message_kind(conn, u, ident)  # type: ignore[arg-type]
            if kind is None:
                raise NotFound(f"no message {ident}")
            if kind == "static_prompt":
                raise InvalidInput("a stored system prompt is rebuilt, not forgotten; forget the conversation")
            s.messages = [ident]  # type: ignore[list-item]
        elif target == "conversation":
            if not stored.exists(conn, u, target, ident):  # type: ignore[arg-type]
                raise NotFound(f"no conversation {ident}")
            s.conversations = [ident]  # type: ignore[list-item]
        elif target == "folder":
            if not stored.exists(conn, u, target, ident):  # type: ignore[arg-type]
                raise NotFound(f"no folder {ident}")
            s.folders = [ident]  # type: ignore[list-item]
            s.conversations = stored.conversations_in_folder(conn, u, ident)  # type: ignore[arg-type]
        elif target == "document":
            if not stored.exists(conn, u, target, ident):  # type: ignore[arg-type]
                raise NotFound(f"no archive document {ident}")
            s.documents = [ident]  # type: ignore[list-item]
        elif target == "memory":
            if not stored.exists(conn, u, target, ident):  # type: ignore[arg-type]
                raise NotFound(f"no memory {ident}")
            s.memories = [ident]  # type: ignore[list-item]
        elif target == "trash":
            s.conversations = stored.trashed_conversations(conn, u)
        else:
            if start is None or end is None:
                raise InvalidInput("forgetting a date range needs a start and an end date")
            if start >= end:
                raise InvalidInput("the start of the range must be before its end")
            # Conversations begun inside the range go whole; elsewhere only the turns inside it.
            s = _Scope(**stored.in_range(conn, u, start, end))
        return s

    def _counts(self, conn: Connection, s: _Scope) -> dict[str, int]:
        conv_messages = stored.thread_messages(conn, s.conversations)
        chunks = stored.document_chunks(conn, s.documents)
        # Turns put away after edited messages (W2) go too: a thread's with it, a message's with it.
        put_away = (stored.threads_put_away(conn, s.conversations)
                    + len(stored.put_away(conn, self.user_id, list(s.messages))))
        return {"conversations": len(s.conversations), "messages": conv_messages + len(s.messages) + put_away,
                "folders": len(s.folders), "documents": len(s.documents), "chunks": chunks,
                "memories": len(s.memories)}

    @staticmethod
    def _token(user_id: int, target: str, s: _Scope, counts: dict[str, int]) -> str:
        material = json.dumps({"v": 1, "user": user_id, "target": target, **s.key(), "counts": counts},
                              separators=(",", ":"), sort_keys=True)
        return hashlib.sha256(material.encode()).hexdigest()

    @staticmethod
    def _range(start: Any, end: Any) -> tuple[str | None, str | None]:
        if start is None and end is None:
            return None, None
        return (parse_moment(start, "start date", end_of_day=False),
                parse_moment(end, "end date", end_of_day=True))

    # -- the owner confirmation pattern --------------------------------------------------------------
    def preview(self, target: str, ident: int | None = None, *, start: Any = None, end: Any = None) -> ForgetPreview:
        """Counts of what forgetting would remove, and the scope token to confirm it with."""
        begin, finish = self._range(start, end)
        with self.store.read() as conn:
            s = self._resolve(conn, target, ident, begin, finish)
            counts = self._counts(conn, s)
            return ForgetPreview(target, counts, self._token(self.user_id, target, s, counts))

    def apply(self, target: str, ident: int | None = None, *, token: str, phrase: str,
              start: Any = None, end: Any = None) -> ForgetReceipt:
        """Remove the previewed scope and everything derived from it, or nothing at all."""
        if phrase != CONFIRMATION_PHRASE:
            raise InvalidInput(f"type the exact phrase {CONFIRMATION_PHRASE!r} to confirm")
        if not isinstance(token, str) or not token:
            raise InvalidInput("the preview's scope token is required")
        begin, finish = self._range(start, end)

        def attempt(ready: Ready | None) -> dict[str, int]:
            with self.store.write() as conn:
                s = self._resolve(conn, target, ident, begin, finish)
                if not hmac.compare_digest(self._token(self.user_id, target, s, self._counts(conn, s)), token):
                    raise Conflict("what this would forget changed since the preview; nothing was removed. "
                                   "Preview again and confirm.")
                counts = purge(self._ctx, self._memories, conn, s, ready)
                ledger.append(conn, user_id=self.user_id, kind="forget.receipt", payload={"target": target, **counts})
            return counts

        # The prompts rebuilt after the purge are filled outside the write lock (U5).
        return ForgetReceipt(target, prepared.run(self.store, attempt))

    def empty_trash(self, *, token: str, phrase: str) -> ForgetReceipt:
        return self.apply("trash", token=token, phrase=phrase)

    def undo_partial(self, conversation_id: int, message_id: int) -> ForgetReceipt:
        """Remove a stopped reply that was kept by default, when the person undoes it (W12).

        Only a reply marked ``partial``, with no other version, that is still the thread's last turn:
        anything else is a Conflict and nothing changes. It goes with everything derived from it.
        """

        def attempt(ready: Ready | None) -> dict[str, int]:
            with self.store.write() as conn:
                last = stored.last_turn(conn, self.user_id, conversation_id)
                if last is None or last[0] != message_id:
                    raise Conflict("only the thread's last reply can be undone, right after it was stopped")
                _, role, metadata = last
                if role != "assistant" or not metadata.get("partial") or int(metadata.get("alternatives") or 1) > 1:
                    raise Conflict("this reply is not a stopped reply that can be undone")
                s = self._resolve(conn, "message", message_id, None, None)
                counts = purge(self._ctx, self._memories, conn, s, ready)
                ledger.append(conn, user_id=self.user_id, kind="forget.receipt", payload={"target": "message", **counts})
            return counts

        return ForgetReceipt("message", prepared.run(self.store, attempt))

    def delete_document(self, document_id: int) -> ForgetReceipt:
        """Remove one archive document the way its delete button always has (no confirmation
        phrase: it can be imported again), with everything derived from it (B4)."""
        with self.store.write() as conn:
            s = self._resolve(conn, "document", document_id, None, None)
            counts = purge(self._ctx, self._memories, conn, s)
            ledger.append(conn, user_id=self.user_id, kind="forget.receipt", payload={"target": "document", **counts})
        return ForgetReceipt("document", counts)

    def clear_search_log(self, *, phrase: str) -> ForgetReceipt:
        """Remove every entry of this user's search log (B5)."""
        from hearth.retrieval import searchlog

        if phrase != CONFIRMATION_PHRASE:
            raise InvalidInput(f"type the exact phrase {CONFIRMATION_PHRASE!r} to confirm")
        with self.store.write() as conn:
            removed = searchlog.clear(conn, self.user_id)
            ledger.append(conn, user_id=self.user_id, kind="forget.receipt",
                          payload={"target": "search_log", "search_log_entries": removed})
            enqueue(conn, self.user_id, COMPACT_JOB, {}, dedupe_key="compact")
        return ForgetReceipt("search_log", {"search_log_entries": removed})


# -- the cascade ------------------------------------------------------------------------------------
# The receipt's counts, in the order the ledger records them.
RECEIPT = ("facts", "handoffs_rewritten", "search_log_entries", "suggestions", "summaries_and_context",
           "conversations", "messages", "folders", "documents", "chunks", "memories", "prompts_rebuilt")


def purge(ctx: "Context", memories: "Memories", conn: Connection, s: _Scope,
          ready: Ready | None = None) -> dict[str, int]:
    """Remove a resolved scope and everything derived from it, in the caller's transaction.

    With ``ready`` (the caller's write runs under ``prepared.run``) the stored prompts rebuilt
    afterwards are filled outside the write lock (U5).

    What goes where is the store's registry of what each area stores (``store/stored``): this
    resolves the messages a scope covers, then walks the registry's steps with the three hooks that
    need an area's logic (rendering handoffs again, deleting memories, rebuilding stored prompts)."""
    from hearth.continuity.branch import rewrite_forgotten

    u = ctx.user_id
    whole = list(s.conversations)
    single = [m for m in s.messages]
    # Every message going away, with its text (to find quotes of it) and its conversation.
    rows = stored.doomed_messages(conn, u, whole, single)
    gone_ids = {r[0] for r in rows}
    # Quotes are looked for only for single messages: what came from a whole forgotten thread is
    # found by its conversation and message ids, which stays fast at any size.
    texts = [r[2] for r in rows if r[0] in set(single) and r[3] == "chat" and r[2].strip()]
    touched = sorted({r[1] for r in rows if r[0] in set(single)} - set(whole))
    # Turns put away after a forgotten message of the person's (W2 branches of its versions) go
    # with it, and the branches of those turns in turn; their words are looked for like its own.
    put_away = stored.put_away(conn, u, [r[0] for r in rows if r[0] in set(single)])
    texts += [r[1] for r in put_away if r[2] == "chat" and r[1].strip()]
    stashed = [r[0] for r in put_away]
    gone_ids |= set(stashed)
    # A whole thread's put-away turns go with it (cascade); they are counted like its others.
    whole_put_away = stored.threads_put_away(conn, whole)
    # Threads that stay but lose turns: what was built from those turns on is dropped and rebuilt.
    first: dict[int, int] = {}
    for r in rows:
        if r[1] in touched:
            first[r[1]] = min(first.get(r[1], r[0]), r[0])

    doomed = Doomed(u, conversations=whole, messages=single, gone=gone_ids, stashed=stashed, texts=texts,
                    touched=touched, first=first, folders=list(s.folders), documents=list(s.documents),
                    memories=list(s.memories), search_log=list(s.search_log), proposals=list(s.proposals))

    def handoffs(conn: Connection, d: Doomed) -> int:
        rewritten, destinations = rewrite_forgotten(conn, u, ctx.settings, d.gone, set(d.conversations))
        d.rebuild |= destinations
        return rewritten

    def forget_memories(conn: Connection, d: Doomed) -> int:
        return sum(memories.delete(memory_id) for memory_id in d.memories)

    def prompts(conn: Connection, d: Doomed) -> int:
        return ctx.rebuild_prompts(conn, sorted(d.rebuild - set(d.conversations)), ready=ready)

    walked = REGISTRY.walk(conn, doomed, {"handoffs": handoffs, "memories": forget_memories, "prompts": prompts})
    counts = {key: walked.get(key, 0) for key in RECEIPT}
    counts.update(conversations=len(whole), messages=len(gone_ids) + whole_put_away, folders=len(s.folders),
                  documents=len(s.documents), memories=len(s.memories))

    # Summaries and live context of the threads that stay are rebuilt by durable jobs.
    for conversation_id in first:
        for kind in _REBUILD_KINDS:
            enqueue(conn, u, kind, {"conversation_id": conversation_id, "force": True},
                    dedupe_key=f"forget:{conversation_id}")
    enqueue(conn, u, COMPACT_JOB, {"messages": sorted(gone_ids)[:50_000], "chunks": doomed.chunks[:50_000],
                                   "facts": doomed.facts[:50_000]}, dedupe_key=None)
    return counts


# -- afterwards: indexes and files -----------------------------------------------------------------
def compact(store: "Store", user_id: int | None = None) -> dict[str, int]:
    """Merge the FTS indexes (dropping every trace of deleted rows), drop stale saved vector
    files, and truncate the WAL. Cost grows with the size of the full-text index; see
    docs/memory.md. On PostgreSQL the tables forgetting deletes from are vacuumed instead: dead
    rows and their GIN and HNSW index entries are removed and their space marked free. The
    process's caches keyed by text (query vectors, memory vectors) and of rows' texts (stored
    prompts) are emptied too."""
    from hearth.memory import duplicates
    from hearth.retrieval.semantic import INDEXES, forget_queries

    duplicates.forget_cached()
    forget_queries()
    versions.forget()

    # SQLite merges its FTS5 indexes and truncates the WAL; PostgreSQL vacuums these tables.
    store.engine.reclaim(store, RECLAIMED)
    dropped = INDEXES.drop_saved(store.key, user_id) if store.engine.vector_index == "in_process" else 0
    return {"vector_files_dropped": dropped}


# The tables that hold text or vectors forgetting removes (vacuumed where the engine needs it).
RECLAIMED = REGISTRY.reclaimed()


def checkpoint(store: "Store") -> None:
    """Copy the WAL into the database file and truncate it to zero bytes (SQLite only)."""
    store.engine.checkpoint(store.connection())


def compact_job(ctx: "Context", payload: dict[str, Any], helper: "Helper") -> None:
    from hearth.retrieval.semantic import INDEXES

    if ctx.store.engine.vector_index == "in_process":
        INDEXES.discard(ctx.store.key, ctx.user_id, payload.get("messages", []), payload.get("chunks", []),
                        payload.get("facts", []))
    compact(ctx.store, ctx.user_id)


@dataclass(frozen=True)
class Verification:
    """Where a canary string was still found (file names only, never content)."""

    canary_chars: int
    files_checked: int
    found_in: list[str]
    fts_terms: int

    @property
    def clean(self) -> bool:
        return not self.found_in and not self.fts_terms

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "clean": self.clean}


def index_words(canary: str) -> list[str]:
    """The canary's words as the keyword index holds them (lower case, diacritics folded, split at
    an apostrophe as FTS5's tokenizer does), without stopwords and single letters: "a" or "the" is
    in any index, so finding one alone says nothing about the canary."""
    words: dict[str, None] = {}
    for match in WORD_RE.finditer(canary.casefold()):
        word = match.group()
        if word in STOPWORDS or word.replace("'", "") in STOPWORDS:
            continue
        plain = "".join(c for c in unicodedata.normalize("NFD", word) if not unicodedata.combining(c))
        for part in plain.split("'"):
            if len(part) > 1 and part not in STOPWORDS:
                words.setdefault(part, None)
    return list(words)


def verify(store: "Store", canary: str) -> Verification:
    """Prove a canary string is gone: the phrase itself in the raw bytes of the database file, its
    WAL (after a checkpoint) and the saved vector files, in any letter case, and each of its words
    that is not a stopword (:func:`index_words`) in the FTS vocabulary. On PostgreSQL, whose files
    belong to the server: the phrase in every text column of every table, and those words in the
    keyword index's terms (the tsvector each indexed row yields)."""
    if not isinstance(canary, str) or len(canary.strip()) < 6:
        raise InvalidInput("the canary must be at least 6 characters, so a match means something")
    canary = canary.strip()
    checked, found, terms = store.engine.find_text(store, canary, index_words(canary))
    return Verification(len(canary), checked, found, terms)


