"""hearth timeline, hearth compact, hearth resume: the relationship timeline from the terminal."""

from __future__ import annotations

import click

from .base import Context, _json, cli, console, pass_ctx

INNER_FAMILIES = ("context.", "checkpoint.", "review.", "memory.", "tool.", "span.")


@cli.command("timeline")
@click.option("--before", help="Cursor of an older page (printed at the end of the previous page).")
@click.option("--limit", type=click.IntRange(1, 10_000), help="Events per page (TIMELINE_HISTORY_EVENT_LIMIT).")
@click.option("--json", "as_json", is_flag=True, help="Print the page as JSON.")
@pass_ctx
def timeline_cmd(obj: Context, before: str | None, limit: int | None, as_json: bool) -> None:
    """The relationship timeline across every conversation, grouped by activity span (E8)."""
    page = obj.scope().timeline.page(before, limit)
    if as_json:
        _json(page.to_dict())
        return
    from hearth.memory.helpers import skips

    spans = {s.id: s for s in page.spans}
    current = object()
    for event in page.events:
        if event.span_id != current:
            current = event.span_id
            span = spans.get(event.span_id) if event.span_id is not None else None
            if span is not None:
                state = "open" if span.open else f"closed ({span.close_reason})"
                console.print(f"== span {span.id} · {span.kind} · {span.started_at} · {state}", markup=False)
            else:
                console.print("== outside any span", markup=False)
        where = f"#{event.conversation_id}" if event.conversation_id else "-"
        if event.message is not None and "content" in event.message:
            text = " ".join(event.message["content"].split())
            text = text if len(text) <= 100 else text[:99] + "…"
            console.print(f"{event.created_at}  {where:>6}  [{event.channel}] {event.message['role']}: {text}",
                          markup=False)
        elif event.kind == skips.EVENT_KIND:
            console.print(f"{event.created_at}  {where:>6}  [{event.channel}] {skips.plain(event.payload.get('task', ''))}",
                          markup=False)
        else:
            numbers = ", ".join(f"{k}={v}" for k, v in event.payload.items()
                                if isinstance(v, (int, float, bool)) or (isinstance(v, str) and len(v) <= 24))
            console.print(f"{event.created_at}  {where:>6}  [{event.channel}] {event.kind} {numbers}".rstrip(),
                          markup=False)
    if not page.events:
        console.print("The timeline is empty.", markup=False)
    if page.before:
        console.print(f"Older: hearth timeline --before '{page.before}'", markup=False)


@cli.command("compact")
@click.argument("conversation_id", type=click.IntRange(1, 2**63 - 1))
@pass_ctx
def compact_cmd(obj: Context, conversation_id: int) -> None:
    """Compact now (E7): shorten the model's working chain and refresh the capsule."""
    result = obj.scope().timeline.compact(conversation_id, channel="cli")
    capsule = f"capsule {result.capsule_id} refreshed" if result.capsule_id else "capsule unchanged"
    console.print(f"Compacted conversation {conversation_id}: {result.items} replacement items; {capsule}.",
                  markup=False)


@cli.command("resume")
@click.option("--json", "as_json", is_flag=True)
@pass_ctx
def resume_cmd(obj: Context, as_json: bool) -> None:
    """Where Hearth picks up (E4): the latest open conversation, its capsule and open span."""
    scope = obj.scope()
    resumed = obj.hearth.resume(scope.user_id)
    if as_json:
        _json(resumed.to_dict())
        return
    console.print(describe(resumed), markup=False)


def describe(resumed) -> str:
    """One line of numbers only: `hearth serve` writes it to its log, and a title is the person's
    words (`hearth resume --json` has the title)."""
    if resumed.conversation is None:
        return "Nothing to resume: no open conversation yet."
    capsule = f"capsule {resumed.capsule.id}" if resumed.capsule else "no capsule"
    span = f"open span {resumed.span.id}" if resumed.span else "no open span"
    return (f"Resuming conversation {resumed.conversation.id}: "
            f"{len(resumed.turns)} recent turns, {capsule}, {span}.")
