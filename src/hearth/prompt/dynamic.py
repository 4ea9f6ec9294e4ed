"""Layer 2: the dynamic context, assembled fresh on every send (D1, D2).

Each dynamic layer returns ``Block``s. ``DynamicContext`` asks every registered layer, orders the
blocks by the SPEC D2 order, and renders them as one system message placed right before the
newest turn; the rolling thread summary is rendered as its own system message. A block with a
``depth`` (a lorebook entry SillyTavern places "at depth", X9) is rendered as a system message of its
own that assembly places that many turns from the end of the history. Nothing here is
stored as a conversation message, and nothing is rendered when no layer has anything to say.
Layers are read-only and cheap: none calls a model on the send path.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Protocol

from hearth.store import Connection

from ..errors import NotFound

if TYPE_CHECKING:
    from hearth.records.conversations import Conversation
    from hearth.records.personas import Persona

    from ..settings import Settings

log = logging.getLogger(__name__)

# SPEC D2 order. A layer's block carries one of these names; unknown names sort last.
ORDER = (
    "lore_before",  # lorebook entries SillyTavern places before the character definition (X9)
    "characters",
    "lore_after",  # ... and after it (also its example-message positions: see docs/layers.md)
    "household",
    "live_context",
    "summary",
    "fragments",
    "thread_recall",
    "keyword_recall",
    "archive_recall",
)

DYNAMIC_HEADER = "Dynamic context for this reply (assembled now; not part of the conversation)."
SUMMARY_HEADER = "Rolling thread summary for this conversation only"
RECALL_HEADING = "=== AUTO-RECALLED CONTEXT ==="
QUOTED_RECALL_HEADING = "=== QUOTED AUTO-RECALL LABEL ==="


@dataclass(frozen=True)
class Block:
    """One labelled piece of dynamic context.

    ``layer`` is a fixed name from ORDER (safe for diagnostics); ``label`` is the heading the model
    sees; ``trust`` says plainly what the block is and how much to rely on it.
    """

    layer: str
    label: str
    text: str
    trust: str = ""
    source_ids: tuple[int, ...] = ()
    numbers: dict[str, int] = field(default_factory=dict)
    depth: int | None = None  # a message of its own, this many turns from the end (X9)
    # What each source id names, where a block mixes kinds (archive recall: "message" or "chunk").
    source_kinds: tuple[str, ...] = ()

    def render(self) -> str:
        head = f"=== {self.label} ==="
        return "\n".join(part for part in (head, self.trust, self.text) if part)


class PastTurn(Protocol):
    """A turn of the thread as a layer reads it (``thread.turns.ThreadTurn``, which quotes and
    counts it with this module's helpers, so it is described here rather than imported)."""

    @property
    def id(self) -> int: ...

    @property
    def role(self) -> str: ...

    @property
    def kind(self) -> str: ...

    @property
    def content(self) -> str: ...


@dataclass
class Turn:
    """What a layer may read about the turn being assembled."""

    conn: Connection
    user_id: int
    conversation: "Conversation"
    persona: "Persona"
    text: str
    history: list[PastTurn]
    settings: "Settings"
    pinned_characters: tuple[str, ...] = ()
    input_limit_tokens: int = 0  # the model's input limit (lorebook budgets are a share of it); 0: unknown
    handoff: dict[str, Any] | None = None  # {"source_conversation_id", "text"} when the prompt holds one
    assembled_text: list[str] = field(default_factory=list)  # text already in the request (K4 overlap)
    has_assistant_reply: bool = False  # false during the birth period (K3)
    # Searches the recall layers ran, as ``searchlog.record`` arguments: layers only read, so the
    # send path writes these after collection, outside the read snapshot (A3).
    search_log: list[dict[str, Any]] = field(default_factory=list)
    # Work one layer did that another may reuse on the same send (the keyword candidate list that
    # keyword recall and archive recall both ask on a recall cue); it lives as long as the turn.
    memo: dict[Any, Any] = field(default_factory=dict)
    started: float = field(default_factory=time.monotonic)  # when the layers began: latency budgets count from here


class Layer(Protocol):
    name: str

    def blocks(self, turn: Turn) -> list[Block]:
        ...


def _rank(block: Block) -> int:
    return ORDER.index(block.layer) if block.layer in ORDER else len(ORDER)


@dataclass(frozen=True)
class RenderedContext:
    blocks: tuple[Block, ...]
    summary_message: str  # "" when there is no rolling summary
    context_message: str  # "" when there are no other blocks
    # (depth, text) system messages placed in the history, deepest first (X9)
    depth_messages: tuple[tuple[int, str], ...] = ()

    @property
    def empty(self) -> bool:
        return not (self.summary_message or self.context_message or self.depth_messages)

    @property
    def depth_chars(self) -> int:
        return sum(len(text) for _, text in self.depth_messages)


class DynamicContext:
    """One user's dynamic layers (``scope.dynamic``), asked in order for blocks on every send."""

    def __init__(self, user_id: int, layers: list[Layer] | None = None):
        self.user_id = user_id
        self.layers: list[Layer] = list(layers or [])

    def register(self, layer: Layer) -> None:
        self.layers.append(layer)

    def prefetch(self, persona: Callable[[], Any], text: str) -> None:
        """A message has arrived and is about to be saved: a layer may start slow work for it (the
        query embedding) now, so the save and the layers before it overlap that work. ``persona``
        reads the thread's persona, called only by a layer with work to start: most messages give
        none, and on PostgreSQL each read is a round trip."""
        for layer in self.layers:
            early = getattr(layer, "prefetch", None)
            if early is not None:
                early(persona, text)

    def collect(self, turn: Turn) -> list[Block]:
        if turn.user_id != self.user_id:
            # A turn of another user's conversation reads like an unknown one (G2).
            raise NotFound(f"no conversation {turn.conversation.id}")
        for layer in self.layers:
            # A layer may start slow work (a query embedding) in the background before any layer
            # runs, so it overlaps the layers before it.
            prepare = getattr(layer, "prepare", None)
            if prepare is not None:
                prepare(turn)
        blocks: list[Block] = []
        for layer in self.layers:
            for block in layer.blocks(turn):
                if block.text.strip():
                    blocks.append(block)
                    turn.assembled_text.append(block.text)
        return sorted(blocks, key=_rank)  # stable: a layer's own order is kept

    def render(self, blocks: list[Block]) -> RenderedContext:
        summary = [b for b in blocks if b.layer == "summary"]
        placed = sorted((b for b in blocks if b.depth is not None), key=lambda b: -(b.depth or 0))
        others = [b for b in blocks if b.layer != "summary" and b.depth is None]
        summary_message = ""
        if summary:
            summary_message = SUMMARY_HEADER + "\n" + "\n".join(b.text for b in summary)
        context_message = ""
        if others:
            context_message = DYNAMIC_HEADER + "\n\n" + "\n\n".join(b.render() for b in others)
        depth_messages = tuple((b.depth or 0, b.render()) for b in placed)
        return RenderedContext(tuple(blocks), summary_message, context_message, depth_messages)


def quote_reserved_headings(text: str) -> str:
    """User-authored text that quotes the recall heading is rewritten, not rejected (K5)."""
    return text.replace(RECALL_HEADING, QUOTED_RECALL_HEADING)
