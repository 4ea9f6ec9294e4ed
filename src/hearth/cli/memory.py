"""Long-term memories and conversation snapshots."""

from __future__ import annotations

import json

import click
from rich.table import Table

from .base import Context, cli, console, pass_ctx

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
    from ..errors import InvalidInput

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
