"""``Context``: what a flow, a layer or a background job needs of the deployment, for one user.

Modules below the wiring take a ``Context`` instead of a ``Scope`` or a ``Hearth``: the store, the
user id every query carries (G2), the settings, the clock, the provider and embedder (created on
first use), the job queue, and the hooks the send path runs. ``hearth.scope`` builds one per scope
(``Hearth.context(user_id)`` hands it to a job); the hooks are explicit callables bound there, so no
module below reaches into a ``Scope`` and none imports it, not even for a type hint.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterable, Protocol

if TYPE_CHECKING:
    from hearth.continuity.timeline.activity import Activity
    from hearth.continuity.timeline.live import LiveBus
    from hearth.memory.helpers.base import Helper
    from hearth.prompt.dynamic import DynamicContext
    from hearth.prompt.prepared import Ready
    from hearth.prompt.stored import Quote
    from hearth.providers.base import Provider
    from hearth.records.conversations import Conversation, Conversations
    from hearth.records.ledger import Message
    from hearth.records.personas import Personas
    from hearth.settings import Settings
    from hearth.store import Connection, Store
    from hearth.thread.tools import Toolbox
    from hearth.thread.turns import TurnCache

# Called after a reply is saved, inside its transaction: (conn, conversation, user msg, reply).
AfterReply = Callable[["Connection", "Conversation", "Message", "Message"], None]
# The handoff of a conversation's prompt (``prompt.stored.HandoffText``), and where it came from.
HandoffText = Callable[["Connection", int], "str | Quote | None"]
HandoffInfo = Callable[["Connection", int], "dict | None"]


class RebuildPrompts(Protocol):
    """Rebuild the stored prompts of these conversations in the caller's transaction; returns how
    many. With ``ready`` (the caller's write runs under ``prompt.prepared.run``) their text is
    filled outside the write lock (U5)."""

    def __call__(self, conn: "Connection", conversation_ids: Iterable[int], *,
                 ready: "Ready | None" = None) -> int: ...


class Proposals(Protocol):
    """The review queue as a flow sees it (F3, G4): suggestions wait there for the person."""

    def propose(self, kind: str, payload: dict[str, Any], reason: str, *, evidence: str = "",
                source: str = "offline", conversation_id: int | None = None,
                repeat_dismissed: bool = False, span_id: int | None = None) -> Any: ...

    def prepare(self, texts: list[str]) -> None: ...

    def run(self, conversation_id: int, helper: Helper, *, full: bool = False) -> Any: ...


class Deployment(Protocol):
    """What a flow that starts before it knows the user needs (an inbound message, a job, startup):
    the store, the settings, and a user's context (``Hearth`` is one)."""

    @property
    def store(self) -> Store: ...

    @property
    def settings(self) -> Settings: ...

    def context(self, user_id: int | None = None) -> Context: ...


@dataclass(frozen=True)
class Context:
    """One user's view of the deployment, handed to the modules below the wiring."""

    store: Store
    user_id: int
    settings: Settings
    conversations: Conversations
    personas: Personas
    clock: Callable[[], float]  # the deployment's clock, read at each call (tests move it)
    activity: Activity  # what runs in each conversation now (E2, E7)
    live: LiveBus  # live-only notices (E6)
    turns: TurnCache  # the per-conversation turn cache the send path reads history from
    get_provider: Callable[[], Provider]
    get_embedder: Callable[[], Any]
    # Queue a job for this user in the caller's transaction: (conn, kind, payload, **options).
    enqueue: Callable[..., int]
    # -- the send path's hooks, bound by the wiring --------------------------------------------------
    handoff_text: HandoffText
    handoff_info: HandoffInfo
    rebuild_prompts: RebuildPrompts
    after_reply: AfterReply  # runs every after-reply hook in the wiring's order
    dynamic: DynamicContext  # the dynamic layers in D2 order
    toolbox: Toolbox  # the tools the model may call
    review: Callable[[], Proposals]

    @property
    def provider(self) -> Provider:
        return self.get_provider()

    @property
    def embedder(self) -> Any:
        """The configured embedder (S7); the local model loads on first embed."""
        return self.get_embedder()

    def model_for(self, conversation: Conversation) -> str:
        """The model a conversation's requests ask for: its own choice, or the deployment's."""
        return conversation.model or self.provider.model

    def input_token_limit(self, model: str | None = None) -> int:
        """Model-specific input safety limit (R1): configured, or derived from the model name (the
        conversation's chosen ``model``, else the deployment's)."""
        if self.settings.input_token_limit:
            return self.settings.input_token_limit
        from hearth.providers import context_window_for

        return context_window_for(model or self.provider.model)
