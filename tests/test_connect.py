"""The person's name, the model connection from the app and the owner's accounts page (W10).

Model lists and test requests go through the official SDKs to the fake provider server on
127.0.0.1 speaking the real wire formats; everything is stored in real database files.
"""

from __future__ import annotations

import json
import logging
import re

import pytest
from fastapi.testclient import TestClient

from hearth import Hearth, Settings
from hearth.server import create_app
from tests.test_server import BASE, assert_error, parse_sse, row_counts

KEY = "sk-proj-w10SecretKeyThatMustNeverLeave9876"
OTHER_KEY = "sk-proj-w10MembersOwnKeyAlsoSecret5432"
PASSWORD = "correct horse battery"


def deployment(tmp_path, environ: dict[str, str] | None = None) -> Hearth:
    return Hearth(Settings.resolve({"home": str(tmp_path / "home")}, environ=environ or {}))


@pytest.fixture
def served(tmp_path, fake_provider_server):
    """(client, hearth, fake): a fresh deployment with no provider configured (offline)."""
    hearth = deployment(tmp_path)
    with TestClient(create_app(hearth.settings, hearth), base_url=BASE) as client:
        yield client, hearth, fake_provider_server
    hearth.close()


def chat_payload(fake, **extra) -> dict:
    return {"provider": "openai-chat", "base_url": fake.openai_base_url, "model": "fake-chat-1", "api_key": KEY,
            **extra}


def new_chat(client) -> int:
    response = client.post("/api/conversations/new-chat", json={"continue": False})
    assert response.status_code in (200, 201), response.text
    return response.json()["conversation"]["id"]


def reply_text(client, conversation_id: int, text: str) -> str:
    response = client.post(f"/api/conversations/{conversation_id}/messages", json={"text": text})
    assert response.status_code == 200, response.text
    events = parse_sse(response.text)
    assert [name for name, _ in events][-1] == "done", response.text
    return "".join(data["text"] for name, data in events if name == "delta")


def chat_requests(fake):
    return [r for r in fake.requests if r.path == "/v1/chat/completions"]


# -- the model list and the test request through the SDK ------------------------------------------------
def test_w10_model_list_comes_from_the_providers_own_list(served):
    client, _hearth, fake = served
    fake.models = ["llama3.1:8b", "qwen2.5:7b", "nomic-embed-text"]
    body = client.post("/api/connection/models", json=chat_payload(fake, model="")).json()
    assert body == {"ok": True, "models": ["llama3.1:8b", "qwen2.5:7b"], "detail": None}  # no embedding model
    assert [r.path for r in fake.requests] == ["/v1/models"]
    assert fake.requests[0].headers["authorization"] == f"Bearer {KEY}"
    fake.models_status = 401
    failed = client.post("/api/connection/models", json=chat_payload(fake)).json()
    assert failed["ok"] is False and failed["models"] == [] and "rejected the API key" in failed["detail"]


def test_w10_test_connection_sends_one_real_request_and_reports_in_plain_words(served):
    client, hearth, fake = served
    assert client.get("/api/connection").json()["source"] == "none"
    before = row_counts(hearth)
    fake.script(text=["Hello", " there, ", "friend."])
    tried = client.post("/api/connection/test", json=chat_payload(fake)).json()
    assert tried["ok"] is True and tried["reply"] == "Hello there, friend." and tried["model"] == "fake-chat-1"
    [request] = chat_requests(fake)
    assert request.body["model"] == "fake-chat-1" and len(request.body["messages"]) == 1
    fake.script(status=401)
    refused = client.post("/api/connection/test", json=chat_payload(fake)).json()
    assert refused["ok"] is False and refused["detail"] == "The model provider rejected the API key (401)."
    gone = client.post("/api/connection/test", json=chat_payload(fake, base_url="http://127.0.0.1:9/v1")).json()
    assert gone["ok"] is False and "Could not reach the model provider" in gone["detail"]
    assert row_counts(hearth) == before  # a test stores nothing: no connection, no message
    assert client.get("/api/connection").json()["saved"] is None


def test_w10_bad_connection_input_is_refused_and_changes_nothing(served):
    client, hearth, fake = served
    client.get("/api/connection")
    before = row_counts(hearth)
    assert_error(client.put("/api/connection", json={"provider": "openai"}), 422)  # OpenAI needs a key
    assert_error(client.put("/api/connection", json={"provider": "openai-chat", "model": "m"}), 422)  # no address
    assert_error(client.put("/api/connection", json=chat_payload(fake, base_url="ftp://x")), 422)
    assert_error(client.put("/api/connection", json=chat_payload(fake, model="")), 422)  # pick a model
    assert_error(client.put("/api/connection", json={"provider": "somewhere"}), 422)
    assert row_counts(hearth) == before


# -- taking effect without a restart -------------------------------------------------------------------------
def test_w10_a_saved_connection_answers_the_next_send_without_a_restart(served):
    client, _hearth, fake = served
    conversation = new_chat(client)
    offline = reply_text(client, conversation, "Hello?")
    assert not chat_requests(fake) and offline  # nothing connected: the offline provider answered
    state = client.put("/api/connection", json=chat_payload(fake)).json()
    assert state["source"] == "own" and state["provider"] == "openai-chat" and state["model"] == "fake-chat-1"
    fake.script(text=["A real", " reply."])
    assert reply_text(client, conversation, "And now?") == "A real reply."
    [request] = chat_requests(fake)
    assert request.body["model"] == "fake-chat-1" and request.headers["authorization"] == f"Bearer {KEY}"
    # Switching back to offline is just as immediate.
    client.put("/api/connection", json={"provider": "offline"})
    reply_text(client, conversation, "Still there?")
    assert len(chat_requests(fake)) == 1


def test_w10_background_work_uses_the_job_owners_saved_connection(served):
    from hearth.ops.jobs import Worker

    client, hearth, fake = served
    client.put("/api/connection", json=chat_payload(fake))
    fake.script(text=["Tea and the sea."])
    conversation = new_chat(client)
    reply_text(client, conversation, "Shall we talk about lighthouses and tea?")
    fake.script(text=['{"title": "Lighthouses and tea"}'])
    Worker(hearth).run_once()  # no helper given: the job owner's connection writes the title
    assert len(chat_requests(fake)) == 2
    assert client.get(f"/api/conversations/{conversation}").json()["title"] == "Lighthouses and tea"


def test_w10_the_chat_model_list_follows_the_saved_connection(served):
    client, _hearth, fake = served
    assert client.get("/api/models").json()["provider"] == "offline"
    fake.models = ["fake-chat-1", "fake-chat-2"]
    client.put("/api/connection", json=chat_payload(fake))
    listed = client.get("/api/models").json()
    assert listed["provider"] == "openai-chat" and listed["models"] == ["fake-chat-1", "fake-chat-2"]


# -- the key stays on the server --------------------------------------------------------------------------------
def test_w10_the_key_is_never_in_a_response_a_log_or_an_export(served, caplog):
    client, hearth, fake = served
    caplog.set_level(logging.DEBUG)
    bodies = []
    saved = client.put("/api/connection", json=chat_payload(fake))
    bodies.append(saved.text)
    assert saved.json()["saved"]["key_hint"] == "sk-…9876"
    for response in (
        client.get("/api/connection"),
        client.post("/api/connection/models", json=chat_payload(fake, api_key=None)),
        client.post("/api/connection/test", json=chat_payload(fake, api_key=None)),
        client.get("/api/diagnostics"),
        client.get("/api/exports/hearth"),
        client.get("/api/models"),
        client.get("/openapi.json"),
    ):
        assert response.status_code == 200, response.text
        bodies.append(response.text)
    conversation = new_chat(client)
    reply_text(client, conversation, "Hi")
    bodies.append(client.get(f"/api/conversations/{conversation}/messages").text)
    fake.script(status=401)
    bodies.append(client.post(f"/api/conversations/{conversation}/messages", json={"text": "again"}).text)
    # The stored key was used (the requests carried it) but never came back out.
    assert all(r.headers.get("authorization") == f"Bearer {KEY}" for r in fake.requests)
    assert len(fake.requests) >= 4
    for text in bodies:
        assert KEY not in text and KEY[8:] not in text
    assert KEY not in caplog.text and KEY[8:] not in caplog.text
    export = json.loads(bodies[5])
    assert "model_connections" not in export["tables"]
    events = hearth.store.connection().execute("SELECT payload FROM events").fetchall()
    assert all(KEY not in row[0] for row in events)


def test_w10_a_stored_key_is_never_sent_to_an_address_it_was_not_saved_for(served):
    client, _hearth, fake = served
    client.put("/api/connection", json={"provider": "openai", "base_url": fake.openai_base_url, "api_key": KEY})
    moved = {"provider": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "gpt-4.1"}
    assert_error(client.post("/api/connection/test", json=moved), 422)  # "OpenAI needs an API key"
    assert_error(client.put("/api/connection", json=moved), 422)
    assert client.get("/api/connection").json()["saved"]["base_url"] == fake.openai_base_url


# -- environment variables win ----------------------------------------------------------------------------------
def test_w10_environment_variables_win_over_the_saved_connection(tmp_path, fake_provider_server):
    fake = fake_provider_server
    hearth = deployment(tmp_path, {"HEARTH_PROVIDER": "offline"})
    with TestClient(create_app(hearth.settings, hearth), base_url=BASE) as client:
        state = client.put("/api/connection", json=chat_payload(fake)).json()
        assert state["source"] == "environment" and state["environment"] == ["HEARTH_PROVIDER"]
        assert state["provider"] == "offline" and state["saved"]["provider"] == "openai-chat"
        reply_text(client, new_chat(client), "Who answers?")
        assert not chat_requests(fake)  # the environment's offline provider did
    hearth.close()
    # Without the variable the same stored connection answers, on the next start.
    hearth = deployment(tmp_path)
    with TestClient(create_app(hearth.settings, hearth), base_url=BASE) as client:
        assert client.get("/api/connection").json()["source"] == "own"
        reply_text(client, new_chat(client), "And now?")
        assert len(chat_requests(fake)) == 1
    hearth.close()


# -- per user, the owner's as the default ----------------------------------------------------------------------
def login(client, name: str, password: str = PASSWORD) -> TestClient:
    response = client.post("/api/auth/login", json={"name": name, "password": password})
    assert response.status_code == 200, response.text
    client.headers["X-CSRF-Token"] = response.json()["csrf_token"]
    return client


@pytest.fixture
def household(tmp_path, fake_provider_server):
    """(owner client, member client, hearth, fake): a locked deployment with a second account."""
    hearth = deployment(tmp_path)
    owner = hearth.users.owner()
    hearth.users.set_password(owner.id, PASSWORD)
    hearth.users.create("sam", PASSWORD)
    app = create_app(hearth.settings, hearth)
    with TestClient(app, base_url=BASE) as a, TestClient(app, base_url=BASE) as b:
        yield login(a, "owner"), login(b, "sam"), hearth, fake_provider_server
    hearth.close()


def test_w10_a_member_uses_the_owners_connection_until_they_save_their_own(household):
    owner, member, _hearth, fake = household
    owner.put("/api/connection", json=chat_payload(fake))
    state = member.get("/api/connection").json()
    assert state["source"] == "owner" and state["provider"] == "openai-chat" and state["saved"] is None
    assert fake.openai_base_url not in member.get("/api/connection").text  # the owner's address stays theirs
    reply_text(member, new_chat(member), "Hi")
    assert chat_requests(fake)[-1].headers["authorization"] == f"Bearer {KEY}"
    member.put("/api/connection", json=chat_payload(fake, api_key=OTHER_KEY, model="fake-chat-2"))
    reply_text(member, new_chat(member), "Mine now")
    assert chat_requests(fake)[-1].headers["authorization"] == f"Bearer {OTHER_KEY}"
    assert chat_requests(fake)[-1].body["model"] == "fake-chat-2"
    reply_text(owner, new_chat(owner), "Still mine")
    assert chat_requests(fake)[-1].headers["authorization"] == f"Bearer {KEY}"
    # The member's stored key is theirs: a test without a key does not borrow the owner's.
    member.delete("/api/connection")
    assert_error(member.post("/api/connection/test", json={"provider": "openai", "base_url": fake.openai_base_url}),
                 422)


# -- the owner's accounts page ----------------------------------------------------------------------------------------
ADMIN_CALLS = [("GET", "/api/admin/users", None), ("POST", "/api/admin/users", {"name": "x", "password": PASSWORD}),
               ("PATCH", "/api/admin/users/1", {"disabled": True}), ("GET", "/api/admin/users/1/tokens", None),
               ("POST", "/api/admin/users/1/tokens", {"name": "t"}), ("DELETE", "/api/admin/users/1/tokens/1", None)]


def test_w10_only_the_owner_may_use_the_accounts_api(household):
    _owner, member, hearth, _fake = household
    before = row_counts(hearth)
    for method, path, body in ADMIN_CALLS:
        assert_error(member.request(method, path, json=body), 403, "forbidden")
    assert row_counts(hearth) == before


def test_w10_owner_adds_disables_and_enables_accounts(household):
    owner, member, hearth, _fake = household
    listed = owner.get("/api/admin/users").json()
    assert [(u["name"], u["is_owner"], u["disabled"]) for u in listed] == [("owner", True, False), ("sam", False, False)]
    added = owner.post("/api/admin/users", json={"name": "robin", "password": PASSWORD})
    assert added.status_code == 201 and added.json()["has_password"] is True
    assert_error(owner.post("/api/admin/users", json={"name": "robin", "password": PASSWORD}), 409)
    assert_error(owner.post("/api/admin/users", json={"name": "kit", "password": "short"}), 422)
    assert [u["name"] for u in owner.get("/api/admin/users").json()] == ["owner", "sam", "robin"]
    sam = listed[1]["id"]
    # A token of sam's works until sam's account is turned off.
    token = owner.post(f"/api/admin/users/{sam}/tokens", json={"name": "phone"}).json()["token"]
    with TestClient(member.app, base_url=BASE) as api:
        assert api.get("/api/auth/me", headers={"Authorization": f"Bearer {token}"}).json()["user"]["name"] == "sam"
        assert owner.patch(f"/api/admin/users/{sam}", json={"disabled": True}).json()["disabled"] is True
        assert_error(api.get("/api/auth/me", headers={"Authorization": f"Bearer {token}"}), 401)
        assert_error(member.get("/api/auth/me"), 401)  # the open session ended
        assert_error(api.post("/api/auth/login", json={"name": "sam", "password": PASSWORD}), 401)
        assert_error(owner.patch(f"/api/admin/users/{hearth.users.owner().id}", json={"disabled": True}), 422)
        owner.patch(f"/api/admin/users/{sam}", json={"disabled": False})
        assert api.get("/api/auth/me", headers={"Authorization": f"Bearer {token}"}).status_code == 200
        assert api.post("/api/auth/login", json={"name": "sam", "password": PASSWORD}).status_code == 200


def test_w10_owner_issues_and_revokes_tokens_shown_once(household):
    owner, _member, _hearth, _fake = household
    sam = owner.get("/api/admin/users").json()[1]["id"]
    created = owner.post(f"/api/admin/users/{sam}/tokens", json={"name": "laptop"})
    assert created.status_code == 201
    token = created.json()["token"]
    assert token.startswith("hth_")
    listed = owner.get(f"/api/admin/users/{sam}/tokens")
    assert token not in listed.text and [t["name"] for t in listed.json()] == ["laptop"]
    assert token not in owner.get("/api/admin/users").text
    with TestClient(owner.app, base_url=BASE) as api:
        assert api.get("/api/auth/me", headers={"Authorization": f"Bearer {token}"}).status_code == 200
        token_id = created.json()["id"]
        assert owner.delete(f"/api/admin/users/{sam}/tokens/{token_id}").status_code == 204
        assert_error(api.get("/api/auth/me", headers={"Authorization": f"Bearer {token}"}), 401)
    assert_error(owner.delete(f"/api/admin/users/{sam}/tokens/{token_id}"), 404)


# -- the person's name ------------------------------------------------------------------------------------------------
CARD = {"spec": "chara_card_v2", "spec_version": "2.0", "data": {
    "name": "Mirren", "description": "A lighthouse keeper who talks to {{user}} about the sea.", "personality": "warm",
    "scenario": "", "first_mes": "*lights the lamp* Evening, {{user}}. Tea?", "mes_example": ""}}


def test_w10_the_persons_name_greets_them_in_an_imported_card(served):
    client, _hearth, _fake = served
    named = client.patch("/api/auth/me", json={"display_name": "Ada"})
    assert named.json()["display_name"] == "Ada"
    imported = client.post("/api/imports?name=mirren.json&format=card", content=json.dumps(CARD).encode(),
                           headers={"Content-Type": "application/octet-stream"})
    assert imported.status_code in (200, 201), imported.text
    persona_id = imported.json()["ids"]["personas"][0]
    client.post("/api/onboarding", json={"persona_id": persona_id})
    opened = client.post("/api/conversations/new-chat", json={"persona_id": persona_id, "continue": False}).json()
    messages = client.get(f"/api/conversations/{opened['conversation']['id']}/messages").json()
    texts = [m["content"] for m in (messages["messages"] if isinstance(messages, dict) else messages)]
    assert texts[0] == "*lights the lamp* Evening, Ada. Tea?"
    assert all("the person" not in t for t in texts)


def test_w10_the_cli_turns_an_account_off_and_on(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from hearth.cli import cli

    monkeypatch.setenv("HEARTH_HOME", str(tmp_path / "home"))
    runner = CliRunner()

    def run(*args):
        result = runner.invoke(cli, list(args), catch_exceptions=False)
        assert result.exit_code == 0, result.output
        return result.output

    run("init")
    run("user", "add", "sam")
    hearth = deployment(tmp_path)
    sam = hearth.users.by_name("sam")
    token = hearth.users.create_token(sam.id, "phone")
    assert "turned off" in run("user", "disable", "sam")
    assert re.search(r"\bsam\s+off\b", run("user", "list"))
    assert hearth.users.token_user(token) is None
    run("user", "enable", "sam")
    assert hearth.users.token_user(token) == sam.id
    assert runner.invoke(cli, ["user", "disable", "owner"]).exit_code != 0  # the owner stays on
    hearth.close()
