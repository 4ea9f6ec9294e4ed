"""The review queue (F3, G4): suggestions about the person wait here until a human decides.

Proposals come from background helpers: household status changes (HS2), fragment additions and
updates (the review job, "DreamWeave" in the seeds), and later extracted memories. Each carries its
kind, the proposed change, a reason, and where it helps the person's own quoted words (evidence,
shown in the queue and never logged). Approving applies the change, optionally with edits, in the
same transaction; dismissing remembers the proposal's content hash so the same suggestion is not
offered again unchanged. Nothing is applied automatically unless the owner turned on auto-approve
for that kind (``auto_approve.status_change``, ``auto_approve.fragment``, ``auto_approve.memory``;
all off by default).

The review job reads the recent conversation, the rolling summary, the live context and the
fragment list, and asks the helper for fragment suggestions.
"""

from __future__ import annotations

import builtins
import hashlib
import json
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, Protocol

from hearth.errors import Conflict, HearthError, InvalidInput, NotFound
from hearth.memory import duplicates
from hearth.memory.helpers import skips
from hearth.memory.helpers.base import HelperOutputError, ReviewInput, TurnText, one_line
from hearth.memory.memories import check_memory
from hearth.ops.jobs import cursor, enqueue, set_cursor
from hearth.outreach.activations import CHECKIN_KIND, parse_when
from hearth.records import ledger
from hearth.store import Connection, utcnow
from hearth.store.queries import proposals, turns
from hearth.store.queries.proposals import StoredProposal

if TYPE_CHECKING:
    from hearth.memory.helpers.base import Helper
    from hearth.memory.memories import Memories, Memory
    from hearth.outreach.activations import Activations
    from hearth.prompt.layers.fragments import Fragments
    from hearth.prompt.layers.household import Household
    from hearth.prompt.layers.live_context import LiveContext
    from hearth.prompt.layers.settings import LayerSettings
    from hearth.prompt.layers.summary import Summaries
    from hearth.records.context import Context

JOB_KIND = "review.run"
KINDS = ("fragment_add", "fragment_update", "status_change", "memory_add", CHECKIN_KIND)
AUTO_SETTING = {"fragment_add": "auto_approve.fragment", "fragment_update": "auto_approve.fragment",
                "status_change": "auto_approve.status_change", "memory_add": "auto_approve.memory",
                CHECKIN_KIND: "auto_approve.checkin"}
# Fields an approval may edit, per kind.
EDITABLE = {
    "fragment_add": ("category", "triggers", "definition", "all_of", "any_of", "none_of", "priority"),
    "fragment_update": ("category", "triggers", "definition", "all_of", "any_of", "none_of", "priority"),
    "status_change": ("to",),
    "memory_add": ("text", "category", "importance", "resolution"),
    CHECKIN_KIND: ("note", "at", "channel"),
}
REVIEW_MESSAGES = 40
MAX_REASON = 500
MAX_EVIDENCE = 1_000


@dataclass(frozen=True)
class Proposal(StoredProposal):
    """One suggestion in the review queue; the HTTP API answers with this record as it is."""

    label: str  # one line for lists (see describe); a field so that answers carry it

    @classmethod
    def of(cls, p: StoredProposal) -> "Proposal":
        return cls(**{f.name: getattr(p, f.name) for f in fields(StoredProposal)},
                   label=describe(p.kind, p.payload, p.source))

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def describe(kind: str, p: dict[str, Any], source: str) -> str:
    """One line for lists: what would change, offline suggestions labelled (G3)."""
    if kind == "status_change":
        text = f"{p['field']}: {p.get('from') or '(unset)'} -> {p['to']}"
    elif kind in ("fragment_add", "fragment_update"):
        verb = "add" if kind == "fragment_add" else f"update #{p.get('fragment_id')}"
        text = f"fragment {verb} [{p.get('category', '')}] {', '.join(p.get('triggers', []))}: {p.get('definition', '')}"
    elif kind == CHECKIN_KIND:
        text = f"check-in at {p.get('at', '')}: {p.get('note', '')}"
    elif p.get("memory_id"):
        verb = "update" if p.get("fact_changed") else "correction"
        text = f"memory {verb} #{p['memory_id']}: {p.get('text', '')}"
    else:
        text = f"memory: {p.get('text', '')}"
        conflict = p.get("conflict")
        if isinstance(conflict, dict):
            verb = "contradicts" if conflict.get("relation") == "contradiction" else "repeats"
            text += f" ({verb} memory #{conflict.get('memory_id')}: {conflict.get('existing_text', '')})"
            if conflict.get("judge") == "model":
                text += " [the model's verdict]"
            elif conflict.get("fallback"):
                text += " [offline verdict: the model check failed]"
    return f"(offline suggestion) {text}" if source == "offline" else text


def _norm(value: Any) -> Any:
    if isinstance(value, str):
        return one_line(value).casefold()
    if isinstance(value, (list, tuple)):
        return sorted(_norm(v) for v in value)
    if isinstance(value, dict):
        return {k: _norm(v) for k, v in sorted(value.items())}
    return value


def content_hash(kind: str, payload: dict[str, Any]) -> str:
    """Identity of a suggestion's content: case, spacing and trigger order do not make it new."""
    canonical = json.dumps({"kind": kind, "payload": _norm(payload)}, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def _check_payload(kind: str, payload: dict[str, Any]) -> dict[str, Any]:
    if kind not in KINDS:
        raise InvalidInput(f"unknown proposal kind {kind!r}")
    if not isinstance(payload, dict):
        raise InvalidInput("a proposal payload must be an object")
    required = {"status_change": ("field_id", "field", "to"), "fragment_add": ("triggers", "definition"),
                "fragment_update": ("fragment_id", "definition", "triggers"), "memory_add": ("text",),
                CHECKIN_KIND: ("persona_id", "note", "at")}[kind]
    missing = [k for k in required if payload.get(k) in (None, "", [])]
    if missing:
        raise InvalidInput(f"a {kind} proposal needs {', '.join(missing)}")
    if kind == "memory_add":
        # What approving it would refuse is refused now, whoever proposes it (MCP, extraction,
        # mining): the queue never holds a suggestion that can never be applied.
        text, category, importance = check_memory(payload["text"], payload.get("category", ""),
                                                  payload.get("importance", 0))
        payload.update(text=text, category=category, importance=importance)
    return payload


class Layers(Protocol):
    """The layers an approved proposal changes and a review reads (``wiring.MemoryLayers``)."""

    settings: LayerSettings
    household: Household
    fragments: Fragments
    live_context: LiveContext
    summaries: Summaries


class ReviewQueue:
    def __init__(self, ctx: "Context", layers: Layers, memories: "Memories", activations: "Activations"):
        self._ctx = ctx
        self._layers = layers
        self._memories = memories
        self._activations = activations
        self.store = ctx.store
        self.user_id = ctx.user_id

    # -- reading ---------------------------------------------------------------------------------
    def get(self, proposal_id: int) -> Proposal:
        found = proposals.get(self.store.connection(), self.user_id, proposal_id)
        if found is None:
            raise NotFound(f"no proposal {proposal_id}")
        return Proposal.of(found)

    def list(self, status: str | None = "pending", kind: str | None = None, limit: int = 200,
             conversation_id: int | None = None) -> list[Proposal]:
        if status is not None and status not in ("pending", "approved", "dismissed"):
            raise InvalidInput("status must be pending, approved or dismissed")
        if kind is not None and kind not in KINDS:
            raise InvalidInput(f"kind must be one of {', '.join(KINDS)}")
        # ``conversation_id``: one thread's suggestions (W11: the notice in the thread).
        return [Proposal.of(p) for p in proposals.listing(self.store.connection(), self.user_id,
                                                          max(1, min(limit, 1000)), conversation_id=conversation_id,
                                                          status=status, kind=kind)]

    def counts(self) -> dict[str, int]:
        found = proposals.counts(self.store.connection(), self.user_id)
        return {s: found.get(s, 0) for s in ("pending", "approved", "dismissed")}

    # -- proposing -------------------------------------------------------------------------------
    def screen(self, text: str) -> duplicates.Finding | None:
        """The review rule for a new memory, run when it is proposed (U8): the memory it repeats or
        contradicts most, or None. Reads only (the model judge, when configured, is asked here,
        outside any write transaction)."""
        embedder = duplicate_embedder(self._ctx)
        findings = duplicates.find(self.store.connection(), self.user_id, text, embedder=embedder,
                                   judgement=self._judge(text, embedder))
        return findings[0] if findings else None

    def propose(self, kind: str, payload: dict[str, Any], reason: str, *, evidence: str = "",
                source: str = "offline", conversation_id: int | None = None,
                repeat_dismissed: bool = False, span_id: int | None = None) -> Proposal | None:
        """Queue a suggestion. Returns None when the same content is already pending or was
        dismissed before, or (a new memory) when it repeats a kept memory with the same content
        words (U8, ``duplicates.already_remembered``). With auto-approve on for its kind, it is applied at once."""
        payload = _check_payload(kind, dict(payload))
        if source not in ("offline", "model"):
            raise InvalidInput("source must be offline or model")
        reason = one_line(reason)[:MAX_REASON] or "No reason given."
        digest = content_hash(kind, {k: v for k, v in payload.items() if k != "conflict"})
        fallback = None
        if kind == "memory_add" and "conflict" not in payload and not payload.get("memory_id"):
            # B3: a suggested memory that repeats or contradicts one already kept waits with both
            # texts side by side, as merge / supersede / keep both; it is never applied unseen.
            embedder = duplicate_embedder(self._ctx)
            judgement = self._judge(str(payload["text"]), embedder)
            findings = duplicates.find(self.store.connection(), self.user_id, str(payload["text"]),
                                       embedder=embedder, judgement=judgement)
            if findings and duplicates.already_remembered(str(payload["text"]), findings[0]):
                # U8: approving it could change nothing, so it is not queued; the ledger says which
                # memory it repeats (ids and a score, never the text).
                with self.store.write() as conn:
                    ledger.append(conn, user_id=self.user_id, conversation_id=conversation_id,
                                  kind="review.already_remembered", channel="inner", span_id=span_id,
                                  payload={"memory_id": findings[0].memory_id, "kind": kind, "source": source,
                                           "score": round(findings[0].score, 3)})
                return None
            if findings:
                payload["conflict"] = findings[0].to_dict()
            fallback = judgement.fallback if judgement is not None else None
        with self.store.write() as conn:
            if proposals.seen(conn, self.user_id, digest, dismissed=not repeat_dismissed):
                return None
            proposal_id = proposals.insert(conn, self.user_id, kind, conversation_id, payload, reason,
                                           (evidence or "")[:MAX_EVIDENCE], source, digest, utcnow())
            event = {"proposal_id": proposal_id, "kind": kind, "source": source}
            if fallback is not None:  # the model judge failed: the offline verdict decided (B3)
                event["judge_fallback"] = fallback
            ledger.append(conn, user_id=self.user_id, conversation_id=conversation_id, kind="review.proposed",
                          channel="inner", payload=event, span_id=span_id)
            if self._layers.settings.get(AUTO_SETTING[kind]) and "conflict" not in payload:
                # A suggestion that cannot be applied as it stands stays pending for the owner.
                proposals.begin_auto_approve(conn)
                try:
                    decided = self._decide(conn, proposal_id, "auto", None)
                except (InvalidInput, Conflict, NotFound):
                    proposals.undo_auto_approve(conn)
                    decided = None
                proposals.end_auto_approve(conn)
                if decided is not None:
                    return decided
            return self.get(proposal_id)

    def remember(self, items: builtins.list[dict[str, Any]], *, actor: str = "owner") -> tuple[
            builtins.list[Memory], builtins.list[Proposal]]:
        """Add memories (the owner's, or imported facts), except any that repeats or contradicts a
        memory already kept, or an earlier item of the same batch: it waits in the review queue
        with both texts, to merge, supersede or keep both (B3). One transaction."""
        if not isinstance(items, list) or not items:
            raise InvalidInput("a memory import needs a non-empty list")
        memories = self._memories
        embedder = duplicate_embedder(self._ctx)
        for i, item in enumerate(items):
            if not isinstance(item, dict) or not isinstance(item.get("text"), str):
                raise InvalidInput(f"item {i}: memory text must not be empty")
        # The model judge (when configured) is asked before the write transaction opens: the write
        # lock is never held while a model answers. Earlier items of the batch meet the offline rules.
        judgements = [self._judge(item["text"], embedder) if item["text"].strip() else None for item in items]
        self.prepare([item["text"] for item in items])
        added: builtins.list[Memory] = []
        queued: builtins.list[Proposal] = []
        with self.store.write() as conn:
            for i, item in enumerate(items):
                judgement = judgements[i]
                findings = duplicates.find(conn, self.user_id, item["text"], embedder=embedder, judgement=judgement)
                if not findings:
                    try:
                        added.append(memories.import_many([item], actor=actor)[0])
                    except InvalidInput as exc:
                        raise InvalidInput(str(exc).replace("item 0", f"item {i}", 1)) from None
                    if judgement is not None and judgement.fallback is not None:
                        # Kept on the offline verdict alone; the ledger says so (codes and counts only).
                        ledger.append(conn, user_id=self.user_id, kind="memory.judge_fallback",
                                      payload={"memory_id": added[-1].id, "pairs": judgement.asked,
                                               "error": judgement.fallback})
                    continue
                top = findings[0]
                payload = {"text": item["text"].strip(), "category": str(item.get("category", "") or ""),
                           "importance": int(item.get("importance", 0) or 0), "conflict": top.to_dict()}
                what = "contradicts" if top.relation == "contradiction" else "repeats"
                proposal = self.propose("memory_add", payload, f"It {what} memory #{top.memory_id} ({top.reason}).",
                                        repeat_dismissed=True)
                if proposal is None:  # the same suggestion is already waiting
                    digest = content_hash("memory_add", {k: v for k, v in payload.items() if k != "conflict"})
                    proposal = self._pending_by_hash(conn, digest)
                queued.append(proposal)
        return added, queued

    def prepare(self, texts: builtins.list[str]) -> None:
        """Embed what duplicate detection will compare ``texts`` with, before a caller opens the
        write transaction its proposals join (B3: the write lock is never held while a model runs)."""
        duplicates.prepare(self.store.connection(), self.user_id, texts, duplicate_embedder(self._ctx))

    def _judge(self, text: str, embedder: Any) -> duplicates.Judgement | None:
        """The model judge's verdicts on ``text`` against the same-subject memories (B3), or None
        when no provider is configured (the offline rules decide alone). Inside a caller's write
        transaction the model is not asked (it would hold the write lock): the offline verdict
        stands, recorded as ``in_transaction``."""
        judge = contradiction_judge(self._ctx)
        if judge is None:
            return None
        conn = self.store.connection()
        if conn.in_transaction:
            return duplicates.Judgement({}, 0, "in_transaction")
        return duplicates.ask_judge(conn, self.user_id, text, judge, embedder=embedder)

    def _pending_by_hash(self, conn: Connection, digest: str) -> Proposal:
        return self.get(proposals.pending_by_hash(conn, self.user_id, digest))

    # -- deciding --------------------------------------------------------------------------------
    def approve(self, proposal_id: int, edits: dict[str, Any] | None = None) -> Proposal:
        """Apply a pending proposal, optionally edited first, in one transaction."""
        with self.store.write() as conn:
            return self._decide(conn, proposal_id, "owner", edits or {})

    def dismiss(self, proposal_id: int) -> Proposal:
        with self.store.write() as conn:
            proposal = self._pending(proposal_id)
            proposals.set_dismissed(conn, proposal.id, utcnow())
            ledger.append(conn, user_id=self.user_id, conversation_id=proposal.conversation_id,
                          kind="review.dismissed", payload={"proposal_id": proposal.id, "kind": proposal.kind})
            return self.get(proposal.id)

    def _pending(self, proposal_id: int) -> Proposal:
        proposal = self.get(proposal_id)
        if proposal.status != "pending":
            raise Conflict(f"proposal {proposal_id} is already {proposal.status}")
        return proposal

    def _decide(self, conn: Connection, proposal_id: int, by: str, edits: dict[str, Any] | None) -> Proposal:
        proposal = self._pending(proposal_id)
        edits = edits or {}
        unknown = set(edits) - set(EDITABLE[proposal.kind])
        if unknown:
            raise InvalidInput(f"a {proposal.kind} proposal cannot edit {', '.join(sorted(unknown))}")
        payload = {**proposal.payload, **edits}
        result_id = self._apply(proposal, payload, by)
        proposals.set_approved(conn, proposal.id, by, utcnow(), result_id, payload)
        ledger.append(conn, user_id=self.user_id, conversation_id=proposal.conversation_id, kind="review.approved",
                      payload={"proposal_id": proposal.id, "kind": proposal.kind, "by": by, "edited": bool(edits)})
        return self.get(proposal.id)

    def _apply(self, proposal: Proposal, payload: dict[str, Any], by: str) -> int:
        layers = self._layers
        fragment_fields = {k: payload[k] for k in ("all_of", "any_of", "none_of", "priority") if k in payload}
        if proposal.kind == "status_change":
            source = "auto" if by == "auto" else "approved"
            return layers.household.set(int(payload["field_id"]), payload["to"], source=source,
                                        proposal_id=proposal.id).id
        if proposal.kind == "fragment_add":
            return layers.fragments.add(payload["triggers"], payload["definition"], payload.get("category", ""),
                                        **fragment_fields, actor="auto" if by == "auto" else "suggestion").id
        if proposal.kind == "fragment_update":
            try:
                return layers.fragments.edit(int(payload["fragment_id"]), triggers=payload["triggers"],
                                             definition=payload["definition"], category=payload.get("category"),
                                             **fragment_fields, actor="auto" if by == "auto" else "suggestion").id
            except NotFound:
                raise Conflict("the fragment this proposal updates no longer exists; dismiss it") from None
        if proposal.kind == CHECKIN_KIND:
            return self._activations.add(
                int(payload["persona_id"]), "checkin", note=str(payload["note"]),
                channel=str(payload.get("channel", "web")), first_at=parse_when(payload["at"])).id
        actor = "auto" if by == "auto" else "suggestion"
        if payload.get("memory_id"):
            # A proposed change to an existing memory: a correction (it was never true as written),
            # or with fact_changed a new version superseding the old one (B1).
            try:
                memory, _rebuilt = self._memories.edit(
                    int(payload["memory_id"]), text=payload["text"], correction=not payload.get("fact_changed"),
                    actor=actor, proposal_id=proposal.id)
            except NotFound:
                raise Conflict("the memory this proposal changes no longer exists; dismiss it") from None
            return memory.id
        conflict = payload.get("conflict")
        resolution = payload.get("resolution")
        if isinstance(conflict, dict) and resolution != "keep_both":
            return self._resolve(proposal, payload, conflict, resolution, actor)
        if resolution is not None and resolution not in duplicates.RESOLUTIONS:
            raise InvalidInput(f"resolution must be one of {', '.join(duplicates.RESOLUTIONS)}")
        memory = self._memories.add(payload["text"], payload.get("category", ""),
                                    int(payload.get("importance", 0)), actor=actor, proposal_id=proposal.id)
        return memory.id

    def _resolve(self, proposal: Proposal, payload: dict[str, Any], conflict: dict[str, Any], resolution: Any,
                 actor: str) -> int:
        """Merge into, or supersede, the memory a suggestion repeats or contradicts (B3)."""
        if resolution not in duplicates.RESOLUTIONS:
            raise InvalidInput("this suggestion repeats or contradicts a memory: choose a resolution, "
                               f"one of {', '.join(duplicates.RESOLUTIONS)}")
        memories = self._memories
        try:
            existing = memories.get(int(conflict["memory_id"]))
        except NotFound:
            raise Conflict("the memory this suggestion compares with no longer exists; keep both or dismiss") from None
        text = str(payload["text"]).strip()
        importance = max(existing.importance, int(payload.get("importance", 0)))
        if resolution == "supersede":
            # The old meaning is retired and kept in history (B1).
            memories.edit(existing.id, text=text, importance=importance, actor=actor, proposal_id=proposal.id)
        elif text != existing.text or importance != existing.importance:
            # Merge: one memory stays, worded as approved; a rewording, so a correction of it.
            memories.edit(existing.id, text=text, importance=importance, correction=True, actor=actor,
                          proposal_id=proposal.id)
        return existing.id

    # -- running the review ----------------------------------------------------------------------
    def request(self, conversation_id: int) -> int:
        """Queue a review of a conversation now (the worker runs it)."""
        with self.store.write() as conn:
            self._ctx.conversations.get(conversation_id)
            return enqueue(conn, self.user_id, JOB_KIND, {"conversation_id": conversation_id, "full": True},
                           dedupe_key=f"conversation:{conversation_id}")

    def run(self, conversation_id: int, helper: "Helper", *, full: bool = False) -> builtins.list[Proposal]:
        """Read the recent conversation and context, ask the helper, queue its suggestions."""
        layers = self._layers
        self._ctx.conversations.get(conversation_id)
        with self.store.read() as conn:
            since = 0 if full else cursor(conn, conversation_id, JOB_KIND)
            rows = turns.recent(conn, conversation_id, since, REVIEW_MESSAGES)
        if not rows:
            return []
        read = [TurnText(role, content, message_id) for message_id, role, content in reversed(rows)]
        summary = layers.summaries.current(conversation_id)
        live = layers.live_context.get(conversation_id)
        material = ReviewInput(
            messages=read, summary=summary.text if summary else "",
            live_context={k: getattr(live, k) for k in ("mood", "events", "needs", "summary")} if live else {},
            fragments=[f.to_dict() for f in layers.fragments.list()])
        skipped: HelperOutputError | None = None
        try:
            suggestions = helper.propose_fragments(material)  # outside any transaction
        except HelperOutputError as exc:
            suggestions, skipped = [], exc  # skipped (E13): these turns are not reviewed again
        made: list[Proposal] = []
        with self.store.write() as conn:
            if skipped is not None:
                skips.record(conn, self.user_id, "fragments", skipped, conversation_id=conversation_id)
            for s in suggestions:
                payload: dict[str, Any] = {"category": s.category, "triggers": list(s.triggers), "definition": s.definition}
                if s.action == "update":
                    payload["fragment_id"] = s.fragment_id
                proposal = self.propose("fragment_update" if s.action == "update" else "fragment_add", payload,
                                        s.reason, evidence=s.evidence, source=s.source, conversation_id=conversation_id)
                if proposal is not None:
                    made.append(proposal)
            set_cursor(conn, self.user_id, conversation_id, JOB_KIND, read[-1].message_id)
        return made


def duplicate_embedder(ctx: "Context") -> Any:
    """The deployment's embedder for duplicate checks (B3), or None when it cannot load: the
    lexical and rule checks still run."""
    if not ctx.settings.duplicate_embeddings:
        return None
    try:
        from hearth.retrieval.semantic import shared_embedder

        return shared_embedder(ctx)
    except (HearthError, OSError, ImportError):
        return None


def contradiction_judge(ctx: "Context") -> duplicates.Judge | None:
    """The model helper when a provider is configured, to judge contradictions (B3); None when
    offline, where the rules decide alone."""
    from hearth.memory.helpers import helper_for

    helper = helper_for(ctx)
    return helper if helper.name == "model" else None


def review_job(ctx: "Context", payload: dict[str, Any], helper: "Helper") -> None:
    conversation_id = payload.get("conversation_id")
    if not isinstance(conversation_id, int):
        raise InvalidInput("review job needs a conversation id")
    ctx.review().run(conversation_id, helper, full=bool(payload.get("full")))
