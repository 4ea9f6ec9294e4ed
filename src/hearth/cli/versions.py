"""Version history and undo (B2) for fragments, personas and household status fields.

Memories have theirs in memory.py (`hearth memory history|restore`). Each `history` lists the
versions newest first with what changed and who changed it; each `restore` applies an older
version again as a new version (nothing is rewritten), so a restore is itself undoable.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Sequence

import click

from .base import Context, console, pass_ctx
from .layers import fragments, status
from .threads import persona

if TYPE_CHECKING:
    from hearth.records.versions import Version

_TEXT = 120


def _show(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= _TEXT else text[:_TEXT - 1] + "…"


def _differences(newer: dict[str, Any], older: dict[str, Any] | None) -> str:
    """What this version set, as `field: value` for the fields that differ from the one before."""
    keys = [k for k in newer if older is None or older.get(k) != newer[k]]
    if older is None:  # the first version: what it said, empty fields left out
        keys = [k for k in keys if newer[k] not in (None, "", [], {})]
    return "; ".join(f"{k}: {_show(newer[k])}" for k in keys) or "(no field changed)"


def _print_versions(found: Sequence[Version]) -> None:
    # One line per version (not a table): the values are long and must stay greppable.
    for i, v in enumerate(found):
        older = found[i + 1].data if i + 1 < len(found) else None
        console.print(f"v{v.version}\t{v.change}\tby {v.actor}\t{v.created_at[:19]}\t{_differences(v.data, older)}",
                      markup=False, soft_wrap=True)


# -- fragments --------------------------------------------------------------------------------------
@fragments.command("history")
@click.argument("fragment_id", type=int)
@pass_ctx
def fragments_history(obj: Context, fragment_id: int) -> None:
    """Every version of a fragment: what changed, when, and who changed it."""
    _print_versions(obj.scope().layers.fragments.history(fragment_id))


@fragments.command("restore")
@click.argument("fragment_id", type=int)
@click.argument("version", type=int)
@pass_ctx
def fragments_restore(obj: Context, fragment_id: int, version: int) -> None:
    """Make VERSION of a fragment current again (as a new version)."""
    layer = obj.scope().layers.fragments
    layer.restore(fragment_id, version)
    now = layer.history(fragment_id)[0].version
    console.print(f"Fragment {fragment_id} restored from version {version} as version {now}.", markup=False)


# -- personas ---------------------------------------------------------------------------------------
@persona.command("history")
@click.argument("name")
@pass_ctx
def persona_history(obj: Context, name: str) -> None:
    """Every version of a persona's settings: what changed, when, and who changed it."""
    scope = obj.scope()
    _print_versions(scope.personas.history(scope.personas.by_name(name).id))


@persona.command("restore")
@click.argument("name")
@click.argument("version", type=int)
@pass_ctx
def persona_restore(obj: Context, name: str, version: int) -> None:
    """Make VERSION of a persona's settings current again (as a new version); its prompts are rebuilt."""
    scope = obj.scope()
    persona_id = scope.personas.by_name(name).id
    restored, rebuilt = scope.restore_persona(persona_id, version)
    now = scope.personas.history(persona_id)[0].version
    console.print(f"Persona {restored.name} restored from version {version} as version {now};"
                  f" {rebuilt} stored prompt(s) rebuilt.", markup=False)


# -- household status fields ------------------------------------------------------------------------
@status.command("versions")
@click.argument("field")
@pass_ctx
def status_versions(obj: Context, field: str) -> None:
    """Every version of a field's definition (name, options, aliases); its values: `status history`."""
    _print_versions(obj.scope().layers.household.field_history(field))


@status.command("restore")
@click.argument("field")
@click.argument("version", type=int)
@pass_ctx
def status_restore(obj: Context, field: str, version: int) -> None:
    """Make VERSION of a field's definition current again (as a new version)."""
    household = obj.scope().layers.household
    restored = household.restore_field(field, version)
    now = household.field_history(restored.id)[0].version
    console.print(f"Status field {restored.name} restored from version {version} as version {now}.", markup=False)


@status.command("restore-value")
@click.argument("field")
@click.argument("value_id", type=int)
@pass_ctx
def status_restore_value(obj: Context, field: str, value_id: int) -> None:
    """Make an earlier value current again, from now (VALUE_ID from `hearth status history FIELD`)."""
    restored = obj.scope().layers.household.restore_value(field, value_id)
    console.print(f"{restored.name}: {restored.value} (restored; the previous value is kept in history).",
                  markup=False)
