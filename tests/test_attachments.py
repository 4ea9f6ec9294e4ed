"""Attachments (W14) and one conversation's export (W15).

Images reach each provider through its official SDK, against the fake server on 127.0.0.1, as
that SDK's own image part; text files are inlined in their message. A provider or model that
cannot see images refuses them before anything is saved; caps answer 413/422 and change nothing;
attachments are counted in the request size (R2) and the header (R4), stay through edits and the
turns an edit puts away, go with delete-forever (B4, read in the SQLite file itself), travel in
the full export and in a conversation's own Markdown and JSON export, whose JSON imports again as
a read-only thread that Branch continues. Every read is bound to its user.
"""

from __future__ import annotations

import base64
import json

import pytest
from fastapi.testclient import TestClient

from hearth import Hearth, InvalidInput, Settings
from hearth.errors import TooLarge
from hearth.interop.export import export_user
from hearth.records.forget import CONFIRMATION_PHRASE
from hearth.server import create_app
from tests.conftest import ENGINE
from tests.test_server import BASE, assert_error, parse_sse, row_counts

# A real 1x1 PNG, and a "picture" carrying a canary in its bytes (after a valid PNG signature).
PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==")
CANARY = "zebrafinch-moonlit-quartz"
NOTES = {"name": "notes.txt", "media_type": "text/plain", "text": "Bring the blue kettle."}


def image(data: bytes = PNG, name: str = "kettle.png") -> dict:
    return {"name": name, "media_type": "image/png", "data": base64.b64encode(data).decode("ascii")}


def provider_settings(tmp_path, fake, provider: str, model: str) -> Settings:
    base = fake.anthropic_base_url if provider == "anthropic" else fake.openai_base_url
    keys = {"anthropic_api_key": "sk-ant-test"} if provider == "anthropic" else {"openai_api_key": "sk-test"}
    return Settings.resolve({"home": str(tmp_path / "home"), "provider": provider, "model": model, "base_url": base,
                             "input_token_limit": 64_000, **keys}, environ={})


def last_user(body: dict, provider: str) -> dict:
    items = body["input"] if provider == "openai" else body["messages"]
    return [m for m in items if m.get("role") == "user"][-1]


# -- each provider's own image part (PR4) ----------------------------------------------------------
@pytest.mark.parametrize("provider,path", [("openai", "/v1/responses"), ("openai-chat", "/v1/chat/completions"),
                                           ("anthropic", "/v1/messages")])
def test_w14_images_reach_each_provider_as_its_sdks_image_part_and_text_files_are_inlined(
        tmp_path, fake_provider_server, provider, path):
    with Hearth(provider_settings(tmp_path, fake_provider_server, provider, "vision-model")) as hearth:
        me = hearth.scope()
        chat = me.conversations.create(me.personas.create("elion", "Elion").id)
        me.send(chat.id, "What is in the picture?", attached=[NOTES, image()])
        me.send(chat.id, "And again?")  # the earlier message keeps its image in the history
    bodies = [r.body for r in fake_provider_server.requests if r.path == path]
    assert len(bodies) == 2
    data_url = "data:image/png;base64," + base64.b64encode(PNG).decode()
    for body in bodies:
        items = body["input"] if provider == "openai" else body["messages"]
        with_image = [m for m in items if m.get("role") == "user" and isinstance(m["content"], list)
                      and any(p["type"] in ("input_image", "image_url", "image") for p in m["content"])]
        if provider == "openai" and body is bodies[1]:
            # The Responses chain holds the earlier turn server-side: only the new message travels.
            assert body.get("previous_response_id") and not with_image
            continue
        assert len(with_image) == 1
        parts = with_image[0]["content"]
        if provider == "openai":
            assert parts[0]["type"] == "input_text" and parts[0]["text"].startswith("What is in the picture?")
            assert parts[1] == {"type": "input_image", "image_url": data_url, "detail": "auto"}
        elif provider == "openai-chat":
            assert parts[0]["type"] == "text" and parts[0]["text"].startswith("What is in the picture?")
            assert parts[1] == {"type": "image_url", "image_url": {"url": data_url}}
        else:
            assert parts[0] == {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                                            "data": base64.b64encode(PNG).decode()}}
            assert parts[1]["type"] == "text" and parts[1]["text"].startswith("What is in the picture?")
        text = parts[0]["text"] if provider != "anthropic" else parts[1]["text"]
        assert '<attachment name="notes.txt" type="text/plain">\nBring the blue kettle.\n</attachment>' in text


@pytest.mark.parametrize("provider,model", [("offline", ""), ("openai-chat", "llama3.1"), ("openai", "gpt-3.5-turbo")])
def test_w14_a_provider_or_model_that_cannot_see_images_refuses_them_and_saves_nothing(
        tmp_path, fake_provider_server, provider, model):
    settings = (Settings.resolve({"home": str(tmp_path / "home"), "provider": "offline"}, environ={})
                if provider == "offline" else provider_settings(tmp_path, fake_provider_server, provider, model))
    with Hearth(settings) as hearth:
        me = hearth.scope()
        chat = me.conversations.create(me.personas.create("elion", "Elion").id)
        before = row_counts(hearth)
        with pytest.raises(InvalidInput, match="cannot see images"):
            me.send(chat.id, "Look", attached=[image()])
        assert row_counts(hearth) == before
        # A text file is fine for any of them.
        reply = me.send(chat.id, "Read this", attached=[NOTES])
        assert reply.size["attachments_count"] == 1 and reply.size["images_count"] == 0
    assert not [r for r in fake_provider_server.requests if r.body.get("messages") or r.body.get("input")
                if "image" in json.dumps(r.body)]


# -- caps, the saved message, the request size ---------------------------------------------------------
def test_w14_caps_on_count_size_and_type_answer_413_or_422_and_change_nothing(tmp_path, provider):
    settings = Settings.resolve({"home": str(tmp_path / "home"), "input_token_limit": 32_000,
                                 "attachment_max_count": 2, "attachment_max_bytes": 2_000,
                                 "attachment_text_chars": 1_500}, environ={})
    hearth = Hearth(settings, provider=provider)
    with TestClient(create_app(settings, hearth), base_url=BASE) as client:
        chat = client.post("/api/conversations", json={"title": "Caps"}).json()
        url = f"/api/conversations/{chat['id']}/messages"
        before = row_counts(hearth)
        cases = [
            (413, {"text": "hi", "attachments": [image(PNG + b"x" * 2_000)]}),
            (413, {"text": "hi", "attachments": [{**NOTES, "text": "y" * 2_001}]}),
            (413, {"text": "hi", "attachments": [{**NOTES, "text": "y" * 800}, {**NOTES, "text": "z" * 800}]}),
            (422, {"text": "hi", "attachments": [NOTES, NOTES, NOTES]}),
            (422, {"text": "hi", "attachments": [{"name": "a.exe", "media_type": "image/png",
                                                   "data": base64.b64encode(b"MZ\x90\x00").decode()}]}),
            (422, {"text": "hi", "attachments": [{"name": "x.bin", "media_type": "application/octet-stream",
                                                   "text": "abc"}]}),
            (422, {"text": "hi", "attachments": [{"name": "x.png", "media_type": "image/png", "data": "not base64!"}]}),
            (422, {"text": "hi", "attachments": [{"name": "both.txt", "text": "a", "data": "YQ=="}]}),
        ]
        for status, body in cases:
            response = client.post(url, json=body)
            assert_error(response, status)
            assert response.json()["detail"]
        assert row_counts(hearth) == before and not provider.requests
        # Within the caps it goes through, and the listing names the files.
        events = parse_sse(client.post(url, json={"text": "hi", "attachments": [NOTES, image()]}).text)
        assert events[0][0] == "saved" and events[-1][0] == "done"
        listed = client.get(f"/api/conversations/{chat['id']}/messages").json()["messages"]
        assert [(a["kind"], a["name"], a["size"]) for a in listed[0]["attachments"]] == [
            ("text", "notes.txt", len(NOTES["text"])), ("image", "kettle.png", len(PNG))]
        image_id = listed[0]["attachments"][1]["id"]
        got = client.get(f"/api/conversations/{chat['id']}/attachments/{image_id}")
        assert got.status_code == 200 and got.content == PNG and got.headers["content-type"] == "image/png"
        assert got.headers["content-security-policy"] == "default-src 'none'"
        text = client.get(f"/api/conversations/{chat['id']}/attachments/{listed[0]['attachments'][0]['id']}")
        assert text.headers["content-type"].startswith("text/plain") and text.text == NOTES["text"]
    hearth.close()


def test_w14_the_message_and_its_attachments_are_saved_before_the_model_is_asked(hearth, me, persona, provider):
    from tests.test_server import failing_reply

    chat = me.conversations.create(persona.id)
    seen = []

    def peek(request):
        # While the provider runs, the message and its files are already in the database.
        with hearth.store.read() as conn:
            seen.append(conn.execute("SELECT count(*) FROM message_attachments").fetchone()[0])
        yield from failing_reply()(request)

    provider.replies.append(peek)
    events = list(me.send_stream(chat.id, "Look", attached=[NOTES, image()]))
    assert events[0].type == "saved" and events[-1].type == "error"
    assert seen == [2]
    reply = me.retry(chat.id)  # the retry sends them again
    assert provider.requests[-1].messages[-1].images[0].data == PNG
    assert reply.user_message.id == events[0].data["message_id"]


def test_w14_r2_r4_attachments_are_counted_in_the_request_size_and_the_header(me, persona, provider):
    chat = me.conversations.create(persona.id)
    plain = me.send(chat.id, "Hello")
    header_before = me.visible_estimate(chat.id)["tokens"]
    big = {**NOTES, "text": "k" * 4_000}
    reply = me.send(chat.id, "Look", attached=[big, image()])
    size = reply.size
    assert plain.size["attachments_count"] == 0 and plain.size["attachments_tokens"] == 0
    assert size["attachments_count"] == 2 and size["images_count"] == 1
    assert size["attachments_tokens"] >= 1_000 + 1_600
    assert size["user_message_tokens"] >= 1_000  # the inlined file is part of the message sent
    assert size["total_tokens"] - plain.size["total_tokens"] >= 1_000 + 1_600
    # R3: the size report is numbers only, never the file's name or text.
    assert "notes" not in json.dumps(size) and "kkkk" not in json.dumps(size)
    assert me.visible_estimate(chat.id)["tokens"] - header_before >= 1_000 + 1_600


# -- edits and the turns an edit puts away ---------------------------------------------------------------
def test_w14_an_edit_keeps_the_messages_attachments_and_put_away_turns_keep_theirs(hearth, me, persona, provider):
    chat = me.conversations.create(persona.id)
    first = me.send(chat.id, "Morning", attached=[NOTES])
    second = me.send(chat.id, "What about this?", attached=[image()])
    # Editing the message with the image: the words change, the image stays and travels again.
    me.edit(chat.id, second.user_message.id, "What about this one?")
    last = provider.requests[-1].messages[-1]
    assert last.content.startswith("What about this one?") and last.images[0].data == PNG
    # Editing the first message puts the second away (a branch of its earlier version)...
    me.edit(chat.id, first.user_message.id, "Good morning")
    assert "Bring the blue kettle." in provider.requests[-1].messages[-1].content  # its file stays
    with hearth.store.read() as conn:
        assert conn.execute("SELECT count(*) FROM message_attachments").fetchone()[0] == 2
        assert not conn.execute("SELECT 1 FROM messages WHERE id = ?", (second.user_message.id,)).fetchone()
    # ...and choosing that version again brings the turn back with its image.
    me.choose_alternative(first.user_message.id, 0)
    me.send(chat.id, "Still there?")
    history = provider.requests[-1].messages
    assert any(m.images and m.images[0].data == PNG for m in history[:-1])


# -- forgetting, exports, isolation ---------------------------------------------------------------------
@pytest.mark.sqlite_only
def test_w14_b4_delete_forever_removes_the_attachments_bytes_from_the_sqlite_file(me, persona, hearth):
    chat = me.conversations.create(persona.id)
    keep = me.conversations.create(persona.id)
    me.send(chat.id, "A file", attached=[{**NOTES, "text": f"secret {CANARY}"}, image(PNG + CANARY.encode())])
    me.send(keep.id, "Another", attached=[NOTES])
    path = hearth.settings.home / "hearth.db"
    preview = me.forget.preview("conversation", chat.id)
    me.forget.apply("conversation", chat.id, token=preview.token, phrase=CONFIRMATION_PHRASE)
    from hearth.records.forget import verify

    assert verify(hearth.store, CANARY).clean
    hearth.store.engine.checkpoint(hearth.store.connection())
    for file in path.parent.glob("hearth.db*"):
        assert CANARY.encode() not in file.read_bytes()
    with hearth.store.read() as conn:
        assert conn.execute("SELECT count(*) FROM message_attachments").fetchone()[0] == 1  # the other thread's


def test_w14_forgetting_one_message_removes_its_attachments(hearth, me, persona):
    chat = me.conversations.create(persona.id)
    sent = me.send(chat.id, "A file", attached=[NOTES, image()])
    preview = me.forget.preview("message", sent.user_message.id)
    me.forget.apply("message", sent.user_message.id, token=preview.token, phrase=CONFIRMATION_PHRASE)
    with hearth.store.read() as conn:
        assert conn.execute("SELECT count(*) FROM message_attachments").fetchone()[0] == 0


def test_w14_the_full_export_lists_attachments_and_imports_them_back(me, persona, hearth, tmp_path, provider):
    chat = me.conversations.create(persona.id)
    me.send(chat.id, "A file", attached=[NOTES, image()])
    exported = export_user(hearth.store, me.user_id)
    table = exported["tables"]["message_attachments"]
    rows = [dict(zip(table["columns"], r)) for r in table["rows"]]
    assert [(r["name"], r["kind"]) for r in rows] == [("notes.txt", "text"), ("kettle.png", "image")]
    assert base64.b64decode(rows[1]["data"]["$base64"]) == PNG
    target = Settings.resolve({"home": str(tmp_path / "other"), "input_token_limit": 32_000}, environ={})
    with Hearth(target, provider=provider) as other:
        report = other.scope().imports.file(json.dumps(exported).encode(), "all.json")
        assert report.status == "imported", report.reason
        with other.store.read() as conn:
            assert conn.execute("SELECT data FROM message_attachments WHERE kind = 'image'").fetchone()[0] == PNG


def test_w14_two_users_never_see_each_others_attachments(hearth, me, persona, provider):
    chat = me.conversations.create(persona.id)
    me.send(chat.id, "Mine", attached=[NOTES, image()])
    other_user = hearth.users.create("second")
    other = hearth.scope(other_user.id)
    mine = other.conversations.create(other.personas.create("kai", "Kai").id)
    other.send(mine.id, "Theirs")
    assert provider.requests[-1].messages[-1].images == ()
    assert "Bring the blue kettle." not in json.dumps([m.content for m in provider.requests[-1].messages])
    app = create_app(hearth.settings, hearth)
    with TestClient(app, base_url=BASE) as client:
        listed = client.get(f"/api/conversations/{chat.id}/messages").json()["messages"]
        ids = [a["id"] for a in listed[0]["attachments"]]
    token = hearth.users.create_token(other_user.id, "script")
    with TestClient(app, base_url=BASE, headers={"Authorization": f"Bearer {token}"}) as client:
        for attachment_id in ids:
            assert_error(client.get(f"/api/conversations/{chat.id}/attachments/{attachment_id}"), 404)
            assert_error(client.get(f"/api/conversations/{mine.id}/attachments/{attachment_id}"), 404)
        assert_error(client.get(f"/api/conversations/{chat.id}/export?format=json"), 404)
    exported = export_user(hearth.store, other_user.id)
    assert not exported["tables"]["message_attachments"]["rows"]


# -- W15: one conversation's export and its re-import ----------------------------------------------------
def test_w15_a_conversation_exports_as_markdown_and_json_and_the_json_imports_read_only_then_continues(
        hearth, me, persona, provider, tmp_path):
    chat = me.conversations.create(persona.id, title="Kettle talk")
    me.send(chat.id, "Look at these", attached=[NOTES, image()])
    me.send(chat.id, "Thanks ```quoted``` fences")
    app = create_app(hearth.settings, hearth)
    with TestClient(app, base_url=BASE) as client:
        md = client.get(f"/api/conversations/{chat.id}/export?format=md")
        assert md.status_code == 200 and md.headers["content-type"].startswith("text/markdown")
        assert 'attachment; filename="Kettle-talk-' in md.headers["content-disposition"]
        text = md.text
        assert text.startswith("# Kettle talk\n") and "Look at these" in text
        assert "Attached: notes.txt (text/plain, 22 bytes)" in text and "Bring the blue kettle." in text
        assert "Attached image: kettle.png (image/png" in text
        exported = client.get(f"/api/conversations/{chat.id}/export?format=json")
        assert exported.status_code == 200 and exported.headers["content-type"] == "application/json"
        document = exported.json()
        assert document["format"] == "hearth-chat" and len(document["messages"]) == 4
        files = document["messages"][0]["attachments"]
        assert [f["name"] for f in files] == ["notes.txt", "kettle.png"]
        assert base64.b64decode(files[1]["data"]) == PNG
        assert_error(client.get(f"/api/conversations/{chat.id}/export?format=pdf"), 422)
        # The JSON goes back in through the ordinary import route, detected by its content.
        before = row_counts(hearth)
        bad = client.post("/api/imports?name=broken.json", content=exported.content.replace(b'"user"', b'"robot"'))
        assert bad.status_code == 422 and bad.json()["report"]["status"] == "refused"
        assert "role of user or assistant" in bad.json()["detail"] and row_counts(hearth) == before
        report = client.post("/api/imports?name=chat.json", content=exported.content).json()
        assert report["status"] == "imported" and report["format"] == "hearth-chat"
        assert report["counts"] == {"conversations": 1, "messages": 4, "attachments": 2}
        again = client.post("/api/imports?name=chat.json", content=exported.content).json()
        assert again["status"] == "duplicate"
        copy_id = report["ids"]["conversations"][0]
        copy = client.get(f"/api/conversations/{copy_id}").json()
        assert copy["imported"] is True and copy["title"] == "Kettle talk" and copy["persona_id"] == persona.id
        listed = client.get(f"/api/conversations/{copy_id}/messages").json()["messages"]
        assert [a["name"] for a in listed[0]["attachments"]] == ["notes.txt", "kettle.png"]
        # Read only: a send is refused and nothing changes.
        assert_error(client.post(f"/api/conversations/{copy_id}/messages", json={"text": "hi"}), 409)
    # Continue (Branch) opens a new chat that carries the imported turns on.
    branched = me.branch(copy_id, "continue-1")
    fresh = branched.conversation
    assert not fresh.imported
    reply = me.send(fresh.id, "Where were we?")
    assert reply.assistant_message.content
    assert "Look at these" in json.dumps([m.content for m in provider.requests[-1].messages])


def test_w15_the_cli_imports_a_conversation_export(hearth, me, persona, tmp_path, monkeypatch):
    from click.testing import CliRunner

    from hearth.cli import cli
    from hearth.interop import chat_export

    chat = me.conversations.create(persona.id, title="By the CLI")
    me.send(chat.id, "Hello", attached=[NOTES])
    with hearth.store.read() as conn:
        document = chat_export.chat_json(conn, me.user_id, me.conversations.get(chat.id), persona)
    path = tmp_path / "chat.json"
    path.write_bytes(chat_export.dumps(document))
    if ENGINE == "postgres":
        pytest.skip("the CLI opens its own deployment by HEARTH_HOME; covered on SQLite")
    monkeypatch.setenv("HEARTH_HOME", str(hearth.settings.home))
    for key in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "HEARTH_BASE_URL", "HEARTH_PROVIDER", "HEARTH_MODEL"):
        monkeypatch.delenv(key, raising=False)
    hearth.close()
    result = CliRunner().invoke(cli, ["import", str(path)])
    assert result.exit_code == 0, result.output
    with Hearth(Settings.resolve({"home": str(tmp_path / "home")}, environ={})) as again:
        rows = again.scope().conversations.list()
        imported = [c for c in rows if c.imported]
        assert len(imported) == 1 and imported[0].title == "By the CLI"


def test_w14_the_library_check_refuses_before_any_write(me, persona):
    chat = me.conversations.create(persona.id)
    with pytest.raises(TooLarge):
        me.send(chat.id, "big", attached=[{**NOTES, "text": "x" * 100_001}])
    with pytest.raises(InvalidInput, match="at most 4 attachments"):
        me.send(chat.id, "many", attached=[NOTES] * 5)
    assert me.conversations.messages(chat.id) == []


def test_w14_x1_the_openai_compatible_endpoint_takes_image_parts_as_data_urls(hearth, me, persona, provider):
    token = hearth.users.create_token(me.user_id, "client")
    headers = {"Authorization": f"Bearer {token}"}
    data_url = "data:image/png;base64," + base64.b64encode(PNG).decode()
    with TestClient(create_app(hearth.settings, hearth), base_url=BASE) as client:
        answer = client.post("/v1/chat/completions", headers=headers, json={"model": "elion", "messages": [
            {"role": "user", "content": [{"type": "text", "text": "What is this?"},
                                         {"type": "image_url", "image_url": {"url": data_url}}]}]})
        assert answer.status_code == 200, answer.text
        sent = provider.requests[-1].messages[-1]
        assert sent.content == "What is this?" and sent.images[0].data == PNG
        conversation_id = int(answer.headers["x-hearth-conversation-id"])
        with hearth.store.read() as conn:
            assert [tuple(r) for r in conn.execute("SELECT name, kind FROM message_attachments"
                                                   " WHERE conversation_id = ?", (conversation_id,))] == [
                ("image-2", "image")]
        before = row_counts(hearth)
        for url in ("https://example.org/cat.png", "data:image/png;base64,@@@"):
            refused = client.post("/v1/chat/completions", headers=headers, json={"model": "elion", "messages": [
                {"role": "user", "content": [{"type": "text", "text": "And this?"},
                                             {"type": "image_url", "image_url": {"url": url}}]}]})
            assert refused.status_code == 400 and refused.json()["error"]["message"]
        assert row_counts(hearth) == before


def test_w14_a_message_may_be_its_files_alone_but_never_nothing(hearth, me, persona, provider):
    chat = me.conversations.create(persona.id)
    reply = me.send(chat.id, "", attached=[image()])
    sent = provider.requests[-1].messages[-1]
    assert reply.user_message.content == "" and sent.images[0].data == PNG
    with pytest.raises(InvalidInput, match="must not be empty"):
        me.send(chat.id, "  ")
    assert len(me.conversations.messages(chat.id)) == 2
