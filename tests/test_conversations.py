"""Personas (C1, G6), conversations (C2), folders, trash and restore (C3), ending (C4)."""

from __future__ import annotations

import pytest

from hearth import Conflict, InvalidInput, NotFound


def test_c1_persona_holds_identity_labels_tone_and_flags(me):
    persona = me.personas.create(
        "clipboard", "Clipboard", identity="A careful note keeper.", user_label="AUMA said:",
        assistant_label="Clipboard said:", legacy_labels=["Clipboard 1.0 said:"], tone="Warm",
        custom_instructions="Keep lists short.", auto_continuity=False, archive_access=True,
    )
    loaded = me.personas.by_name("clipboard")
    assert loaded == persona
    assert loaded.auto_continuity is False and loaded.archive_access is True and loaded.web_search is False
    assert loaded.legacy_labels == ["Clipboard 1.0 said:"]


def test_c1_persona_names_are_unique_per_user_and_validated(hearth, me):
    me.personas.create("elion")
    with pytest.raises(Conflict):
        me.personas.create("elion")
    with pytest.raises(InvalidInput):
        me.personas.create("has spaces")
    other = hearth.scope(hearth.users.create("guest").id)
    assert other.personas.create("elion").name == "elion"  # another user's namespace


def test_g6_labels_are_configuration_with_neutral_defaults(me):
    persona = me.personas.create("sol", "Sol")
    assert persona.user_label == "User said:"
    assert persona.assistant_label == "Sol said:"
    updated = me.personas.update(persona.id, user_label="Robin said:", assistant_label="Sol Brightwater said:")
    assert (updated.user_label, updated.assistant_label) == ("Robin said:", "Sol Brightwater said:")
    with pytest.raises(InvalidInput):
        me.personas.update(persona.id, user_label="  ")


def test_c2_conversation_has_title_persona_folder_times_state_visibility_and_shield(me, persona):
    folder = me.folders.create("Letters")
    conversation = me.conversations.create(persona.id, title="Morning", folder_id=folder.id)
    assert conversation.title == "Morning" and conversation.persona_id == persona.id
    assert conversation.folder_id == folder.id and conversation.state == "open"
    assert conversation.visibility == "visible" and conversation.continuity_shielded is False
    assert conversation.created_at == conversation.updated_at
    message = me.conversations.add_message(conversation.id, "user", "hi")
    assert me.conversations.get(conversation.id).updated_at == message.created_at


def test_c2_unknown_persona_or_folder_is_refused(me, persona):
    with pytest.raises(NotFound):
        me.conversations.create(9999)
    with pytest.raises(NotFound):
        me.conversations.create(persona.id, folder_id=9999)


def test_c3_hidden_folder_hides_its_conversations_and_showing_returns_them(me, persona):
    folder = me.folders.create("Private")
    conversation = me.conversations.create(persona.id, folder_id=folder.id)
    me.folders.set_hidden(folder.id, True)
    assert me.conversations.get(conversation.id).visibility == "hidden"
    assert me.conversations.messages(conversation.id) == []  # still openable
    me.folders.set_hidden(folder.id, False)
    assert me.conversations.get(conversation.id).visibility == "visible"


def test_c3_move_trash_and_restore(me, persona):
    folder = me.folders.create("Archive", hidden=True)
    conversation = me.conversations.create(persona.id)
    assert me.conversations.move(conversation.id, folder.id).visibility == "hidden"
    assert me.conversations.move(conversation.id, None).visibility == "visible"
    trashed = me.conversations.trash(conversation.id)
    assert trashed.visibility == "trashed"
    assert conversation.id not in [c.id for c in me.conversations.list()]
    assert conversation.id in [c.id for c in me.conversations.list(include_trashed=True)]
    assert me.conversations.restore(conversation.id).visibility == "visible"


def test_c4_ending_a_conversation_keeps_history_and_blocks_new_turns(me, persona):
    conversation = me.conversations.create(persona.id)
    me.conversations.add_message(conversation.id, "user", "before the end")
    ended = me.conversations.end(conversation.id)
    assert ended.state == "ended" and ended.ended_at
    assert [m.content for m in me.conversations.messages(conversation.id)] == ["before the end"]
    with pytest.raises(Conflict, match="ended"):
        me.send(conversation.id, "after the end")
    assert me.conversations.end(conversation.id).ended_at == ended.ended_at  # idempotent
