"""Memory layers: background jobs, household status, live context, fragments, review queue, settings."""

from __future__ import annotations

import json

import click

from .base import Context, Table, cli, console, err_console, pass_ctx


# -- memory layers: household status, live context, fragments, review queue, jobs -------------------
@cli.command("worker")
@click.option("--once", is_flag=True, help="Run every job that is due now, then exit.")
@click.option("--poll", type=click.FloatRange(0.1, 3600), default=2.0, show_default=True,
              help="Seconds to wait when the queue is empty.")
@pass_ctx
def worker_cmd(obj: Context, once: bool, poll: float) -> None:
    """Run background jobs (summaries, live context, status detection, review) until Ctrl-C."""
    from hearth.ops.jobs import Worker
    from hearth.outreach import activations
    from hearth.outreach.channels import mail

    worker = Worker(obj.hearth, poll_seconds=poll)
    mail.schedule(obj.hearth)  # the mailbox poll, when email is configured (E10)
    activations.schedule_all(obj.hearth.store)  # the companion's own schedules (E11)
    if once:
        ran = worker.run_once()
        counts = worker.queue.counts()
        console.print(f"Ran {ran} job(s); pending {counts['pending']}, dead {counts['dead']}.", markup=False)
        return
    err_console.print("Worker running; Ctrl-C to stop.", markup=False)
    try:
        worker.run_forever()
    except KeyboardInterrupt:
        worker.stop()
        err_console.print("Worker stopped.", markup=False)


@cli.group()
def jobs() -> None:
    """The background job queue."""


@jobs.command("list")
@click.option("--status", type=click.Choice(["pending", "running", "done", "dead"]))
@pass_ctx
def jobs_list(obj: Context, status: str | None) -> None:
    scope = obj.scope()
    console.print("  ".join(f"{k} {v}" for k, v in scope.jobs.counts().items()), markup=False)
    for job in scope.jobs.list(status=status, limit=30):
        console.print(f"{job.id}\t{job.kind}\t{job.status}\tattempts {job.attempts}\t{job.last_error or ''}",
                      markup=False)


@jobs.command("retry")
@click.argument("job_id", type=int)
@pass_ctx
def jobs_retry(obj: Context, job_id: int) -> None:
    scope = obj.scope()
    job = scope.jobs.retry(job_id)
    console.print(f"Job {job.id} ({job.kind}) is pending again.", markup=False)


@cli.group()
def status() -> None:
    """Household status: present-tense facts such as who is home."""


@status.command("list")
@click.option("--as-of", "as_of", help="Show the status on this date (ISO date or date-time) instead.")
@click.option("--known", is_flag=True, help="With --as-of: what Hearth knew then, not what was true then.")
@pass_ctx
def status_list(obj: Context, as_of: str | None, known: bool) -> None:
    if as_of is not None:
        values = obj.scope().layers.household.as_of(as_of, "known" if known else "valid")
        for name, value in values.items():
            console.print(f"{name}: {value}", markup=False)
        if not values:
            console.print("No status was set then.", markup=False)
        return
    for f in obj.scope().layers.household.fields():
        options = f"  (options: {', '.join(f.options)})" if f.options else ""
        console.print(f"{f.name}: {f.value if f.value is not None else '(unset)'}{options}", markup=False)


@status.command("add")
@click.argument("field")
@click.option("--option", "options", multiple=True, help="An allowed value (repeatable); makes it a toggle.")
@click.option("--alias", "aliases", multiple=True, help="Another word for it in conversation (repeatable).")
@click.option("--value", help="Its current value.")
@pass_ctx
def status_add(obj: Context, field: str, options: tuple[str, ...], aliases: tuple[str, ...], value: str | None) -> None:
    f = obj.scope().layers.household.add_field(field, list(options), list(aliases), value)
    console.print(f"Status field {f.name} added.", markup=False)


@status.command("set")
@click.argument("field")
@click.argument("value")
@click.option("--valid-from", help="When it became true (ISO date or date-time; default now).")
@click.option("--correction", is_flag=True, help="Fix a wrongly entered value instead of recording a change.")
@pass_ctx
def status_set(obj: Context, field: str, value: str, valid_from: str | None, correction: bool) -> None:
    """Set FIELD to VALUE (the field is created if new); the old value goes to history."""
    f = obj.scope().layers.household.set(field, value, create=True, valid_from=valid_from, correction=correction)
    console.print(f"{f.name}: {f.value}", markup=False)


@status.command("clear")
@click.argument("field")
@pass_ctx
def status_clear(obj: Context, field: str) -> None:
    f = obj.scope().layers.household.set(field, None)
    console.print(f"{f.name} is unset.", markup=False)


@status.command("rm")
@click.argument("field")
@pass_ctx
def status_rm(obj: Context, field: str) -> None:
    obj.scope().layers.household.remove_field(field)
    console.print(f"Status field {field} removed; its history is kept.", markup=False)


@status.command("history")
@click.argument("field", required=False)
@pass_ctx
def status_history(obj: Context, field: str | None) -> None:
    """Every value a field has had, newest first; `status restore-value FIELD ID` brings one back."""
    for v in obj.scope().layers.household.history(field):
        until = v.valid_to[:19] if v.valid_to else "now"
        retired = "\t(corrected away)" if v.retired_at else ""
        console.print(f"#{v.id}\t{v.field}: {v.value}\t{v.valid_from[:19]} .. {until}\t{v.source}{retired}",
                      markup=False)


@cli.group()
def context() -> None:
    """Live context of a conversation: mood, events, needs, nudges and its rolling summary."""


@context.command("show")
@click.argument("conversation_id", type=int)
@pass_ctx
def context_show(obj: Context, conversation_id: int) -> None:
    layers = obj.scope().layers
    state = layers.live_context.get(conversation_id)
    summary = layers.summaries.current(conversation_id)
    if state is None:
        console.print("No live context yet.", markup=False)
    else:
        for label, value in (("Mood", state.mood), ("Events", state.events), ("Needs", state.needs),
                             ("Summary", state.display_summary), ("Source", state.source)):
            console.print(f"{label}: {value}", markup=False)
        for n in state.nudges:
            console.print(f"Nudge {n.id}: {n.text}", markup=False)
    console.print(f"Rolling summary: {summary.display if summary else '(none yet)'}", markup=False)


@context.command("set")
@click.argument("conversation_id", type=int)
@click.option("--mood")
@click.option("--events")
@click.option("--needs")
@click.option("--summary")
@click.option("--nudge", "nudges", multiple=True, help="Add an optional follow-up (repeatable).")
@pass_ctx
def context_set(obj: Context, conversation_id: int, nudges: tuple[str, ...], **values: str | None) -> None:
    layers = obj.scope().layers
    if any(v is not None for v in values.values()):
        layers.live_context.set(conversation_id, **values)
    for text in nudges:
        layers.live_context.add_nudge(conversation_id, text)
    console.print(f"Live context of conversation {conversation_id} saved.", markup=False)


@cli.group()
def fragments() -> None:
    """Memory fragments: durable context brought in when a trigger word appears."""


def _fragment_options(fn):
    for option in reversed([
        click.option("--trigger", "triggers", multiple=True, help="Trigger word or phrase (repeatable)."),
        click.option("--definition"),
        click.option("--category"),
        click.option("--all-of", "all_of", multiple=True, help="Every one of these must also appear."),
        click.option("--any-of", "any_of", multiple=True, help="At least one of these must also appear."),
        click.option("--none-of", "none_of", multiple=True, help="None of these may appear."),
        click.option("--priority", type=int),
    ]):
        fn = option(fn)
    return fn


@fragments.command("add")
@_fragment_options
@click.option("--disabled", is_flag=True)
@pass_ctx
def fragments_add(obj: Context, triggers, definition, category, all_of, any_of, none_of, priority, disabled) -> None:
    from ..errors import InvalidInput

    if not triggers or not definition:
        raise InvalidInput("a fragment needs at least one --trigger and a --definition")
    f = obj.scope().layers.fragments.add(list(triggers), definition, category or "", all_of=list(all_of),
                                         any_of=list(any_of), none_of=list(none_of), priority=priority or 0,
                                         enabled=not disabled)
    console.print(f"Fragment {f.id} added.", markup=False)


@fragments.command("list")
@click.option("--category")
@pass_ctx
def fragments_list(obj: Context, category: str | None) -> None:
    table = Table("id", "category", "triggers", "definition", "on")
    for f in obj.scope().layers.fragments.list(category=category):
        table.add_row(str(f.id), f.category, ", ".join(f.triggers), f.definition, "yes" if f.enabled else "no")
    console.print(table)


@fragments.command("edit")
@click.argument("fragment_id", type=int)
@_fragment_options
@click.option("--enabled/--disabled", default=None)
@pass_ctx
def fragments_edit(obj: Context, fragment_id: int, triggers, definition, category, all_of, any_of, none_of,
                   priority, enabled) -> None:
    f = obj.scope().layers.fragments.edit(
        fragment_id, triggers=list(triggers) or None, definition=definition, category=category,
        all_of=list(all_of) or None, any_of=list(any_of) or None, none_of=list(none_of) or None,
        priority=priority, enabled=enabled)
    console.print(f"Fragment {f.id} updated.", markup=False)


@fragments.command("rm")
@click.argument("fragment_id", type=int)
@pass_ctx
def fragments_rm(obj: Context, fragment_id: int) -> None:
    obj.scope().layers.fragments.remove(fragment_id)
    console.print(f"Fragment {fragment_id} removed.", markup=False)


@fragments.command("test")
@click.argument("text")
@click.option("--persona", help="Only the books in scope for this persona (short or display name).")
@pass_ctx
def fragments_test(obj: Context, text: str, persona: str | None) -> None:
    """Show which fragments TEXT would trigger."""
    scope = obj.scope()
    persona_id = _persona(scope, persona).id if persona else None
    found = scope.layers.fragments.match(text, persona_id=persona_id)
    for f, m in found:
        console.print(f"{f.id}\t{m.trigger}\t{f.definition}", markup=False)
    if not found:
        console.print("No fragment triggers.", markup=False)


def _persona(scope, name: str):
    """A persona by its short name, or else its display name (any case)."""
    from ..errors import NotFound

    wanted = name.casefold()
    found = [p for p in scope.personas.list(include_archived=True) if p.name.casefold() == wanted] or \
        [p for p in scope.personas.list(include_archived=True) if p.display_name.casefold() == wanted]
    if not found:
        raise NotFound(f"no persona named {name!r}")
    return found[0]


def _scope_text(book, names: dict[int, str]) -> str:
    if book.scope == "all":
        return "all personas"
    who = ", ".join(names.get(pid, f"#{pid}") for pid in book.persona_ids) or "no one"
    return f"its character: {who}" if book.scope == "character" else f"chosen personas: {who}"


@fragments.command("books")
@pass_ctx
def fragments_books(obj: Context) -> None:
    """Books (fragment categories) and which personas they fire for."""
    scope = obj.scope()
    names = {p.id: p.display_name for p in scope.personas.list(include_archived=True)}
    table = Table("book", "fragments", "scope")
    books = scope.layers.fragments.books.list()
    for book in books:
        table.add_row(book.name, str(book.fragments), _scope_text(book, names))
    if books:
        console.print(table)
    else:
        console.print("No books yet: a book is a fragment category (a card's book, a World Info file).",
                      markup=False)


@fragments.command("scope")
@click.argument("book")
@click.option("--persona", "personas", multiple=True, help="Fire only for this persona (repeatable).")
@click.option("--all", "for_all", is_flag=True, help="Fire for every persona.")
@pass_ctx
def fragments_scope(obj: Context, book: str, personas: tuple[str, ...], for_all: bool) -> None:
    """Choose which personas BOOK fires for: --persona NAME (repeatable) or --all."""
    from ..errors import InvalidInput

    if for_all == bool(personas):
        raise InvalidInput("give either --all or at least one --persona")
    scope = obj.scope()
    ids = [_persona(scope, name).id for name in personas]
    done = scope.layers.fragments.books.set_scope(book, "all" if for_all else "personas", ids)
    names = {p.id: p.display_name for p in scope.personas.list(include_archived=True)}
    console.print(f"{done.name}: {_scope_text(done, names)}.", markup=False)


@cli.group()
def review() -> None:
    """The review queue: suggested status changes and fragments wait for approval."""


@review.command("list")
@click.option("--status", "status_", type=click.Choice(["pending", "approved", "dismissed"]), default="pending")
@pass_ctx
def review_list(obj: Context, status_: str) -> None:
    items = obj.scope().layers.review.list(status_)
    for p in items:
        console.print(f"{p.id}\t{p.kind}\t{p.label}", markup=False)
        console.print(f"\tReason: {p.reason}", markup=False)
        if p.evidence:
            console.print(f"\tYou said: \"{p.evidence}\"", markup=False)
    if not items:
        console.print(f"No {status_} proposals.", markup=False)


@review.command("approve")
@click.argument("proposal_id", type=int)
@click.option("--to", "to", help="Status change: use this value instead.")
@click.option("--definition", help="Fragment: use this definition instead.")
@click.option("--trigger", "triggers", multiple=True, help="Fragment: use these triggers instead.")
@click.option("--category", help="Fragment or memory: use this category instead.")
@click.option("--text", help="Memory: use this text instead.")
@pass_ctx
def review_approve(obj: Context, proposal_id: int, to, definition, triggers, category, text) -> None:
    edits = {k: v for k, v in (("to", to), ("definition", definition), ("category", category), ("text", text))
             if v is not None}
    if triggers:
        edits["triggers"] = list(triggers)
    p = obj.scope().layers.review.approve(proposal_id, edits)
    console.print(f"Approved {p.id}: {p.label}", markup=False)


@review.command("dismiss")
@click.argument("proposal_id", type=int)
@pass_ctx
def review_dismiss(obj: Context, proposal_id: int) -> None:
    p = obj.scope().layers.review.dismiss(proposal_id)
    console.print(f"Dismissed {p.id}; it will not be suggested again unchanged.", markup=False)


@review.command("run")
@click.argument("conversation_id", type=int)
@pass_ctx
def review_run(obj: Context, conversation_id: int) -> None:
    """Queue a review of a conversation (run `hearth worker --once` or keep a worker running)."""
    job_id = obj.scope().layers.review.request(conversation_id)
    console.print(f"Review queued as job {job_id}.", markup=False)


@cli.group()
def layers() -> None:
    """Settings of the memory layers: cadences, budgets, auto-approve per kind (off by default)."""


@layers.command("show")
@pass_ctx
def layers_show(obj: Context) -> None:
    for key, value in obj.scope().layers.settings.all().items():
        console.print(f"{key} = {json.dumps(value)}", markup=False)


@layers.command("set")
@click.argument("key")
@click.argument("value")
@pass_ctx
def layers_set(obj: Context, key: str, value: str) -> None:
    saved = obj.scope().layers.settings.set(key, value)
    console.print(f"{key} = {json.dumps(saved)}", markup=False)
