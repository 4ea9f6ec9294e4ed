"""Delete forever (B4), retention (B5) and the verification that forgotten text is gone."""

from __future__ import annotations

import click

from .base import Context, _json, cli, console, pass_ctx

TARGETS = click.Choice(["message", "conversation", "folder", "document", "memory", "trash", "range"])


@cli.group("forget", invoke_without_command=True)
@click.option("--verify", "canary", metavar="TEXT",
              help="Check that TEXT is absent from the database file, its WAL, the FTS index and vector files.")
@pass_ctx
@click.pass_context
def forget(click_ctx: click.Context, obj: Context, canary: str | None) -> None:
    """Delete forever with everything derived from it: preview, then apply with the token."""
    if click_ctx.invoked_subcommand is not None:
        return
    if canary is None:
        click.echo(click_ctx.get_help())
        return
    from hearth.records.forget import compact, verify

    compact(obj.hearth.store)  # pending index merges first, so the check sees the settled state
    result = verify(obj.hearth.store, canary)
    if result.clean:
        console.print(f"Clean: not found in {result.files_checked} file(s) or the full-text index.", markup=False)
        return
    where = ", ".join(result.found_in + (["full-text index"] if result.fts_terms else []))
    raise click.ClickException(f"still present in: {where}")


@forget.command("preview")
@click.argument("target", type=TARGETS)
@click.argument("item_id", type=int, required=False)
@click.option("--from", "start", help="range: first day (ISO date)")
@click.option("--to", "end", help="range: last day (ISO date)")
@pass_ctx
def forget_preview(obj: Context, target: str, item_id: int | None, start: str | None, end: str | None) -> None:
    """Counts of what would be removed, and the token `hearth forget apply` needs."""
    _json(obj.scope().forget.preview(target, item_id, start=start, end=end).to_dict())


@forget.command("apply")
@click.argument("target", type=TARGETS)
@click.argument("item_id", type=int, required=False)
@click.option("--from", "start", help="range: first day (ISO date)")
@click.option("--to", "end", help="range: last day (ISO date)")
@click.option("--token", required=True, help="The scope token from `hearth forget preview`.")
@click.option("--phrase", required=True, help='Exactly "FORGET FOREVER".')
@pass_ctx
def forget_apply(obj: Context, target: str, item_id: int | None, start: str | None, end: str | None,
                 token: str, phrase: str) -> None:
    receipt = obj.scope().forget.apply(target, item_id, token=token, phrase=phrase, start=start, end=end)
    console.print("Forgotten: " + ", ".join(f"{v} {k.replace('_', ' ')}" for k, v in receipt.counts.items() if v)
                  + ". Index compaction runs in the background (hearth worker).", markup=False)


@forget.command("search-log")
@click.option("--phrase", required=True, help='Exactly "FORGET FOREVER".')
@pass_ctx
def forget_search_log(obj: Context, phrase: str) -> None:
    """Clear this user's whole search log."""
    receipt = obj.scope().forget.clear_search_log(phrase=phrase)
    console.print(f"Removed {receipt.counts['search_log_entries']} search-log entries.", markup=False)
