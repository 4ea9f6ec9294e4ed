"""Imported ChatGPT and Claude conversations open as read-only threads (A5, X4, W4, U1, G2, B4, H1-H9).

The archive document keeps the text: its chunks are the one searchable copy, and its turns
(speaker, role, time, text) are kept beside them unindexed for the thread view, read page by page.
Continue in a new chat makes a chat whose handoff is the document's last turns under the handoff
limits; forgetting the document removes the view and that handoff.
"""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient

from hearth import Hearth, Settings
from hearth.continuity.branch import handoff_text
from hearth.records.forget import verify
from hearth.server import create_app
from tests.test_forget import drain
from tests.test_server import BASE

CANARY = "quillvortex"


@pytest.fixture
def client(hearth):
    with TestClient(create_app(hearth.settings, hearth), base_url=BASE) as c:
        yield c


def chatgpt_export() -> list[dict]:
    """A conversations.json as ChatGPT writes it: a client root without a message, a hidden system
    node, a reply regenerated once (two branches; current_node picks the second), a tool call and
    its output, an image part beside text, and model metadata."""
    def node(node_id, parent, children, role=None, parts=(), t=None, **extra):
        message = None
        if role is not None:
            message = {"id": node_id, "author": {"role": role, "name": None, "metadata": {}}, "create_time": t,
                       "update_time": None, "status": "finished_successfully", "end_turn": role == "assistant",
                       "weight": 1.0, "recipient": extra.pop("recipient", "all"), "channel": None,
                       "content": {"content_type": extra.pop("content_type", "text"), "parts": list(parts)},
                       "metadata": {"model_slug": "gpt-4o", "default_model_slug": "gpt-4o", **extra.pop("metadata", {})}}
            message.update(extra)
        return {"id": node_id, "message": message, "parent": parent, "children": list(children)}

    mapping = {
        "client-created-root": node("client-created-root", None, ["sys"]),
        "sys": node("sys", "client-created-root", ["u1"], "system", [""], None,
                    metadata={"is_visually_hidden_from_conversation": True}),
        "u1": node("u1", "sys", ["a1-old", "a1"], "user", ["We adopted a **kitten** today! Name ideas?"], 1_717_236_000.5),
        "a1-old": node("a1-old", "u1", [], "assistant", ["An answer the person regenerated."], 1_717_236_010.0),
        "a1": node("a1", "u1", ["u2"], "assistant",
                   ["Congratulations! A few ideas:\n\n- *Pepper*\n- **Miso**\n- Comet"], 1_717_236_020.0),
        "u2": node("u2", "a1", ["c1"], "user",
                   [{"content_type": "image_asset_pointer", "asset_pointer": "file-service://file-1"},
                    "Here she is. Miso it is."], 1_717_236_100.0, content_type="multimodal_text"),
        "c1": node("c1", "u2", ["t1"], "assistant", ["print('tool code')"], 1_717_236_110.0,
                   recipient="python", content_type="code"),
        "t1": node("t1", "c1", ["a2"], "tool", ["tool output"], 1_717_236_111.0),
        "a2": node("a2", "t1", [], "assistant", ["Miso suits her. <script>alert(1)</script>"], 1_717_236_120.0),
    }
    return [{"title": "Kitten names", "create_time": 1_717_236_000.0, "update_time": 1_717_236_120.0,
             "mapping": mapping, "moderation_results": [], "current_node": "a2", "plugin_ids": None,
             "conversation_id": "6f1c-kitten", "conversation_template_id": None, "gizmo_id": None,
             "is_archived": False, "safe_urls": [], "default_model_slug": "gpt-4o", "id": "6f1c-kitten"}]


def claude_export(turns: int = 10, *, long_turn: int | None = None, canary: str = "") -> list[dict]:
    """A claude.ai conversations.json: human and assistant messages with content blocks (text,
    tool_use, tool_result), ISO times, and a conversation listed twice."""
    messages = []
    for i in range(turns):
        human = i % 2 == 0
        text = f"Turn {i}: {'the person' if human else 'Claude'} speaks of the garden {canary}".strip()
        if long_turn == i:
            text += " " + "x" * 400
        content = [{"type": "text", "text": text, "citations": []}]
        if not human:
            content.append({"type": "tool_use", "name": "repl", "input": {"code": "HIDDEN_TOOL"}})
            content.append({"type": "tool_result", "name": "repl", "content": [{"type": "text", "text": "RESULT"}]})
        messages.append({"uuid": f"m{i}", "sender": "human" if human else "assistant", "text": "",
                         "content": content, "created_at": f"2024-05-01T10:{i // 60:02d}:{i % 60:02d}.000000Z",
                         "updated_at": f"2024-05-01T10:{i // 60:02d}:{i % 60:02d}.000000Z",
                         "attachments": [], "files": []})
    conversation = {"uuid": "c-garden", "name": "Garden diary", "created_at": "2024-05-01T10:00:00.000000Z",
                    "updated_at": "2024-05-01T11:00:00.000000Z", "account": {"uuid": "acc"},
                    "chat_messages": messages}
    return [conversation, conversation]


def import_file(client, payload, name="conversations.json", headers=None, **params):
    response = client.post("/api/imports", params={"name": name, **params}, content=json.dumps(payload).encode(),
                           headers=headers or {})
    assert response.status_code == 201, response.text
    [document_id] = response.json()["ids"]["documents"]
    return document_id


def test_x4_a5_a_chatgpt_export_opens_as_its_turns_read_only_and_is_searched_once(client, me, persona):
    document_id = import_file(client, chatgpt_export(), persona_id=persona.id)
    listed = client.get("/api/archive/documents", params={"source": ["chatgpt", "claude"]}).json()
    assert [(d["id"], d["title"], d["source"], d["turns"]) for d in listed] == [
        (document_id, "Kitten names", "chatgpt", 4)]
    page = client.get(f"/api/archive/documents/{document_id}/turns")
    assert page.status_code == 200, page.text
    body = page.json()
    assert body["document"]["title"] == "Kitten names" and body["total"] == 4 and not body["passages"]
    assert not body["has_earlier"] and not body["has_later"]
    assert [(t["position"], t["role"], t["speaker"], t["created_at"]) for t in body["turns"]] == [
        (0, "user", "AUMA", "2024-06-01T10:00:00Z"), (1, "assistant", "Elion Voicefire", "2024-06-01T10:00:20Z"),
        (2, "user", "AUMA", "2024-06-01T10:01:40Z"), (3, "assistant", "Elion Voicefire", "2024-06-01T10:02:00Z")]
    texts = [t["text"] for t in body["turns"]]
    # The current branch, as written (Markdown and all): not the regenerated answer, the tool call,
    # its output or the hidden system message.
    assert texts[1] == "Congratulations! A few ideas:\n\n- *Pepper*\n- **Miso**\n- Comet"
    assert texts[2] == "Here she is. Miso it is." and texts[3].endswith("<script>alert(1)</script>")
    assert not {"An answer the person regenerated.", "print('tool code')", "tool output"} & set(texts)
    # Read only: the view has no route that writes.
    assert client.post(f"/api/archive/documents/{document_id}/turns", json={}).status_code == 405
    # One searchable copy: the chunk is found once, and no conversation was made to find twice.
    results = client.get("/api/search", params={"q": "Miso kitten"}).json()["results"]
    assert [(r["kind"], r["source_id"]) for r in results] == [("chunk", document_id)]
    assert me.conversations.list(limit=10) == []


def test_x4_h1_h9_a_claude_export_continues_in_a_new_chat_carrying_its_last_eight_turns(tmp_path):
    settings = Settings.resolve({"home": str(tmp_path / "h"), "handoff_per_message_limit": 300}, environ={})
    hearth = Hearth(settings)
    try:
        me = hearth.scope()
        persona = me.personas.create("elion", "Elion", user_label="AUMA said:", assistant_label="Elion Voicefire said:")
        sage = me.personas.create("sage", "Sage", user_label="Robin said:", assistant_label="Sage said:")
        with TestClient(create_app(settings, hearth), base_url=BASE) as client:
            document_id = import_file(client, claude_export(10, long_turn=9), persona_id=persona.id)
            turns = client.get(f"/api/archive/documents/{document_id}/turns").json()["turns"]
            assert len(turns) == 10 and turns[0]["speaker"] == "AUMA" and turns[1]["speaker"] == "Elion Voicefire"
            assert turns[3]["created_at"] == "2024-05-01T10:00:03Z"
            assert all("HIDDEN_TOOL" not in t["text"] and "RESULT" not in t["text"] for t in turns)

            first = client.post(f"/api/archive/documents/{document_id}/continue", json={"retry_key": "k-1"})
            assert first.status_code == 200, first.text
            made = first.json()
            assert made["created"] and made["source_document_id"] == document_id
            assert made["handoff"]["selected"] == 8 and made["handoff"]["markers"] == 1
            chat = made["conversation"]
            assert chat["title"] == "Garden diary (continued)" and not chat["imported"]
            assert chat["persona_id"] == persona.id  # the persona the import labelled the turns with
            again = client.post(f"/api/archive/documents/{document_id}/continue", json={"retry_key": "k-1"}).json()
            assert not again["created"] and again["conversation"]["id"] == chat["id"]

            messages = client.get(f"/api/conversations/{chat['id']}/messages").json()["messages"]
            [artifact] = messages
            assert artifact["kind"] == "handoff_artifact"
            assert artifact["metadata"]["source_document_id"] == document_id
            assert "Turn 1:" not in artifact["content"] and "Turn 2:" in artifact["content"]
            assert "Not included here" in artifact["content"]  # turn 9 is over the per-message limit
            assert me.handoff(chat["id"])["source_document_id"] == document_id
            model_text = handoff_text(hearth.store.connection(), me.user_id, chat["id"], settings)
            assert "AUMA said:" in model_text and "Turn 8: the person" in model_text and "Turn 1:" not in model_text

            # Another persona may be chosen; its labels speak the handoff.
            other = client.post(f"/api/archive/documents/{document_id}/continue",
                                json={"retry_key": "k-2", "persona_id": sage.id}).json()
            assert other["conversation"]["persona_id"] == sage.id
            assert "Robin said:" in handoff_text(hearth.store.connection(), me.user_id, other["conversation"]["id"],
                                                 settings)
            # A retry key already used for one source is not reused for another.
            conflict = client.post(f"/api/conversations/{chat['id']}/branch", json={"retry_key": "k-1"})
            assert conflict.status_code == 409
            assert client.post(f"/api/archive/documents/{document_id}/continue",
                               json={"retry_key": "k-3", "extra": 1}).status_code == 422
    finally:
        hearth.close()


def test_g2_another_users_imported_conversation_is_unknown(client, hearth, me, persona):
    document_id = import_file(client, chatgpt_export(), persona_id=persona.id)
    robin = hearth.users.create("robin")
    headers = {"Authorization": f"Bearer {hearth.users.create_token(robin.id, 't')}"}
    for method, path, body in (("GET", f"/api/archive/documents/{document_id}", None),
                               ("GET", f"/api/archive/documents/{document_id}/turns", None),
                               ("GET", f"/api/archive/documents/{document_id}/turns?before=2", None),
                               ("POST", f"/api/archive/documents/{document_id}/continue", {"retry_key": "r"}),
                               ("DELETE", f"/api/archive/documents/{document_id}", None)):
        answer = client.request(method, path, json=body, headers=headers)
        assert answer.status_code == 404, (method, path, answer.text)
        assert "Kitten" not in answer.text and "Miso" not in answer.text
    assert client.get("/api/archive/documents", params={"source": "chatgpt"}, headers=headers).json() == []
    assert hearth.scope(robin.id).conversations.list(limit=10) == []
    assert client.get(f"/api/archive/documents/{document_id}/turns").json()["total"] == 4  # still the owner's


def test_w4_a_five_thousand_turn_conversation_is_read_in_pages(client, me, persona):
    mapping = {"root": {"id": "root", "message": None, "parent": None, "children": ["n0"]}}
    for i in range(5_000):
        role = "user" if i % 2 == 0 else "assistant"
        mapping[f"n{i}"] = {"id": f"n{i}", "parent": "root" if i == 0 else f"n{i - 1}",
                            "children": [f"n{i + 1}"] if i < 4_999 else [],
                            "message": {"id": f"n{i}", "author": {"role": role}, "create_time": 1_700_000_000 + i,
                                        "content": {"content_type": "text", "parts": [f"Line {i} of the long talk"]},
                                        "metadata": {}, "recipient": "all"}}
    export = [{"id": "long", "title": "The long talk", "create_time": 1_700_000_000, "mapping": mapping,
               "current_node": "n4999"}]
    document_id = import_file(client, export, persona_id=persona.id)
    newest = client.get(f"/api/archive/documents/{document_id}/turns").json()
    assert newest["total"] == 5_000 and len(newest["turns"]) == 100
    assert newest["turns"][0]["position"] == 4_900 and newest["turns"][-1]["text"] == "Line 4999 of the long talk"
    assert newest["has_earlier"] and not newest["has_later"]
    earlier = client.get(f"/api/archive/documents/{document_id}/turns", params={"before": 4_900, "limit": 50}).json()
    assert [t["position"] for t in earlier["turns"]] == list(range(4_850, 4_900)) and earlier["has_later"]
    # Forward from the start, 500 at a time: every turn once, in order.
    seen, start = [], 0
    while True:
        page = client.get(f"/api/archive/documents/{document_id}/turns", params={"limit": 500, "start": start}).json()
        seen += [t["position"] for t in page["turns"]]
        if not page["has_later"]:
            break
        start = page["turns"][-1]["position"] + 1
    assert seen == list(range(5_000))
    assert client.get(f"/api/archive/documents/{document_id}/turns", params={"limit": 501}).status_code == 422
    assert client.get(f"/api/archive/documents/{document_id}/turns",
                      params={"before": 10, "start": 5}).status_code == 422


def test_b4_forgetting_the_document_removes_the_thread_and_the_handoff_quoting_it(client, hearth, me, persona):
    document_id = import_file(client, claude_export(4, canary=CANARY), persona_id=persona.id)
    chat = client.post(f"/api/archive/documents/{document_id}/continue", json={"retry_key": "k"}).json()
    chat_id = chat["conversation"]["id"]
    assert CANARY in client.get(f"/api/conversations/{chat_id}/messages").json()["messages"][0]["content"]
    assert client.delete(f"/api/archive/documents/{document_id}").status_code == 204
    assert client.get(f"/api/archive/documents/{document_id}/turns").status_code == 404
    assert client.post(f"/api/archive/documents/{document_id}/continue", json={"retry_key": "k2"}).status_code == 404
    assert hearth.store.connection().execute("SELECT count(*) FROM archive_turns").fetchone()[0] == 0
    # The continuation stays, without the bubble and the handoff that quoted the document.
    assert client.get(f"/api/conversations/{chat_id}/messages").json()["messages"] == []
    assert me.handoff(chat_id) is None
    assert handoff_text(hearth.store.connection(), me.user_id, chat_id, hearth.settings) == ""
    drain(hearth)
    assert verify(hearth.store, CANARY).clean


def test_x4_a_document_imported_before_turns_were_kept_shows_its_passages_until_imported_again(client, hearth, me, persona):
    export = claude_export(4)
    document_id = import_file(client, export, persona_id=persona.id)
    with hearth.store.write() as conn:  # as a document imported by an earlier version was stored
        conn.execute("DELETE FROM archive_turns WHERE document_id = ?", (document_id,))
    page = client.get(f"/api/archive/documents/{document_id}/turns").json()
    assert page["passages"] and page["total"] == 1
    assert page["turns"][0]["text"].startswith("AUMA said:\nTurn 0: the person")
    refused = client.post(f"/api/archive/documents/{document_id}/continue", json={"retry_key": "k"})
    assert refused.status_code == 409 and "import the export again" in refused.json()["detail"]
    again = client.post("/api/imports", params={"name": "conversations.json", "persona_id": persona.id},
                        content=json.dumps(export).encode())
    assert again.status_code == 201 and again.json()["status"] == "updated"
    assert again.json()["counts"]["documents_updated"] == 1
    page = client.get(f"/api/archive/documents/{document_id}/turns").json()
    assert not page["passages"] and page["total"] == 4
    once_more = client.post("/api/imports", params={"name": "conversations.json", "persona_id": persona.id},
                            content=json.dumps(export).encode())
    assert once_more.status_code == 200 and once_more.json()["status"] == "duplicate"
