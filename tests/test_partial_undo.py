"""Stop keeps the partial reply and Undo removes it (W12), and what voice the page may offer (W16),
over HTTP on real SQLite files."""

from __future__ import annotations

from tests.test_server import app, assert_error, chat, client, send  # noqa: F401  (fixtures)


def test_w12_undo_removes_only_a_kept_partial_that_is_still_the_last_reply(client, chat, hearth):  # noqa: F811
    cid = chat["id"]
    send(client, cid, "First")
    answered = client.get(f"/api/conversations/{cid}/messages").json()["messages"][-1]
    # A finished reply is not a stopped one: nothing changes.
    assert_error(client.delete(f"/api/conversations/{cid}/partial/{answered['id']}"), 409)

    # A message of the person's, then the stopped reply the page keeps at once.
    me = hearth.scope()
    me.conversations.add_message(cid, "user", "Tell me a story")
    kept = client.post(f"/api/conversations/{cid}/partial", json={"text": "Once upon"})
    assert kept.status_code == 201 and kept.json()["metadata"]["partial"] is True
    kept_id = kept.json()["id"]
    # Another user cannot undo it.
    second = hearth.users.create("second")
    other = {"Authorization": f"Bearer {hearth.users.create_token(second.id, 'tests')}"}
    assert client.delete(f"/api/conversations/{cid}/partial/{kept_id}", headers=other).status_code in (404, 409)
    assert me.conversations.messages(cid)[-1].id == kept_id
    # Undo: gone, with the person's message saved and unanswered.
    assert client.delete(f"/api/conversations/{cid}/partial/{kept_id}").status_code == 204
    assert [m.content for m in me.conversations.messages(cid)][-2:] == [answered["content"], "Tell me a story"]
    # Twice is an error that changes nothing.
    assert_error(client.delete(f"/api/conversations/{cid}/partial/{kept_id}"), 409)


def test_w16_voice_ability_says_whether_realtime_voice_can_run(client):  # noqa: F811
    assert client.get("/api/voice/ability").json() == {"realtime": False}
