"""The HTTP edge answers as its OpenAPI description says (U4, U3): statuses, error bodies, headers.

The property-based fuzz over every operation is in test_api_fuzz.py; these are the named cases.
"""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient

from hearth import ConfigError, Settings
from hearth.server import create_app
from hearth.server.auth import is_public

BASE = "http://127.0.0.1:8765"


@pytest.fixture
def client(hearth):
    with TestClient(create_app(hearth.settings, hearth), base_url=BASE, raise_server_exceptions=False) as c:
        yield c


def error_of(response, status: int, code: str) -> dict:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["error"] == code and body["detail"], body
    return body


def test_u4_a_wrong_method_answers_405_and_a_non_numeric_id_404(client, persona):
    error_of(client.get("/api/conversations/new-chat"), 405, "method_not_allowed")
    assert client.get("/api/conversations/new-chat").headers["allow"] == "POST"
    error_of(client.delete("/api/memories/import"), 405, "method_not_allowed")
    error_of(client.get("/api/conversations/abc"), 404, "not_found")
    error_of(client.get("/api/conversations/-1"), 404, "not_found")
    error_of(client.get(f"/api/conversations/{2**63}"), 422, "invalid_input")  # digits, out of range
    created = client.post("/api/conversations/new-chat", json={"persona_id": persona.id})
    assert created.status_code == 201
    assert client.get(f"/api/conversations/{created.json()['conversation']['id']}").status_code == 200


def test_u4_the_description_documents_the_error_body_and_every_status_the_guards_answer(client):
    spec = client.get("/openapi.json").json()
    text = json.dumps(spec)
    assert "HTTPValidationError" not in text and "ValidationError" not in spec["components"]["schemas"]
    assert set(spec["components"]["schemas"]["ErrorBody"]["required"]) == {"error", "detail"}
    operations = [(path, method, op) for path, ops in spec["paths"].items() for method, op in ops.items()]
    assert len(operations) > 100
    for path, method, op in operations:
        responses = op["responses"]
        label = f"{method.upper()} {path}"
        error_ref = "OpenAIError" if path.startswith("/v1/") else "ErrorBody"
        for status, response in responses.items():
            if status.startswith(("4", "5")):
                schema = response["content"]["application/json"]["schema"]
                refs = [schema["$ref"]] if "$ref" in schema else [s["$ref"] for s in schema["anyOf"]]
                # The MCP endpoint's own refusals (after the guards) are JSON-RPC errors (U8).
                assert all(r.endswith(error_ref) or (path == "/mcp" and r.endswith("JsonRpcMessage"))
                           for r in refs), label
                assert any(r.endswith(error_ref) for r in refs) or path == "/mcp", label
        assert "503" in responses, label
        if path.startswith("/v1/"):
            assert "422" not in responses and "400" in responses, label  # OpenAI's clients expect 400
        else:
            assert "422" in responses, label
        if "{" in path:
            assert "404" in responses, label
        if method in ("post", "put", "patch", "delete"):
            assert {"400", "409", "413"} <= set(responses), label
        if not is_public(path):  # the guard's own rule: webhooks, login, the installable app's files
            assert {"401", "403"} <= set(responses), label
    login = spec["paths"]["/api/auth/login"]["post"]["responses"]
    assert {"401", "429"} <= set(login)


def test_u4_every_json_answer_is_no_store_and_nosniff_errors_included(hearth, client, persona):
    def headers_ok(response) -> None:
        assert response.headers["x-content-type-options"] == "nosniff", response.url
        if response.headers.get("content-type", "").startswith("application/json"):
            assert response.headers["cache-control"] == "no-store", (response.url, response.status_code)

    answers = [
        client.get("/api/personas"),  # 200
        client.get("/openapi.json"),
        client.get("/api/no-such-route"),  # 404 from the router
        client.get("/api/personas/999999"),  # 404 from the library
        client.get("/api/conversations/new-chat"),  # 405
        client.post("/api/memories", json={"text": 5}),  # 422
        client.post("/api/memories", content=b"{", headers={"Content-Type": "application/json"}),  # 400
        client.post("/api/memories", content=b"x" * (hearth.settings.max_body_bytes + 1)),  # 413 (body guard)
        client.get("/api/search", params={"q": "a\x00b"}),  # 422 (body guard, query)
        client.get("/v1/models"),  # 401 in OpenAI's shape
    ]
    assert [a.status_code for a in answers] == [200, 200, 404, 404, 405, 422, 400, 413, 422, 401]
    for answer in answers:
        headers_ok(answer)
    hearth.users.set_password(hearth.users.owner().id, "correct horse battery staple")
    with TestClient(create_app(hearth.settings, hearth), base_url=BASE) as fresh:
        refused = fresh.get("/api/personas")  # 401 from the auth guard
        assert refused.status_code == 401
        headers_ok(refused)
        page = fresh.get("/login")
        assert page.headers["x-content-type-options"] == "nosniff" and page.headers["cache-control"] == "no-store"


def test_u3_an_archive_upload_is_not_capped_by_the_body_limit_but_by_its_own(settings, tmp_path):
    from hearth import Hearth

    small = settings.with_(max_body_bytes=10_000, max_import_bytes=400_000)
    archive = "".join(f"AUMA said:\nThe kite number {i} got stuck in the oak by the river.\n"
                      for i in range(3_000)).encode()
    assert 10_000 < len(archive) < 400_000
    with Hearth(small) as hearth, TestClient(create_app(small, hearth), base_url=BASE) as client:
        imported = client.post("/api/archive/import", params={"format": "labelled", "name": "notes.txt"},
                               content=archive)
        assert imported.status_code == 201, imported.text
        assert imported.json()["counts"]["documents"] == 1
        # Other routes keep the body limit.
        error_of(client.post("/api/memories", json={"text": "x" * 20_000}), 413, "too_large")
    tiny = settings.with_(home=tmp_path / "tiny", max_body_bytes=10_000, max_import_bytes=50_000)
    with Hearth(tiny) as hearth, TestClient(create_app(tiny, hearth), base_url=BASE) as client:
        before = client.get("/api/archive/documents").json()
        # Streamed without a Content-Length: the upload is counted as it arrives.
        body = error_of(client.post("/api/archive/import", params={"format": "labelled"},
                                    content=iter([archive[i:i + 8_192] for i in range(0, len(archive), 8_192)])),
                        413, "too_large")
        assert "50000 bytes" in body["detail"]
        error_of(client.post("/api/archive/import", params={"format": "labelled"}, content=archive), 413, "too_large")
        assert client.get("/api/archive/documents").json() == before


def test_u3_trusted_proxies_must_be_addresses_or_networks():
    assert Settings.resolve({"trusted_proxies": "127.0.0.1, 10.0.0.0/8"}, environ={}).trusted_proxies
    assert Settings.resolve({}, environ={"HEARTH_TRUSTED_PROXIES": "*"}).trusted_proxies == "*"
    with pytest.raises(ConfigError, match="trusted_proxies"):
        Settings.resolve({"trusted_proxies": "proxy.example.org"}, environ={})
