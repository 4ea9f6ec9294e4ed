"""Memory where the person talks (W11): a thread's waiting suggestions, decided in place through the
review queue's rules (F3, G4), and each reply's "What I remembered" read back from the records its
own send saved. Real SQLite files, real sends through the RecordingProvider, two users.
"""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from hearth.retrieval.archive import Archive
from hearth.retrieval.semantic import embed_pending, shared_embedder
from hearth.server import create_app
from tests.test_checkpoints import IDLE, later, worker_at
from tests.test_server import BASE, assert_error, row_counts, send


@pytest.fixture
def client(hearth):
    with TestClient(create_app(hearth.settings, hearth), base_url=BASE) as c:
        yield c


def reply_id(events) -> int:
    return next(data for kind, data in events if kind == "done")["message_id"]


def context_of(provider) -> str:
    systems = [m.content for m in provider.requests[-1].messages if m.role == "system"]
    return next((s for s in systems if s.startswith("Dynamic context")), "")


def test_w11_a_checkpoints_suggestions_wait_in_their_thread_and_are_decided_in_place(client, hearth, persona):
    chat = client.post("/api/conversations", json={"persona_id": persona.id}).json()
    other = client.post("/api/conversations", json={"persona_id": persona.id}).json()
    send(client, chat["id"], "My sister is called Mia. I'm allergic to peanuts.")
    send(client, other["id"], "Just chatting about the weather today.")
    later(hearth, IDLE + 5)
    worker_at(hearth, IDLE + 5).run_once()  # the idle checkpoint: extraction into the review queue (E2)

    waiting = client.get(f"/api/conversations/{chat['id']}/suggestions").json()
    assert waiting["memories_kept"] == 0
    texts = sorted(s["payload"]["text"] for s in waiting["suggestions"])
    assert texts == ["The person is allergic to peanuts.", "The person's sister is called Mia."]
    # The person's own words come with each suggestion (the evidence quote), and nothing is kept yet (G4).
    assert all(s["evidence"] and s["evidence"] in "My sister is called Mia. I'm allergic to peanuts."
               for s in waiting["suggestions"])
    assert client.get("/api/memories").json() == []
    assert client.get(f"/api/conversations/{other['id']}/suggestions").json()["suggestions"] == []
    # The thread's memory count is honest about what waits (the issue's "0 memories" after 12 turns).
    snapshot = client.get(f"/api/conversations/{chat['id']}/snapshot").json()
    assert (len(snapshot["memories"]), snapshot["kept"], snapshot["waiting"]) == (0, 0, 2)

    sister = next(s for s in waiting["suggestions"] if "Mia" in s["payload"]["text"])
    peanuts = next(s for s in waiting["suggestions"] if "peanuts" in s["payload"]["text"])
    # Edited in place: the same approve route and rules as the review queue.
    approved = client.post(f"/api/review/{sister['id']}/approve",
                           json={"edits": {"text": "My sister Mia lives in Porto."}}).json()
    assert approved["status"] == "approved"
    assert client.post(f"/api/review/{peanuts['id']}/dismiss").json()["status"] == "dismissed"
    after = client.get(f"/api/conversations/{chat['id']}/suggestions").json()
    assert after == {"suggestions": [], "memories_kept": 1}
    assert [m["text"] for m in client.get("/api/memories").json()] == ["My sister Mia lives in Porto."]
    snapshot = client.get(f"/api/conversations/{chat['id']}/snapshot").json()
    assert (len(snapshot["memories"]), snapshot["kept"], snapshot["waiting"]) == (0, 1, 0)
    # A decided suggestion cannot be decided twice (the queue's rule, not a new one).
    assert_error(client.post(f"/api/review/{peanuts['id']}/approve", json={}), 409)


def test_w11_a_suggestion_the_review_rules_refuse_is_refused_in_place_too(client, me, persona):
    chat = client.post("/api/conversations", json={"persona_id": persona.id}).json()
    proposal = me.layers.review.propose("memory_add", {"text": "Likes tea"}, "Said so.", evidence="I like tea",
                                        conversation_id=chat["id"])
    assert [s["id"] for s in client.get(f"/api/conversations/{chat['id']}/suggestions").json()["suggestions"]] \
        == [proposal.id]
    assert_error(client.post(f"/api/review/{proposal.id}/approve", json={"edits": {"kind": "x"}}), 422)
    assert_error(client.post(f"/api/review/{proposal.id}/approve", json={"edits": {"text": "   "}}), 422)
    assert client.get("/api/memories").json() == []  # nothing changed
    assert len(client.get(f"/api/conversations/{chat['id']}/suggestions").json()["suggestions"]) == 1


def test_w11_what_i_remembered_lists_the_snapshot_the_fired_fragment_recall_and_the_handoff(client, me, persona,
                                                                                            provider):
    memory = client.post("/api/memories", json={"text": "Mara is training for the Berlin marathon."}).json()
    fragment = me.layers.fragments.add(["pretzel"], "The pretzel stand by the Brandenburg Gate.", "places")
    earlier = me.conversations.create(persona.id, "Berlin weekend")
    said = me.conversations.add_message(earlier.id, "user", "We ate a pretzel near the finish line in Berlin.")
    me.conversations.add_message(earlier.id, "assistant", "That pretzel was enormous.")
    yesterday = me.conversations.create(persona.id, "Yesterday")  # the newest thread: the handoff's source
    me.conversations.add_message(yesterday.id, "user", "I slept badly last night.")
    me.conversations.add_message(yesterday.id, "assistant", "Rest well tonight.")
    chat = client.post("/api/conversations/new-chat", json={"persona_id": persona.id}).json()
    cid = chat["conversation"]["id"]
    send(client, cid, "Good morning, how are you?")  # the birth period: recall stays silent (K3)
    events = send(client, cid, "Tell me again about the pretzel in Berlin at the finish line")
    mid = reply_id(events)
    # What the provider was sent holds what the disclosure will name.
    context = context_of(provider)
    assert "Brandenburg Gate" in context and "finish line in Berlin" in context

    got = client.get(f"/api/conversations/{cid}/messages/{mid}/remembered").json()
    assert got["recorded"] is True
    assert [(m["id"], m["text"]) for m in got["memories"]] == [(memory["id"], memory["text"])]
    assert [(f["id"], f["triggers"]) for f in got["fragments"]] == [(fragment.id, ["pretzel"])]
    recalled = {r["message_id"]: r for r in got["recall"]}
    assert said.id in recalled
    assert recalled[said.id]["conversation_id"] == earlier.id and recalled[said.id]["title"] == "Berlin weekend"
    assert recalled[said.id]["this_conversation"] is False and "pretzel" in recalled[said.id]["text"]
    assert got["handoff"] == {"conversation_id": yesterday.id, "document_id": None, "title": "Yesterday"}

    # An edit shows the memory's current words; a forgotten source drops out (B4), never a stale copy.
    client.patch(f"/api/memories/{memory['id']}", json={"text": "Mara ran the Berlin marathon.", "correction": True})
    me.layers.fragments.remove(fragment.id)
    again = client.get(f"/api/conversations/{cid}/messages/{mid}/remembered").json()
    assert [m["text"] for m in again["memories"]] == ["Mara ran the Berlin marathon."]
    assert again["fragments"] == []


def test_w11_a_reply_that_remembered_nothing_has_nothing_to_show(client, persona):
    chat = client.post("/api/conversations", json={"persona_id": persona.id}).json()
    mid = reply_id(send(client, chat["id"], "hi"))
    got = client.get(f"/api/conversations/{chat['id']}/messages/{mid}/remembered").json()
    assert got == {"message_id": mid, "recorded": True, "memories": [], "memories_more": False, "fragments": [],
                   "recall": [], "archive": [], "handoff": None}
    # The person's own message remembered nothing: it is no reply.
    user_id = next(data for kind, data in send(client, chat["id"], "hello again") if kind == "saved")["message_id"]
    assert client.get(f"/api/conversations/{chat['id']}/messages/{user_id}/remembered").json()["recorded"] is False


def test_w11_g2_another_users_thread_reply_or_suggestions_are_unknown(client, hearth, me, persona):
    client.post("/api/memories", json={"text": "The owner's secret: zephyrquill."})
    chat = client.post("/api/conversations", json={"persona_id": persona.id}).json()
    mid = reply_id(send(client, chat["id"], "Tell me about zephyrquill"))
    me.layers.review.propose("memory_add", {"text": "The owner likes zephyrquill."}, "Said so.",
                             conversation_id=chat["id"])
    second = hearth.users.create("second")
    other = {"Authorization": f"Bearer {hearth.users.create_token(second.id, 'tests')}"}
    own = client.post("/api/conversations", json={"title": "mine"}, headers=other).json()
    own_reply = reply_id(parse_send(client, own["id"], other))
    elsewhere = client.post("/api/conversations", json={"persona_id": persona.id}).json()
    before = row_counts(hearth)
    for path in (f"/api/conversations/{chat['id']}/messages/{mid}/remembered",
                 f"/api/conversations/{own['id']}/messages/{mid}/remembered",  # their thread, the owner's reply
                 f"/api/conversations/{chat['id']}/messages/{own_reply}/remembered",
                 f"/api/conversations/{chat['id']}/suggestions",
                 f"/api/conversations/{own['id']}/messages/999999/remembered"):
        body = assert_error(client.get(path, headers=other), 404, "not_found")
        assert "zephyrquill" not in str(body)
    theirs = client.get(f"/api/conversations/{own['id']}/suggestions", headers=other).json()
    assert theirs == {"suggestions": [], "memories_kept": 0}
    assert client.get(f"/api/conversations/{own['id']}/messages/{own_reply}/remembered",
                      headers=other).json()["memories"] == []
    # The owner's reply in another of the owner's threads is unknown there too.
    assert_error(client.get(f"/api/conversations/{elsewhere['id']}/messages/{mid}/remembered"), 404)
    assert row_counts(hearth) == before  # reading changed nothing


def parse_send(client, conversation_id: int, headers: dict) -> list:
    from tests.test_server import parse_sse

    response = client.post(f"/api/conversations/{conversation_id}/messages", json={"text": "hello"}, headers=headers)
    assert response.status_code == 200, response.text
    return parse_sse(response.text)


def test_w11_a2_archive_excerpts_are_listed_with_their_document(client, hearth, me):
    keeper = me.personas.create("voice", "Elion", user_label="AUMA said:", assistant_label="Elion Voicefire said:",
                                archive_access=True)
    document = Archive(hearth.store, me.user_id).add_text(
        "Orchard", "AUMA said:\nThe quince tree was planted in 2017.\n", document_date="2017-05-01")
    embed_pending(hearth.store, shared_embedder(), user_id=me.user_id)
    chat = me.conversations.create(keeper.id, "Now")
    me.send(chat.id, "hello")
    reply = me.send(chat.id, "When did we plant the quince tree?").assistant_message
    got = client.get(f"/api/conversations/{chat.id}/messages/{reply.id}/remembered").json()
    [excerpt] = [a for a in got["archive"] if a["kind"] == "chunk"]
    assert excerpt["title"] == "Orchard" and excerpt["date"] == "2017-05-01"
    assert excerpt["document_id"] == document.document.id and "quince tree was planted" in excerpt["text"]


def test_w11_each_version_of_a_reply_keeps_what_its_own_send_remembered(client, me, persona):
    chat = me.conversations.create(persona.id, "Versions")
    me.send(chat.id, "Good morning")
    first = me.send(chat.id, "Tell me about the lighthouse keeper").assistant_message
    path = f"/api/conversations/{chat.id}/messages/{first.id}/remembered"
    assert client.get(path).json()["fragments"] == []
    fragment = me.layers.fragments.add(["lighthouse"], "The lighthouse keeper is called Ines.", "people")
    again = me.regenerate(chat.id).assistant_message
    assert again.id == first.id  # another version of the same reply
    assert [f["id"] for f in client.get(path).json()["fragments"]] == [fragment.id]
    me.choose_alternative(first.id, 0)  # back to the first version: its own record, without the entry
    assert client.get(path).json()["fragments"] == []
