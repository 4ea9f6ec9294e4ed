"""An activation's run (E11): the companion writes its message through the send path, and a
messaging channel delivers it.

``activations`` queues a run when an activation fires; this job sits above the send path (which
itself hears "stop check-ins" through ``activations``), so the two never import each other.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hearth.continuity.branch import new_chat
from hearth.outreach.activations import INSTRUCTIONS, Activations
from hearth.outreach.channels.outbound import deliver_reply
from hearth.store.queries import activations as queries
from hearth.store.queries.outreach_lookups import activation_reply
from hearth.thread.send import SendPath

if TYPE_CHECKING:
    from hearth.memory.helpers.base import Helper
    from hearth.records.context import Context


def run_job(ctx: "Context", payload: dict[str, Any], helper: "Helper") -> None:
    """Write the activation's message through the send path and deliver it; safe to run again."""
    run_id = int(payload["run_id"])
    conn = ctx.store.connection()
    run = queries.run(conn, run_id, ctx.user_id)
    if run is None or run.status != "queued":
        return
    activation = Activations(ctx.store, ctx.user_id).get(run.activation_id)
    current = ctx.conversations.current(activation.persona_id)
    conversation_id = current.id if current else new_chat(ctx, activation.persona_id, channel="inner").conversation.id
    # The run id in the message's metadata makes a re-run find the message instead of writing another.
    written = activation_reply(conn, conversation_id, run_id)
    if written is not None:
        message = ctx.conversations.message(written)
    else:
        instruction = INSTRUCTIONS[activation.kind].format(note=activation.note)
        message = SendPath(ctx).inner(conversation_id, instruction,
                                      metadata={"activation": activation.kind, "activation_run": run_id})
    if activation.channel != "web":
        deliver_reply(ctx, activation.channel, activation.persona_id, message)
    with ctx.store.write() as wconn:
        queries.set_delivered(wconn, run_id, conversation_id, message.id)
