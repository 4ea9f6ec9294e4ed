"""Set-up, health, users and tokens: init, doctor, passwd, user, token."""

from __future__ import annotations

import click

from .. import __version__
from ..errors import HearthError
from .base import Context, Table, cli, console, err_console, pass_ctx


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

    from hearth.ops.jobs import JobQueue
    from hearth.records.ledger import verify

    from ..store import LATEST_VERSION

    hearth = obj.hearth
    conn = hearth.store.connection()
    engine_rows = hearth.store.engine.describe(hearth.store)  # engine, versions, keyword index
    report = verify(conn)
    try:
        provider = f"{hearth.provider.name} ({hearth.provider.model})"
    except HearthError as exc:
        provider = f"not usable: {exc}"
    table = Table(show_header=False, box=None)
    for key, value in [
        ("hearth", __version__),
        ("python", platform.python_version()),
        *engine_rows,
        ("schema version", f"{hearth.store.schema_version()} (latest {LATEST_VERSION})"),
        ("provider", provider),
        ("embedder", _embedder_line(hearth)),
        ("owner password", "set" if hearth.users.password_configured() else "not set"),
        ("ledger", "ok" if report.ok else "; ".join(report.problems)),
        ("events / messages", f"{report.events} / {report.messages}"),
        ("jobs", "  ".join(f"{k} {v}" for k, v in JobQueue(hearth.store).counts().items())),
        ("prompt reconciliation", _reconciliation_line(conn)),
        ("backup leftovers", _backup_leftovers_line(hearth)),
    ]:
        table.add_row(key, value)
    console.print(table)


def _backup_leftovers_line(hearth) -> str:
    """Remove the partial files killed backups left where backups were made (none in use: a running
    backup holds its partial file locked)."""
    from hearth.ops.backup import sweep_known

    removed = sweep_known(hearth.store, hearth.settings.home)
    if not removed:
        return "none"
    return "; ".join(f"removed {len(names)} in {folder}: {', '.join(names)}" for folder, names in removed.items())


def _embedder_line(hearth) -> str:
    """Name and size of the embedder, and whether the local model's files are installed (not loaded)."""
    try:
        embedder = hearth.embedder
        check = getattr(embedder, "files", None)
        if check is not None:
            check()
    except HearthError as exc:
        return f"not usable: {exc}"
    return f"{embedder.name} ({embedder.dim} dimensions)"


def _reconciliation_line(conn) -> str:
    from hearth.prompt.reconcile import state

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
        role = "owner" if u.is_owner else "off" if u.disabled else ""
        console.print(f"{u.id}\t{u.name}\t{role}\t{u.display_name or ''}", markup=False)


@user.command("disable")
@click.argument("name")
@pass_ctx
def user_disable(obj: Context, name: str) -> None:
    """Turn an account off: no login, no API token; its data stays (W10)."""
    obj.hearth.users.set_disabled(obj.hearth.users.by_name(name).id, True)
    console.print(f"User {name} turned off.", markup=False)


@user.command("enable")
@click.argument("name")
@pass_ctx
def user_enable(obj: Context, name: str) -> None:
    """Turn an account on again."""
    obj.hearth.users.set_disabled(obj.hearth.users.by_name(name).id, False)
    console.print(f"User {name} can log in again.", markup=False)


@user.command("name")
@click.argument("display_name", required=False)
@click.option("--clear", is_flag=True, help="Forget the display name: companions say \"the person\" again.")
@pass_ctx
def user_name(obj: Context, display_name: str | None, clear: bool) -> None:
    """Show or set what companions call the acting user ({{user}} in character cards)."""
    scope = obj.scope()
    if display_name is None and not clear:
        current = obj.hearth.users.get(scope.user_id).display_name
        console.print(current or "(not set: companions say \"the person\")", markup=False)
        return
    rebuilt = scope.set_display_name(None if clear else display_name)
    shown = obj.hearth.users.get(scope.user_id).display_name
    console.print(f"Display name {'set to ' + shown if shown else 'cleared'}; {rebuilt} stored prompt(s) rebuilt.",
                  markup=False)


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
