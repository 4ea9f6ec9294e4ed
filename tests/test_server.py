"""HTTP API tests: conversation routes, SSE sends, bad input, the OpenAPI document, user scoping.

Everything runs against real SQLite files; the ASGI app is driven through Starlette's TestClient,
and one test talks to a real uvicorn server over TCP.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from contextlib import contextmanager
from typing import Iterator

import fastapi.routing
import httpx
import pytest
import uvicorn
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient

from hearth import Hearth, ProviderError
from hearth.providers.base import StreamEvent, Usage
from hearth.server import create_app
from hearth.store import catalog

BASE = "http://127.0.0.1:8765"
HOSTILE = "<img src=x onerror=alert(1)> **bold** [x](javascript:alert(1))"


# -- helpers ---------------------------------------------------------------------------------------
def parse_sse(text: str) -> list[tuple[str, dict]]:
    events = []
    for frame in text.split("\n\n"):
        if not frame.strip():
            continue
        kind, data = "message", []
        for line in frame.split("\n"):
            if line.startswith("event:"):
                kind = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].strip())
        events.append((kind, json.loads("\n".join(data))))
    return events


def row_counts(hearth: Hearth) -> dict[str, int]:
    conn = hearth.store.connection()
    return {t: conn.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0] for t in catalog.tables(conn)}


def failing_reply(message: str = "the provider is rate limiting requests (HTTP 429); try again shortly"):
    def reply(request):
        raise ProviderError(message, kind="rate_limit", retryable=True)
        yield  # pragma: no cover - makes this a generator like a real stream

    return reply


def app_routes(app) -> list[tuple[str, set[str], object]]:
    """(path, methods, route) for every route the app serves, included routers flattened.

    Newer FastAPI keeps included routers as nodes of ``app.routes``; older ones copy their routes.
    """
    iter_contexts = getattr(fastapi.routing, "iter_route_contexts", None)
    if iter_contexts is None:
        return [(r.path, set(getattr(r, "methods", None) or ()), r) for r in app.routes]
    return [(rc.path_format or rc.path, set(rc.methods or ()), rc.original_route)
            for rc in iter_contexts(app.routes)]


@contextmanager
def serve_in_thread(app) -> Iterator[str]:
    """Run ``app`` on a real uvicorn server on a free 127.0.0.1 port; yields the base URL."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning",
                                           lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 15
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=15)
        sock.close()


@pytest.fixture
def app(hearth):
    return create_app(hearth.settings, hearth)


@pytest.fixture
def client(app):
    with TestClient(app, base_url=BASE) as c:
        yield c


@pytest.fixture
def chat(client, persona) -> dict:
    response = client.post("/api/conversations", json={"persona_id": persona.id, "title": "Morning"})
    assert response.status_code == 201
    return response.json()


def send(client, conversation_id: int, text: str = "Good morning") -> list[tuple[str, dict]]:
    response = client.post(f"/api/conversations/{conversation_id}/messages", json={"text": text})
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/event-stream")
    return parse_sse(response.text)


def assert_error(response: httpx.Response, status: int, code: str | None = None) -> dict:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert set(body) == {"error", "detail"} and body["detail"]
    if code:
        assert body["error"] == code
    return body


# -- conversations (C2-C4) ---------------------------------------------------------------------------
def test_c2_create_list_and_read_conversation(client, persona, hearth):
    created = client.post("/api/conversations", json={"persona_id": persona.id, "title": "Tea"}).json()
    assert created["title"] == "Tea" and created["persona_id"] == persona.id and created["state"] == "open"
    listed = client.get("/api/conversations").json()
    assert [c["id"] for c in listed] == [created["id"]]
    assert client.get(f"/api/conversations/{created['id']}").json() == created
    # Without a persona id the default persona is used.
    default = client.post("/api/conversations", json={}).json()
    assert default["persona_id"] == hearth.scope().personas.default().id


def test_c2_c3_rename_move_trash_and_restore_shielded(client, chat):
    cid = chat["id"]
    folder = client.post("/api/folders", json={"name": "Evenings"}).json()
    assert client.post(f"/api/conversations/{cid}/rename", json={"title": "  Renamed "}).json()["title"] == "Renamed"
    assert client.post(f"/api/conversations/{cid}/move", json={"folder_id": folder["id"]}).json()["folder_id"] == folder["id"]
    assert [c["id"] for c in client.get("/api/conversations", params={"folder_id": folder["id"]}).json()] == [cid]
    assert client.post(f"/api/conversations/{cid}/move", json={"folder_id": None}).json()["folder_id"] is None

    trashed = client.post(f"/api/conversations/{cid}/trash").json()
    assert trashed["visibility"] == "trashed"
    assert client.get("/api/conversations").json() == []
    assert [c["id"] for c in client.get("/api/conversations", params={"include_trashed": True}).json()] == [cid]
    restored = client.post(f"/api/conversations/{cid}/restore", json={"shielded": True}).json()
    assert restored["visibility"] == "visible" and restored["continuity_shielded"] is True
    # restore also works with no body at all
    client.post(f"/api/conversations/{cid}/trash")
    assert client.post(f"/api/conversations/{cid}/restore").json()["visibility"] == "visible"


def test_c3_folder_hide_and_show_changes_visibility(client, chat):
    folder = client.post("/api/folders", json={"name": "Private"}).json()
    client.post(f"/api/conversations/{chat['id']}/move", json={"folder_id": folder["id"]})
    assert client.patch(f"/api/folders/{folder['id']}", json={"hidden": True}).json()["hidden"] is True
    assert client.get(f"/api/conversations/{chat['id']}").json()["visibility"] == "hidden"
    client.patch(f"/api/folders/{folder['id']}", json={"hidden": False})
    assert client.get(f"/api/conversations/{chat['id']}").json()["visibility"] == "visible"
    assert [f["name"] for f in client.get("/api/folders").json()] == ["Private"]
    assert_error(client.post("/api/folders", json={"name": "Private"}), 409, "conflict")


def test_c4_end_keeps_history_and_refuses_new_messages(client, chat, hearth):
    send(client, chat["id"])
    ended = client.post(f"/api/conversations/{chat['id']}/end").json()
    assert ended["state"] == "ended" and ended["ended_at"]
    before = row_counts(hearth)
    body = assert_error(client.post(f"/api/conversations/{chat['id']}/messages", json={"text": "hello?"}), 409)
    assert "ended" in body["detail"]
    assert row_counts(hearth) == before
    assert len(client.get(f"/api/conversations/{chat['id']}/messages").json()["messages"]) == 2


# -- sending (U1, R2, R4, PR5) ------------------------------------------------------------------------
def test_u1_r4_send_streams_events_and_messages_hide_stored_prompt(client, chat, hearth):
    events = send(client, chat["id"], "Good morning")
    kinds = [k for k, _ in events]
    assert kinds[0] == "saved" and kinds[1] == "diagnostics" and kinds[-1] == "done"
    assert "delta" in kinds and "error" not in kinds
    reply = "".join(d["text"] for k, d in events if k == "delta")
    assert reply == "Reply 1"
    diagnostics = events[1][1]
    assert diagnostics["total_tokens"] > 0 and diagnostics["input_limit_tokens"] == 32_000

    def numbers_only(value):
        if isinstance(value, dict):
            return all(numbers_only(v) for v in value.values())
        return isinstance(value, (int, float, bool)) or value == "chars/4"

    assert numbers_only(diagnostics)

    listed = client.get(f"/api/conversations/{chat['id']}/messages").json()
    assert [(m["role"], m["content"]) for m in listed["messages"]] == [("user", "Good morning"), ("assistant", reply)]
    stored = hearth.scope().stored_prompt(chat["id"])
    assert stored and all(m["content"] != stored for m in listed["messages"])
    assert listed["estimate"] == hearth.scope().visible_estimate(chat["id"]) == {
        "messages": 2, "tokens": -(-len("Good morning" + reply) // 4)}
    assert client.get(f"/api/conversations/{chat['id']}/estimate").json() == listed["estimate"]
    size = client.get(f"/api/conversations/{chat['id']}/request-size").json()["size"]
    assert size == diagnostics
    done = events[-1][1]
    assert done["user_message_id"] == events[0][1]["message_id"]
    assert done["message_id"] == listed["messages"][1]["id"]


def test_u1_request_size_is_null_before_first_send(client, chat):
    assert client.get(f"/api/conversations/{chat['id']}/request-size").json() == {"size": None}
    assert client.get(f"/api/conversations/{chat['id']}/messages").json() == {
        "messages": [], "estimate": {"messages": 0, "tokens": 0}}


def test_u1_tool_events_and_usage_arrive_over_sse(client, chat, provider, hearth):
    def reply(request):
        yield StreamEvent("text", text="Thinking. ")
        yield StreamEvent("usage", usage=Usage(input_tokens=10, output_tokens=2))

    provider.replies.append(reply)
    events = send(client, chat["id"], "Hi")
    done = events[-1]
    assert done[0] == "done" and done[1]["usage"]["input"] == 10 and done[1]["usage"]["output"] == 2


def test_pr5_provider_error_is_an_error_event_and_message_stays_saved(client, chat, provider):
    provider.replies.append(failing_reply())
    events = send(client, chat["id"], "Are you there?")
    assert [k for k, _ in events] == ["saved", "diagnostics", "error"]
    error = events[-1][1]
    assert error["error"] == "provider_error" and error["kind"] == "rate_limit" and error["retryable"] is True
    assert "429" in error["detail"]
    listed = client.get(f"/api/conversations/{chat['id']}/messages").json()["messages"]
    assert [(m["role"], m["content"]) for m in listed] == [("user", "Are you there?")]


def test_pr5_retry_reanswers_the_saved_message_once(client, chat, provider):
    provider.replies.append(failing_reply())
    send(client, chat["id"], "Are you there?")
    response = client.post(f"/api/conversations/{chat['id']}/retry", json={})
    assert response.status_code == 200
    events = parse_sse(response.text)
    assert [k for k, _ in events][-1] == "done"
    listed = client.get(f"/api/conversations/{chat['id']}/messages").json()["messages"]
    assert [m["role"] for m in listed] == ["user", "assistant"]
    # Nothing left to retry: a plain 409 before any stream starts.
    assert_error(client.post(f"/api/conversations/{chat['id']}/retry"), 409, "conflict")


# -- bad input (U3) --------------------------------------------------------------------------------------
def test_u3_send_validation_errors_are_json_before_the_stream_and_change_nothing(client, chat, hearth):
    send(client, chat["id"])
    trashed = client.post("/api/conversations", json={"title": "old"}).json()
    client.post(f"/api/conversations/{trashed['id']}/trash")
    too_long = "x" * (hearth.settings.max_message_chars + 1)
    cases = [
        (chat["id"], {"text": ""}, 422, "invalid_input"),
        (chat["id"], {"text": "   "}, 422, "invalid_input"),
        (chat["id"], {"text": too_long}, 422, "invalid_input"),
        (chat["id"], {"text": "hi", "channel": "carrier-pigeon"}, 422, "invalid_input"),
        (chat["id"], {"text": 5}, 422, "invalid_input"),
        (chat["id"], {"text": "hi", "extra": 1}, 422, "invalid_input"),
        (chat["id"], {}, 422, "invalid_input"),
        (trashed["id"], {"text": "hi"}, 409, "conflict"),
        (999_999, {"text": "hi"}, 404, "not_found"),
    ]
    before = row_counts(hearth)
    for cid, body, status, code in cases:
        assert_error(client.post(f"/api/conversations/{cid}/messages", json=body), status, code)
        assert row_counts(hearth) == before, body


def test_u3_oversized_bodies_answer_413_and_change_nothing(settings, provider):
    small = Hearth(settings.with_(max_body_bytes=2_000), provider=provider)
    try:
        with TestClient(create_app(small.settings, small), base_url=BASE) as client:
            client.get("/api/conversations")  # creates the owner first
            before = row_counts(small)
            big = json.dumps({"text": "x" * 5_000})
            body = assert_error(client.post("/api/memories", content=big,
                                            headers={"Content-Type": "application/json"}), 413, "too_large")
            assert "2000 bytes" in body["detail"]

            def chunks():  # no Content-Length: the limit must hold on what actually arrives
                for _ in range(10):
                    yield b"x" * 500

            assert_error(client.post("/api/memories", content=chunks(),
                                     headers={"Content-Type": "application/json"}), 413, "too_large")
            assert row_counts(small) == before
            assert client.post("/api/memories", json={"text": "fits"}).status_code == 201
    finally:
        small.close()


def test_u3_malformed_json_utf8_unknown_ids_and_routes_are_clear_4xx(client, chat, hearth):
    before = row_counts(hearth)
    body = assert_error(client.post("/api/memories", content=b'{"text": "a",',
                                    headers={"Content-Type": "application/json"}), 400, "invalid_json")
    assert "not valid JSON" in body["detail"]
    body = assert_error(client.post("/api/memories/import", content=b'{"items": [{"text": "caf\xe9"}]}',
                                    headers={"Content-Type": "application/json"}), 400, "invalid_utf8")
    assert "UTF-8" in body["detail"]
    assert_error(client.post("/api/memories/import", json={"items": []}), 422, "invalid_input")
    assert_error(client.post("/api/memories/import", json={"items": [{"text": "ok"}, {"text": ""}]}), 422)
    assert_error(client.post("/api/memories", json={"text": "x", "importance": "5"}), 422)
    assert_error(client.post("/api/memories", json={"text": "x", "importance": 11}), 422)
    assert_error(client.post("/api/memories", content=b"text=hello",
                             headers={"Content-Type": "application/x-www-form-urlencoded"}), 422)
    assert_error(client.get("/api/conversations/424242"), 404, "not_found")
    assert_error(client.get("/api/memories/424242"), 404, "not_found")
    assert_error(client.patch("/api/personas/424242", json={"tone": "Warm"}), 404, "not_found")
    assert_error(client.get(f"/api/conversations/{2**70}"), 422)
    assert_error(client.get("/api/conversations/abc"), 404, "not_found")  # an id segment is digits
    assert_error(client.get("/api/no-such-thing"), 404, "not_found")
    assert_error(client.delete("/api/conversations"), 405, "method_not_allowed")
    assert_error(client.post(f"/api/conversations/{chat['id']}/move", json={"folder_id": 424242}), 404)
    assert row_counts(hearth) == before


def test_u3_hostile_title_is_stored_exactly_as_given(client, hearth):
    created = client.post("/api/conversations", json={"title": HOSTILE}).json()
    assert created["title"] == HOSTILE
    assert client.get(f"/api/conversations/{created['id']}").json()["title"] == HOSTILE
    page = client.get("/")
    assert page.status_code == 200
    # The page never embeds user text; the script fills it in with textContent.
    assert "onerror" not in page.text
    assert "default-src 'self'" in page.headers["content-security-policy"]


# -- other nouns ---------------------------------------------------------------------------------------
def test_c1_p5_persona_routes_and_settings_save_rebuilds_prompts(client, persona, chat):
    send(client, chat["id"])
    personas = client.get("/api/personas").json()
    assert [p["name"] for p in personas] == ["elion"]
    saved = client.patch(f"/api/personas/{persona.id}", json={"tone": "Playful"}).json()
    assert saved["persona"]["tone"] == "Playful" and saved["prompts_rebuilt"] == 1
    created = client.post("/api/personas", json={"name": "sage", "display_name": "Sage",
                                                  "characters": [{"name": "Ada", "description": "a friend"}]})
    assert created.status_code == 201 and created.json()["characters"] == [{"name": "Ada", "description": "a friend"}]
    assert_error(client.post("/api/personas", json={"name": "bad name!"}), 422, "invalid_input")
    assert_error(client.post("/api/personas", json={"name": "sage"}), 409, "conflict")


def test_m1_m2_m4_memory_routes_and_snapshots(client, chat, hearth):
    first = client.post("/api/memories", json={"text": "Likes tea", "category": "taste", "importance": 3})
    assert first.status_code == 201
    mid = first.json()["id"]
    imported = client.post("/api/memories/import", json={"items": [{"text": "Has a cat"}, {"text": "Lives by the sea"}]})
    assert [m["text"] for m in imported.json()["added"]] == ["Has a cat", "Lives by the sea"]
    # The chat was created before these memories: its snapshot is empty until refreshed (M2, M4).
    snap = client.get(f"/api/conversations/{chat['id']}/snapshot").json()
    assert snap["memories"] == [] and snap["info"]["provenance"] == "captured"
    info = client.post(f"/api/conversations/{chat['id']}/snapshot/refresh").json()
    assert info["provenance"] == "refreshed" and info["refreshed_at"]
    assert len(client.get(f"/api/conversations/{chat['id']}/snapshot").json()["memories"]) == 3
    edited = client.patch(f"/api/memories/{mid}", json={"text": "Loves green tea"}).json()
    assert edited["memory"]["text"] == "Loves green tea"
    order = client.post(f"/api/memories/{mid}/move", json={"position": 3}).json()
    assert [m["id"] for m in order][-1] == mid
    assert client.delete(f"/api/memories/{mid}").json() == {"prompts_rebuilt": 0}
    assert [m["text"] for m in client.get("/api/memories").json()] == ["Has a cat", "Lives by the sea"]
    assert_error(client.post(f"/api/memories/{imported.json()['added'][0]['id']}/move", json={"position": 9}), 422)


def test_s2_events_routes_list_the_callers_ledger_without_text(client, chat):
    send(client, chat["id"], "A secret sentence")
    events = client.get(f"/api/conversations/{chat['id']}/events").json()
    kinds = [e["kind"] for e in events]
    assert kinds[0] == "conversation.created" and "message" in kinds and "context.request_size" in kinds
    assert "A secret sentence" not in json.dumps(events)
    assert {e["id"] for e in events} <= {e["id"] for e in client.get("/api/events", params={"limit": 1000}).json()}


# -- OpenAPI (U4) ----------------------------------------------------------------------------------------
def test_u4_openapi_lists_every_route_with_method_and_request_model(client, app):
    spec = client.get("/openapi.json").json()
    assert spec == app.openapi()
    paths = spec["paths"]
    schemas = spec["components"]["schemas"]
    seen = set()
    walked = app_routes(app)
    assert len(walked) > 30
    for path, methods, route in walked:
        if isinstance(route, fastapi.routing.APIWebSocketRoute):
            # OpenAPI cannot describe WebSockets: the voice sockets are documented in docs/http-api.md.
            assert path in ("/api/voice", "/channels/voice/twilio/stream"), path
            continue
        if not isinstance(route, APIRoute):
            # Only the document itself and the static files are served outside the API routes and
            # left out of it; the MCP endpoint (served by the MCP SDK) is described like a route (U8).
            if path == "/mcp":
                for method in methods - {"HEAD"}:
                    operation = paths[path][method.lower()]
                    assert {"401", "403", "503"} <= set(operation["responses"]), method
                    assert operation["security"] == [{"HTTPBearer": []}]
                    seen.add((path, method.lower()))
                assert paths[path]["post"]["requestBody"]["content"]["application/json"]["schema"]["$ref"] \
                    == "#/components/schemas/JsonRpcMessage" and "JsonRpcError" in schemas
                continue
            assert path in ("/openapi.json", "/static", "/static/{path}", "/vendor", "/vendor/{path}"), path
            continue
        assert path in paths, path
        for method in methods:
            operation = paths[path].get(method.lower())
            assert operation is not None, (method, path)
            seen.add((path, method.lower()))
            if route.body_field is not None:
                content = operation["requestBody"]["content"]["application/json"]["schema"]
                refs = [content.get("$ref")] + [s.get("$ref") for s in content.get("anyOf", [])]
                names = [r.rsplit("/", 1)[-1] for r in refs if r]
                assert names and all(n in schemas for n in names), path
                for name in names:
                    # The OpenAI-compatible body accepts the parameters Hearth ignores (X1, docs/clients.md).
                    assert schemas[name].get("additionalProperties") is (path.startswith("/v1/") or False), name
            else:
                # Only raw image uploads (avatars, W3) document a body without a request model.
                body = operation.get("requestBody")
                assert body is None or set(body["content"]) <= {"image/png", "image/jpeg", "image/webp",
                                                                "image/gif"}, path
    documented = {(p, m) for p, ops in paths.items() for m in ops}
    assert documented == seen
    send_op = paths["/api/conversations/{conversation_id}/messages"]["post"]
    assert "text/event-stream" in send_op["responses"]["200"]["content"]
    assert {"HTTPBearer", "APIKeyCookie"} <= set(spec["components"]["securitySchemes"])


# -- user scoping (G2) -------------------------------------------------------------------------------------
def test_g2_second_user_cannot_read_or_change_the_owners_data(client, chat, hearth, persona):
    send(client, chat["id"], "Owner's private words")
    folder = client.post("/api/folders", json={"name": "Owner folder"}).json()
    memory = client.post("/api/memories", json={"text": "Owner memory"}).json()
    owner_token_id = client.post("/api/auth/tokens", json={"name": "owner laptop"}).json()["id"]
    second = hearth.users.create("second")
    token = hearth.users.create_token(second.id, "tests")
    other = {"Authorization": f"Bearer {token}"}
    own_chat = client.post("/api/conversations", json={"title": "mine"}, headers=other).json()
    cid, pid, fid, mid = chat["id"], persona.id, folder["id"], memory["id"]
    foreign = [
        ("GET", f"/api/conversations/{cid}", None),
        ("GET", f"/api/conversations/{cid}/messages", None),
        ("POST", f"/api/conversations/{cid}/messages", {"text": "let me in"}),
        ("POST", f"/api/conversations/{cid}/retry", {}),
        ("GET", f"/api/conversations/{cid}/request-size", None),
        ("GET", f"/api/conversations/{cid}/estimate", None),
        ("GET", f"/api/conversations/{cid}/events", None),
        ("GET", f"/api/conversations/{cid}/snapshot", None),
        ("POST", f"/api/conversations/{cid}/snapshot/refresh", None),
        ("POST", f"/api/conversations/{cid}/rename", {"title": "mine now"}),
        ("POST", f"/api/conversations/{cid}/move", {"folder_id": None}),
        ("POST", f"/api/conversations/{cid}/trash", None),
        ("POST", f"/api/conversations/{cid}/restore", None),
        ("POST", f"/api/conversations/{cid}/end", None),
        ("POST", "/api/conversations", {"persona_id": pid}),
        ("POST", "/api/conversations", {"folder_id": fid}),
        ("POST", f"/api/conversations/{own_chat['id']}/move", {"folder_id": fid}),
        ("GET", f"/api/personas/{pid}", None),
        ("PATCH", f"/api/personas/{pid}", {"tone": "Cold"}),
        ("GET", f"/api/folders/{fid}", None),
        ("PATCH", f"/api/folders/{fid}", {"hidden": True}),
        ("GET", f"/api/memories/{mid}", None),
        ("PATCH", f"/api/memories/{mid}", {"text": "changed"}),
        ("DELETE", f"/api/memories/{mid}", None),
        ("POST", f"/api/memories/{mid}/move", {"position": 1}),
        ("DELETE", f"/api/auth/tokens/{owner_token_id}", None),
    ]
    before = row_counts(hearth)
    for method, path, body in foreign:
        response = client.request(method, path, json=body, headers=other)
        assert_error(response, 404, "not_found")
        # Exactly like an id that does not exist at all.
        assert response.json()["detail"] in (
            f"no conversation {cid}", f"no persona {pid}", f"no folder {fid}", f"no memory {mid}",
            f"no active token {owner_token_id}")
        assert row_counts(hearth) == before, (method, path)

    assert [c["id"] for c in client.get("/api/conversations", headers=other).json()] == [own_chat["id"]]
    assert pid not in [p["id"] for p in client.get("/api/personas", headers=other).json()]
    assert client.get("/api/folders", headers=other).json() == []
    assert client.get("/api/memories", headers=other).json() == []
    their_events = client.get("/api/events", params={"limit": 1000}, headers=other).json()
    assert their_events and all(e["payload"].get("persona_id") != pid for e in their_events)
    owner_event_ids = {e["id"] for e in client.get("/api/events", params={"limit": 1000}).json()}
    assert owner_event_ids.isdisjoint(e["id"] for e in their_events)
    assert client.get("/api/auth/me", headers=other).json()["user"]["name"] == "second"
    # The owner's thread is untouched.
    owner_view = client.get(f"/api/conversations/{cid}").json()
    assert owner_view["title"] == "Morning" and owner_view["state"] == "open"


# -- a real server ---------------------------------------------------------------------------------------
def test_u1_real_uvicorn_streams_a_reply_over_tcp(app, hearth, persona):
    with serve_in_thread(app) as base:
        with httpx.Client(base_url=base, timeout=10) as http:
            chat = http.post("/api/conversations", json={"persona_id": persona.id}).json()
            with http.stream("POST", f"/api/conversations/{chat['id']}/messages", json={"text": "Hello"}) as response:
                assert response.status_code == 200
                assert response.headers["content-type"].startswith("text/event-stream")
                text = "".join(response.iter_text())
            events = parse_sse(text)
            assert [k for k, _ in events][:2] == ["saved", "diagnostics"] and events[-1][0] == "done"
            assert "".join(d["text"] for k, d in events if k == "delta") == "Reply 1"
            assert http.get("/").status_code == 200
            assert http.get("/static/app.js").headers["content-type"].startswith(("text/javascript", "application/javascript"))


def test_w2_a3_stop_closes_the_reply_at_once_off_the_event_loop_and_keeps_what_it_searched(app, hearth, persona,
                                                                                         provider):
    """The person pressing Stop closes the connection mid-reply. The reply's clean-up (the provider
    stream closed, what the assembly searched written, the reply marked ended) runs right away on a
    worker thread: not later, wherever the garbage collector happens to run, and not on the event
    loop, where a database write would hold up every other request."""
    closed: list[str] = []

    def endless(request):
        try:
            for i in range(200):
                time.sleep(0.02)
                yield StreamEvent("text", text=f"Piece {i}. ")
        finally:
            try:
                asyncio.get_running_loop()
                closed.append("event loop")
            except RuntimeError:
                closed.append("worker thread")

    provider.replies.append(endless)
    with serve_in_thread(app) as base:
        with httpx.Client(base_url=base, timeout=10) as http:
            chat = http.post("/api/conversations", json={"persona_id": persona.id}).json()
            with http.stream("POST", f"/api/conversations/{chat['id']}/messages", json={"text": "Go on"}) as response:
                for line in response.iter_lines():
                    if line == "event: delta":
                        break

            def kinds() -> list[str]:
                return [e["kind"] for e in http.get(f"/api/conversations/{chat['id']}/events").json()]

            deadline = time.monotonic() + 10
            while not (closed and "context.request_size" in kinds()) and time.monotonic() < deadline:
                time.sleep(0.02)
            assert closed == ["worker thread"] and "context.request_size" in kinds()
            # Ended: "Compact now" is no longer refused as a reply in flight.
            assert http.post(f"/api/conversations/{chat['id']}/compact").status_code != 409


# -- visibility over HTTP refreshes stored prompts (V1, V3) ----------------------------------------
def test_v1_v3_http_trash_move_hide_and_release_refresh_the_prompts_that_quote_a_thread(client, me, persona):
    source = me.conversations.create(persona.id, "Source")
    me.send(source.id, "the lighthouse keeper's name was Tamsin")
    branched = me.branch(source.id, "http-visibility-key")
    destination = branched.conversation.id if hasattr(branched, "conversation") else branched.id
    me.send(destination, "hello")
    assert "Tamsin" in me.stored_prompt(destination)

    assert client.post(f"/api/conversations/{source.id}/trash").status_code == 200
    assert "Tamsin" not in me.stored_prompt(destination)
    restored = client.post(f"/api/conversations/{source.id}/restore", json={}).json()
    assert restored["continuity_shielded"] is True and "Tamsin" not in me.stored_prompt(destination)

    released = client.post(f"/api/conversations/{source.id}/shield/release")
    assert released.status_code == 200 and "Tamsin" in me.stored_prompt(destination)

    folder = client.post("/api/folders", json={"name": "Vault"}).json()
    client.post(f"/api/conversations/{source.id}/move", json={"folder_id": folder["id"]})
    assert client.patch(f"/api/folders/{folder['id']}", json={"hidden": True}).status_code == 200
    assert "Tamsin" not in me.stored_prompt(destination)
