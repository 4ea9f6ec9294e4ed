"""Personas, folders, conversations, chatting, and cross-thread continuity (new, branch, shield)."""

from __future__ import annotations

from typing import Any

import click

from ..errors import InvalidInput
from .base import Context, Table, Text, _json, cli, console, err_console, pass_ctx


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
@click.option("--all", "include_archived", is_flag=True, help="Include archived personas.")
@pass_ctx
def persona_list(obj: Context, include_archived: bool) -> None:
    for p in obj.scope().personas.list(include_archived=include_archived):
        console.print(f"{p.id}\t{p.name}\t{p.display_name}{'  (archived)' if p.archived_at else ''}", markup=False)


@persona.command("show")
@click.argument("name")
@pass_ctx
def persona_show(obj: Context, name: str) -> None:
    _json(obj.scope().personas.by_name(name).to_dict())


@persona.command("edit")
@click.argument("name")
@click.option("--display-name")
@click.option("--identity")
@click.option("--user-label")
@click.option("--assistant-label")
@click.option("--legacy-label", "legacy_labels", multiple=True,
              help="Replaces the legacy labels (repeatable); --no-legacy-labels clears them.")
@click.option("--no-legacy-labels", is_flag=True, help="Remove every legacy label.")
@click.option("--tone")
@click.option("--instructions", "custom_instructions")
@click.option("--auto-continuity/--no-auto-continuity", default=None)
@click.option("--archive-access/--no-archive-access", default=None)
@click.option("--web-search/--no-web-search", default=None)
@click.option("--avatar", type=click.Path(exists=True, dir_okay=False), help="A PNG, JPEG, WebP or GIF image.")
@pass_ctx
def persona_edit(obj: Context, name: str, legacy_labels: tuple[str, ...], no_legacy_labels: bool,
                 avatar: str | None, **values: Any) -> None:
    """Change a persona's fields (C1, G6); only the options given change. Stored prompts are rebuilt."""
    from pathlib import Path

    from hearth.records.avatars import checked_image

    scope = obj.scope()
    persona_ = scope.personas.by_name(name)
    changes = {k: v for k, v in values.items() if v is not None}
    if legacy_labels or no_legacy_labels:
        changes["legacy_labels"] = [] if no_legacy_labels else list(legacy_labels)
    image = Path(avatar).read_bytes() if avatar else None
    mime = checked_image(image) if image is not None else None  # refused before anything changes
    if not changes and image is None:
        raise InvalidInput("nothing to change: give at least one option (see --help)")
    with obj.hearth.store.write():
        rebuilt = scope.update_persona(persona_.id, **changes)[1] if changes else 0
        if image is not None and mime is not None:
            scope.personas.set_avatar(persona_.id, image, mime)
    note = f"; {rebuilt} stored prompt(s) rebuilt" if rebuilt else ""
    console.print(f"Persona {persona_.name} saved{note}.", markup=False)


@persona.command("archive")
@click.argument("name")
@click.option("--restore", is_flag=True, help="Bring an archived persona back.")
@pass_ctx
def persona_archive(obj: Context, name: str, restore: bool) -> None:
    """Archive a persona: its threads stay readable; it leaves the pickers and New Chat (W3)."""
    scope = obj.scope()
    changed = scope.personas.archive(scope.personas.by_name(name).id, not restore)
    console.print(f"Persona {changed.name} {'restored' if restore else 'archived'}.", markup=False)


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
    obj.scope().folders.set_hidden(folder_id, True)
    console.print("Folder hidden.")


@folders.command("show")
@click.argument("folder_id", type=int)
@pass_ctx
def folders_show(obj: Context, folder_id: int) -> None:
    obj.scope().folders.set_hidden(folder_id, False)
    console.print("Folder shown.")


@cli.group()
def conversations() -> None:
    """Conversations: list, read, move, trash, restore, end."""


# The same commands as `hearth threads` (the web page calls them threads).
cli.add_command(conversations, "threads")


@conversations.command("list")
@click.option("--trashed", is_flag=True, help="Include trashed conversations.")
@click.option("--search", "-s", "text", default="",
              help="Words in the title or a message (the last may be a word's start); tag:NAME filters by tag.")
@click.option("--pinned", is_flag=True, help="Only pinned conversations.")
@pass_ctx
def conversations_list(obj: Context, trashed: bool, text: str, pinned: bool) -> None:
    table = Table("id", "title", "state", "visibility", "updated", "tags")
    found = obj.scope().conversations.list(include_trashed=trashed, text=text.strip(), pinned=True if pinned else None)
    for c in found:
        shield = " (shielded)" if c.continuity_shielded else ""
        marks = ("pinned " if c.pinned_at else "") + ("imported " if c.imported else "")
        # Text(): a title or message is shown as written, never read as console markup.
        title = (c.title or "Untitled") + (f"  ({marks.strip()})" if marks else "")
        table.add_row(str(c.id), Text(title, overflow="fold"), c.state, c.visibility + shield, c.updated_at[:19],
                      " ".join(c.tags))
        if c.match:  # why it matched: the message's snippet
            table.add_row("", Text(f"  {c.match.snippet}", overflow="fold"), "", "", "", "")
    console.print(table)


@conversations.command("pin")
@click.argument("conversation_id", type=int)
@pass_ctx
def conversations_pin(obj: Context, conversation_id: int) -> None:
    """Pin a conversation: listed first, in the Pinned group."""
    obj.scope().conversations.pin(conversation_id)
    console.print(f"Conversation {conversation_id} pinned.", markup=False)


@conversations.command("unpin")
@click.argument("conversation_id", type=int)
@pass_ctx
def conversations_unpin(obj: Context, conversation_id: int) -> None:
    """Unpin a conversation: it goes back to its place among the others."""
    obj.scope().conversations.unpin(conversation_id)
    console.print(f"Conversation {conversation_id} unpinned.", markup=False)


@conversations.command("tag")
@click.argument("conversation_id", type=int)
@click.argument("tags", nargs=-1, required=True)
@click.option("--remove", is_flag=True, help="Remove these tags instead.")
@pass_ctx
def conversations_tag(obj: Context, conversation_id: int, tags: tuple[str, ...], remove: bool) -> None:
    """Add tags to a conversation (or remove them with --remove)."""
    scope = obj.scope()
    with obj.hearth.store.write():  # all or nothing: a bad tag changes none
        current = scope.conversations.get(conversation_id).tags
        if remove:
            from hearth.thread.search import check_tag

            gone = {check_tag(t) for t in tags}
            result = scope.conversations.set_tags(conversation_id, [t for t in current if t not in gone])
        else:
            result = scope.conversations.set_tags(conversation_id, [*current, *tags])
    console.print(f"Conversation {conversation_id} tags: {' '.join(result.tags) or '(none)'}", markup=False)


@conversations.command("tags")
@pass_ctx
def conversations_tags(obj: Context) -> None:
    """Every tag in use, with how many conversations carry it."""
    for t in obj.scope().conversations.tags():
        console.print(f"{t['tag']}\t{t['count']}", markup=False)


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
        result = getattr(obj.scope().conversations, name)(conversation_id)
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
    result = obj.scope().conversations.move(conversation_id, folder_id)
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
    continued = None
    if conversation_id is None:
        persona_id = scope.personas.by_name(persona_name).id if persona_name else None
        # A new conversation carries the last eligible thread's final eight when the persona
        # uses automatic continuity (H6).
        started = scope.new_chat(persona_id, channel="cli")
        conversation = started.conversation
        if started.source_conversation_id is not None:
            source = scope.conversations.get(started.source_conversation_id)
            continued = f"conversation {source.id} ({source.title or 'Untitled'})"
    else:
        conversation = scope.conversations.get(conversation_id)
    current = scope.personas.get(conversation.persona_id)
    intro = f"Conversation {conversation.id} with {current.display_name}"
    if continued:
        intro += f", continuing from {continued}"
    # The hint about leaving only makes sense when the chat is interactive.
    err_console.print(intro + ("." if messages else ". Ctrl-D to leave."), markup=False)
    if conversation_id is None:
        # A character's greeting opens the new thread (X3): shown as the companion's first turn.
        for greeting in scope.conversations.messages(conversation.id):
            click.echo(greeting.content)

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
            text = click.prompt(current.user_label or ">", prompt_suffix=" ")
        except (EOFError, click.Abort):
            click.echo()
            return
        if not text.strip():
            continue
        try:
            turn(text)
        except InvalidInput as exc:
            # Nothing was saved (e.g. a message over the length limit): say why and ask again.
            err_console.print(f"Error: {exc}. Nothing was sent; try again.", markup=False)


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
    obj.scope().conversations.set_shielded(conversation_id, True)
    console.print(f"Conversation {conversation_id} is shielded; affected prompts were refreshed.", markup=False)


@shield.command("release")
@click.argument("conversation_id", type=int)
@pass_ctx
def shield_release(obj: Context, conversation_id: int) -> None:
    obj.scope().conversations.set_shielded(conversation_id, False)
    console.print(f"Shield released for conversation {conversation_id}; affected prompts were refreshed.",
                  markup=False)
