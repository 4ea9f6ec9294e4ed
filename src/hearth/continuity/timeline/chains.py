"""The Responses API working chain of a conversation (E7): chaining, compaction, "Compact now".

With a provider that chains (the OpenAI Responses provider), each turn continues from the last
response id instead of resending the thread, and every request (the first and each tool
continuation) enables server-side compaction when ``compaction_threshold`` is set. "Compact now"
calls the compaction endpoint: its output (the user messages and one opaque compaction item) is
kept as the replacement input, sent in place of the earlier chain until the next successful turn,
and the durable capsule is refreshed. The model's working chain is shortened; the timeline is
not touched.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from hearth.continuity.timeline import capsules
from hearth.errors import InvalidInput
from hearth.records import ledger
from hearth.store import Connection, utcnow
from hearth.store.queries import response_chains as queries
from hearth.store.queries.response_chains import Chain

if TYPE_CHECKING:
    from hearth.records.context import Context


@dataclass(frozen=True)
class Compaction:
    """What "Compact now" did (the HTTP answer is this record as it is)."""

    conversation_id: int
    compacted_at: str
    items: int  # replacement input items the compaction endpoint returned
    capsule_id: int | None  # the capsule it refreshed; None when the refresh was queued as a job

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def get(conn: Connection, conversation_id: int) -> Chain | None:
    return queries.get(conn, conversation_id)


def after_turn(conn: Connection, user_id: int, conversation_id: int, response_id: str,
               model: str | None = None) -> None:
    """A successful turn: continue from its response (made by ``model``); a compaction's
    replacement input is spent."""
    queries.continue_from(conn, user_id, conversation_id, response_id or None, model, utcnow())


def reset(conn: Connection, conversation_id: int) -> None:
    """Forget the chain (the next turn sends the thread again); the timeline is untouched."""
    queries.delete(conn, conversation_id)


def compaction_threshold_tokens(ctx: "Context", model: str | None = None) -> int | None:
    """The token count at which the server compacts the chain (E12): ``compaction_threshold`` of
    the model's input limit, None when it is 0 or the provider keeps no Responses chain."""
    fraction = ctx.settings.compaction_threshold
    if fraction <= 0 or not getattr(ctx.provider, "chains", False):
        return None
    return int(fraction * ctx.input_token_limit(model))


def compact(ctx: "Context", conversation_id: int, *, channel: str = "web") -> Compaction:
    """Compact now: refused (409) while a reply or compaction of this conversation runs."""
    provider = ctx.provider
    conversation = ctx.conversations.get(conversation_id)
    if not getattr(provider, "chains", False) or not hasattr(provider, "compact"):
        raise InvalidInput(f"Compact now needs the OpenAI Responses provider; this deployment uses "
                           f"{provider.name!r}")
    from hearth.providers.base import ChatMessage
    from hearth.providers.openai_responses import to_responses_input

    model = ctx.model_for(conversation)
    with ctx.activity.compaction(conversation.id):
        with ctx.store.read() as conn:
            chain = get(conn, conversation.id)
            if chain is not None and not chain.continues(model, conversation.model):
                chain = None  # another model's chain: compact the thread itself
            prompt = queries.stored_prompt(conn, conversation.id)
            messages: list[ChatMessage] = []
            if chain is None or (not chain.replacement_input and not chain.response_id):
                messages = [ChatMessage(role, content) for role, content in queries.thread_turns(conn, conversation.id)]
        instructions, items = to_responses_input(messages)
        if chain is not None and chain.replacement_input:
            items = list(chain.replacement_input)
        if not items and not (chain and chain.response_id):
            raise InvalidInput("there is nothing to compact in this conversation yet")
        result = provider.compact(  # type: ignore[attr-defined]
            instructions=prompt if prompt is not None else instructions, items=items,
            previous_response_id=chain.response_id if chain and not chain.replacement_input else None, model=model)
        with ctx.store.write() as conn:
            now = utcnow()
            queries.set_compacted(conn, ctx.user_id, conversation.id, json.dumps(result.output, separators=(",", ":")),
                                  model, now)
            span_id = capsules.open_span_of(conn, ctx.user_id, conversation.persona_id)
            ledger.append(conn, user_id=ctx.user_id, conversation_id=conversation.id, kind="context.compacted",
                          channel=channel, created_at=now, span_id=span_id,
                          payload={"mode": "manual", "items": len(result.output),
                                   "input_tokens": result.usage.input_tokens,
                                   "output_tokens": result.usage.output_tokens})
        # Refresh the durable capsule now; a failure is announced live and retried by a job.
        from hearth.memory.helpers import helper_for

        capsule = None
        try:
            capsule = capsules.refresh(ctx, conversation.id, helper_for(ctx), reason="compaction")
        except Exception:  # noqa: BLE001 - the compaction stands; the capsule job tries again
            with ctx.store.write() as conn:
                capsules.schedule(conn, ctx.user_id, conversation.id, "compaction")
        return Compaction(conversation.id, now, len(result.output), capsule.id if capsule else None)
