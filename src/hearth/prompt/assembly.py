"""Request assembly, the input budget and the request-size report (T1, R1-R4, K5).

The request is: stored static prompt; current-thread history (trimmed oldest-first only when the
budget requires), with any lorebook entries placed "at depth" as system messages among its turns
(X9); the rolling summary and dynamic context system messages right before the newest turn; a
character card's post-history instructions (X3) after them; the current user message; tool
definitions. Sizes are estimated from the very strings sent, at about four characters a token: no
tokenizer, no second retrieval.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

from hearth.records.ledger import Message

from ..errors import DispatchRefused
from ..providers.base import ChatMessage, ImagePart, ProviderRequest, ToolSpec
from ..text import ESTIMATE_METHOD, IMAGE_TOKENS, estimate_tokens
from .dynamic import RECALL_HEADING, RenderedContext, quote_reserved_headings


def tool_chars(tools: list[ToolSpec]) -> int:
    return sum(len(t.name) + len(t.description) + len(json.dumps(t.parameters)) for t in tools)


@dataclass(frozen=True)
class SizeReport:
    """Request-size details (R2). Numbers, booleans and fixed names only (R3)."""

    history_tokens: int
    history_messages: int
    history_trimmed_messages: int
    static_prompt_tokens: int
    handoff_tokens: int
    handoff_already_included: bool
    summary_tokens: int
    dynamic_context_tokens: int
    dynamic_blocks: dict[str, int]
    user_message_tokens: int
    tools_tokens: int
    tools_count: int
    total_tokens: int
    input_limit_tokens: int
    remaining_tokens: int
    estimate_method: str = ESTIMATE_METHOD
    # The continuity capsule (E3): its own system message, paired with the turns it does not cover.
    capsule_tokens: int = 0
    capsule_active: bool = False
    # A card's post-history instructions (X3): their own system message after the history.
    post_history_tokens: int = 0
    # Each section of the static prompt, already counted in static_prompt_tokens (custom
    # instructions hold a card's system prompt, example_dialogue its example dialogue).
    static_sections: dict[str, int] = field(default_factory=dict)
    # Attachments (W14), already counted in the sections that carry them (the user message and
    # history): how many files and images travel, and their estimate (text inlined, images at
    # ``IMAGE_TOKENS`` each, counted in the total too).
    attachments_count: int = 0
    images_count: int = 0
    attachments_tokens: int = 0

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class AssembledRequest:
    request: ProviderRequest
    size: SizeReport


def history_messages(history: list) -> list[ChatMessage]:
    """Ordinary turns travel as themselves; a handoff artifact travels as an assistant bubble.

    K5 holds for every turn of every request: text quoting the reserved recall heading is
    rewritten here, at assembly, not only in the request that first carried it.
    """
    return _history_turns(history)[0]


class HistoryTurns(list):
    """The turns the history cache read for one send (``ThreadTurn``, oldest first), with each
    turn's provider message, token estimate and length beside them, kept by its cached window.
    Assembly takes these lists as they are: walking a long thread's ~2,000 turn objects again on
    every send cost 1.5-2 ms in a server whose heap holds a million-vector index."""

    def __init__(self, turns: list, chats: list[ChatMessage], sizes: list[int],
                 lengths: list[int]) -> None:
        super().__init__(turns)
        self.chats = chats
        self.sizes = sizes
        self.lengths = lengths


def _history_turns(history: list) -> tuple[list[ChatMessage], list[int]]:
    """The history as provider messages with their token estimates. The history cache's turns
    (``HistoryTurns``) carry both lists; other message objects are converted here."""
    if isinstance(history, HistoryTurns):
        return history.chats, history.sizes
    turns: list[ChatMessage] = []
    sizes: list[int] = []
    for m in history:
        if m.role not in ("user", "assistant") or m.kind not in ("chat", "handoff_artifact"):
            continue
        turns.append(ChatMessage(role=m.role, content=quote_reserved_headings(m.content)))
        sizes.append(estimate_tokens(len(turns[-1].content)))
    return turns, sizes


def assemble(
    *,
    static_prompt: str,
    handoff_chars: int,
    history: list,
    context: RenderedContext,
    user_text: str,
    tools: list[ToolSpec],
    input_limit_tokens: int,
    output_reserve_tokens: int,
    birth_period: bool,
    trimmed_before: int = 0,
    capsule: str = "",
    post_history: str = "",
    static_sections: dict[str, int] | None = None,
    user_images: tuple[ImagePart, ...] = (),
    user_attached_chars: int = 0,
    user_attached_files: int = 0,
) -> AssembledRequest:
    """Build the provider request; trim history oldest-first only when the budget requires (T1).

    ``trimmed_before`` counts older turns the caller already left unread because they could not fit.
    ``post_history`` (a card's post-history instructions, macros filled) is persona configuration:
    it is kept like the static prompt when the budget is tight. ``static_sections`` are the
    characters of each static prompt section, for the report.
    """
    turns, sizes = _history_turns(history)
    user_text = quote_reserved_headings(user_text)
    post_history = quote_reserved_headings(post_history)
    room = input_limit_tokens - output_reserve_tokens
    essential_chars = (len(static_prompt) + len(capsule) + len(post_history) + len(user_text) + tool_chars(tools)
                       + 4 * IMAGE_TOKENS * len(user_images))
    if estimate_tokens(essential_chars) > room:
        # Even with no history and no context it cannot fit: refuse rather than send a request with
        # negative room. The user's message stays saved and can be retried once it fits.
        raise DispatchRefused(
            f"refused to send: the static prompt, tools and this message need about "
            f"{estimate_tokens(essential_chars)} tokens, more than the {room} the model's input limit leaves "
            f"({input_limit_tokens} minus {output_reserve_tokens} for the reply); shorten the persona "
            f"or memories, or raise input_token_limit")
    context_chars = len(context.summary_message) + len(context.context_message) + context.depth_chars
    if estimate_tokens(essential_chars + context_chars) > room:
        context = RenderedContext((), "", "")  # summary and recall are low priority (K6): left out first
    fixed_chars = essential_chars + len(context.summary_message) + len(context.context_message) + context.depth_chars
    used = estimate_tokens(fixed_chars) + sum(sizes)
    dropped = 0
    while dropped < len(turns) and used > room:
        used -= sizes[dropped]
        dropped += 1
    kept = turns[dropped:]

    head = [ChatMessage("system", static_prompt)] if static_prompt else []
    if capsule:
        # Before the verbatim turns it does not cover; never a user or assistant message (E3).
        head.append(ChatMessage("system", capsule))
    tail = []
    if context.summary_message:
        tail.append(ChatMessage("system", context.summary_message))
    if context.context_message:
        tail.append(ChatMessage("system", context.context_message))
    if post_history:
        # After the history, as SillyTavern places them; the person's message stays last (R1).
        tail.append(ChatMessage("system", post_history))
    # Depth 0 and 1 (after or before the newest message in SillyTavern) sit right before the
    # person's message, which stays last (R1).
    tail.extend(ChatMessage("system", text) for depth, text in context.depth_messages if depth <= 1)
    tail.append(ChatMessage("user", user_text, images=user_images, attached_chars=user_attached_chars,
                            attached_files=user_attached_files))
    messages = head + _place_at_depth(kept, context.depth_messages) + tail

    if birth_period:
        refuse_birth_period_recall(messages)

    history_chars = (sum(history.lengths[dropped:]) if isinstance(history, HistoryTurns)
                     else sum(len(t.content) for t in kept))
    block_sizes: dict[str, int] = {}
    for block in context.blocks:
        block_sizes[block.layer] = block_sizes.get(block.layer, 0) + estimate_tokens(len(block.render()))
    images = sum(len(m.images) for m in messages)
    attached = [m for m in messages if m.images or m.attached_chars]
    total = (estimate_tokens(history_chars + sum(len(m.content) for m in head + tail) + tool_chars(tools))
             + IMAGE_TOKENS * images)
    size = SizeReport(
        history_tokens=estimate_tokens(history_chars),
        history_messages=len(kept),
        history_trimmed_messages=dropped + trimmed_before,
        static_prompt_tokens=estimate_tokens(len(static_prompt)),
        handoff_tokens=estimate_tokens(handoff_chars),
        handoff_already_included=handoff_chars > 0,
        summary_tokens=estimate_tokens(len(context.summary_message)),
        dynamic_context_tokens=estimate_tokens(len(context.context_message) + context.depth_chars),
        dynamic_blocks=block_sizes,
        user_message_tokens=estimate_tokens(len(user_text)),
        tools_tokens=estimate_tokens(tool_chars(tools)),
        tools_count=len(tools),
        total_tokens=total,
        input_limit_tokens=input_limit_tokens,
        remaining_tokens=input_limit_tokens - total,
        capsule_tokens=estimate_tokens(len(capsule)),
        capsule_active=bool(capsule),
        post_history_tokens=estimate_tokens(len(post_history)),
        static_sections={key: estimate_tokens(chars) for key, chars in (static_sections or {}).items()},
        attachments_count=images + sum(m.attached_files for m in attached),
        images_count=images,
        attachments_tokens=estimate_tokens(sum(m.attached_chars for m in attached)) + IMAGE_TOKENS * images,
    )
    return AssembledRequest(ProviderRequest(messages=messages, tools=list(tools),
                                            max_output_tokens=output_reserve_tokens), size)


def _place_at_depth(turns: list[ChatMessage], notes: tuple[tuple[int, str], ...]) -> list[ChatMessage]:
    """The history with each ``(depth, text)`` note as a system message before its last
    ``depth - 1`` turns (the newest message, not yet in ``turns``, counts as the first), as
    SillyTavern counts depth; a note deeper than the history goes first. Depth 0 and 1 go in the
    tail instead."""
    at: dict[int, list[str]] = {}
    for depth, text in notes:  # deepest first
        if depth > 1:
            at.setdefault(max(0, len(turns) - (depth - 1)), []).append(text)
    if not at:
        return turns
    out: list[ChatMessage] = []
    for index, turn in enumerate(turns):
        out.extend(ChatMessage("system", text) for text in at.get(index, ()))
        out.append(turn)
    return out


def refuse_birth_period_recall(messages: list[ChatMessage]) -> None:
    """K5: a real auto-recall section must never reach the model before the first reply."""
    for message in messages:
        if message.role == "system" and RECALL_HEADING in message.content:
            raise DispatchRefused(
                "refused to send: automatic recall appeared before the thread's first reply"
            )


def visible_estimate(messages: list[Message]) -> dict[str, int]:
    """The chat header's compact estimate: visible current-thread messages only (R4)."""
    visible = [m for m in messages if m.visible]
    chars = sum(len(m.content) for m in visible)
    return {"messages": len(visible), "tokens": estimate_tokens(chars)}
