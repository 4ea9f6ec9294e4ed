"""Long-term memories and conversation snapshots."""

from __future__ import annotations

import json

import click

from .base import Context, Table, cli, console, pass_ctx


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
    added, queued = obj.scope().layers.review.remember([{"text": text, "category": category,
                                                          "importance": importance}])
    if queued:
        console.print(f"Not added: {queued[0].label}. It waits in the review queue as suggestion"
                      f" {queued[0].id}: approve it with a resolution (merge, supersede or keep_both) or dismiss it.",
                      markup=False)
        return
    console.print(f"Memory {added[0].id} added; it will be part of new conversations.", markup=False)


@memory.command("edit")
@click.argument("memory_id", type=int)
@click.option("--text")
@click.option("--category")
@click.option("--importance", type=click.IntRange(0, 10))
@click.option("--visible/--hidden", "eligible", default=None)
@click.option("--correction", is_flag=True, help="A typo fix of the same version, not a change of meaning.")
@click.option("--valid-from", help="When the new text became true (ISO date or date-time; default now).")
@pass_ctx
def memory_edit(obj: Context, memory_id: int, text: str | None, category: str | None,
                importance: int | None, eligible: bool | None, correction: bool, valid_from: str | None) -> None:
    """Change a memory. New text supersedes the old version (kept in history) unless --correction."""
    m, rebuilt = obj.scope().memories.edit(memory_id, text=text, category=category, importance=importance,
                                           eligible=eligible, correction=correction, valid_from=valid_from)
    console.print(f"Memory {m.id} is now version {m.version}; {rebuilt} stored prompt(s) refreshed.", markup=False)


@memory.command("end")
@click.argument("memory_id", type=int)
@click.option("--valid-until", help="When it stopped being true (ISO date or date-time; default now).")
@pass_ctx
def memory_end(obj: Context, memory_id: int, valid_until: str | None) -> None:
    """Record that a memory is no longer true: it leaves every prompt, its history stays."""
    _, rebuilt = obj.scope().memories.end(memory_id, valid_until)
    console.print(f"Memory {memory_id} ended; {rebuilt} stored prompt(s) refreshed.", markup=False)


@memory.command("history")
@click.argument("memory_id", type=int)
@pass_ctx
def memory_history(obj: Context, memory_id: int) -> None:
    """Every version of a memory: what it said, when it was true, who changed it."""
    table = Table("version", "change", "by", "valid", "recorded", "text")
    for v in obj.scope().memories.history(memory_id):
        valid = f"{v.valid_from[:19]} .. {v.valid_until[:19] if v.valid_until else 'now'}"
        recorded = f"{v.recorded_at[:19]}" + (f" (retired {v.retired_at[:19]})" if v.retired_at else "")
        table.add_row(str(v.version), v.change, v.actor, valid, recorded, v.text)
    console.print(table)


@memory.command("restore")
@click.argument("memory_id", type=int)
@click.argument("version", type=int)
@pass_ctx
def memory_restore(obj: Context, memory_id: int, version: int) -> None:
    """Make VERSION current again (as a new version); undo for memories."""
    m, rebuilt = obj.scope().memories.restore(memory_id, version)
    console.print(f"Memory {m.id} restored from version {version} as version {m.version};"
                  f" {rebuilt} stored prompt(s) refreshed.", markup=False)


@memory.command("rm")
@click.argument("memory_id", type=int)
@pass_ctx
def memory_rm(obj: Context, memory_id: int) -> None:
    rebuilt = obj.scope().memories.delete(memory_id)
    console.print(f"Memory {memory_id} deleted everywhere; {rebuilt} stored prompt(s) refreshed.", markup=False)


@memory.command("list")
@click.option("--as-of", "as_of", help="List what was true on this date (ISO date or date-time) instead.")
@click.option("--known", is_flag=True, help="With --as-of: what Hearth knew then, not what was true then.")
@pass_ctx
def memory_list(obj: Context, as_of: str | None, known: bool) -> None:
    if as_of is not None:
        versions = obj.scope().memories.as_of(as_of, "known" if known else "valid")
        table = Table("id", "version", "valid from", "text", "visible")
        for v in versions:
            table.add_row(str(v.memory_id), str(v.version), v.valid_from[:19], v.text, "yes" if v.eligible else "no")
        console.print(table)
        return
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
    from ..errors import InvalidInput

    try:
        items = json.loads(path.read().decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InvalidInput(f"cannot read {path.name}: {exc}") from None
    if not isinstance(items, list):
        raise InvalidInput(f"{path.name} must hold a JSON list of memories")
    created, queued = obj.scope().layers.review.remember(items, actor="import")
    console.print(f"Imported {len(created)} memories; they will be part of new conversations."
                  + (f" {len(queued)} repeat or contradict a memory and wait in the review queue." if queued else ""),
                  markup=False)


@memory.command("refresh")
@click.argument("conversation_id", type=int)
@pass_ctx
def memory_refresh(obj: Context, conversation_id: int) -> None:
    """Replace one conversation's memory snapshot with the current memories."""
    info = obj.scope().memories.refresh(conversation_id)
    console.print(f"Memory refreshed for conversation {conversation_id} at {info.refreshed_at}.", markup=False)
