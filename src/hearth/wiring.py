"""What a user's scope is made of beyond its nouns, in one place: the dynamic layers (in D2 order),
the model's tools, the hooks that run after a reply is saved, and the background job kinds with
their handlers.

``scope.Scope`` asks ``wire(context, ...)`` for its parts and ``Hearth.job_handlers()`` hands the
worker this module's table, so the job queue knows no layer and no layer knows this module: what
a layer, tool or hook needs arrives as the user's ``records.context.Context``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from hearth.continuity.timeline import capsules, checkpoints, spans
from hearth.errors import InvalidInput
from hearth.memory import review
from hearth.ops.jobs import Handler, cursor, enqueue
from hearth.outreach import activations, runs
from hearth.outreach.activations import Activations
from hearth.outreach.channels import inbound, mail, outbound
from hearth.prompt.dynamic import Layer
from hearth.prompt.layers import archive_recall, fragments, household, live_context, summary
from hearth.prompt.layers.characters import PinnedCharacters
from hearth.prompt.layers.keyword_recall import KeywordRecall
from hearth.prompt.layers.settings import LayerSettings
from hearth.prompt.layers.thread_recall import ThreadRecall
from hearth.records import forget
from hearth.records.context import AfterReply, Context
from hearth.records.conversations import chat_turns_after
from hearth.retrieval import embedding_job
from hearth.store import Connection
from hearth.thread import titles
from hearth.thread.recall_tools import RecallTools
from hearth.thread.tools import Tool

if TYPE_CHECKING:
    from hearth.memory.memories import Memories
    from hearth.records.conversations import Conversation
    from hearth.records.ledger import Message

_registered: dict[str, Handler] = {}


def register_handler(kind: str, handler: Handler) -> None:
    """Add a job kind that every default ``Worker`` runs (background work defined elsewhere)."""
    if not kind or not callable(handler):
        raise InvalidInput("register_handler needs a kind and a callable")
    _registered[kind] = handler


def job_handlers() -> dict[str, Handler]:
    """Every job kind a default worker runs, with its handler."""
    return {
        forget.COMPACT_JOB: forget.compact_job,
        activations.TICK_JOB: activations.tick_job,
        activations.RUN_JOB: runs.run_job,
        inbound.REPLY_JOB: outbound.reply_job,
        mail.POLL_JOB: mail.poll_job,
        embedding_job.EMBED_JOB: embedding_job.embed_job,
        summary.JOB_KIND: summary.refresh_job,
        live_context.JOB_KIND: live_context.refresh_job,
        household.JOB_KIND: household.detect_job,
        review.JOB_KIND: review.review_job,
        spans.CHECKPOINT_JOB: checkpoints.checkpoint_job,
        capsules.JOB_KIND: capsules.capsule_job,
        titles.JOB_KIND: titles.title_job,
        **_registered,
    }


class MemoryLayers:
    """The thread-local and durable memory layers of one user's scope (``scope.layers``)."""

    def __init__(self, ctx: Context, memories: Memories, activations: Activations):
        store, user_id = ctx.store, ctx.user_id
        self.user_id = user_id
        self.settings = LayerSettings(store, user_id)
        self.household = household.Household(store, user_id, ctx.conversations)
        self.live_context = live_context.LiveContext(store, user_id, ctx.conversations)
        self.summaries = summary.Summaries(store, user_id, ctx.conversations)
        self.fragments = fragments.Fragments(store, user_id)
        self.review = review.ReviewQueue(ctx, self, memories, activations)


def schedule_due(conn: Connection, user_id: int, conversation_id: int, settings: LayerSettings) -> list[str]:
    """Queue the background work a conversation is due for; returns the kinds queued."""
    queued = []
    payload = {"conversation_id": conversation_id}
    key = f"conversation:{conversation_id}"
    if summary.is_due(conn, conversation_id, settings.get("summary.every")):
        enqueue(conn, user_id, summary.JOB_KIND, payload, dedupe_key=key)
        queued.append(summary.JOB_KIND)
    if live_context.is_due(conn, conversation_id, settings.get("live_context.every")):
        enqueue(conn, user_id, live_context.JOB_KIND, payload, dedupe_key=key)
        queued.append(live_context.JOB_KIND)
    if household.has_fields(conn, user_id):
        enqueue(conn, user_id, household.JOB_KIND, payload, dedupe_key=key)
        queued.append(household.JOB_KIND)
    every = settings.get("review.every")
    if chat_turns_after(conn, conversation_id, cursor(conn, conversation_id, review.JOB_KIND), every) >= every:
        enqueue(conn, user_id, review.JOB_KIND, payload, dedupe_key=key)
        queued.append(review.JOB_KIND)
    return queued


@dataclass(frozen=True)
class Wiring:
    """A scope's parts: its memory layers, dynamic layers in D2 order, tools and after-reply hooks."""

    layers: MemoryLayers
    dynamic: list[Layer]
    tools: list[Tool]
    after_reply: list[AfterReply]


def wire(ctx: Context, *, memories: Memories, activations: Activations) -> Wiring:
    """Build one user's layers, tools and hooks. Nothing loads a model here: the embedder is a
    factory called on first use."""
    store, user_id = ctx.store, ctx.user_id
    layers = MemoryLayers(ctx, memories, activations)

    def embedder() -> Any:
        from hearth.retrieval.semantic import shared_embedder

        return shared_embedder(ctx)

    fragment_layer = fragments.FragmentLayer(store)

    def after_reply(conn: Connection, conversation: Conversation, user_message: Message,
                    reply: Message) -> None:
        """Inside the reply's transaction: mark used nudges, record lorebook timers, then queue
        what is due. No model calls."""
        live_context.mark_used(conn, user_id, conversation.id, reply)
        fragment_layer.record_timers(conn, conversation.id, user_message.id)
        schedule_due(conn, user_id, conversation.id, layers.settings)

    def queue_embedding(conn: Connection, conversation: Conversation, user_message: Message,
                        reply: Message) -> None:
        ctx.enqueue(conn, embedding_job.EMBED_JOB, {"limit": embedding_job.EMBED_JOB_SLICE}, dedupe_key="embed")

    dynamic: list[Layer] = [
        PinnedCharacters(),
        household.HouseholdLayer(),
        live_context.LiveContextLayer(),
        summary.SummaryLayer(),
        fragment_layer,
        # Thread, keyword and archive recall, in that order (D2).
        ThreadRecall(store),
        KeywordRecall(store),
        archive_recall.ArchiveRecall(store, embedder),
    ]
    def title(conn: Connection, conversation: Conversation, user_message: Message, reply: Message) -> None:
        from hearth.providers import choose_provider_name  # W4: a model-written title only with a model

        titles.after_reply(conn, conversation, user_message, reply,
                           model_titles=choose_provider_name(ctx.settings) != "offline")

    return Wiring(layers, dynamic, RecallTools(ctx, embedder).tools(),
                  [title, after_reply, queue_embedding])
