"""A conversation's model and instructions, and prompt presets (W3, PR1, P5)."""

from __future__ import annotations

import click

from ..errors import InvalidInput
from .base import Context, Table, Text, cli, console, err_console, pass_ctx
from .threads import conversations


@conversations.command("model")
@click.argument("conversation_id", type=int)
@click.argument("name", required=False)
@click.option("--default", "use_default", is_flag=True, help="Use the deployment's default model again.")
@click.option("--refresh", is_flag=True, help="Read the provider's model list again first.")
@pass_ctx
def threads_model(obj: Context, conversation_id: int, name: str | None, use_default: bool, refresh: bool) -> None:
    """Choose the model a conversation's requests ask for (NAME, or --default); without either,
    show its model and the models the provider offers."""
    scope = obj.scope()
    if name is not None and use_default:
        raise InvalidInput("give a model NAME or --default, not both")
    if name is None and not use_default:
        conversation = scope.conversations.get(conversation_id)
        offered = obj.hearth.models.get(refresh=refresh)
        console.print(f"Conversation {conversation_id} uses {conversation.model or offered.default}"
                      f"{'' if conversation.model else ' (the default)'}.", markup=False)
        if not offered.listed:
            err_console.print(f"The provider's model list could not be read: {offered.detail}", markup=False)
        console.print(f"Offered by {offered.provider}: {', '.join(offered.models)}", markup=False)
        return
    if refresh:
        obj.hearth.models.get(refresh=True)
    conversation, choice = scope.set_model(conversation_id, None if use_default else name)
    what = conversation.model or f"the default model ({obj.hearth.provider.model})"
    console.print(f"Conversation {conversation_id} now uses {what}.", markup=False)
    if choice is not None and choice.note:
        err_console.print(choice.note, markup=False)


@conversations.command("instructions")
@click.argument("conversation_id", type=int)
@click.argument("text", required=False)
@click.option("--clear", is_flag=True, help="Use the persona's instructions again.")
@pass_ctx
def threads_instructions(obj: Context, conversation_id: int, text: str | None, clear: bool) -> None:
    """Set a conversation's own custom instructions (TEXT, or --clear); without either, show them.
    The stored prompt is rebuilt at once."""
    scope = obj.scope()
    if text is not None and clear:
        raise InvalidInput("give TEXT or --clear, not both")
    if text is None and not clear:
        current = scope.presets.conversation_instructions(conversation_id)
        click.echo(current if current is not None else "(the persona's instructions)")
        return
    changed = scope.set_custom_instructions(conversation_id, None if clear else text)
    state = "changed; its prompt was rebuilt" if changed else "unchanged"
    console.print(f"Conversation {conversation_id} instructions {state}.", markup=False)


@cli.group()
def presets() -> None:
    """Prompt presets: named texts to use as a conversation's instructions."""


@presets.command("list")
@pass_ctx
def presets_list(obj: Context) -> None:
    table = Table("id", "name", "text")
    for p in obj.scope().presets.list():
        first = p.text.splitlines()[0] if p.text else ""
        table.add_row(str(p.id), Text(p.name), Text(first[:60] + ("…" if len(p.text) > len(first[:60]) else "")))
    console.print(table)


@presets.command("show")
@click.argument("preset")
@pass_ctx
def presets_show(obj: Context, preset: str) -> None:
    """Print a preset's text (PRESET is its id or name)."""
    click.echo(obj.scope().presets.find(preset).text)


@presets.command("add")
@click.argument("name")
@click.argument("text")
@pass_ctx
def presets_add(obj: Context, name: str, text: str) -> None:
    """Save a preset: NAME and its TEXT."""
    created = obj.scope().presets.create(name, text)
    console.print(f"Preset {created.name} ({created.id}) saved.", markup=False)


@presets.command("edit")
@click.argument("preset")
@click.option("--name", help="A new name.")
@click.option("--text", help="A new text.")
@pass_ctx
def presets_edit(obj: Context, preset: str, name: str | None, text: str | None) -> None:
    """Rename a preset or change its text; conversations it was applied to keep their copy."""
    scope = obj.scope()
    changed = scope.presets.update(scope.presets.find(preset).id, name=name, text=text)
    console.print(f"Preset {changed.name} ({changed.id}) saved.", markup=False)


@presets.command("delete")
@click.argument("preset")
@pass_ctx
def presets_delete(obj: Context, preset: str) -> None:
    scope = obj.scope()
    found = scope.presets.find(preset)
    scope.presets.delete(found.id)
    console.print(f"Preset {found.name} deleted.", markup=False)


@presets.command("apply")
@click.argument("preset")
@click.argument("conversation_id", type=int)
@pass_ctx
def presets_apply(obj: Context, preset: str, conversation_id: int) -> None:
    """Use a preset's text as a conversation's custom instructions (its prompt is rebuilt)."""
    scope = obj.scope()
    found = scope.presets.find(preset)
    changed = scope.presets.apply(found.id, conversation_id)
    state = "now uses" if changed else "already used"
    console.print(f"Conversation {conversation_id} {state} preset {found.name}.", markup=False)
