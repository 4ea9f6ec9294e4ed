"""Backups, restore, owner cleanup of retired rows, and the full export."""

from __future__ import annotations

import json

import click

from .base import Context, _json, cli, console, err_console, pass_ctx


@cli.command("backup")
@click.argument("dest", type=click.Path(dir_okay=False))
@pass_ctx
def backup_cmd(obj: Context, dest: str) -> None:
    """Write a verified copy of the database and its manifest (on PostgreSQL: a SQLite-format copy)."""
    from hearth.ops.backup import backup

    report = backup(obj.hearth.store, dest)
    if report.removed:
        console.print(f"Removed {len(report.removed)} file(s) left by an interrupted backup: "
                      + ", ".join(report.removed), markup=False)
    console.print(f"Backup written and verified: {report.path} ({report.bytes:,} bytes, "
                  f"{sum(report.counts.values()):,} rows, schema {report.schema_version}).", markup=False)


@cli.command("restore")
@click.argument("src", type=click.Path(exists=True, dir_okay=False))
@click.option("--yes", is_flag=True, help="Do not ask before replacing the database.")
@pass_ctx
def restore_cmd(obj: Context, src: str, yes: bool) -> None:
    """Replace this deployment's database with a verified backup (stop the server first)."""
    from hearth.ops.backup import restore_deployment, verify_backup

    from ..store.postgres import describe_url

    verify_backup(src)  # refuse before asking anything
    url = obj.settings.database_url
    target = describe_url(url) if url else str(obj.settings.database_path)
    if (url or obj.settings.database_path.exists()) and not yes:
        click.confirm(f"Replace the database at {target}?", abort=True)
    report = restore_deployment(src, obj.settings)
    console.print(f"Restored {sum(report.counts.values()):,} rows (schema {report.schema_version}).",
                  markup=False)


@cli.command("migrate-store")
@click.option("--to", "to", required=True, help="Target: a postgresql:// URL or a SQLite file path.")
@click.option("--from", "from_", default=None, help="Source (default: this deployment's store).")
@pass_ctx
def migrate_store_cmd(obj: Context, to: str, from_: str | None) -> None:
    """Copy every row to another store, SQLite <-> PostgreSQL; resumable; verified (S11)."""
    from pathlib import Path

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    from hearth.ops.migrate_store import check_target, copy_store

    from ..store import open_store

    def opened(where: str | None):
        if where is None:
            return open_store(obj.settings.database_url, obj.settings.database_path)
        if where.startswith(("postgresql://", "postgres://")):
            return open_store(where, Path("."))
        if not Path(where).parent.is_dir():
            raise click.BadParameter(f"no folder for {where}")
        return open_store("", Path(where))

    source = opened(from_)
    target = opened(to)
    try:
        check_target(source, target)
        columns = [TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn()]
        with Progress(*columns, console=err_console.rich, transient=True, disable=not err_console.is_terminal) as bar:
            tasks: dict[str, object] = {}

            def progress(table: str, done: int, total: int) -> None:
                if table not in tasks:
                    tasks[table] = bar.add_task(table, total=total)
                bar.update(tasks[table], completed=done)  # type: ignore[arg-type]

            report = copy_store(source, target, progress)
    finally:
        source.close()
        target.close()
    copied = sum(report.copied.values())
    if not report.ok:
        raise click.ClickException("the copy does not match: " + "; ".join(report.problems[:5]))
    console.print(f"Copied {copied:,} row(s); {sum(report.counts.values()):,} rows in "
                  f"{len(report.counts)} tables match and the ledger check passes.", markup=False)


@cli.group()
def cleanup() -> None:
    """Owner-only removal of retired generated-summary rows (needs an owner password)."""


@cleanup.command("preview")
@pass_ctx
def cleanup_preview(obj: Context) -> None:
    """Counts and dates only, and the scope token deletion needs."""
    from hearth.ops import cleanup as cleanup_mod

    _json(cleanup_mod.preview(obj.hearth.context(obj.scope().user_id)).to_dict())


@cleanup.command("delete")
@click.option("--token", required=True, help="The scope token from `hearth cleanup preview`.")
@click.option("--backup-verified", is_flag=True, help="Acknowledge that a verified restorable backup exists.")
@click.option("--phrase", required=True, help='Exactly "DELETE RETIRED GENERATED SUMMARIES".')
@pass_ctx
def cleanup_delete(obj: Context, token: str, backup_verified: bool, phrase: str) -> None:
    from hearth.ops import cleanup as cleanup_mod

    receipt = cleanup_mod.delete(obj.hearth.context(obj.scope().user_id), token=token, backup_verified=backup_verified, phrase=phrase)
    console.print(f"Removed {receipt.removed} record(s).", markup=False)


# -- export (S5) ---------------------------------------------------------------------------------
@cli.command("export")
@click.option("-o", "--output", type=click.Path(dir_okay=False, writable=True), help="File to write (default: stdout).")
@pass_ctx
def export_(obj: Context, output: str | None) -> None:
    """Write all of the acting user's data as one JSON document."""
    from hearth.interop.export import export_user

    scope = obj.scope()
    text = json.dumps(export_user(obj.hearth.store, scope.user_id), ensure_ascii=False)
    if output:
        with open(output, "w", encoding="utf-8") as handle:
            handle.write(text)
        err_console.print(f"Exported to {output}.", markup=False)
    else:
        click.echo(text)
