"""Users and scoping (G1, G2): one user's data never reaches another user."""

from __future__ import annotations

import pytest

from hearth import AuthError, Hearth, InvalidInput, NotFound, Settings
from hearth.store import is_postgres


def test_g1_fresh_install_runs_with_no_key_and_no_server(tmp_path):
    settings = Settings.resolve({"home": str(tmp_path / "fresh")}, environ={})
    with Hearth(settings) as hearth:
        me = hearth.scope()
        conversation = me.conversations.create()
        reply = me.send(conversation.id, "Good morning")
        assert hearth.provider.name == "offline"
        assert reply.assistant_message.content.startswith("[offline")
        if is_postgres(hearth.store.connection()):  # the PostgreSQL lane: its database, no file
            assert not settings.database_path.exists()
        else:
            assert settings.database_path.is_file()
            assert hearth.store.connection().execute("PRAGMA journal_mode").fetchone()[0] == "wal"


@pytest.fixture
def two_users(hearth, persona):
    alice = hearth.scope()
    bob = hearth.scope(hearth.users.create("bob").id)
    folder = alice.folders.create("Alice's folder")
    conversation = alice.conversations.create(persona.id, "Alice's thread", folder_id=folder.id)
    message = alice.conversations.add_message(conversation.id, "user", "alice secret")
    memory = alice.memories.add("alice memory")
    return alice, bob, persona, folder, conversation, message, memory


def test_g2_one_user_cannot_read_anothers_data(two_users):
    alice, bob, persona, folder, conversation, message, memory = two_users
    for read in (
        lambda: bob.conversations.get(conversation.id),
        lambda: bob.conversations.messages(conversation.id),
        lambda: bob.conversations.message(message.id),
        lambda: bob.personas.get(persona.id),
        lambda: bob.folders.get(folder.id),
        lambda: bob.memories.get(memory.id),
        lambda: bob.memories.snapshot(conversation.id),
        lambda: bob.request_size(conversation.id),
        lambda: bob.stored_prompt(conversation.id),
    ):
        with pytest.raises(NotFound):
            read()
    assert bob.conversations.list() == [] and bob.personas.list() == [] and bob.memories.list() == []


def test_g2_one_user_cannot_change_anothers_data(hearth, two_users):
    alice, bob, persona, folder, conversation, message, memory = two_users
    conn = hearth.store.connection()
    before = conn.execute("SELECT count(*) FROM events").fetchone()[0]
    for change in (
        lambda: bob.conversations.add_message(conversation.id, "user", "intrusion"),
        lambda: bob.send(conversation.id, "intrusion"),
        lambda: bob.conversations.trash(conversation.id),
        lambda: bob.conversations.end(conversation.id),
        lambda: bob.conversations.rename(conversation.id, "mine now"),
        lambda: bob.conversations.move(conversation.id, None),
        lambda: bob.folders.set_hidden(folder.id, True),
        lambda: bob.personas.update(persona.id, identity="changed"),
        lambda: bob.memories.edit(memory.id, text="changed"),
        lambda: bob.memories.delete(memory.id),
        lambda: bob.memories.refresh(conversation.id),
        lambda: bob.conversations.create(persona.id),
    ):
        with pytest.raises(NotFound):
            change()
    assert conn.execute("SELECT count(*) FROM events").fetchone()[0] == before
    assert alice.conversations.get(conversation.id).title == "Alice's thread"
    assert alice.memories.get(memory.id).text == "alice memory"


def test_g2_another_users_memories_never_reach_a_prompt(two_users, provider):
    alice, bob, *_ = two_users
    bob_persona = bob.personas.create("bobs")
    bob_conversation = bob.conversations.create(bob_persona.id)
    bob.send(bob_conversation.id, "hello")
    sent = "\n".join(m.content for m in provider.requests[-1].messages)
    assert "alice" not in sent


def test_u2_passwords_are_hashed_and_checked(hearth):
    owner = hearth.users.owner()
    hearth.users.set_password(owner.id, "correct horse battery")
    stored = hearth.store.connection().execute("SELECT password_hash FROM users WHERE id = ?", (owner.id,)).fetchone()[0]
    assert stored.startswith("$argon2id$") and "correct horse" not in stored
    assert hearth.users.check_password("owner", "correct horse battery").id == owner.id
    with pytest.raises(AuthError):
        hearth.users.check_password("owner", "wrong password")
    with pytest.raises(AuthError):
        hearth.users.check_password("nobody", "correct horse battery")
    with pytest.raises(InvalidInput):
        hearth.users.set_password(owner.id, "short")


def test_u2_tokens_are_stored_hashed_and_can_be_revoked(hearth):
    owner = hearth.users.owner()
    token = hearth.users.create_token(owner.id, "script")
    assert hearth.users.token_user(token) == owner.id
    assert token not in str(list(hearth.store.connection().execute("SELECT * FROM api_tokens").fetchall()[0]))
    token_id = hearth.users.list_tokens(owner.id)[0]["id"]
    hearth.users.revoke_token(owner.id, token_id)
    assert hearth.users.token_user(token) is None
