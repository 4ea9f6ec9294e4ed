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
    ]:
        table.add_row(key, value)
    console.print(table)


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
        conversation = scope.new_conversation(persona_id, channel="cli")
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
    import uvicorn

    from .server import check_bind, create_app

    obj.overrides.update({"host": host, "port": port, "insecure_no_auth": insecure_no_auth})
    settings = obj.settings
    hearth = Hearth(settings)
    check_bind(settings, hearth)
    err_console.print(f"Hearth is listening on http://{settings.host}:{settings.port}", markup=False)
    uvicorn.run(create_app(settings, hearth), host=settings.host, port=settings.port, log_level="warning")
