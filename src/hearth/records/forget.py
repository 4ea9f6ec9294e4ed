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
from hearth.records import ledger
from hearth.records.temporal import parse_moment
from hearth.retrieval.facts import citing as citing_facts
from hearth.store import Connection, Row, engine_of, versions
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


def _ids(rows: Any) -> list[int]:
    return [r[0] for r in rows]


def _in(ids: list[int]) -> str:
    return ",".join("?" * len(ids))


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
            row = conn.execute("SELECT kind FROM messages WHERE id = ? AND user_id = ?", (ident, u)).fetchone()
            if row is None:
                raise NotFound(f"no message {ident}")
            if row[0] == "static_prompt":
                raise InvalidInput("a stored system prompt is rebuilt, not forgotten; forget the conversation")
            s.messages = [ident]  # type: ignore[list-item]
        elif target == "conversation":
            if not conn.execute("SELECT 1 FROM conversations WHERE id = ? AND user_id = ?", (ident, u)).fetchone():
                raise NotFound(f"no conversation {ident}")
            s.conversations = [ident]  # type: ignore[list-item]
        elif target == "folder":
            if not conn.execute("SELECT 1 FROM folders WHERE id = ? AND user_id = ?", (ident, u)).fetchone():
                raise NotFound(f"no folder {ident}")
            s.folders = [ident]  # type: ignore[list-item]
            s.conversations = _ids(conn.execute(
                "SELECT id FROM conversations WHERE folder_id = ? AND user_id = ? ORDER BY id", (ident, u)))
        elif target == "document":
            if not conn.execute("SELECT 1 FROM archive_documents WHERE id = ? AND user_id = ?", (ident, u)).fetchone():
                raise NotFound(f"no archive document {ident}")
            s.documents = [ident]  # type: ignore[list-item]
        elif target == "memory":
            if not conn.execute("SELECT 1 FROM memories WHERE id = ? AND user_id = ?", (ident, u)).fetchone():
                raise NotFound(f"no memory {ident}")
            s.memories = [ident]  # type: ignore[list-item]
        elif target == "trash":
            s.conversations = _ids(conn.execute(
                "SELECT id FROM conversations WHERE user_id = ? AND trashed_at IS NOT NULL ORDER BY id", (u,)))
        else:
            if start is None or end is None:
                raise InvalidInput("forgetting a date range needs a start and an end date")
            if start >= end:
                raise InvalidInput("the start of the range must be before its end")
            # Conversations begun inside the range go whole; elsewhere only the turns inside it.
            s.conversations = _ids(conn.execute(
                "SELECT id FROM conversations WHERE user_id = ? AND created_at >= ? AND created_at < ? ORDER BY id",
                (u, start, end)))
            s.messages = _ids(conn.execute(
                f"SELECT id FROM messages WHERE user_id = ? AND created_at >= ? AND created_at < ?"
                f" AND kind != 'static_prompt' AND conversation_id NOT IN ({_in(s.conversations)}) ORDER BY id",
                (u, start, end, *s.conversations)))
            s.documents = _ids(conn.execute(
                "SELECT id FROM archive_documents WHERE user_id = ? AND created_at >= ? AND created_at < ?",
                (u, start, end)))
            s.memories = _ids(conn.execute(
                "SELECT id FROM memories WHERE user_id = ? AND created_at >= ? AND created_at < ?", (u, start, end)))
            s.search_log = _ids(conn.execute(
                "SELECT id FROM search_log WHERE user_id = ? AND created_at >= ? AND created_at < ?", (u, start, end)))
            s.proposals = _ids(conn.execute(
                "SELECT id FROM proposals WHERE user_id = ? AND created_at >= ? AND created_at < ?", (u, start, end)))
        return s

    def _counts(self, conn: Connection, s: _Scope) -> dict[str, int]:
        conv_messages = conn.execute(
            f"SELECT count(*) FROM messages WHERE conversation_id IN ({_in(s.conversations)})"
            " AND kind != 'static_prompt'", s.conversations).fetchone()[0]
        chunks = conn.execute(f"SELECT count(*) FROM archive_chunks WHERE document_id IN ({_in(s.documents)})",
                              s.documents).fetchone()[0]
        # Turns put away after edited messages (W2) go too: a thread's with it, a message's with it.
        put_away = conn.execute(
            f"SELECT count(*) FROM branch_messages WHERE conversation_id IN ({_in(s.conversations)})",
            s.conversations).fetchone()[0] + len(_put_away(conn, self.user_id, list(s.messages)))
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
        with self.store.write() as conn:
            s = self._resolve(conn, target, ident, begin, finish)
            if not hmac.compare_digest(self._token(self.user_id, target, s, self._counts(conn, s)), token):
                raise Conflict("what this would forget changed since the preview; nothing was removed. "
                               "Preview again and confirm.")
            counts = purge(self._ctx, self._memories, conn, s)
            ledger.append(conn, user_id=self.user_id, kind="forget.receipt", payload={"target": target, **counts})
        return ForgetReceipt(target, counts)

    def empty_trash(self, *, token: str, phrase: str) -> ForgetReceipt:
        return self.apply("trash", token=token, phrase=phrase)

    def undo_partial(self, conversation_id: int, message_id: int) -> ForgetReceipt:
        """Remove a stopped reply that was kept by default, when the person undoes it (W12).

        Only a reply marked ``partial``, with no other version, that is still the thread's last turn:
        anything else is a Conflict and nothing changes. It goes with everything derived from it.
        """
        with self.store.write() as conn:
            last = conn.execute(
                "SELECT id, role, metadata FROM messages WHERE conversation_id = ? AND user_id = ? AND kind = 'chat'"
                " AND role IN ('user', 'assistant') ORDER BY id DESC LIMIT 1",
                (conversation_id, self.user_id)).fetchone()
            if last is None or last["id"] != message_id:
                raise Conflict("only the thread's last reply can be undone, right after it was stopped")
            metadata = last["metadata"] if isinstance(last["metadata"], dict) else json.loads(last["metadata"] or "{}")
            if last["role"] != "assistant" or not metadata.get("partial") or int(metadata.get("alternatives") or 1) > 1:
                raise Conflict("this reply is not a stopped reply that can be undone")
            s = self._resolve(conn, "message", message_id, None, None)
            counts = purge(self._ctx, self._memories, conn, s)
            ledger.append(conn, user_id=self.user_id, kind="forget.receipt", payload={"target": "message", **counts})
        return ForgetReceipt("message", counts)

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
def purge(ctx: "Context", memories: "Memories", conn: Connection, s: _Scope) -> dict[str, int]:
    """Remove a resolved scope and everything derived from it, in the caller's transaction."""
    u = ctx.user_id
    counts: dict[str, int] = {}
    whole = list(s.conversations)
    single = [m for m in s.messages]
    # Every message going away, with its text (to find quotes of it) and its conversation. Two
    # lookups, not one with OR: each uses its own index, where the OR scanned all the user's messages.
    select = "SELECT id, conversation_id, content, kind FROM messages WHERE user_id = ? AND kind != 'static_prompt'"
    found: dict[int, tuple] = {}
    if whole:
        found.update((r[0], r) for r in conn.execute(f"{select} AND conversation_id IN ({_in(whole)})", (u, *whole)))
    if single:
        found.update((r[0], r) for r in conn.execute(f"{select} AND id IN ({_in(single)})", (u, *single)))
    rows = [found[k] for k in sorted(found)]
    gone_ids = {r[0] for r in rows}
    # Quotes are looked for only for single messages: what came from a whole forgotten thread is
    # found by its conversation and message ids, which stays fast at any size.
    texts = [r[2] for r in rows if r[0] in set(single) and r[3] == "chat" and r[2].strip()]
    touched = sorted({r[1] for r in rows if r[0] in set(single)} - set(whole))
    # Turns put away after a forgotten message of the person's (W2 branches of its versions) go
    # with it, and the branches of those turns in turn; their words are looked for like its own.
    put_away = _put_away(conn, u, [r[0] for r in rows if r[0] in set(single)])
    texts += [r[1] for r in put_away if r[2] == "chat" and r[1].strip()]
    stashed = [r[0] for r in put_away]
    gone_ids |= set(stashed)
    # A whole thread's put-away turns go with it (cascade); they are counted like its others.
    whole_put_away = conn.execute(f"SELECT count(*) FROM branch_messages WHERE conversation_id IN ({_in(whole)})",
                                  whole).fetchone()[0]

    # Facts citing any forgotten turn go with it (the trigger on fact_sources): found first, for
    # the counts and to take their vectors out of the loaded index.
    fact_ids = citing_facts(conn, u, sorted(gone_ids))
    counts["facts"] = len(fact_ids)
    counts["handoffs_rewritten"], rebuild = _rewrite_handoffs(ctx, conn, gone_ids, set(whole))
    counts["search_log_entries"] = _forget_searches(conn, u, gone_ids, whole, s.documents, texts, s.search_log)
    counts["suggestions"] = _forget_proposals(conn, u, whole, touched, texts, s.memories, s.proposals)

    # Thread-local continuity built from forgotten turns in threads that stay: dropped now, rebuilt
    # by durable jobs from what remains.
    first: dict[int, int] = {}
    for r in rows:
        if r[1] in touched:
            first[r[1]] = min(first.get(r[1], r[0]), r[0])
    derived = 0
    for conversation_id, first_id in first.items():
        derived += conn.execute("DELETE FROM thread_summaries WHERE conversation_id = ? AND through_message_id >= ?",
                                (conversation_id, first_id)).rowcount
        derived += conn.execute(
            "UPDATE live_context SET mood = '', events = '', needs = '', summary = '', through_message_id = 0"
            " WHERE conversation_id = ? AND through_message_id >= ?", (conversation_id, first_id)).rowcount
        derived += conn.execute("DELETE FROM nudges WHERE conversation_id = ?", (conversation_id,)).rowcount
        # Continuity capsules written from these turns (E3): the capsule goes with its ledger event.
        derived += conn.execute(
            "DELETE FROM events WHERE id IN (SELECT id FROM capsules WHERE conversation_id = ?"
            " AND through_message_id >= ?)", (conversation_id, first_id)).rowcount
        # A Responses API chain (E7) and a compaction's replacement input may carry the turn: start over.
        derived += conn.execute("DELETE FROM response_chains WHERE conversation_id = ?", (conversation_id,)).rowcount
        for kind in _REBUILD_KINDS:
            enqueue(conn, u, kind, {"conversation_id": conversation_id, "force": True},
                    dedupe_key=f"forget:{conversation_id}")
    counts["summaries_and_context"] = derived

    # The messages themselves: deleting the ledger event removes the message (cascade), its FTS
    # row (trigger) and its embedding (cascade).
    if single:
        # Put-away turns: their events go, and with them their rows (cascade); then the branches.
        if stashed:
            conn.execute(f"DELETE FROM events WHERE user_id = ? AND id IN ({_in(stashed)})", (u, *stashed))
            conn.execute(f"DELETE FROM message_branches WHERE user_id = ? AND message_id IN ({_in(stashed)})",
                         (u, *stashed))
        conn.execute(f"DELETE FROM message_branches WHERE user_id = ? AND message_id IN ({_in(single)})",
                     (u, *single))
        conn.execute(f"DELETE FROM events WHERE user_id = ? AND id IN ({_in(single)})", (u, *single))
    if whole:
        conn.execute(f"DELETE FROM jobs WHERE user_id = ? AND status IN ('pending', 'dead')"
                     f" AND {engine_of(conn).json_int('payload', 'conversation_id')} IN ({_in(whole)})", (u, *whole))
        conn.execute(f"DELETE FROM conversations WHERE user_id = ? AND id IN ({_in(whole)})", (u, *whole))
    if s.folders:
        conn.execute(f"DELETE FROM folders WHERE user_id = ? AND id IN ({_in(s.folders)})", (u, *s.folders))
    counts["conversations"] = len(whole)
    counts["messages"] = len(gone_ids) + whole_put_away
    counts["folders"] = len(s.folders)

    chunk_ids = _ids(conn.execute(f"SELECT id FROM archive_chunks WHERE document_id IN ({_in(s.documents)})",
                                  s.documents))
    if s.documents:
        continued, holders = _forget_document_handoffs(conn, u, s.documents)
        counts["handoffs_rewritten"] += continued
        rebuild |= holders
        conn.execute(f"DELETE FROM archive_documents WHERE user_id = ? AND id IN ({_in(s.documents)})",
                     (u, *s.documents))
    counts["documents"] = len(s.documents)
    counts["chunks"] = len(chunk_ids)

    prompts = 0
    for memory_id in s.memories:
        prompts += memories.delete(memory_id)
    counts["memories"] = len(s.memories)
    counts["prompts_rebuilt"] = prompts + ctx.rebuild_prompts(conn, sorted(rebuild - set(whole)))

    enqueue(conn, u, COMPACT_JOB, {"messages": sorted(gone_ids)[:50_000], "chunks": chunk_ids[:50_000],
                                   "facts": fact_ids[:50_000]}, dedupe_key=None)
    return counts


def _put_away(conn: Connection, user_id: int, message_ids: list[int]) -> list[Row]:
    """(id, content, kind) of the turns kept after these messages' versions (W2), and after theirs."""
    out: list[Row] = []
    parents = list(message_ids)
    while parents:
        rows = conn.execute(
            f"SELECT b.id, b.content, b.kind FROM branch_messages b JOIN message_branches r ON r.id = b.branch_id"
            f" WHERE r.user_id = ? AND r.message_id IN ({_in(parents)})", (user_id, *parents)).fetchall()
        out += rows
        parents = [r[0] for r in rows]
    return out


def _rewrite_handoffs(ctx: "Context", conn: Connection, gone: set[int],
                      whole: set[int]) -> tuple[int, set[int]]:
    """Render again every handoff that quoted a forgotten message, from what remains of it.

    Returns (handoffs rewritten, destination conversations whose prompts need a rebuild)."""
    from hearth.continuity.branch import _as_source, _labels, _stored_ids
    from hearth.continuity.handoff import PLACEHOLDER_UUID, limits_from_settings, rerender

    u = ctx.user_id
    if not gone and not whole:
        return 0, set()
    # Handoffs from an archive document hold turn ids, not message ids: they go with the document.
    rows = conn.execute(
        "SELECT id, conversation_id, source_conversation_id, source_message_ids FROM conversation_summaries"
        " WHERE user_id = ? AND source_document_id IS NULL", (u,)).fetchall()
    rewritten, destinations = 0, set()
    for row in rows:
        ids = _stored_ids(row["source_message_ids"])
        from_whole = row["source_conversation_id"] in whole
        if not from_whole and not gone.intersection(ids):
            continue
        keep = [] if from_whole else [i for i in ids if i not in gone]
        source_id = row["source_conversation_id"]
        kept = conn.execute(
            f"SELECT id, role, kind, content, created_at FROM messages WHERE user_id = ? AND id IN ({_in(keep)})"
            " ORDER BY id", (u, *keep)).fetchall() if keep else []
        handoff = None
        if kept and source_id is not None:
            user_label, assistant_label = _labels(conn, u, source_id)
            title = conn.execute("SELECT title FROM conversations WHERE id = ?", (source_id,)).fetchone()
            handoff = rerender([_as_source(r) for r in kept], user_label=user_label, assistant_label=assistant_label,
                               limits=limits_from_settings(ctx.settings),
                               source_title=title[0] if title else None)
            if handoff.is_empty:
                handoff = None
        conn.execute(
            "UPDATE conversation_summaries SET source_message_ids = ?, handoff = ?, summary = '', recent_raw = ''"
            " WHERE id = ?",
            (json.dumps([r["id"] for r in kept] if handoff else []),
             handoff.model_text(PLACEHOLDER_UUID) if handoff else "", row["id"]))
        # The visible handoff bubble in the destination thread quotes the same turns.
        for artifact in conn.execute(
                "SELECT id, metadata FROM messages WHERE conversation_id = ? AND kind = 'handoff_artifact'",
                (row["conversation_id"],)).fetchall():
            if handoff is None:
                conn.execute("DELETE FROM events WHERE id = ?", (artifact["id"],))
            else:
                meta = {**json.loads(artifact["metadata"]), "source_message_ids": [r["id"] for r in kept]}
                conn.execute("UPDATE messages SET content = ?, metadata = ? WHERE id = ?",
                             (handoff.visible_text(), json.dumps(meta), artifact["id"]))
        rewritten += 1
        destinations.add(row["conversation_id"])
    return rewritten, destinations


def _forget_document_handoffs(conn: Connection, user_id: int, documents: list[int]) -> tuple[int, set[int]]:
    """Chats that continued a forgotten archive document lose the handoff quoting its turns: the
    record is emptied and the visible bubble removed (its event, so the message goes by cascade).
    Returns (handoffs removed, destination conversations whose prompts need a rebuild)."""
    rows = conn.execute(
        f"SELECT id, conversation_id FROM conversation_summaries WHERE user_id = ?"
        f" AND source_document_id IN ({_in(documents)})", (user_id, *documents)).fetchall()
    for row in rows:
        conn.execute("UPDATE conversation_summaries SET source_message_ids = '[]', handoff = '', summary = '',"
                     " recent_raw = '', source_document_id = NULL WHERE id = ?", (row["id"],))
        conn.execute("DELETE FROM events WHERE id IN (SELECT id FROM messages WHERE conversation_id = ?"
                     " AND kind = 'handoff_artifact')", (row["conversation_id"],))
    return len(rows), {row["conversation_id"] for row in rows}


def _quotes(text: str, texts: list[str]) -> bool:
    """Does ``text`` quote one of ``texts`` (or is it quoted by one)? Short fragments do not count."""
    folded = text.casefold()
    if len(folded) < 12:
        return any(folded and folded == t.casefold() for t in texts)
    return any(folded in t.casefold() or (len(t) >= 12 and t.casefold() in folded) for t in texts)


def _forget_searches(conn: Connection, user_id: int, gone: set[int], whole: list[int],
                     documents: list[int], texts: list[str], dated: list[int]) -> int:
    """Search-log entries made from a forgotten thread, citing a forgotten message, chunk or
    document, or whose query quotes a forgotten single message. Candidates are found in SQL (the
    log's results are JSON written by ``searchlog.record``) and confirmed by reading them."""
    doomed = set(dated)
    if whole:
        doomed.update(_ids(conn.execute(
            f"SELECT id FROM search_log WHERE user_id = ? AND conversation_id IN ({_in(whole)})", (user_id, *whole))))
    single = sorted(gone - set(_ids(conn.execute(
        f"SELECT id FROM messages WHERE conversation_id IN ({_in(whole)})", whole)))) if whole else sorted(gone)
    patterns = ([f'%"source_id": {c},%' for c in whole] + [f'%"source_id": {d},%' for d in documents]
                + [f'%"id": {m},%' for m in single])
    for i in range(0, len(patterns), 200):
        some = patterns[i:i + 200]
        where = " OR ".join("results LIKE ?" for _ in some)
        for row in conn.execute(f"SELECT id, results FROM search_log WHERE user_id = ? AND ({where})",
                                (user_id, *some)):
            for result in json.loads(row[1]):
                kind, rid, source = result.get("kind"), result.get("id"), result.get("source_id")
                if (kind == "message" and (rid in gone or source in whole)) or (
                        kind == "chunk" and source in documents):
                    doomed.add(row[0])
                    break
    engine = engine_of(conn)
    for text in texts[:200]:
        folded = text.casefold()
        # A short text matches a query only when equal (below); a long one also by containment.
        contains = f"{engine.contains('lower(query)', '?')} OR " if len(folded) >= 12 else ""
        doomed.update(_ids(conn.execute(
            f"SELECT id FROM search_log WHERE user_id = ? AND query != '' AND ({contains}"
            f"(length(query) >= 12 AND {engine.contains('?', 'lower(query)')}))",
            (user_id, *([folded] if contains else []), folded))))
        doomed.update(_ids(conn.execute(
            "SELECT id FROM search_log WHERE user_id = ? AND lower(query) = ?", (user_id, folded))))
    ids = sorted(doomed)
    for i in range(0, len(ids), 500):
        part = ids[i:i + 500]
        conn.execute(f"DELETE FROM search_log WHERE user_id = ? AND id IN ({_in(part)})", (user_id, *part))
    return len(ids)


def _forget_proposals(conn: Connection, user_id: int, whole: list[int], touched: list[int],
                      texts: list[str], memories: list[int], dated: list[int]) -> int:
    doomed = set(dated)
    if whole:
        doomed.update(_ids(conn.execute(
            f"SELECT id FROM proposals WHERE user_id = ? AND conversation_id IN ({_in(whole)})", (user_id, *whole))))
    if texts:
        for row in conn.execute(
                f"SELECT id, evidence, payload FROM proposals WHERE user_id = ?"
                f" AND (conversation_id IN ({_in(touched)}) OR conversation_id IS NULL)", (user_id, *touched)):
            if (row[1] and _quotes(row[1], texts)) or any(
                    isinstance(v, str) and v and _quotes(v, texts) for v in json.loads(row[2]).values()):
                doomed.add(row[0])
    ids = sorted(doomed)
    for i in range(0, len(ids), 500):
        part = ids[i:i + 500]
        conn.execute(f"DELETE FROM proposals WHERE user_id = ? AND id IN ({_in(part)})", (user_id, *part))
    return len(ids)


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
RECLAIMED = ("messages", "events", "message_attachments", "message_embeddings", "archive_chunks", "archive_documents",
             "archive_turns",
             "memories", "facts", "memory_versions", "search_log", "proposals", "artifacts", "summaries")


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


