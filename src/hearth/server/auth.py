"""Owner authentication for the HTTP server (U2) and the user scope of every request (G2).

Who is calling is decided once per request by ``AuthGuard``, before any route runs:

* ``Authorization: Bearer hth_...`` -> that token's user (no CSRF needed: browsers never add it);
* a session cookie -> its user; state-changing methods also need ``X-CSRF-Token``;
* neither, and an owner password is set -> 401 (pages redirect to ``/login``);
* neither, and no password -> the owner, but only for requests addressed to a loopback host name
  (so a web page cannot reach the open server through DNS rebinding) unless
  ``insecure_no_auth`` was chosen.

State-changing requests carrying an ``Origin`` of another site are refused in every mode.

The page's own files (``/static/``, ``/icons/``) are public in every mode: the same for everyone,
holding nothing personal (a foreign host name gets them too; it gets nothing else). Reading them
decides no principal, so the thirty-odd requests of a page load read nothing from the database.
"""

from __future__ import annotations

import ipaddress
import math
import secrets
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from fastapi import APIRouter, Depends, Request, Response
from fastapi.security import APIKeyCookie, HTTPBearer
from pydantic import BaseModel, Field
from starlette.concurrency import run_in_threadpool
from starlette.requests import HTTPConnection
from starlette.responses import RedirectResponse
from starlette.types import ASGIApp, Receive, Send
from starlette.types import Scope as AsgiScope

from hearth.records.context import Context
from hearth.records.users import MAX_DISPLAY_NAME, SESSION_DAYS
from hearth.scope import Hearth, Scope
from hearth.store import state

from ..errors import AuthError, ConfigError, Conflict, Forbidden, RateLimited
from ..settings import Settings
from .errors import hearth_error_response
from .models import IdPath, RequestModel, responses

if TYPE_CHECKING:
    from ..store import Store

COOKIE = "hearth_session"
CSRF_HEADER = "X-CSRF-Token"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
# The app's manifest, icons and service worker are public: browsers fetch the manifest and its icons
# without the session cookie, and none of them holds anything personal.
PUBLIC_PATHS = frozenset({"/login", "/api/auth/login", "/manifest.webmanifest", "/sw.js"})
CLIENT_PREFIXES = ("/v1/", "/mcp/")
LOGIN_LIMIT = 5
LOGIN_WINDOW_SECONDS = 300.0


@dataclass(frozen=True)
class Principal:
    user_id: int
    method: str  # session | token | open
    csrf_token: str = ""
    session_token: str = ""


def is_public(path: str) -> bool:
    # Channel webhooks authenticate by their provider's signature, not by a session (E10).
    return path in PUBLIC_PATHS or path.startswith(("/static/", "/channels/", "/icons/"))


def is_page_file(path: str) -> bool:
    """The page's scripts, styles and icons: served to anyone, without deciding who asks."""
    return path.startswith(("/static/", "/icons/"))


def is_client_path(path: str) -> bool:
    """The OpenAI-compatible routes and the MCP endpoint (X1, X2): API tokens only, in every mode."""
    return path.startswith(CLIENT_PREFIXES) or path in ("/v1", "/mcp")


def is_loopback(host: str) -> bool:
    """True for localhost names and loopback addresses (host without port)."""
    host = host.strip().strip("[]").lower()
    if host in ("localhost", "localhost.", "ip6-localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _host_name(host_header: str) -> str:
    """The host part of a Host header: ``[::1]:8765`` -> ``::1``, ``a.b:80`` -> ``a.b``."""
    if host_header.startswith("["):
        return host_header[1:].split("]", 1)[0]
    if host_header.count(":") == 1:
        return host_header.split(":", 1)[0]
    return host_header


def check_bind(settings: Settings, hearth: Hearth) -> None:
    """Refuse to serve an open (password-less) app on a non-loopback address (U2).

    Raises ``ConfigError``; ``hearth serve`` calls this before binding.
    """
    if is_loopback(settings.host) or settings.insecure_no_auth:
        return
    if hearth.users.password_configured():
        return
    raise ConfigError(
        f"refusing to listen on {settings.host} without an owner password: set a password first,"
        " or bind 127.0.0.1, or explicitly choose insecure_no_auth"
    )


class LoginLimiter:
    """Failed logins per key (client address, user name) in a sliding window."""

    def __init__(self, limit: int = LOGIN_LIMIT, window: float = LOGIN_WINDOW_SECONDS,
                 clock: Callable[[], float] = time.monotonic):
        self.limit = limit
        self.window = window
        self.clock = clock
        self._failures: dict[str, list[float]] = {}
        self._lock = threading.Lock()

    def retry_after(self, keys: tuple[str, ...]) -> int:
        """Seconds until another attempt is allowed; 0 when allowed now."""
        now = self.clock()
        wait = 0.0
        with self._lock:
            for key in keys:
                recent = [t for t in self._failures.get(key, ()) if now - t < self.window]
                if recent:
                    self._failures[key] = recent
                else:
                    self._failures.pop(key, None)
                if len(recent) >= self.limit:
                    wait = max(wait, recent[-self.limit] + self.window - now)
        return math.ceil(wait) if wait > 0 else 0

    def fail(self, keys: tuple[str, ...]) -> None:
        now = self.clock()
        with self._lock:
            for key in keys:
                self._failures.setdefault(key, []).append(now)

    def clear(self, keys: tuple[str, ...]) -> None:
        with self._lock:
            for key in keys:
                self._failures.pop(key, None)


class StoredLoginLimiter(LoginLimiter):
    """The same limit kept in the database (``app_state``), so every server process sharing a
    PostgreSQL database counts the same failures (S10). Wall-clock time: processes share it."""

    PREFIX = "login_failures:"

    def __init__(self, store: "Store", limit: int = LOGIN_LIMIT, window: float = LOGIN_WINDOW_SECONDS,
                 clock: Callable[[], float] = time.time):
        super().__init__(limit, window, clock)
        self.store = store

    def _recent(self, conn, key: str, now: float) -> list[float]:
        return [t for t in state.get(conn, self.PREFIX + key, []) if now - t < self.window]

    def retry_after(self, keys: tuple[str, ...]) -> int:
        now = self.clock()
        wait = 0.0
        with self.store.read() as conn:
            for key in keys:
                recent = self._recent(conn, key, now)
                if len(recent) >= self.limit:
                    wait = max(wait, recent[-self.limit] + self.window - now)
        return math.ceil(wait) if wait > 0 else 0

    def fail(self, keys: tuple[str, ...]) -> None:
        now = self.clock()
        with self.store.write() as conn:
            for key in keys:
                state.put(conn, self.PREFIX + key, [*self._recent(conn, key, now), now][-self.limit:])

    def clear(self, keys: tuple[str, ...]) -> None:
        with self.store.write() as conn:
            for key in keys:
                state.delete(conn, self.PREFIX + key)


class AuthGuard:
    """ASGI middleware: decides the principal of each HTTP request, or answers 401/403."""

    def __init__(self, app: ASGIApp, hearth: Hearth):
        self.app = app
        self.hearth = hearth

    async def __call__(self, scope: AsgiScope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        if scope["type"] == "websocket":
            # A WebSocket is authenticated like a request; a refusal closes it before the handshake
            # completes (the client sees HTTP 403).
            connection = HTTPConnection(scope)
            try:
                principal = await run_in_threadpool(self.authenticate, connection)
            except AuthError:
                await send({"type": "websocket.close", "code": 1008})
                return
            scope.setdefault("state", {})["principal"] = principal
            await self.app(scope, receive, send)
            return
        if scope["method"] in SAFE_METHODS and is_page_file(scope["path"]):
            await self.app(scope, receive, send)  # no principal: no database read, no worker thread
            return
        request = Request(scope)
        try:
            principal = await run_in_threadpool(self.authenticate, request)
        except AuthError as exc:
            wants_page = request.method == "GET" and not request.url.path.startswith("/api/") \
                and request.url.path != "/openapi.json" and not is_client_path(request.url.path)
            response: Response
            if wants_page and not isinstance(exc, Forbidden):
                response = RedirectResponse("/login", status_code=303)
            else:
                response = hearth_error_response(exc, request.url.path)
            await response(scope, receive, send)
            return
        scope.setdefault("state", {})["principal"] = principal
        await self.app(scope, receive, send)

    def authenticate(self, request: HTTPConnection) -> Principal | None:
        users = self.hearth.users
        path = request.url.path
        websocket = request.scope["type"] == "websocket"
        # A browser cannot put a CSRF header on a WebSocket, but always names its Origin: that check
        # is what keeps another site's page from opening one with the person's cookie.
        unsafe = websocket or request.scope["method"] not in SAFE_METHODS
        if unsafe:
            _check_origin(request)
        header = request.headers.get("authorization")
        if header:
            scheme, _, token = header.partition(" ")
            token = token.strip()
            if scheme.lower() != "bearer" or not token.startswith("hth_"):
                raise AuthError("the Authorization header must be 'Bearer hth_...'")
            user_id = users.token_user(token)
            if user_id is None:
                raise AuthError("invalid or revoked API token")
            return Principal(user_id, "token")
        if is_client_path(path):
            raise AuthError("an API token is required: send 'Authorization: Bearer hth_...'")
        cookie = request.cookies.get(COOKIE)
        session = users.session(cookie) if cookie else None
        if session is not None:
            if unsafe and not websocket and not is_public(path):
                sent = request.headers.get(CSRF_HEADER, "")
                if not secrets.compare_digest(sent.encode(), session.csrf_token.encode()):
                    raise Forbidden(f"missing or wrong {CSRF_HEADER} header")
            return Principal(session.user_id, "session", session.csrf_token, cookie or "")
        if users.password_configured():
            if is_public(path):
                return None
            raise AuthError("log in first")
        settings = self.hearth.settings
        if not settings.insecure_no_auth and not is_loopback(_host_name(request.headers.get("host", ""))):
            raise Forbidden("without an owner password this server only answers requests addressed to localhost")
        return Principal(users.owner().id, "open")


def _check_origin(request: HTTPConnection) -> None:
    """Browsers name the page that sent a POST; another site's page may not change anything."""
    origin = request.headers.get("origin")
    if origin is None:
        return  # not sent by a browser page, or a same-origin GET-like navigation
    if origin.split("://", 1)[-1] != request.headers.get("host", ""):
        raise Forbidden("cross-site request refused")


# -- dependencies ------------------------------------------------------------------------------
# Declared for the OpenAPI document only; AuthGuard has already checked the credentials.
_bearer = HTTPBearer(auto_error=False, description="API token: `Authorization: Bearer hth_...`")
_cookie = APIKeyCookie(name=COOKIE, auto_error=False, description="Browser session (login); needs X-CSRF-Token on changes")


def get_hearth(request: Request) -> Hearth:
    return request.app.state.hearth


def principal_of_connection(connection: HTTPConnection) -> Principal:
    """The principal AuthGuard found for a request or WebSocket."""
    principal = getattr(connection.state, "principal", None)
    if principal is None:
        raise AuthError("log in first")
    return principal


def principal_of(request: Request) -> Principal:
    return principal_of_connection(request)


def current_scope(request: Request, _b: object = Depends(_bearer), _c: object = Depends(_cookie)) -> Scope:
    """The calling user's scope: every query of the request is bound to that user (G2)."""
    return get_hearth(request).scope(principal_of(request).user_id)


def current_context(request: Request, scope: Scope = Depends(current_scope)) -> Context:
    """The calling user's ``Context``, for the flows below the wiring that take one."""
    return get_hearth(request).context(scope.user_id)


def require_owner_with_password(request: Request, scope: Scope = Depends(current_scope)) -> Scope:
    """For maintenance endpoints: unavailable until an owner password is set, and owner only (U2)."""
    hearth = get_hearth(request)
    if not hearth.users.password_configured():
        raise Forbidden("maintenance endpoints are unavailable until an owner password is set")
    if not hearth.users.get(scope.user_id).is_owner:
        raise Forbidden("only the owner may do this")
    return scope


def owner_context(request: Request, scope: Scope = Depends(require_owner_with_password)) -> Context:
    """``require_owner_with_password``, as the owner's ``Context``."""
    return get_hearth(request).context(scope.user_id)


# -- routes --------------------------------------------------------------------------------------
router = APIRouter(prefix="/api/auth", tags=["auth"])


class LoginIn(RequestModel):
    name: str | None = Field(default=None, max_length=64, description="User name; the owner when omitted")
    password: str = Field(max_length=1024)


class UserOut(BaseModel):
    id: int
    name: str
    is_owner: bool


class LoginOut(BaseModel):
    user: UserOut
    csrf_token: str


class MeOut(BaseModel):
    user: UserOut
    method: str
    password_configured: bool
    display_name: str | None = Field(default=None, description="What companions call you; null: \"the person\"")


class ProfileIn(RequestModel):
    display_name: str | None = Field(max_length=MAX_DISPLAY_NAME, description=(
        "What companions call you: {{user}} in character cards and persona text (X3); empty or null clears it"))


class TokenIn(RequestModel):
    name: str = Field(min_length=1, max_length=100)


class TokenCreated(BaseModel):
    id: int
    name: str
    token: str


class TokenOut(BaseModel):
    id: int
    name: str
    created_at: str
    revoked_at: str | None


def _user_out(hearth: Hearth, user_id: int) -> UserOut:
    user = hearth.users.get(user_id)
    return UserOut(id=user.id, name=user.name, is_owner=user.is_owner)


@router.post("/login", response_model=LoginOut, responses=responses(401, 429, s401="Wrong user name or password"))
def login(body: LoginIn, request: Request, response: Response) -> LoginOut:
    """Log in with a password; sets an HTTP-only session cookie and returns the CSRF token."""
    hearth = get_hearth(request)
    users = hearth.users
    if not users.password_configured():
        raise Conflict("no owner password is set; this server is open on this machine")
    name = body.name or users.owner().name
    limiter: LoginLimiter = request.app.state.login_limiter
    client = request.client.host if request.client else "unknown"
    keys = (f"ip:{client}", f"name:{name.lower()}")
    wait = limiter.retry_after(keys)
    if wait:
        raise RateLimited(f"too many failed logins; try again in {wait} seconds", retry_after=wait)
    try:
        user = users.check_password(name, body.password)
    except AuthError:
        limiter.fail(keys)
        raise
    limiter.clear(keys)
    token, session = users.start_session(user.id)
    response.set_cookie(COOKIE, token, max_age=SESSION_DAYS * 86400, path="/", httponly=True,
                        samesite="strict", secure=request.url.scheme == "https")
    return LoginOut(user=_user_out(hearth, user.id), csrf_token=session.csrf_token)


@router.post("/logout", status_code=204, response_class=Response)
def logout(request: Request, _scope: Scope = Depends(current_scope)) -> Response:
    """End the browser session (API tokens are revoked separately)."""
    principal = principal_of(request)
    if principal.method == "session":
        get_hearth(request).users.end_session(principal.session_token)
    response = Response(status_code=204)
    response.delete_cookie(COOKIE, path="/", httponly=True, samesite="strict",
                           secure=request.url.scheme == "https")
    return response


@router.get("/me", response_model=MeOut)
def me(request: Request, scope: Scope = Depends(current_scope)) -> MeOut:
    hearth = get_hearth(request)
    return MeOut(user=_user_out(hearth, scope.user_id), method=principal_of(request).method,
                 password_configured=hearth.users.password_configured(),
                 display_name=hearth.users.get(scope.user_id).display_name)


@router.patch("/me", response_model=MeOut)
def update_me(body: ProfileIn, request: Request, scope: Scope = Depends(current_scope)) -> MeOut:
    """Set what companions call you; stored prompts that name you by macro are rebuilt first (P5)."""
    scope.set_display_name(body.display_name)
    return me(request, scope)


@router.get("/tokens", response_model=list[TokenOut])
def list_tokens(request: Request, scope: Scope = Depends(current_scope)) -> list[dict]:
    return get_hearth(request).users.list_tokens(scope.user_id)


@router.post("/tokens", response_model=TokenCreated, status_code=201)
def create_token(body: TokenIn, request: Request, scope: Scope = Depends(current_scope)) -> TokenCreated:
    """Create an API token; its secret is shown only in this answer."""
    users = get_hearth(request).users
    token = users.create_token(scope.user_id, body.name)
    row = users.list_tokens(scope.user_id)[-1]
    return TokenCreated(id=row["id"], name=row["name"], token=token)


@router.delete("/tokens/{token_id:int}", status_code=204, response_class=Response)
def revoke_token(token_id: IdPath, request: Request, scope: Scope = Depends(current_scope)) -> Response:
    get_hearth(request).users.revoke_token(scope.user_id, token_id)
    return Response(status_code=204)


__all__ = [
    "AuthGuard", "COOKIE", "CSRF_HEADER", "LoginLimiter", "Principal", "check_bind",
    "current_scope", "get_hearth", "is_loopback", "require_owner_with_password", "router",
]
