"""The background embedding job (S7): new chat turns and archive chunks embedded in bounded
slices, outside the send path."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hearth.memory.helpers.base import Helper
    from hearth.records.context import Context

EMBED_JOB = "recall.embed"
EMBED_JOB_SLICE = 512  # two of embed_pending's windows of 256 turns (S19)


def embed_job(ctx: Context, payload: dict[str, Any], helper: Helper | None = None) -> None:
    """Background job: embed one slice of this user's new chat turns and archive chunks (S7), and
    first the turns named in ``messages`` (their chosen text changed).

    Queues itself again while work remains, so a large import is embedded in bounded slices.
    """
    from hearth.retrieval.semantic import INDEXES, embed_messages, embed_pending, model_id, shared_embedder

    embedder = shared_embedder(ctx)
    changed = payload.get("messages")
    if isinstance(changed, list) and changed:
        # Turns whose chosen version changed (W2) lie behind the cursor: they are named.
        embed_messages(ctx.store, embedder, ctx.user_id, [int(i) for i in changed[:EMBED_JOB_SLICE]])
    # Follows the cursor: a reply's job reads only the rows that arrived since the last one.
    report = embed_pending(ctx.store, embedder, user_id=ctx.user_id,
                           limit=int(payload.get("limit", EMBED_JOB_SLICE)), follow=True,
                           pause=ctx.activity.wait_quiet)
    # The new vectors go into the loaded indexes here, in the background, not on the next send.
    INDEXES.catch_up(ctx.store.connection(), str(ctx.store.key), ctx.user_id, model_id(embedder))
    if report.remaining:
        from hearth.ops.jobs import enqueue

        with ctx.store.write() as conn:
            enqueue(conn, ctx.user_id, EMBED_JOB, {"limit": EMBED_JOB_SLICE}, dedupe_key="embed")
