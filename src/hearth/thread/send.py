"""The send path: save the message, assemble the request, stream the reply, save the reply.

    1. one transaction: the user's message and its event (durable before any model call), and
       the stored static prompt (built on the first send, rebuilt first if legacy; its text is made
       outside the write lock and written by a second attempt of the transaction, U5);
    2. each dynamic layer returns its blocks (read-only, no model calls);
    3. assemble: static prompt + history trimmed to the budget + dynamic context + user message
       + tool definitions, with its size report from the same strings;
    4. stream from the provider, running tool calls and continuing;
    5. one transaction: the assistant message, tool and usage events.

A provider error leaves the user's message saved and no partial reply behind; the caller can retry
with ``retry()``, which resends the last unanswered user message without saving it twice.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Generator, Iterator, Sequence

from hearth.continuity.timeline import capsules, chains, spans
from hearth.errors import Conflict, InvalidInput, NotFound, ProviderError
from hearth.outreach import activations
from hearth.prompt import prepared, stored
from hearth.prompt.assembly import AssembledRequest, HistoryTurns, assemble
from hearth.prompt.dynamic import Turn, quote_reserved_headings
from hearth.prompt.layers.live_context import MarkerFilter
from hearth.prompt.prepared import Ready
from hearth.providers.base import ChatMessage, ImagePart, ProviderRequest, Usage
from hearth.providers.vision import sees_images
from hearth.records import attachments, ledger
from hearth.records.conversations import Conversation
from hearth.records.ledger import Message
from hearth.retrieval import searchlog
from hearth.store import utcnow
from hearth.store.queries import turns
from hearth.text import estimate_tokens
from hearth.thread import alternatives, character
from hearth.thread.remembered import KEY as REMEMBERED
from hearth.thread.remembered import sources as remembered_sources
from hearth.thread.tools import ToolContext, arguments_json
from hearth.validation import check_text

if TYPE_CHECKING:
    from hearth.records.context import Context

log = logging.getLogger(__name__)

MAX_TOOL_ROUNDS = 4


@dataclass(frozen=True)
class SendEvent:
    """What a face (CLI, SSE) shows while a reply streams. ``diagnostics`` carries numbers only."""

    type: str  # saved | diagnostics | delta | tool | done | error
    data: dict[str, Any] = field(default_factory=dict)


# A reply's events. Closing them early (the person pressed Stop) runs the reply's clean-up: what
# the assembly searched is written and the reply is marked ended.
Events = Generator[SendEvent, None, None]


@dataclass(frozen=True)
class Reply:
    user_message: Message
    assistant_message: Message
    size: dict[str, Any]
    usage: dict[str, int]


class SendPath:
    def __init__(self, ctx: "Context"):
        self.ctx = ctx
        self.settings = ctx.settings
        self.span_id: int | None = None  # the activity span of this send (E1)
        self.regenerate = False  # answering the newest user message again: the chain is not continued
        self.model: str | None = None  # the model this send asks for (the conversation's, set by ``assemble``)
        # What the layers searched (A3) and the request's size, not yet written (``assemble``).
        self._diagnostics: tuple[list[dict[str, Any]], str | None, dict[str, Any]] | None = None
        # The ids of what the request carried, saved in the reply's metadata (W11, ``remembered``).
        self.remembered: dict[str, Any] = {}
        # A caller's prepared text (``prompt.prepared``) when this send's save is part of its write.
        self.ready: Ready | None = None

    def _check_text(self, text: Any) -> str:
        return check_text(text, "message", max_chars=self.settings.max_message_chars, required=True)

    def stream(self, conversation_id: int, text: str, *, channel: str = "web",
               pin_characters: tuple[str, ...] = (), retry: bool = False, regenerate: bool = False,
               edit_message_id: int | None = None, attached: Sequence[Any] = (), ready: Ready | None = None) -> Events:
        """Send ``text`` with its ``attached`` files (W14); or answer the last unanswered message
        again (``retry``); or write another version of the last reply (``regenerate``); or replace a
        message the person sent with ``text`` and answer it again (``edit_message_id``). Replaced
        versions stay as alternatives; the turns after an edited message stay as the branch of its
        earlier version. An edit replaces the words only: the message keeps its attachments.
        ``ready``: a caller's (``prompt.prepared``) whose write transaction this send's save joins."""
        self.ready = ready
        # Checked before anything is written: a file over a limit changes nothing (413/422).
        checked = attachments.check(attached, self.settings) if attached else []
        activity = self.ctx.activity
        activity.begin_reply(conversation_id)  # refused (409) while "Compact now" runs (E7)
        try:
            yield from self._stream(conversation_id, text, channel, pin_characters, retry, regenerate,
                                    edit_message_id, checked)
        finally:
            activity.end_reply(conversation_id)

    def _stream(self, conversation_id: int, text: str, channel: str, pin_characters: tuple[str, ...],
                retry: bool, regenerate: bool, edit_message_id: int | None,
                attached: list[attachments.NewAttachment]) -> Iterator[SendEvent]:
        self.regenerate = regenerate or edit_message_id is not None
        ctx = self.ctx
        store = ctx.store
        if not (retry or regenerate or edit_message_id is not None):
            ctx.dynamic.prefetch(lambda: ctx.personas.of_thread(conversation_id), text)
        conversation, user_message, replacing, prompt = prepared.run(
            store, lambda ready: self._save(conversation_id, text, channel, retry, regenerate, edit_message_id,
                                            attached, ready), self.ready)
        assert self.span_id is not None, "the save touched the span"
        yield SendEvent("saved", {"message_id": user_message.id, "span_id": self.span_id})

        # The span's idle checkpoint waits while this reply is in flight (E2).
        with ctx.activity.reply_in_span(self.span_id):
            with ctx.activity.assembling():  # background embedding waits for it
                assembled = self.assemble(conversation, user_message, prompt, pin_characters, size_channel=channel)
            try:
                yield from self._answer(conversation, user_message, assembled, channel, replacing, regenerate)
            finally:
                self._flush_diagnostics(conversation_id)

    def _save(self, conversation_id: int, text: str, channel: str, retry: bool, regenerate: bool,
              edit_message_id: int | None, attached: list[attachments.NewAttachment],
              ready: Ready | None) -> tuple[Conversation, Message, Message | None, stored.StoredPrompt]:
        """Step 1, one attempt (``prompt.prepared``): the user's message and the stored prompt in one
        transaction; a prompt to build is made outside the write lock and written by the next (U5)."""
        ctx = self.ctx
        store = ctx.store
        replacing: Message | None = None  # the reply that gets a new version instead of a new row
        idle = self.settings.idle_checkpoint_minutes * 60
        with store.write() as conn:
            conversation = ctx.conversations.get(conversation_id)
            check_open(conversation)
            ledger.check_channel(channel)
            if any(a.kind == "image" for a in attached) and not sees_images(ctx.provider.name,
                                                                             ctx.model_for(conversation)):
                raise InvalidInput(f"the model of this conversation ({ctx.model_for(conversation)}, "
                                   f"{ctx.provider.name}) cannot see images; remove the image or choose a model "
                                   "that takes images")
            now = utcnow()
            # E1: one indexed upsert in this same transaction (opens a span only after idle).
            self.span_id = spans.touch(conn, ctx.user_id, conversation.persona_id, channel, now=now,
                                       idle_cutoff=spans.stamp(ctx.clock() - idle), idle_seconds=idle,
                                       conversation_id=conversation_id)
            if retry:
                user_message = self._unanswered(conn, conversation_id)
            elif regenerate:
                # An unanswered newest message (replacing is None) is simply answered.
                user_message, replacing = self._last_exchange(conn, conversation_id)
            elif edit_message_id is not None:
                user_message = self._editable(conn, conversation_id, edit_message_id)
                alternatives.add(conn, ctx.user_id, user_message.id, self._check_text(text), channel=channel,
                                 reason="edited")
                user_message = ctx.conversations.message(user_message.id)
            else:
                # A message may be its files alone (a picture with no words, W14).
                words = (check_text(text, "message", max_chars=self.settings.max_message_chars) if attached
                         else self._check_text(text))
                user_message = save_turn(ctx, conn, conversation_id, words, channel=channel,
                                         created_at=now, span_id=self.span_id)
                # In the message's own transaction: saved whole, before any model call.
                attachments.add(conn, ctx.user_id, conversation_id, user_message.id, attached)
            prompt = stored.ensure(conn, ctx.user_id, conversation_id, ctx.handoff_text, channel, ready)
            return conversation, user_message, replacing, prompt

    def _answer(self, conversation: Conversation, user_message: Message, assembled: AssembledRequest,
                channel: str, replacing: Message | None, regenerate: bool) -> Iterator[SendEvent]:
        """Ask the provider and save its reply, with what the assembly searched (A3)."""
        ctx = self.ctx
        store = ctx.store
        conversation_id = conversation.id
        size = assembled.size.to_dict()
        yield SendEvent("diagnostics", size)

        try:
            outcome = yield from self._run_provider(assembled.request, conversation, channel)
        except ProviderError as exc:
            with store.write() as conn:
                self._write_diagnostics(conn, conversation_id)
                ledger.append(conn, user_id=ctx.user_id, conversation_id=conversation_id,
                              kind="provider.error", channel=channel, span_id=self.span_id,
                              payload={"kind": exc.kind, "retryable": exc.retryable})
            yield SendEvent("error", {"error": exc.code, "kind": exc.kind, "detail": str(exc),
                                      "retryable": exc.retryable, "user_message_id": user_message.id})
            return
        text_out, usage, tool_rounds, response_id, compacted = outcome

        provider = ctx.provider
        with store.write() as conn:
            if replacing is None and not regenerate and _answered(conn, conversation_id, user_message.id):
                # Two retries (or a send and a retry) raced: inside the write lock only the first
                # reply is stored; the loser is told plainly and nothing is written twice.
                raise Conflict("this message was answered by another request meanwhile")
            self._keep_span_open(conn, conversation, channel)
            self._write_diagnostics(conn, conversation_id)  # before the reply, in the ledger's order
            metadata: dict[str, Any] = {"provider": provider.name, "model": self.model or provider.model,
                                        "tool_rounds": tool_rounds, "reply_to": user_message.id,
                                        REMEMBERED: self.remembered}
            if regenerate:
                metadata["regenerated"] = True
            if replacing is not None:
                alternatives.add(conn, ctx.user_id, replacing.id, text_out, metadata=metadata, channel=channel)
                message = ctx.conversations.message(replacing.id)
            else:
                message = ctx.conversations.add_message(
                    conversation_id, "assistant", text_out, channel=channel, metadata=metadata, span_id=self.span_id)
            usage_payload = self._after_turn(conn, conversation, channel, usage, response_id, compacted)
            ctx.after_reply(conn, conversation, user_message, message)
        yield SendEvent("done", {"message_id": message.id, "user_message_id": user_message.id,
                                 "usage": usage_payload, "size": size})

    def inner(self, conversation_id: int, instruction: str, *, metadata: dict[str, Any]) -> Message:
        """A turn the companion starts itself (E11): ``instruction`` stands where the person's
        message would in the request but is never saved as one (the person did not say it); the
        reply is saved with channel ``inner``. A provider error propagates and nothing is saved."""
        ctx = self.ctx

        def attempt(ready: Ready | None) -> tuple[Conversation, stored.StoredPrompt, int]:
            with ctx.store.write() as conn:
                conversation = ctx.conversations.get(conversation_id)
                if conversation.state == "ended" or conversation.visibility == "trashed" or conversation.imported:
                    raise Conflict("this conversation cannot take new turns")
                # A prompt to build is made outside the write lock (``prompt.prepared``, U5).
                prompt = stored.ensure(conn, ctx.user_id, conversation_id, ctx.handoff_text, "inner", ready)
                last = turns.last_id(conn, conversation_id)
                # Each activation is its own span with channel inner (E1, E11).
                self.span_id, _now = spans.touch_now(conn, ctx, conversation.persona_id, "inner",
                                                     conversation_id=conversation_id)
                return conversation, prompt, last

        conversation, prompt, last = prepared.run(ctx.store, attempt)
        assert self.span_id is not None, "the save touched the span"
        cue = Message(id=last + 1, user_id=ctx.user_id, conversation_id=conversation_id, role="user",
                      kind="chat", content=instruction, channel="inner", created_at="")
        assembled = self.assemble(conversation, cue, prompt)
        try:
            with ctx.activity.reply_in_span(self.span_id):
                run = self._run_provider(assembled.request, conversation, "inner")
                while True:
                    try:
                        next(run)
                    except StopIteration as stop:
                        text_out, usage, tool_rounds, response_id, compacted = stop.value
                        break
            provider = ctx.provider
            with ctx.store.write() as conn:
                self._keep_span_open(conn, conversation, "inner")
                self._write_diagnostics(conn, conversation_id)
                message = ctx.conversations.add_message(
                    conversation_id, "assistant", text_out, channel="inner", span_id=self.span_id,
                    metadata={**metadata, "provider": provider.name, "model": self.model or provider.model,
                              "tool_rounds": tool_rounds, REMEMBERED: self.remembered})
                # The same after-turn path as any reply: the person's next turn chains from this
                # one, so the model sees what it said on its own (E7, E11).
                self._after_turn(conn, conversation, "inner", usage, response_id, compacted)
                span = spans.get(conn, ctx.user_id, self.span_id)
                if span.open:
                    spans.close(conn, ctx.user_id, span, "activation_done", at=utcnow())
        finally:
            self._flush_diagnostics(conversation_id)
        return message

    def _keep_span_open(self, conn: Any, conversation: Conversation, channel: str) -> None:
        """A turn of this exchange is saved: its span stays open however long the reply took, or the
        turn joins the span open now if a checkpoint closed it meanwhile (E2)."""
        assert self.span_id is not None
        self.span_id = spans.keep_open(conn, self.ctx, self.span_id, conversation.persona_id, channel,
                                       conversation_id=conversation.id)

    def _after_turn(self, conn, conversation: Conversation, channel: str, usage: Usage, response_id: str,
                    compacted: bool) -> dict[str, int]:
        """E3, E6, E7 in the reply's transaction: record the usage, continue the chain, record a
        server-side compaction, and queue a capsule refresh when compaction happened or usage
        crossed the threshold. Returns the usage event's payload."""
        user_id = self.ctx.user_id
        usage_payload = {"input": usage.input_tokens, "output": usage.output_tokens,
                         "total": usage.total_tokens, "cached": usage.cached_tokens}
        ledger.append(conn, user_id=user_id, conversation_id=conversation.id, kind="context.usage",
                      channel=channel, payload=usage_payload, span_id=self.span_id)
        if response_id and getattr(self.ctx.provider, "chains", False):
            chains.after_turn(conn, user_id, conversation.id, response_id, self.model)
        if compacted:
            ledger.append(conn, user_id=user_id, conversation_id=conversation.id, kind="context.compacted",
                          channel=channel, span_id=self.span_id, payload={"mode": "auto"})
            capsules.schedule(conn, user_id, conversation.id, "compaction")
        elif capsules.crossed(usage.input_tokens, self.ctx.input_token_limit(self.model),
                              self.settings.capsule_threshold):
            capsules.schedule(conn, user_id, conversation.id, "threshold")
        return usage_payload

    def _unanswered(self, conn, conversation_id: int) -> Message:
        last = last_turn(conn, conversation_id)
        if last is None or last.role != "user":
            raise Conflict("there is no unanswered message to retry")
        return last

    def _last_exchange(self, conn, conversation_id: int) -> tuple[Message, Message | None]:
        """The last reply and the message it answers; or the newest message and None when it is
        still unanswered (a client that regenerates after a failed reply, X1)."""
        reply = last_turn(conn, conversation_id)
        if reply is None:
            raise Conflict("there is no reply to regenerate; send a message first")
        if reply.role == "user":
            return reply, None
        asked = turns.user_turn_before(conn, conversation_id, reply.id)
        if asked is None:
            raise Conflict("this reply answers no message of yours, so it cannot be regenerated")
        return asked, reply

    def _editable(self, conn, conversation_id: int, message_id: int) -> Message:
        """Any message of the person's in this thread: editing it puts the turns after it away as the
        branch of the version it replaces (W2), and the thread continues from the edit."""
        message = turns.user_turn(conn, conversation_id, message_id)
        if message is None:
            raise NotFound(f"no message {message_id} of yours in this conversation")
        return message

    def assemble(self, conversation: Conversation, user_message: Message, prompt: stored.StoredPrompt,
                 pin_characters: tuple[str, ...] = (), size_channel: str | None = None) -> AssembledRequest:
        """The request for the provider. What the layers searched (A3), and the request's
        ``context.request_size`` event when ``size_channel`` is given, are left for the reply's
        transaction (``_write_diagnostics``): nothing is written between the save and the provider."""
        ctx = self.ctx
        # The conversation's own model, if it chose one: its name goes into the request and its
        # context window sets the budget.
        self.model = model = ctx.model_for(conversation)
        limit = ctx.input_token_limit(model)
        reserve = min(self.settings.output_token_reserve, limit // 4)
        chaining = bool(getattr(ctx.provider, "chains", False))
        seeing = sees_images(ctx.provider.name, model)
        # Most of this snapshot's reads are the same on every send of the thread: PostgreSQL sends
        # them ahead, with the snapshot's BEGIN (store/ahead.py).
        with ctx.store.read(ahead=("send", conversation.id)) as conn:
            # W14: the message as the model reads it (its text files inlined) and its images.
            current = attachments.of_messages(conn, ctx.user_id, conversation.id, [user_message.id],
                                              content=True).get(user_message.id, [])
            user_text, user_images = _with_attachments(user_message.content, current, seeing)
            room_chars = max(0, (limit - reserve) * 4 - len(prompt.text) - len(user_text)
                             - 4 * attachments.image_tokens(len(user_images)))
            # E3: the latest capsule travels with the turns it does not cover.
            capsule = capsules.latest(conn, conversation.id)
            capsule_text = capsule.render() if capsule else ""
            history, older = ctx.turns.read(conn, conversation.id, user_message.id,
                                                      max(0, room_chars - len(capsule_text)),
                                                      after_id=capsule.through_message_id if capsule else 0)
            chain = chains.get(conn, conversation.id) if chaining and not self.regenerate else None
            if chain is not None and not chain.continues(model, conversation.model):
                chain = None  # the model changed: the chain restarts with the whole thread
            persona = ctx.personas.get(conversation.persona_id)
            # A greeting (a card's first message, X3) is not a reply: the birth period goes on (K3).
            has_reply = turns.has_reply(conn, conversation.id)
            post_history = character.post_history(conn, ctx.user_id, persona, conversation.id, user_message)
            turn = Turn(conn=conn, user_id=ctx.user_id, conversation=conversation, persona=persona,
                        text=user_message.content, history=history, settings=self.settings,
                        pinned_characters=tuple(pin_characters), input_limit_tokens=limit,
                        handoff=ctx.handoff_info(conn, conversation.id),
                        assembled_text=[prompt.text, *(m.content for m in history[-8:])],
                        has_assistant_reply=has_reply)
            context = ctx.dynamic.render(ctx.dynamic.collect(turn))
            self.remembered = remembered_sources(conn, conversation.id, context.blocks, turn.handoff,
                                                 prompt.handoff_chars > 0)
            history = _history_with_attachments(conn, ctx.user_id, conversation.id, history, seeing)
        assembled = assemble(
            static_prompt=prompt.text, handoff_chars=prompt.handoff_chars, history=history, context=context,
            user_text=quote_reserved_headings(user_text), tools=ctx.toolbox.specs(),
            user_images=tuple(user_images), user_attached_chars=len(user_text) - len(user_message.content),
            user_attached_files=sum(a.kind == "text" for a in current),
            input_limit_tokens=limit, output_reserve_tokens=reserve, birth_period=not has_reply,
            trimmed_before=older, capsule=capsule_text, post_history=post_history,
            static_sections=prompt.section_chars,
        )
        if chaining:
            # E7: continue the Responses chain (or start from a compaction's replacement input).
            request = replace(assembled.request,
                              previous_response_id=chain.response_id if chain else None,
                              replacement_input=chain.replacement_input if chain else (),
                              compact_threshold=chains.compaction_threshold_tokens(ctx, model))
            assembled = replace(assembled, request=request)
        assembled = replace(assembled, request=replace(assembled.request, model=model))
        self._diagnostics = (turn.search_log, size_channel, assembled.size.to_dict())
        return assembled

    def _write_diagnostics(self, conn: Any, conversation_id: int) -> None:
        """Write what ``assemble`` left: the search log rows (A3) and, with a ``size_channel``, the
        ``context.request_size`` event. They join the reply's (or the provider error's) transaction,
        so the person waits for neither before the provider is asked."""
        if self._diagnostics is None:
            return
        (logs, channel, size), self._diagnostics = self._diagnostics, None
        for entry in logs:
            searchlog.record(conn, **entry)
        if channel is not None:
            ledger.append(conn, user_id=self.ctx.user_id, conversation_id=conversation_id,
                          kind="context.request_size", channel=channel, payload=size, span_id=self.span_id)

    def _flush_diagnostics(self, conversation_id: int) -> None:
        """What ``assemble`` left and no transaction took (the reply raced another, the stream was
        closed, the provider failed inside ``inner``): written now, in a transaction of its own."""
        if self._diagnostics is not None:
            with self.ctx.store.write() as conn:
                self._write_diagnostics(conn, conversation_id)

    def _run_provider(self, request: ProviderRequest, conversation: Conversation, channel: str):
        """Stream the reply, running tool calls between rounds.

        Returns (text, usage, rounds, the last response id, whether the server compacted)."""
        provider = self.ctx.provider
        chaining = bool(getattr(provider, "chains", False))
        messages = list(request.messages)
        parts: list[str] = []
        usage = Usage()
        response_id = ""
        compacted = False
        tool_ctx = ToolContext(self.ctx.store, self.ctx.user_id, conversation.id, conversation.persona_id)
        round_request = request
        for round_ in range(MAX_TOOL_ROUNDS + 1):
            calls = []
            round_text: list[str] = []
            tools = request.tools if round_ < MAX_TOOL_ROUNDS else []
            shown = MarkerFilter()  # echoed nudge markers never reach the screen (LC2)
            for event in provider.stream(replace(round_request, messages=messages, tools=tools)):
                if event.type == "text" and event.text:
                    round_text.append(event.text)
                    visible = shown.feed(event.text)
                    if visible:
                        yield SendEvent("delta", {"text": visible})
                elif event.type == "tool_call" and event.tool_call:
                    calls.append(event.tool_call)
                elif event.type == "usage" and event.usage:
                    usage = _add(usage, event.usage)
                    response_id = event.response_id or response_id
                elif event.type == "compacted":
                    compacted = True
            parts.extend(round_text)
            if tail := shown.flush():
                yield SendEvent("delta", {"text": tail})
            if not calls:
                return "".join(parts), usage, round_, response_id, compacted
            if chaining and response_id:
                # A tool continuation chains from the round that asked for the tools (E7).
                round_request = replace(round_request, previous_response_id=response_id, replacement_input=())
            messages.append(ChatMessage("assistant", "".join(round_text), tool_calls=tuple(calls)))
            for call in calls:
                # R3: frames and payloads carry fixed names only; a name the model invented is "unknown".
                name = call.name if call.name in self.ctx.toolbox.tools else "unknown"
                yield SendEvent("tool", {"name": name, "status": "running"})
                result = self.ctx.toolbox.run(tool_ctx, call)
                with self.ctx.store.write() as conn:
                    self._keep_span_open(conn, conversation, channel)
                    ledger.append(conn, user_id=self.ctx.user_id, conversation_id=conversation.id,
                                  kind="tool.call", channel=channel, span_id=self.span_id,
                                  payload={"name": name, "argument_chars": len(arguments_json(call.arguments)),
                                           "result_chars": len(result)})
                messages.append(ChatMessage("tool", result, tool_call_id=call.id))
                yield SendEvent("tool", {"name": name, "status": "done", "result_tokens": estimate_tokens(len(result))})
        return "".join(parts), usage, MAX_TOOL_ROUNDS, response_id, compacted


def _with_attachments(text: str, attached: Sequence[attachments.Attachment],
                      seeing: bool) -> tuple[str, list[ImagePart]]:
    """(the message's text with its text files inlined, its images). A model that cannot see
    images is told their names instead (a thread whose model changed since they were sent)."""
    if not attached:
        return text, []
    inlined = attachments.inline(text, attached)
    images = [a.image() for a in attached if a.data is not None]
    if images and not seeing:
        return f"{inlined}\n\n{attachments.unseen(attached)}", []
    return inlined, images


def _history_with_attachments(conn: Any, user_id: int, conversation_id: int, history: Any, seeing: bool) -> Any:
    """The history with each earlier message's attachments, as its own request carried them (W14).
    One indexed read over the history's range; threads without attachments keep their turns as read."""
    if not isinstance(history, HistoryTurns) or not history:
        return history
    found = attachments.in_range(conn, user_id, conversation_id, history[0].id, history[-1].id, content=True)
    if not found:
        return history
    chats, sizes, lengths = list(history.chats), list(history.sizes), list(history.lengths)
    for i, turn in enumerate(history):
        attached = found.get(turn.id)
        if not attached or turn.role != "user":
            continue
        text, images = _with_attachments(chats[i].content, attached, seeing)
        chats[i] = ChatMessage("user", text, images=tuple(images), attached_chars=len(text) - len(chats[i].content),
                               attached_files=sum(a.kind == "text" for a in attached))
        lengths[i] = len(text)
        sizes[i] = estimate_tokens(len(text)) + attachments.image_tokens(len(images))
    return HistoryTurns(list(history), chats, sizes, lengths)


def save_turn(ctx: "Context", conn: Any, conversation_id: int, text: str, *, channel: str, created_at: str,
              span_id: int | None, metadata: dict[str, Any] | None = None) -> Message:
    """Save what the person said, in the caller's transaction: the one way a turn of theirs enters a
    thread, whether typed in the chat or arriving by SMS, email or voice. A whole-message "stop
    check-ins" / "start check-ins" is heard here, in any channel (E11)."""
    message = ctx.conversations.add_message(conversation_id, "user", text, channel=channel, metadata=metadata,
                                            created_at=created_at, span_id=span_id)
    activations.note_user_message(conn, ctx.store, ctx.user_id, text, channel)
    return message


def answer(ctx: "Context", conversation_id: int, *, channel: str) -> Reply:
    """Answer the person's newest turn, already saved (a channel message stored on arrival, or a
    message whose reply failed): the send path from its second step, nothing saved twice."""
    return collect(SendPath(ctx).stream(conversation_id, "", channel=channel, retry=True), ctx.conversations)


def check_open(conversation: Conversation) -> None:
    if conversation.state == "ended":
        raise Conflict("this conversation has ended; start a new one")
    if conversation.visibility == "trashed":
        raise Conflict("this conversation is in the trash; restore it to continue")
    if conversation.imported:
        raise Conflict("this conversation was imported and is read only; continue it in a new chat (Branch)")


def last_turn(conn, conversation_id: int) -> Message | None:
    return turns.last(conn, conversation_id)


def keep_partial(ctx: "Context", conversation_id: int, text: str, *, channel: str = "web") -> Message:
    """Keep what arrived of a reply the person stopped (W2), only when they choose to.

    It answers the unanswered message, or becomes another version of the last reply when a
    regeneration was stopped. It is marked ``partial`` in its metadata.
    """
    if not isinstance(text, str) or not text.strip():
        raise InvalidInput("a partial reply must not be empty")
    if len(text) > ctx.settings.max_message_chars:
        raise InvalidInput(f"a partial reply is longer than {ctx.settings.max_message_chars} characters")
    with ctx.store.write() as conn:
        conversation = ctx.conversations.get(conversation_id)
        check_open(conversation)
        last = last_turn(conn, conversation_id)
        if last is None:
            raise Conflict("there is nothing this reply could answer")
        metadata = {"partial": True}
        if last.role == "assistant":
            alternatives.add(conn, ctx.user_id, last.id, text, metadata=metadata, channel=channel)
            return ctx.conversations.message(last.id)
        # A kept reply is a turn like any other: it belongs to a span, so a checkpoint reads it (E2).
        span_id, _now = spans.touch_now(conn, ctx, conversation.persona_id, channel, conversation_id=conversation_id)
        message = ctx.conversations.add_message(conversation_id, "assistant", text, channel=channel,
                                                metadata=metadata, span_id=span_id)
        ctx.after_reply(conn, conversation, last, message)
        return message


def _answered(conn: Any, conversation_id: int, user_message_id: int) -> bool:
    """Whether a reply to this user message is already stored (read inside the write lock)."""
    return turns.answered(conn, conversation_id, user_message_id)


def _add(a: Usage, b: Usage) -> Usage:
    return Usage(a.input_tokens + b.input_tokens, a.output_tokens + b.output_tokens,
                 a.cached_tokens + b.cached_tokens)


def collect(events: Iterator[SendEvent], conversations) -> Reply:
    """Run a send to completion; raise the provider error if there was one."""
    done = None
    for event in events:
        if event.type == "error":
            raise ProviderError(event.data["detail"], event.data["kind"], event.data["retryable"])
        if event.type == "done":
            done = event.data
    assert done is not None
    return Reply(conversations.message(done["user_message_id"]), conversations.message(done["message_id"]),
                 done["size"], done["usage"])
