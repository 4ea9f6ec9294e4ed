"""Owner authentication (U2): login, cookies, CSRF, API tokens, rate limits, open mode, binding."""

from __future__ import annotations

import re

import pytest
from fastapi import Depends
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient

from hearth import ConfigError
from hearth.server import check_bind, create_app, require_owner_with_password
from hearth.server.auth import COOKIE, LoginLimiter, is_loopback
from tests.test_server import BASE, app_routes, assert_error, row_counts

PASSWORD = "correct horse battery"


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def owner(hearth):
    return hearth.users.owner()


@pytest.fixture
def locked(hearth, owner):
    """A deployment whose owner has a password."""
    hearth.users.set_password(owner.id, PASSWORD)
    return hearth


@pytest.fixture
def app(hearth):
    return create_app(hearth.settings, hearth)


@pytest.fixture
def client(app):
    with TestClient(app, base_url=BASE) as c:
        yield c


def login(client, password: str = PASSWORD, name: str | None = None):
    body = {"password": password} if name is None else {"password": password, "name": name}
    return client.post("/api/auth/login", json=body)


# The installable app's manifest, service worker and icons (W5): public, nothing personal in them.
APP_FILES = ("/manifest.webmanifest", "/sw.js", "/icons/{name}")


def fill(path: str) -> str:
    return re.sub(r"\{[^}]+\}", "1", path)


# -- everything but login needs a session -----------------------------------------------------------
def test_u2_every_route_but_login_needs_authentication(locked, client, app):
    checked = 0
    for path, methods, route in app_routes(app):
        if not isinstance(route, APIRoute) or path in ("/api/auth/login", "/login") or path in APP_FILES:
            continue
        for method in methods:
            response = client.request(method, fill(path), json={} if method != "GET" else None,
                                      follow_redirects=False)
            if path.startswith("/api/"):
                assert_error(response, 401, "unauthorized")
            elif path.startswith("/v1/"):  # OpenAI-compatible routes answer in OpenAI's error shape (X1)
                assert response.status_code == 401 and response.json()["error"]["code"] == "invalid_api_key", path
            elif path.startswith("/channels/"):  # webhooks: authenticated by the provider's signature
                assert_error(response, 403, "forbidden")
            else:
                assert response.status_code == 303 and response.headers["location"] == "/login", path
            checked += 1
    assert checked > 30
    assert_error(client.get("/openapi.json"), 401)
    # Public: the login page, the login endpoint and the static files.
    assert client.get("/login").status_code == 200
    assert client.get("/static/app.css").status_code == 200
    assert client.get("/static/login.js").status_code == 200
    # And the installable app's files: browsers fetch the manifest and its icons without the cookie.
    assert client.get("/manifest.webmanifest").json()["start_url"] == "/"
    assert client.get("/sw.js").headers["content-type"].startswith("text/javascript")
    assert client.get("/icons/hearth-192.png").headers["content-type"] == "image/png"
    assert_error(client.get("/icons/other.png"), 404)


def test_u2_login_sets_http_only_strict_cookie_and_returns_csrf(locked, client, owner):
    response = login(client)
    assert response.status_code == 200
    data = response.json()
    assert data["user"] == {"id": owner.id, "name": owner.name, "is_owner": True} and data["csrf_token"]
    cookie = response.headers["set-cookie"]
    assert cookie.startswith(f"{COOKIE}=")
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie.replace("Strict", "strict")
    assert "Secure" not in cookie  # plain http on localhost
    me = client.get("/api/auth/me").json()
    assert me == {"user": data["user"], "method": "session", "password_configured": True, "display_name": None}
    page = client.get("/")
    assert page.status_code == 200 and data["csrf_token"] in page.text


def test_u2_cookie_is_secure_when_the_request_is_https(locked, app):
    with TestClient(app, base_url="https://127.0.0.1") as client:
        cookie = login(client).headers["set-cookie"]
        assert "Secure" in cookie and "HttpOnly" in cookie
        assert client.get("/api/auth/me").status_code == 200


def test_u2_login_by_user_name_and_wrong_password(locked, client, hearth):
    assert_error(login(client, "wrong password!"), 401, "unauthorized")
    assert_error(login(client, PASSWORD, name="nobody"), 401, "unauthorized")
    assert login(client, PASSWORD, name="owner").status_code == 200
    assert_error(client.post("/api/auth/login", json={"password": PASSWORD, "extra": 1}), 422)


def test_u2_state_changes_with_a_cookie_need_the_csrf_header(locked, client, hearth):
    csrf = login(client).json()["csrf_token"]
    client.get("/api/conversations")  # reading needs no token
    before = row_counts(hearth)
    assert_error(client.post("/api/conversations", json={"title": "x"}), 403, "forbidden")
    assert_error(client.post("/api/conversations", json={"title": "x"}, headers={"X-CSRF-Token": "nope"}), 403)
    assert_error(client.post("/api/memories", json={"text": "x"}, headers={"X-CSRF-Token": ""}), 403)
    assert row_counts(hearth) == before
    created = client.post("/api/conversations", json={"title": "x"}, headers={"X-CSRF-Token": csrf})
    assert created.status_code == 201


def test_u2_api_tokens_need_no_csrf_and_can_be_revoked(locked, client, hearth, owner):
    csrf = login(client).json()["csrf_token"]
    made = client.post("/api/auth/tokens", json={"name": "script"}, headers={"X-CSRF-Token": csrf}).json()
    assert made["token"].startswith("hth_") and made["name"] == "script"
    listed = client.get("/api/auth/tokens").json()
    assert [t["name"] for t in listed] == ["script"] and "token" not in listed[0]
    with TestClient(client.app, base_url=BASE) as script:
        auth = {"Authorization": f"Bearer {made['token']}"}
        assert script.post("/api/memories", json={"text": "via token"}, headers=auth).status_code == 201
        assert script.get("/api/auth/me", headers=auth).json()["method"] == "token"
        assert_error(script.get("/api/memories", headers={"Authorization": "Bearer hth_forged"}), 401)
        assert_error(script.get("/api/memories", headers={"Authorization": "Basic abc"}), 401)
        revoked = client.delete(f"/api/auth/tokens/{made['id']}", headers={"X-CSRF-Token": csrf})
        assert revoked.status_code == 204
        assert_error(script.get("/api/memories", headers=auth), 401)


def test_u2_failed_logins_are_rate_limited_per_user_name(locked, client, app):
    clock = FakeClock()
    app.state.login_limiter = LoginLimiter(clock=clock)
    for _ in range(5):
        assert_error(login(client, "wrong password!"), 401)
    limited = login(client)  # even the right password waits
    assert_error(limited, 429, "rate_limited")
    assert 0 < int(limited.headers["Retry-After"]) <= 300
    # Another address guessing the same name is limited too.
    with TestClient(app, base_url=BASE, client=("10.0.0.9", 4000)) as elsewhere:
        assert_error(login(elsewhere, PASSWORD), 429)
    clock.now += 301
    assert login(client).status_code == 200


def test_u2_failed_logins_are_rate_limited_per_client_address(locked, client, app):
    app.state.login_limiter = LoginLimiter(clock=FakeClock())
    for i in range(5):
        assert_error(login(client, "guess", name=f"user{i}"), 401)
    assert_error(login(client), 429)
    with TestClient(app, base_url=BASE, client=("10.0.0.9", 4000)) as elsewhere:
        assert login(elsewhere).status_code == 200


def test_u2_logout_ends_the_session(locked, client):
    csrf = login(client).json()["csrf_token"]
    token = client.cookies[COOKIE]
    assert_error(client.post("/api/auth/logout"), 403)  # CSRF applies to logout too
    response = client.post("/api/auth/logout", headers={"X-CSRF-Token": csrf})
    assert response.status_code == 204
    assert COOKIE in response.headers["set-cookie"] and "Max-Age=0" in response.headers["set-cookie"]
    assert_error(client.get("/api/auth/me"), 401)
    with TestClient(client.app, base_url=BASE, cookies={COOKIE: token}) as replay:
        assert_error(replay.get("/api/auth/me"), 401)


def test_u2_pages_redirect_to_login_and_back(locked, client, hearth):
    response = client.get("/", follow_redirects=False)
    assert response.status_code == 303 and response.headers["location"] == "/login"
    page = client.get("/login")
    assert page.status_code == 200 and 'type="password"' in page.text


def test_u2_open_mode_works_without_login_on_localhost(client, hearth):
    assert client.get("/api/auth/me").json()["method"] == "open"
    assert client.post("/api/conversations", json={}).status_code == 201
    assert client.get("/login", follow_redirects=False).status_code == 303
    assert_error(login(client), 409, "conflict")
    # A page on another site cannot make the browser change anything.
    before = row_counts(hearth)
    assert_error(client.post("/api/conversations", json={}, headers={"Origin": "http://evil.example"}), 403)
    assert row_counts(hearth) == before
    assert client.post("/api/conversations", json={}, headers={"Origin": BASE}).status_code == 201


def test_u2_open_mode_refuses_foreign_host_names(hearth, app):
    # DNS rebinding: a page at evil.example resolving to 127.0.0.1 sends Host: evil.example.
    with TestClient(app, base_url="http://evil.example:8765") as client:
        assert_error(client.get("/api/conversations"), 403, "forbidden")
    for host in ("http://localhost:8765", "http://[::1]:8765"):
        with TestClient(app, base_url=host) as client:
            assert client.get("/api/conversations").status_code == 200
    insecure = hearth.settings.with_(insecure_no_auth=True)
    hearth.settings = insecure
    with TestClient(create_app(insecure, hearth), base_url="http://192.168.1.20:8765") as client:
        assert client.get("/api/conversations").status_code == 200


def test_u2_the_pages_own_files_are_public_and_serving_them_reads_no_account(hearth, app, locked, monkeypatch):
    # The page's scripts, styles and icons are the same for everyone: a page load's thirty-odd file
    # requests decide no principal (no database read, no worker thread), in every mode and for any
    # host name; everything else is still refused.
    def refuse(*_args):
        raise AssertionError("a page file request read an account")

    for name in ("session", "password_configured", "owner", "token_user"):
        monkeypatch.setattr(hearth.users, name, refuse)
    with TestClient(app, base_url="http://evil.example:8765") as client:
        client.cookies.set(COOKIE, "a-session-token")
        assert client.get("/static/app.js").status_code == 200
        assert client.head("/static/app.css").status_code == 200
        assert client.get("/icons/hearth-192.png").headers["content-type"] == "image/png"
        assert client.get("/static/nothing-here.js").status_code == 404
        with pytest.raises(AssertionError, match="read an account"):
            client.get("/api/conversations")
        with pytest.raises(AssertionError, match="read an account"):
            client.post("/static/app.js")  # not a read: decided as any other request
    monkeypatch.undo()
    with TestClient(app, base_url="http://evil.example:8765") as client:
        assert client.get("/", follow_redirects=False).status_code == 303  # the page itself asks for the login


def test_u2_password_change_ends_existing_sessions(locked, client, owner, hearth):
    login(client)
    assert client.get("/api/auth/me").status_code == 200
    hearth.users.set_password(owner.id, "another long password")
    assert_error(client.get("/api/auth/me"), 401)


# -- binding -----------------------------------------------------------------------------------------
def test_u2_check_bind_refuses_open_non_loopback(hearth, owner):
    for host in ("127.0.0.1", "::1", "localhost", "127.0.0.2"):
        check_bind(hearth.settings.with_(host=host), hearth)
    for host in ("0.0.0.0", "192.168.1.20", "::", "example.org"):
        with pytest.raises(ConfigError, match="password"):
            check_bind(hearth.settings.with_(host=host), hearth)
    check_bind(hearth.settings.with_(host="0.0.0.0", insecure_no_auth=True), hearth)
    hearth.users.set_password(owner.id, PASSWORD)
    check_bind(hearth.settings.with_(host="0.0.0.0"), hearth)
    assert is_loopback("[::1]") and not is_loopback("")


# -- maintenance gate ---------------------------------------------------------------------------------
def test_u2_maintenance_needs_an_owner_password_and_the_owner(hearth, owner, app):
    @app.post("/api/maintenance/probe")
    def probe(scope=Depends(require_owner_with_password)) -> dict:
        return {"user_id": scope.user_id}

    second = hearth.users.create("second")
    token = hearth.users.create_token(second.id, "t")
    with TestClient(app, base_url=BASE) as client:
        assert_error(client.post("/api/maintenance/probe"), 403, "forbidden")  # no password yet
        hearth.users.set_password(owner.id, PASSWORD)
        csrf = login(client).json()["csrf_token"]
        assert client.post("/api/maintenance/probe", headers={"X-CSRF-Token": csrf}).json() == {"user_id": owner.id}
        assert_error(client.post("/api/maintenance/probe", headers={"Authorization": f"Bearer {token}"}), 403)
