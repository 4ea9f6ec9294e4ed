"""The ``hearth`` command: thin click commands over the library.

Every command resolves settings once (flags > HEARTH_* env > config file > defaults), opens the
deployment, acts as one user (the owner unless ``--user`` names another), and prints errors from
the error tree as one clear line. Invalid settings exit with code 2, other errors with code 1.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from . import __version__
from .engine import Hearth, Scope
from .errors import ConfigError, HearthError
from .settings import Settings

console = Console(highlight=False)
err_console = Console(stderr=True, highlight=False)


class Context:
    def __init__(self, overrides: dict[str, Any], user: str | None):
        self.overrides = overrides
        self.user = user
        self._hearth: Hearth | None = None

    @property
    def settings(self) -> Settings:
        return Settings.resolve(self.overrides)

    @property
    def hearth(self) -> Hearth:
        if self._hearth is None:
            self._hearth = Hearth(self.settings)
        return self._hearth

    def scope(self) -> Scope:
        hearth = self.hearth
        if self.user:
            return hearth.scope(hearth.users.by_name(self.user).id)
        return hearth.scope()


pass_ctx = click.make_pass_decorator(Context)


class HearthGroup(click.Group):
    """Translates the error tree into one line and an exit code at the edge."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except ConfigError as exc:
            err_console.print(f"Error: {exc}", markup=False)
            sys.exit(2)
        except HearthError as exc:
            err_console.print(f"Error: {exc}", markup=False)
            sys.exit(1)


@click.group(cls=HearthGroup)
@click.version_option(__version__, prog_name="hearth")
@click.option("--home", envvar="HEARTH_HOME", help="Data folder (default ~/.local/share/hearth).")
@click.option("--user", "user", help="Act as this user (default: the owner).")
@click.pass_context
def cli(ctx: click.Context, home: str | None, user: str | None) -> None:
    """Hearth: memory and continuity for AI companions."""
    ctx.obj = Context({"home": home}, user)


def main() -> None:
    cli(prog_name="hearth")


def _json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, ensure_ascii=False, default=str))


# -- set-up and health ----------------------------------------------------------------------------
@cli.command()
@pass_ctx
def init(obj: Context) -> None:
    """Create the data folder, the database and a first persona."""
    scope = obj.scope()
    persona = scope.personas.default()
    console.print(f"Hearth is ready at {obj.hearth.settings.home}", markup=False)
    console.print(f"Persona: {persona.display_name} ({persona.name})", markup=False)


@cli.command()
@pass_ctx
def doctor(obj: Context) -> None:
    """Versions, database, indexes and configuration at a glance."""
    import platform
    import sqlite3

    from .jobs import JobQueue
    from .ledger import verify
    from .store import LATEST_VERSION

    hearth = obj.hearth
    conn = hearth.store.connection()
    try:
        conn.execute("CREATE VIRTUAL TABLE temp.fts5_probe USING fts5(x)")
        conn.execute("DROP TABLE temp.fts5_probe")
        fts5 = True
    except sqlite3.OperationalError:
        fts5 = False
    report = verify(conn)
    try:
        provider = f"{hearth.provider.name} ({hearth.provider.model})"
    except HearthError as exc:
        provider = f"not usable: {exc}"
    table = Table(show_header=False, box=None)
    for key, value in [
        ("hearth", __version__),
        ("python", platform.python_version()),
        ("sqlite", sqlite3.sqlite_version),
        ("database", str(hearth.settings.database_path)),
        ("schema version", f"{hearth.store.schema_version()} (latest {LATEST_VERSION})"),
        ("keyword index (FTS5)", "available" if fts5 else "missing"),
        ("provider", provider),
        ("owner password", "set" if hearth.users.password_configured() else "not set"),
        ("ledger", "ok" if report.ok else "; ".join(report.problems)),
        ("events / messages", f"{report.events} / {report.messages}"),
        ("jobs", "  ".join(f"{k} {v}" for k, v in JobQueue(hearth.store).counts().items())),
        ("prompt reconciliation", _reconciliation_line(conn)),
    ]:
        table.add_row(key, value)
    console.print(table)


def _reconciliation_line(conn) -> str:
    from .reconcile import state

    current = state(conn)
    if not current:
        return "not run yet"
    if "completed_policy_version" in current and not current.get("remaining_failures"):
        return f"complete (policy {current['completed_policy_version']})"
    return f"{current.get('remaining_failures', 0)} failure(s) remaining"


# -- users and auth -------------------------------------------------------------------------------
@cli.command()
@click.option("--password", prompt=True, hide_input=True, confirmation_prompt=True)
@pass_ctx
def passwd(obj: Context, password: str) -> None:
    """Set the password of the acting user (the owner by default)."""
    scope = obj.scope()
    obj.hearth.users.set_password(scope.user_id, password)
    console.print("Password set. The server now requires login.")


@cli.group()
def user() -> None:
    """Users of this deployment."""


@user.command("add")
@click.argument("name")
@pass_ctx
def user_add(obj: Context, name: str) -> None:
    created = obj.hearth.users.create(name)
    console.print(f"User {created.name} ({created.id}) created.", markup=False)


@user.command("list")
@pass_ctx
def user_list(obj: Context) -> None:
    for u in obj.hearth.users.list():
        console.print(f"{u.id}\t{u.name}\t{'owner' if u.is_owner else ''}", markup=False)


@cli.group()
def token() -> None:
    """API tokens for programmatic clients."""


@token.command("create")
@click.argument("name")
@pass_ctx
def token_create(obj: Context, name: str) -> None:
    scope = obj.scope()
    click.echo(obj.hearth.users.create_token(scope.user_id, name))
    err_console.print("Store this token now: it is not shown again.")


@token.command("list")
@pass_ctx
def token_list(obj: Context) -> None:
    scope = obj.scope()
    for t in obj.hearth.users.list_tokens(scope.user_id):
        console.print(f"{t['id']}\t{t['name']}\t{t['created_at']}\t{'revoked' if t['revoked_at'] else 'active'}",
                      markup=False)


@token.command("revoke")
@click.argument("token_id", type=int)
@pass_ctx
def token_revoke(obj: Context, token_id: int) -> None:
    scope = obj.scope()
    obj.hearth.users.revoke_token(scope.user_id, token_id)
    console.print("Token revoked.")


# -- personas -------------------------------------------------------------------------------------
@cli.group()
def persona() -> None:
    """Personas: who the companion is."""


@persona.command("add")
@click.argument("name")
@click.option("--display-name")
@click.option("--identity", default="")
@click.option("--user-label")
@click.option("--assistant-label")
@click.option("--legacy-label", "legacy_labels", multiple=True)
@click.option("--tone", default="Natural")
@click.option("--instructions", "custom_instructions", default="")
@click.option("--auto-continuity/--no-auto-continuity", default=True)
@click.option("--archive-access/--no-archive-access", default=False)
@pass_ctx
def persona_add(obj: Context, name: str, display_name: str | None, legacy_labels: tuple[str, ...],
                **values: Any) -> None:
    scope = obj.scope()
    created = scope.personas.create(name, display_name, legacy_labels=list(legacy_labels), **values)
    console.print(f"Persona {created.name} ({created.id}) created.", markup=False)


@persona.command("list")
@pass_ctx
def persona_list(obj: Context) -> None:
    for p in obj.scope().personas.list():
        console.print(f"{p.id}\t{p.name}\t{p.display_name}", markup=False)


@persona.command("show")
@click.argument("name")
@pass_ctx
def persona_show(obj: Context, name: str) -> None:
    _json(obj.scope().personas.by_name(name).to_dict())


# -- folders and conversations ----------------------------------------------------------------------
@cli.group()
def folders() -> None:
    """Folders: hide and show groups of conversations."""


@folders.command("add")
@click.argument("name")
@click.option("--hidden", is_flag=True)
@pass_ctx
def folders_add(obj: Context, name: str, hidden: bool) -> None:
    folder = obj.scope().folders.create(name, hidden)
    console.print(f"Folder {folder.name} ({folder.id}) created.", markup=False)


@folders.command("list")
@pass_ctx
def folders_list(obj: Context) -> None:
    for f in obj.scope().folders.list():
        console.print(f"{f.id}\t{f.name}\t{'hidden' if f.hidden else 'shown'}", markup=False)


@folders.command("hide")
@click.argument("folder_id", type=int)
@pass_ctx
def folders_hide(obj: Context, folder_id: int) -> None:
    obj.scope().set_folder_hidden(folder_id, True)
    console.print("Folder hidden.")


@folders.command("show")
@click.argument("folder_id", type=int)
@pass_ctx
def folders_show(obj: Context, folder_id: int) -> None:
    obj.scope().set_folder_hidden(folder_id, False)
    console.print("Folder shown.")


@cli.group()
def conversations() -> None:
    """Conversations: list, read, move, trash, restore, end."""


@conversations.command("list")
@click.option("--trashed", is_flag=True, help="Include trashed conversations.")
@pass_ctx
def conversations_list(obj: Context, trashed: bool) -> None:
    table = Table("id", "title", "state", "visibility", "updated")
    for c in obj.scope().conversations.list(include_trashed=trashed):
        shield = " (shielded)" if c.continuity_shielded else ""
        table.add_row(str(c.id), c.title or "Untitled", c.state, c.visibility + shield, c.updated_at[:19])
    console.print(table)


@conversations.command("show")
@click.argument("conversation_id", type=int)
@pass_ctx
def conversations_show(obj: Context, conversation_id: int) -> None:
    scope = obj.scope()
    c = scope.conversations.get(conversation_id)
    persona_ = scope.personas.get(c.persona_id)
    console.print(f"# {c.title or 'Untitled'} ({c.state}, {c.visibility})", markup=False)
    for m in scope.conversations.messages(conversation_id):
        label = persona_.user_label if m.role == "user" else persona_.assistant_label
        console.print(f"\n{label} [{m.created_at[:19]}]\n{m.content}", markup=False)


def _conversation_action(name: str, help_: str):
    @conversations.command(name, help=help_)
    @click.argument("conversation_id", type=int)
    @pass_ctx
    def action(obj: Context, conversation_id: int) -> None:
        result = getattr(obj.scope(), f"{name}_conversation")(conversation_id)
        console.print(f"Conversation {result.id}: {result.state}, {result.visibility}.", markup=False)

    return action


_conversation_action("trash", "Move a conversation to the trash.")
_conversation_action("restore", "Restore a conversation from the trash.")
_conversation_action("end", "End a conversation: an explicit boundary that keeps its history.")


@conversations.command("move")
@click.argument("conversation_id", type=int)
@click.option("--folder", "folder_id", type=int, help="Folder id; omit to move out of any folder.")
@pass_ctx
def conversations_move(obj: Context, conversation_id: int, folder_id: int | None) -> None:
    result = obj.scope().move_conversation(conversation_id, folder_id)
    console.print(f"Conversation {result.id} is now {result.visibility}.", markup=False)


# -- chatting -------------------------------------------------------------------------------------
@cli.command()
@click.option("--persona", "persona_name", help="Persona name (default: the first persona).")
@click.option("--conversation", "conversation_id", type=int, help="Continue this conversation.")
@click.option("-m", "--message", "messages", multiple=True, help="Send this message and exit (repeatable).")
@pass_ctx
def chat(obj: Context, persona_name: str | None, conversation_id: int | None, messages: tuple[str, ...]) -> None:
    """Talk to the companion in the terminal; replies stream as they arrive."""
    scope = obj.scope()
    if conversation_id is None:
        persona_id = scope.personas.by_name(persona_name).id if persona_name else None
        # A new conversation carries the last eligible thread's final eight when the persona
        # uses automatic continuity (H6).
        conversation = scope.new_chat(persona_id, channel="cli").conversation
    else:
        conversation = scope.conversations.get(conversation_id)
    current = scope.personas.get(conversation.persona_id)
    err_console.print(f"Conversation {conversation.id} with {current.display_name}. Ctrl-D to leave.",
                      markup=False)

    def turn(text: str) -> None:
        for event in scope.send_stream(conversation.id, text, channel="cli"):
            if event.type == "delta":
                click.echo(event.data["text"], nl=False)
            elif event.type == "tool":
                if event.data["status"] == "running":
                    err_console.print(f"[using {event.data['name']}]", markup=False)
            elif event.type == "error":
                click.echo()
                err_console.print(f"Error: {event.data['detail']} Your message is saved; "
                                  "send it again with `hearth chat --conversation "
                                  f"{conversation.id}` after the problem clears.", markup=False)
                return
        click.echo()

    if messages:
        for text in messages:
            turn(text)
        return
    while True:
        try:
            text = click.prompt(current.user_label.rstrip(":") or ">", prompt_suffix=" ")
        except (EOFError, click.Abort):
            click.echo()
            return
        if text.strip():
            turn(text)


# -- memories -------------------------------------------------------------------------------------
@cli.group()
def memory() -> None:
    """Long-term memories and conversation snapshots."""


@memory.command("add")
@click.argument("text")
@click.option("--category", default="")
@click.option("--importance", type=click.IntRange(0, 10), default=0)
@pass_ctx
def memory_add(obj: Context, text: str, category: str, importance: int) -> None:
    m = obj.scope().memories.add(text, category, importance)
    console.print(f"Memory {m.id} added; it will be part of new conversations.", markup=False)


@memory.command("edit")
@click.argument("memory_id", type=int)
@click.option("--text")
@click.option("--category")
@click.option("--importance", type=click.IntRange(0, 10))
@click.option("--visible/--hidden", "eligible", default=None)
@pass_ctx
def memory_edit(obj: Context, memory_id: int, text: str | None, category: str | None,
                importance: int | None, eligible: bool | None) -> None:
    m, rebuilt = obj.scope().memories.edit(memory_id, text=text, category=category, importance=importance,
                                           eligible=eligible)
    console.print(f"Memory {m.id} updated; {rebuilt} stored prompt(s) refreshed.", markup=False)


@memory.command("rm")
@click.argument("memory_id", type=int)
@pass_ctx
def memory_rm(obj: Context, memory_id: int) -> None:
    rebuilt = obj.scope().memories.delete(memory_id)
    console.print(f"Memory {memory_id} deleted everywhere; {rebuilt} stored prompt(s) refreshed.", markup=False)


@memory.command("list")
@pass_ctx
def memory_list(obj: Context) -> None:
    table = Table("#", "id", "category", "importance", "text", "visible")
    for position, m in enumerate(obj.scope().memories.list(), start=1):
        table.add_row(str(position), str(m.id), m.category, str(m.importance), m.text, "yes" if m.eligible else "no")
    console.print(table)


@memory.command("move")
@click.argument("memory_id", type=int)
@click.argument("position", type=int)
@pass_ctx
def memory_move(obj: Context, memory_id: int, position: int) -> None:
    obj.scope().memories.move(memory_id, position)
    console.print(f"Memory {memory_id} moved to position {position}.", markup=False)


@memory.command("import")
@click.argument("path", type=click.File("rb"))
@pass_ctx
def memory_import(obj: Context, path) -> None:
    """Import a JSON list of {text, category?, importance?} as one batch."""
    from .errors import InvalidInput

    try:
        items = json.loads(path.read().decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InvalidInput(f"cannot read {path.name}: {exc}") from None
    created = obj.scope().memories.import_many(items)
    console.print(f"Imported {len(created)} memories; they will be part of new conversations.", markup=False)


@memory.command("refresh")
@click.argument("conversation_id", type=int)
@pass_ctx
def memory_refresh(obj: Context, conversation_id: int) -> None:
    """Replace one conversation's memory snapshot with the current memories."""
    info = obj.scope().memories.refresh(conversation_id)
    console.print(f"Memory refreshed for conversation {conversation_id} at {info.refreshed_at}.", markup=False)


# -- server ---------------------------------------------------------------------------------------
@cli.command()
@click.option("--host", help="Address to bind (default 127.0.0.1).")
@click.option("--port", type=int, help="Port (default 8765).")
@click.option("--insecure-no-auth", is_flag=True, default=None,
              help="Allow binding a non-loopback address without an owner password.")
@pass_ctx
def serve(obj: Context, host: str | None, port: int | None, insecure_no_auth: bool | None) -> None:
    """Start the HTTP API and web UI."""
    import threading

    import uvicorn

    from .reconcile import reconcile
    from .server import check_bind, create_app

    obj.overrides.update({"host": host, "port": port, "insecure_no_auth": insecure_no_auth})
    settings = obj.settings
    hearth = Hearth(settings)
    check_bind(settings, hearth)
    server = uvicorn.Server(uvicorn.Config(create_app(settings, hearth), host=settings.host,
                                           port=settings.port, log_level="warning"))

    def after_start() -> None:
        # Maintenance must never delay the port (P7): wait until the server is accepting requests.
        while not server.started and not server.should_exit:
            threading.Event().wait(0.05)
        if server.started:
            result = reconcile(hearth)
            if result.failed:
                err_console.print(f"Prompt reconciliation: {result.failed} conversation(s) still failing; "
                                  "see `hearth doctor`.", markup=False)

    from .jobs import Worker

    worker = Worker(hearth)  # summaries, live context, status detection, review, embeddings
    threading.Thread(target=after_start, name="hearth-maintenance", daemon=True).start()
    worker.start()
    err_console.print(f"Hearth is listening on http://{settings.host}:{settings.port}", markup=False)
    try:
        server.run()
    finally:
        worker.stop()


# -- cross-thread continuity, backups and maintenance -------------------------------------------
@cli.command("new")
@click.option("--persona", "persona_name", help="Persona name (default: the first persona).")
@click.option("--title", default="")
@click.option("--continue/--no-continue", "continue_", default=True,
              help="Carry the final eight turns of the most recent eligible conversation (H6).")
@pass_ctx
def new_cmd(obj: Context, persona_name: str | None, title: str, continue_: bool) -> None:
    """Start a new conversation, continuing the most recent eligible one."""
    scope = obj.scope()
    persona_id = scope.personas.by_name(persona_name).id if persona_name else None
    result = scope.new_chat(persona_id, title=title, channel="cli", continue_=continue_)
    if result.source_conversation_id is None:
        console.print(f"Conversation {result.conversation.id} started.", markup=False)
    else:
        h = result.handoff
        console.print(f"Conversation {result.conversation.id} started, continuing conversation "
                      f"{result.source_conversation_id} ({h['verbatim']} turns verbatim, "
                      f"{h['markers']} shown as markers).", markup=False)


@cli.command("branch")
@click.argument("source_id", type=int)
@click.option("--retry-key", help="Repeat a branch request safely; a new key is made when omitted.")
@click.option("--title", default=None)
@pass_ctx
def branch_cmd(obj: Context, source_id: int, retry_key: str | None, title: str | None) -> None:
    """Branch / Fresh Chat: a new conversation opening with the source's final exchange."""
    import uuid

    key = retry_key or str(uuid.uuid4())
    result = obj.scope().branch(source_id, key, title, channel="cli")
    state = "created" if result.created else "already existed for this retry key"
    console.print(f"Conversation {result.conversation.id} {state} (branch of {source_id}).", markup=False)
    if not retry_key:
        err_console.print(f"Retry key: {key}", markup=False)


@cli.group()
def shield() -> None:
    """Continuity Shield: keep a conversation out of automatic continuity."""


@shield.command("set")
@click.argument("conversation_id", type=int)
@pass_ctx
def shield_set(obj: Context, conversation_id: int) -> None:
    obj.scope().set_shielded(conversation_id, True)
    console.print(f"Conversation {conversation_id} is shielded; affected prompts were refreshed.", markup=False)


@shield.command("release")
@click.argument("conversation_id", type=int)
@pass_ctx
def shield_release(obj: Context, conversation_id: int) -> None:
    obj.scope().set_shielded(conversation_id, False)
    console.print(f"Shield released for conversation {conversation_id}; affected prompts were refreshed.",
                  markup=False)


@cli.command("backup")
@click.argument("dest", type=click.Path(dir_okay=False))
@pass_ctx
def backup_cmd(obj: Context, dest: str) -> None:
    """Write a verified copy of the database (online backup API) and its manifest."""
    from .backup import backup

    report = backup(obj.hearth.store, dest)
    console.print(f"Backup written and verified: {report.path} ({report.bytes:,} bytes, "
                  f"{sum(report.counts.values()):,} rows, schema {report.schema_version}).", markup=False)


@cli.command("restore")
@click.argument("src", type=click.Path(exists=True, dir_okay=False))
@click.option("--yes", is_flag=True, help="Do not ask before replacing the database.")
@pass_ctx
def restore_cmd(obj: Context, src: str, yes: bool) -> None:
    """Replace this deployment's database with a verified backup (stop the server first)."""
    from .backup import restore, verify_backup

    verify_backup(src)  # refuse before asking anything
    target = obj.settings.database_path
    if target.exists() and not yes:
        click.confirm(f"Replace the database at {target}?", abort=True)
    report = restore(src, target)
    console.print(f"Restored {sum(report.counts.values()):,} rows (schema {report.schema_version}).",
                  markup=False)


@cli.group()
def cleanup() -> None:
    """Owner-only removal of retired generated-summary rows (needs an owner password)."""


@cleanup.command("preview")
@pass_ctx
def cleanup_preview(obj: Context) -> None:
    """Counts and dates only, and the scope token deletion needs."""
    from . import cleanup as cleanup_mod

    _json(cleanup_mod.preview(obj.scope()).to_dict())


@cleanup.command("delete")
@click.option("--token", required=True, help="The scope token from `hearth cleanup preview`.")
@click.option("--backup-verified", is_flag=True, help="Acknowledge that a verified restorable backup exists.")
@click.option("--phrase", required=True, help='Exactly "DELETE RETIRED GENERATED SUMMARIES".')
@pass_ctx
def cleanup_delete(obj: Context, token: str, backup_verified: bool, phrase: str) -> None:
    from . import cleanup as cleanup_mod

    receipt = cleanup_mod.delete(obj.scope(), token=token, backup_verified=backup_verified, phrase=phrase)
    console.print(f"Removed {receipt.removed} record(s).", markup=False)


# -- memory layers: household status, live context, fragments, review queue, jobs -------------------
@cli.command("worker")
@click.option("--once", is_flag=True, help="Run every job that is due now, then exit.")
@click.option("--poll", type=click.FloatRange(0.1, 3600), default=2.0, show_default=True,
              help="Seconds to wait when the queue is empty.")
@pass_ctx
def worker_cmd(obj: Context, once: bool, poll: float) -> None:
    """Run background jobs (summaries, live context, status detection, review) until Ctrl-C."""
    from .jobs import Worker

    worker = Worker(obj.hearth, poll_seconds=poll)
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
    console.print("  ".join(f"{k} {v}" for k, v in scope.layers.jobs.counts(scope.user_id).items()), markup=False)
    for job in scope.layers.jobs.list(user_id=scope.user_id, status=status, limit=30):
        console.print(f"{job.id}\t{job.kind}\t{job.status}\tattempts {job.attempts}\t{job.last_error or ''}",
                      markup=False)


@jobs.command("retry")
@click.argument("job_id", type=int)
@pass_ctx
def jobs_retry(obj: Context, job_id: int) -> None:
    scope = obj.scope()
    job = scope.layers.jobs.retry(job_id, scope.user_id)
    console.print(f"Job {job.id} ({job.kind}) is pending again.", markup=False)


@cli.group()
def status() -> None:
    """Household status: present-tense facts such as who is home."""


@status.command("list")
@pass_ctx
def status_list(obj: Context) -> None:
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
@pass_ctx
def status_set(obj: Context, field: str, value: str) -> None:
    """Set FIELD to VALUE (the field is created if new); the old value goes to history."""
    f = obj.scope().layers.household.set(field, value, create=True)
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
    for v in obj.scope().layers.household.history(field):
        until = v.valid_to[:19] if v.valid_to else "now"
        console.print(f"{v.field}: {v.value}\t{v.valid_from[:19]} .. {until}\t{v.source}", markup=False)


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
    from .errors import InvalidInput

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
@pass_ctx
def fragments_test(obj: Context, text: str) -> None:
    """Show which fragments TEXT would trigger."""
    found = obj.scope().layers.fragments.match(text)
    for f, m in found:
        console.print(f"{f.id}\t{m.trigger}\t{f.definition}", markup=False)
    if not found:
        console.print("No fragment triggers.", markup=False)


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


# -- recall: search, search log, archive import, reindex ----------------------------------------------
@cli.command("search")
@click.argument("query")
@click.option("--include-shielded", is_flag=True, help="Also search shielded conversations (this search only).")
@click.option("--archive/--no-archive", default=True, help="Include archive documents.")
@click.option("--conversations/--no-conversations", "messages", default=True, help="Include conversations.")
@click.option("--from", "date_from", help="Only results on or after this date (YYYY-MM-DD).")
@click.option("--to", "date_to", help="Only results on or before this date (YYYY-MM-DD).")
@click.option("--collection", "collections", multiple=True, help="Limit the archive to these collections.")
@click.option("--limit", type=click.IntRange(1, 100), default=10)
@click.option("--json", "as_json", is_flag=True, help="Print the results with their score breakdown as JSON.")
@pass_ctx
def search_cmd(obj: Context, query: str, as_json: bool, collections: tuple[str, ...], **options: Any) -> None:
    """Search your conversations and archive (keyword + meaning); logged in the search log."""
    from .layers.archive_recall import owner_search

    outcome = owner_search(obj.scope(), query, collections=collections, **options)
    if as_json:
        _json({"reliability": outcome.reliability, "log_id": outcome.log_id,
               "results": [r.log_record() for r in outcome.results]})
        return
    table = Table("date", "source", "text", "signals", "score")
    for r in outcome.results:
        text = " ".join(r.text.split())
        table.add_row((r.date or "")[:10], r.title, text[:160] + ("…" if len(text) > 160 else ""),
                      "+".join(r.scores.get("signals", [])), f"{r.scores.get('fused', 0):.4f}")
    console.print(table)
    console.print(f"{len(outcome.results)} result(s), reliability {outcome.reliability} "
                  f"(search log entry {outcome.log_id}).", markup=False)


@cli.command("search-log")
@click.option("--limit", type=click.IntRange(1, 500), default=20)
@click.option("--origin", help="Only entries from this origin (owner, keyword_recall, tool:search_archive, ...).")
@click.option("--id", "entry_id", type=int, help="Show one entry in full.")
@click.option("--json", "as_json", is_flag=True)
@pass_ctx
def search_log_cmd(obj: Context, limit: int, origin: str | None, entry_id: int | None, as_json: bool) -> None:
    """What every search looked for, what came back, and how reliable it looked."""
    from .retrieval import searchlog

    scope = obj.scope()
    conn = scope.store.connection()
    if entry_id is not None:
        _json(searchlog.entry(conn, scope.user_id, entry_id).to_dict())
        return
    entries = searchlog.entries(conn, scope.user_id, limit=limit, origin=origin)
    if as_json:
        _json([e.to_dict() for e in entries])
        return
    table = Table("id", "when", "origin", "query", "results", "reliability", "ms")
    for e in entries:
        table.add_row(str(e.id), e.created_at[:19], e.origin, e.query[:60], f"{e.result_count}/{e.candidate_count}",
                      e.reliability, str(e.duration_ms))
    console.print(table)


@cli.command("import")
@click.argument("path", type=click.Path(exists=True, dir_okay=False))
@click.option("--format", "fmt", type=click.Choice(["auto", "chatgpt", "labelled"]), default="auto")
@click.option("--collection", default="imports", help="Archive collection to add the documents to.")
@click.option("--persona", "persona_name", help="Persona whose labels name the speakers (default: the first).")
@click.option("--date", "document_date", help="Date of a labelled text archive (YYYY-MM-DD).")
@pass_ctx
def import_cmd(obj: Context, path: str, fmt: str, collection: str, persona_name: str | None,
               document_date: str | None) -> None:
    """Import a ChatGPT conversations.json or a labelled text archive into the deep archive."""
    from pathlib import Path

    from rich.progress import Progress

    from .importers import import_bytes
    from .retrieval.archive import Archive

    scope = obj.scope()
    persona_ = scope.personas.by_name(persona_name) if persona_name else scope.personas.default()
    data = Path(path).read_bytes()
    with Progress(console=err_console, transient=True) as bar:
        task = bar.add_task("Importing", total=None)
        report = import_bytes(Archive(scope.store, scope.user_id), data, fmt=fmt, name=Path(path).name,
                              collection=collection, document_date=document_date, persona=persona_,
                              progress=lambda done, total: bar.update(task, completed=done, total=total))
    console.print(f"Imported {report.documents_added} document(s) ({report.chunks_added} chunks); "
                  f"{report.documents_skipped} already in the archive. Run `hearth reindex` to embed them.",
                  markup=False)


@cli.command("reindex")
@click.option("--all-users", is_flag=True, help="Embed for every user, not only the acting one.")
@pass_ctx
def reindex_cmd(obj: Context, all_users: bool) -> None:
    """Embed every message and archive chunk that has no vector yet, and rebuild the vector index.

    Safe to interrupt: finished batches are saved, and the next run continues without duplicates.
    """
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    from .retrieval.semantic import INDEXES, embed_pending, shared_embedder

    scope = obj.scope()
    embedder = shared_embedder(obj.hearth)
    columns = (TextColumn("Embedding"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    with Progress(*columns, console=err_console) as bar:
        task = bar.add_task("embed", total=None)
        report = embed_pending(scope.store, embedder, user_id=None if all_users else scope.user_id,
                               progress=lambda done, total: bar.update(task, completed=done, total=total))
    INDEXES.clear()
    console.print(f"Embedded {report.messages} message(s) and {report.chunks} archive chunk(s); "
                  f"{report.remaining} left.", markup=False)


# -- export (S5) ---------------------------------------------------------------------------------
@cli.command("export")
@click.option("-o", "--output", type=click.Path(dir_okay=False, writable=True), help="File to write (default: stdout).")
@pass_ctx
def export_(obj: Context, output: str | None) -> None:
    """Write all of the acting user's data as one JSON document."""
    from .export import export_user

    scope = obj.scope()
    text = json.dumps(export_user(obj.hearth.store, scope.user_id), ensure_ascii=False)
    if output:
        with open(output, "w", encoding="utf-8") as handle:
            handle.write(text)
        err_console.print(f"Exported to {output}.", markup=False)
    else:
        click.echo(text)
