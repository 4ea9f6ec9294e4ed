"""Cross-thread continuity: stored handoffs, automatic New Chat continuity, Branch / Fresh Chat.

Three paths share the pure renderer in :mod:`hearth.continuity.handoff`:

* :func:`handoff_text` gives the model-facing continuity block for a conversation's stored
  prompt. It re-renders the stored source message ids under the current limits (H9), only while
  the source conversation is eligible (V1, V2), with a fresh boundary UUID every time (H5).
  Retired generated-summary text is never read (H10).
* :func:`new_chat` creates a conversation that continues the most recent eligible conversation of
  the same persona (H6), when the persona has ``auto_continuity``.
* :func:`branch` creates a conversation from a chosen source with a visible handoff bubble (H7),
  idempotently per client retry key (H8).
* :func:`continue_document` does the same from an imported archive document (a ChatGPT or Claude
  conversation, read only): its last eight turns are the handoff, under the same limits.

Every write happens in one transaction with the conversation it belongs to (S3). The
``conversation_summaries`` row keeps its historical name; here it is only ever a handoff record:
the chosen source message ids plus a rendering kept for the record, never injected as is.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from hearth.continuity.handoff import (
    FINAL_TURNS,
    PLACEHOLDER_UUID,
    Handoff,
    SourceMessage,
    is_eligible,
    limits_from_settings,
    render_handoff,
    rerender,
)
from hearth.errors import Conflict, ConstraintError, InvalidInput, StoreError
from hearth.prompt import prepared
from hearth.prompt.prepared import Ready
from hearth.records import ledger
from hearth.records.conversations import MAX_TITLE, Conversation
from hearth.retrieval.archive import Archive
from hearth.store import Connection, utcnow
from hearth.store.queries import handoffs as queries
from hearth.store.queries.handoffs import DocumentTurn
from hearth.thread.character import GREETING_CHANNELS, open_with_greeting

if TYPE_CHECKING:
    from hearth.records.context import Context
    from hearth.records.personas import Persona
    from hearth.settings import Settings

MAX_RETRY_KEY = 200
# A collision of a fresh UUID with quoted text is astronomically unlikely; a few tries suffice.
_BOUNDARY_TRIES = 5


# --- reading ------------------------------------------------------------------------------------

def _eligible_conversation(conn: Connection, user_id: int, conversation_id: int) -> bool:
    """Whether the conversation may feed automatic continuity now (V1, V2)."""
    return queries.is_eligible(conn, user_id, conversation_id)


def _labels(conn: Connection, user_id: int, conversation_id: int) -> tuple[str, str]:
    """The speaker labels of the persona that held the source conversation (G6)."""
    labels = queries.conversation_labels(conn, user_id, conversation_id)
    if labels is None:
        raise StoreError(f"conversation {conversation_id} has no persona")
    return labels


def final_eight(conn: Connection, user_id: int, conversation_id: int) -> list[SourceMessage]:
    """The final eight eligible messages of a conversation, oldest first (H1).

    Reads newest first and stops once eight eligible turns are found, so a long conversation is
    not loaded whole. Eligibility is decided by the renderer's own rule, not restated in SQL.
    """
    return queries.last_chat_turns(conn, user_id, conversation_id, count=FINAL_TURNS, keep=is_eligible)


def _stored_ids(raw: str) -> list[int]:
    """Source message ids from a stored row; anything malformed is ignored, never trusted."""
    try:
        data = json.loads(raw or "[]")
    except json.JSONDecodeError:
        return []
    if not isinstance(data, list):
        return []
    return [v for v in data if isinstance(v, int) and not isinstance(v, bool)]


def _turn_source(turn: DocumentTurn) -> SourceMessage:
    """An archive document's turn as a handoff source (its id is the turn's, in document order)."""
    return SourceMessage(id=turn.id, role=turn.role, kind="chat", content=turn.text,
                         created_at=turn.created_at or "")


def document_final_eight(conn: Connection, user_id: int, document_id: int) -> list[SourceMessage]:
    """The final eight eligible turns of an archive document, oldest first, read newest first."""
    return [_turn_source(t) for t in queries.last_document_turns(
        conn, user_id, document_id, count=FINAL_TURNS, keep=lambda t: is_eligible(_turn_source(t)))]


def _persona_labels(conn: Connection, user_id: int, persona_id: int) -> tuple[str, str]:
    labels = queries.persona_labels(conn, user_id, persona_id)
    if labels is None:
        raise StoreError(f"persona {persona_id} is missing")
    return labels


def _document_handoff(conn: Connection, user_id: int, conversation_id: int, document_id: int,
                      ids: list[int], settings: "Settings") -> Handoff | None:
    """A continuation's handoff, rendered again from the document's stored turns (H9); the labels
    are those of the persona the continuation speaks with."""
    turns = queries.document_turns(conn, user_id, document_id, ids)
    persona_id = queries.conversation_persona(conn, user_id, conversation_id)
    if not turns or persona_id is None:
        return None
    user_label, assistant_label = _persona_labels(conn, user_id, persona_id)
    rendered = rerender([_turn_source(t) for t in turns], user_label=user_label, assistant_label=assistant_label,
                        limits=limits_from_settings(settings))
    return None if rendered.is_empty else rendered


def capture(conn: Connection, user_id: int, source_conversation_id: int, settings: "Settings") -> Handoff:
    """Render the handoff of a source conversation from database reads only (H1-H4, H6)."""
    user_label, assistant_label = _labels(conn, user_id, source_conversation_id)
    return render_handoff(
        final_eight(conn, user_id, source_conversation_id),
        user_label=user_label, assistant_label=assistant_label,
        limits=limits_from_settings(settings),
        source_title=queries.conversation_title(conn, source_conversation_id),
    )


def _model_text(handoff: Handoff) -> str:
    for _ in range(_BOUNDARY_TRIES):
        try:
            return handoff.model_text(uuid.uuid4())
        except InvalidInput:
            continue  # the quoted text contains this very boundary; draw another
    raise StoreError("could not choose a handoff boundary that is absent from the quoted text")


@dataclass(frozen=True)
class Quoted:
    """A conversation's handoff as its stored prompt quotes it: equal while the turns it carries
    are; ``text()`` encloses them in a boundary drawn fresh each time (H5), so the text is made
    where the prompt is, outside the write lock (``prompt.prepared``, U5)."""

    handoff: Handoff

    def text(self) -> str:
        return _model_text(self.handoff)


def handoff_quote(conn: Connection, user_id: int, conversation_id: int, settings: "Settings") -> Quoted | None:
    """What ``handoff_text`` encloses, or None: the turns only, read and chosen under the limits."""
    record = queries.handoff_of(conn, user_id, conversation_id)
    if record is not None and record.source_document_id is not None:
        ids = _stored_ids(record.source_message_ids)
        document = _document_handoff(conn, user_id, conversation_id, record.source_document_id, ids, settings) \
            if ids else None
        return Quoted(document) if document is not None else None
    if record is None or record.source_conversation_id is None:
        return None
    source_id = record.source_conversation_id
    if not _eligible_conversation(conn, user_id, source_id):
        return None
    ids = _stored_ids(record.source_message_ids)
    if not ids:
        return None
    turns = queries.conversation_messages(conn, user_id, source_id, ids)
    user_label, assistant_label = _labels(conn, user_id, source_id)
    rendered = rerender(turns, user_label=user_label, assistant_label=assistant_label,
                        limits=limits_from_settings(settings))
    return None if rendered.is_empty else Quoted(rendered)


def handoff_text(conn: Connection, user_id: int, conversation_id: int, settings: "Settings") -> str:
    """The model-facing continuity block for a conversation's stored prompt, or ``""``.

    Only a row with a non-empty ``handoff`` counts, and only while its source conversation is
    eligible: not trashed, not in a hidden folder, not shielded (V1, V2). The stored rendering is
    not used: the stored source ids that still exist and are still eligible are rendered again
    under the limits in force now (H9). ``summary`` and ``recent_raw`` are never read (H10).
    """
    quote = handoff_quote(conn, user_id, conversation_id, settings)
    return quote.text() if quote is not None else ""


def _store_handoff(conn: Connection, user_id: int, conversation_id: int, source_id: int | None,
                   handoff: Handoff, *, document_id: int | None = None) -> None:
    # The record keeps the model rendering with the fixed placeholder boundary, so it is the same
    # bytes on every retry; it is never injected as is (H9). Retired columns stay empty (H10).
    queries.insert_handoff(conn, user_id, conversation_id, source_id, document_id,
                           json.dumps(list(handoff.source_message_ids)), handoff.model_text(PLACEHOLDER_UUID),
                           utcnow())


# --- automatic New Chat continuity (H6) ----------------------------------------------------------

def most_recent_eligible(conn: Connection, user_id: int, persona_id: int) -> int | None:
    """The most recently updated eligible conversation of this persona that has a turn to carry.
    A card's greeting alone is not one: a thread opened and left would otherwise carry nothing
    but the greeting into the next, instead of the last real exchange (X3)."""
    return queries.most_recent_eligible(conn, user_id, persona_id)


@dataclass(frozen=True)
class NewChat:
    """A new conversation and, when one was carried, where its continuity came from."""

    conversation: Conversation
    source_conversation_id: int | None = None
    # Numbers only (selected, verbatim, markers, sizes); empty when nothing was carried.
    handoff: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"conversation": self.conversation.to_dict(), "source_conversation_id": self.source_conversation_id,
                "handoff": dict(self.handoff)}


def new_chat(ctx: "Context", persona_id: int | None = None, *, title: str = "", folder_id: int | None = None,
             channel: str = "web", continue_: bool = True, ready: Ready | None = None) -> NewChat:
    """Create a conversation, carrying the final eight of the most recent eligible one (H6).

    Selection and rendering are database reads inside the same write transaction that then
    creates the conversation (with its memory snapshot, P1) and its handoff row, so either both
    exist or neither does: a capture failure leaves no empty conversation behind. A persona
    without ``auto_continuity`` (or ``continue_=False``) gets a plain new conversation.

    On the web and the CLI a persona from a character card greets: the card's first message opens
    the thread, with or without a handoff, as SillyTavern opens every new chat (X3, ``character``).
    Its macros are filled outside the write lock (``prompt.prepared``, U5); ``ready`` is a caller's
    whose own write this joins.
    """
    persona = ctx.personas.get(persona_id) if persona_id else ctx.personas.default()
    ledger.check_channel(channel)
    try:
        return prepared.run(ctx.store, lambda ready: _new_chat(ctx, persona, title, folder_id, channel, continue_,
                                                               ready), ready)
    except ConstraintError as exc:
        raise StoreError(f"the new conversation could not be created: {exc}") from exc


def _new_chat(ctx: "Context", persona: "Persona", title: str, folder_id: int | None, channel: str, continue_: bool,
              ready: Ready | None) -> NewChat:
    """One attempt of ``new_chat``'s write (``prompt.prepared``): the greeting is filled outside the
    write lock, for the conversation id and start the first attempt was given (U5)."""
    with ctx.store.write() as conn:
        source_id = None
        handoff = None
        if continue_ and persona.auto_continuity:
            source_id = most_recent_eligible(conn, ctx.user_id, persona.id)
            if source_id is not None:
                handoff = capture(conn, ctx.user_id, source_id, ctx.settings)
        again = ready.kept.get("conversation") if ready is not None else None
        conversation = ctx.conversations.create(persona.id, title=title, folder_id=folder_id, channel=channel,
                                                created_at=again[1] if again else None,
                                                conversation_id=again[0] if again else None)
        if ready is not None:
            ready.kept["conversation"] = (conversation.id, conversation.created_at)
        if channel in GREETING_CHANNELS:
            open_with_greeting(conn, ctx.user_id, persona, conversation.id, channel, ready)
        if source_id is None or handoff is None or handoff.is_empty:
            return NewChat(conversation)
        _store_handoff(conn, ctx.user_id, conversation.id, source_id, handoff)
        diagnostics = handoff.diagnostics()
        ledger.append(conn, user_id=ctx.user_id, conversation_id=conversation.id,
                      kind="continuity.captured", channel=channel,
                      payload={"source_conversation_id": source_id, **diagnostics})
        return NewChat(conversation, source_id, diagnostics)


# --- Branch / Fresh Chat (H7, H8) ------------------------------------------------------------------

@dataclass(frozen=True)
class BranchResult:
    conversation: Conversation
    artifact_message_id: int | None
    source_conversation_id: int | None
    # False when the retry key had already produced this destination (H8).
    created: bool
    handoff: dict[str, int] = field(default_factory=dict)
    source_document_id: int | None = None  # an imported archive conversation continued (A5, X4)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["conversation"] = self.conversation.to_dict()
        return data


def check_retry_key(retry_key: Any) -> str:
    if not isinstance(retry_key, str) or not retry_key.strip():
        raise InvalidInput("a branch needs a retry key (any unique text chosen by the client)")
    retry_key = retry_key.strip()
    if len(retry_key) > MAX_RETRY_KEY:
        raise InvalidInput(f"retry key is longer than {MAX_RETRY_KEY} characters")
    return retry_key


def _branch_title(source_title: str) -> str:
    base = source_title.strip()
    if not base:
        return "Branch"
    suffix = " (branch)"
    return base[: MAX_TITLE - len(suffix)] + suffix


def _existing(ctx: "Context", conn: Connection, retry_key: str, source_id: int | None,
              document_id: int | None = None) -> BranchResult | None:
    request = queries.branch_request(conn, ctx.user_id, retry_key)
    if request is None:
        return None
    if ((request.source_conversation_id is not None and request.source_conversation_id != source_id)
            or (request.source_document_id is not None and request.source_document_id != document_id)):
        raise Conflict("this retry key already made a branch from another conversation; use a new key")
    destination = request.destination_conversation_id
    return BranchResult(ctx.conversations.get(destination), queries.first_artifact(conn, destination),
                        request.source_conversation_id, created=False,
                        source_document_id=request.source_document_id)


def branch(ctx: "Context", source_conversation_id: int, retry_key: str, title: str | None = None,
           *, channel: str = "web") -> BranchResult:
    """Create a Branch / Fresh Chat from a chosen source conversation (H7, H8).

    One transaction creates the destination (same persona, fresh memory snapshot), its visible
    assistant handoff bubble (kind ``handoff_artifact``, never eligible for a later handoff,
    keyword recall or archive ingestion) and its handoff row, so the first stored prompt can carry
    the continuity block while the source stays eligible. The retry key is recorded in the same
    transaction: the same key always returns the same destination, and concurrent requests with
    one key are serialised by the write lock, so exactly one destination is created.

    Branching is deliberate access: a hidden, trashed or shielded source may be branched from.
    """
    retry_key = check_retry_key(retry_key)
    ledger.check_channel(channel)
    try:
        with ctx.store.write() as conn:
            done = _existing(ctx, conn, retry_key, source_conversation_id)
            if done is not None:
                return done
            source = ctx.conversations.get(source_conversation_id)
            handoff = capture(conn, ctx.user_id, source.id, ctx.settings)
            if handoff.is_empty:
                raise Conflict("the source conversation has no messages to branch from")
            return _open_branch(ctx, conn, handoff, source.persona_id,
                                _branch_title(source.title) if title is None else title, source.title, channel,
                                retry_key, source_conversation_id=source.id)
    except ConstraintError as exc:
        raise StoreError(f"the branch could not be created: {exc}") from exc


def _open_branch(ctx: "Context", conn: Connection, handoff: Handoff, persona_id: int, title: str,
                 source_title: str, channel: str, retry_key: str, *, source_conversation_id: int | None = None,
                 source_document_id: int | None = None) -> BranchResult:
    """In the caller's transaction: the destination chat, its visible handoff bubble, its handoff
    record, the retry key and the ``conversation.branched`` event. The source is a conversation
    (Branch) or an imported archive document (Continue in a new chat)."""
    source = ({"source_conversation_id": source_conversation_id} if source_document_id is None
              else {"source_document_id": source_document_id})
    destination = ctx.conversations.create(persona_id, title=title, channel=channel)
    diagnostics = handoff.diagnostics()
    artifact_id = ledger.append_message(
        conn, user_id=ctx.user_id, conversation_id=destination.id, role="assistant",
        content=handoff.visible_text(source_title), kind="handoff_artifact", channel=channel,
        metadata={"artifact": "branch_handoff", **source, "source_message_ids": list(handoff.source_message_ids)},
    )
    _store_handoff(conn, ctx.user_id, destination.id, source_conversation_id, handoff,
                   document_id=source_document_id)
    queries.insert_branch_request(conn, ctx.user_id, retry_key, destination.id, utcnow(),
                                  source_conversation_id=source_conversation_id,
                                  source_document_id=source_document_id)
    ledger.append(conn, user_id=ctx.user_id, conversation_id=destination.id, kind="conversation.branched",
                  channel=channel, payload={**source, **diagnostics})
    return BranchResult(ctx.conversations.get(destination.id), artifact_id, source_conversation_id,
                        created=True, handoff=diagnostics, source_document_id=source_document_id)


# --- Continue an imported archive conversation (A5, X4) --------------------------------------------

def _continued_title(title: str) -> str:
    suffix = " (continued)"
    return (title.strip() or "Imported conversation")[: MAX_TITLE - len(suffix)] + suffix


def _continuing_persona(ctx: "Context", document: Any, persona_id: int | None) -> Any:
    """The persona asked for; else the one whose labels the import gave the turns, while it is
    there and not archived; else the default."""
    if persona_id is not None:
        return ctx.personas.get(persona_id)
    chosen = document.metadata.get("persona_id")
    if isinstance(chosen, int) and not isinstance(chosen, bool):
        for persona in ctx.personas.list():
            if persona.id == chosen:
                return persona
    return ctx.personas.default()


def continue_document(ctx: "Context", document_id: int, retry_key: str, *, persona_id: int | None = None,
                      channel: str = "web") -> BranchResult:
    """Continue an imported conversation (an archive document, read only) in a new chat.

    Branch's machinery with an archive document as the source: one transaction creates the chat,
    its visible handoff bubble quoting the document's last eight turns (the same limits, H1-H4)
    and its handoff record, whose source is the document and whose ids are the turns' (so it is
    rendered again from them under the limits in force, H9, and goes when the document is
    forgotten, B4). The retry key makes it idempotent (H8). Another user's document is unknown.
    """
    retry_key = check_retry_key(retry_key)
    ledger.check_channel(channel)
    try:
        with ctx.store.write() as conn:
            document = Archive(ctx.store, ctx.user_id).get(document_id)
            done = _existing(ctx, conn, retry_key, None, document.id)
            if done is not None:
                return done
            if not queries.has_document_turns(conn, document.id):
                raise Conflict("this document was imported before Hearth kept each turn; import the export "
                               "again to open and continue it as a thread")
            persona = _continuing_persona(ctx, document, persona_id)
            user_label, assistant_label = _persona_labels(conn, ctx.user_id, persona.id)
            handoff = render_handoff(document_final_eight(conn, ctx.user_id, document.id), user_label=user_label,
                                     assistant_label=assistant_label,
                                     limits=limits_from_settings(ctx.settings), source_title=document.title)
            if handoff.is_empty:
                raise Conflict("the document has no turns of yours or the companion's to continue from")
            return _open_branch(ctx, conn, handoff, persona.id, _continued_title(document.title), document.title,
                                channel, retry_key, source_document_id=document.id)
    except ConstraintError as exc:
        raise StoreError(f"the continuation could not be created: {exc}") from exc


# --- forgetting ---------------------------------------------------------------------------------

def rewrite_forgotten(conn: Connection, user_id: int, settings: "Settings", gone: set[int],
                      whole: set[int]) -> tuple[int, set[int]]:
    """Render again every handoff that quoted a forgotten message (B4), from what remains of it;
    a handoff from a forgotten whole thread, or with nothing left, is emptied (the record stays).

    Returns (handoffs rewritten, destination conversations whose prompts need a rebuild)."""
    if not gone and not whole:
        return 0, set()
    # Handoffs from an archive document hold turn ids, not message ids: they go with the document.
    records = queries.message_handoffs(conn, user_id)
    rewritten, destinations = 0, set()
    for record in records:
        ids = _stored_ids(record.source_message_ids)
        from_whole = record.source_conversation_id in whole
        if not from_whole and not gone.intersection(ids):
            continue
        keep = [] if from_whole else [i for i in ids if i not in gone]
        source_id = record.source_conversation_id
        kept = queries.messages(conn, user_id, keep) if keep else []
        handoff = None
        if kept and source_id is not None:
            user_label, assistant_label = _labels(conn, user_id, source_id)
            handoff = rerender(kept, user_label=user_label, assistant_label=assistant_label,
                               limits=limits_from_settings(settings),
                               source_title=queries.conversation_title(conn, source_id))
            if handoff.is_empty:
                handoff = None
        queries.rewrite_handoff(conn, record.id, json.dumps([t.id for t in kept] if handoff else []),
                                handoff.model_text(PLACEHOLDER_UUID) if handoff else "")
        # The visible handoff bubble in the destination thread quotes the same turns.
        for artifact_id, metadata in queries.artifacts(conn, record.conversation_id):
            if handoff is None:
                queries.delete_artifact(conn, artifact_id)
            else:
                meta = {**json.loads(metadata), "source_message_ids": [t.id for t in kept]}
                queries.set_artifact(conn, artifact_id, handoff.visible_text(), json.dumps(meta))
        rewritten += 1
        destinations.add(record.conversation_id)
    return rewritten, destinations
