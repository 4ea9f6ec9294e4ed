"""The FastAPI application: middleware, routers, the web pages and static files.

Endpoints are plain ``def`` functions, so FastAPI runs the synchronous core in its threadpool;
each worker thread gets its own SQLite connection from the store.
"""

from __future__ import annotations

import html
import logging
import re
from contextlib import asynccontextmanager
from pathlib import Path
from typing import AsyncIterator

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.templating import Jinja2Templates
from starlette.datastructures import Headers
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Send
from starlette.types import Scope as AsgiScope

from hearth.scope import Hearth

from .. import __version__
from ..errors import TooLarge
from ..settings import Settings
from . import (
    activations,
    admin,
    alternatives,
    auth,
    backups,
    channels,
    choices,
    connection,
    continuity,
    conversations,
    diagnostics,
    errors,
    folders,
    imports,
    layers,
    memories,
    openapi,
    personas,
    pwa,
    recall,
    scripts,
    timeline,
    vendor,
    voice,
)
from . import attachments as attachment_routes
from . import forget as forget_routes
from . import remembered as remembered_routes
from . import versions as version_routes
from .files import KeptFiles
from .mcp_http import PATH as MCP_PATH
from .mcp_http import McpEndpoint
from .openai_compat import router as openai_router

HERE = Path(__file__).parent
log = logging.getLogger(__name__)
BODY_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
# Uploads of whole files (card PNGs, export zips, chat archives): binary, with their own size limit.
UPLOAD_PATHS = frozenset({"/api/imports", "/api/archive/import"})
# Sends that may carry attachments (W14): their bodies may hold a message's files, base64 encoded.
# (``/v1/chat/completions`` keeps ``max_body_bytes``: its images are small ones, docs/clients.md.)
ATTACHING_PATH = re.compile(r"^/api/conversations/\d+/messages$")
# Answers that carry a person's data: never kept by a browser or proxy cache, never content-sniffed.
NO_STORE_TYPES = (b"application/json", b"application/x-ndjson", b"text/event-stream", b"application/problem+json")


class ResponseHeaders:
    """ASGI middleware: ``nosniff`` on every answer and ``Cache-Control: no-store`` on every JSON
    (and NDJSON, SSE) answer, errors, 404s, 405s and the ``/v1`` routes included."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: AsgiScope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                names = {name.lower() for name, _ in headers}
                content_type = next((v for n, v in headers if n.lower() == b"content-type"), b"")
                if b"x-content-type-options" not in names:
                    headers.append((b"x-content-type-options", b"nosniff"))
                if content_type.startswith(NO_STORE_TYPES) and b"cache-control" not in names:
                    headers.append((b"cache-control", b"no-store"))
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_headers)


class BodyGuard:
    """ASGI middleware: every request body is read here first, bounded and checked (U3).

    Bodies over ``max_bytes`` (by Content-Length or by what actually arrives) answer 413; API
    bodies that are not UTF-8 answer 400. The checked body is then replayed to the app, so no
    route ever sees more than the limit. Uploads (``UPLOAD_PATHS``: card PNGs, export zips, chat
    archives) are binary, have their own limit, ``import_bytes``, and stream through uncopied.
    """

    def __init__(self, app: ASGIApp, max_bytes: int, import_bytes: int | None = None,
                 attaching_bytes: int | None = None):
        self.app = app
        self.max_bytes = self.default_max = max_bytes
        self.import_bytes = import_bytes or max_bytes
        self.attaching_bytes = max(attaching_bytes or 0, max_bytes)

    async def __call__(self, scope: AsgiScope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        binary = scope["path"] in UPLOAD_PATHS
        limit = (self.import_bytes if binary else self.attaching_bytes if ATTACHING_PATH.match(scope["path"])
                 else self.default_max)
        headers = Headers(scope=scope)
        if b"%00" in scope.get("query_string", b"").lower() or "\x00" in scope["path"]:
            # The text rule (no NUL characters) holds for query parameters as for bodies.
            await self._refuse(scope, receive, send, 422, "invalid_input",
                               "the request's query or path contains a NUL character")
            return
        declared = headers.get("content-length")
        if declared is not None:
            if not declared.isdigit():
                await self._refuse(scope, receive, send, 400, "bad_request", "invalid Content-Length header")
                return
            if int(declared) > limit:
                await self._too_large(scope, receive, send, limit)
                return
        if binary:
            await self.app(scope, self._counted(receive, limit), send)
            return
        chunks: list[bytes] = []
        size = 0
        more = True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                await self._too_large(scope, receive, send, limit)
                return
            chunks.append(chunk)
            more = message.get("more_body", False)
        body = b"".join(chunks)
        # Imports and images (avatars) are the binary bodies; everything else in the API is text.
        image = headers.get("content-type", "").startswith("image/")
        if body and scope["path"].startswith("/api/") and not binary and not image:
            try:
                body.decode("utf-8")
            except UnicodeDecodeError as exc:
                await self._refuse(scope, receive, send, 400, "invalid_utf8",
                                   f"request body is not valid UTF-8 (byte {exc.start})")
                return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()  # later calls only wait for the client to disconnect

        await self.app(scope, replay, send)

    @staticmethod
    def _counted(receive: Receive, limit: int) -> Receive:
        """Uploads pass through as they arrive (never buffered here); past ``limit`` bytes the
        route's read fails with TooLarge (413) before anything is imported."""
        size = 0

        async def counted() -> Message:
            nonlocal size
            message = await receive()
            size += len(message.get("body", b""))
            if size > limit:
                raise TooLarge(f"the uploaded file is larger than {limit} bytes")
            return message

        return counted

    async def _too_large(self, scope: AsgiScope, receive: Receive, send: Send, limit: int) -> None:
        await self._refuse(scope, receive, send, 413, "too_large", f"request body is larger than {limit} bytes")

    @staticmethod
    async def _refuse(scope: AsgiScope, receive: Receive, send: Send, status: int, code: str, detail: str) -> None:
        await errors.error_response(code, detail, status, {"Connection": "close"}, scope["path"])(scope, receive, send)


def create_app(settings: Settings | None = None, hearth: Hearth | None = None) -> FastAPI:
    """Build the app over ``hearth`` (opened from ``settings`` when not given)."""
    if hearth is None:
        hearth = Hearth(settings)
    settings = hearth.settings
    mcp_endpoint = McpEndpoint(hearth)

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        async with mcp_endpoint.run():  # the MCP server at /mcp (X2)
            yield

    app = FastAPI(
        title="Hearth",
        version=__version__,
        summary="Memory and continuity engine for AI companions",
        docs_url=None,  # the interactive docs pages load third-party scripts; the JSON is enough
        redoc_url=None,
        lifespan=lifespan,
    )
    app.state.hearth = hearth
    # Where several servers share one database (PostgreSQL), failed logins are counted there (S10).
    app.state.login_limiter = (auth.StoredLoginLimiter(hearth.store) if hearth.store.engine.shared
                               else auth.LoginLimiter())
    templates = Jinja2Templates(directory=str(HERE / "templates"))

    errors.install(app)
    openapi.install(app)  # the description documents every status the server really answers (U4)
    app.add_middleware(auth.AuthGuard, hearth=hearth)
    app.add_middleware(BodyGuard, max_bytes=settings.max_body_bytes,
                       import_bytes=settings.max_import_bytes,
                       # The message, and its attachments at their largest in base64 (W14).
                       attaching_bytes=settings.max_body_bytes + settings.attachment_max_count * (
                           settings.attachment_max_bytes * 4 // 3 + 1_000) + settings.attachment_text_chars * 6)
    app.add_middleware(ResponseHeaders)  # outermost: also marks BodyGuard's and AuthGuard's refusals

    for router in (auth.router, personas.router, folders.router, continuity.router, conversations.router,
                   memories.snapshots, memories.router, conversations.events_router, layers.router, diagnostics.router,
                   recall.router, openai_router, channels.router, channels.webhooks, activations.router,
                   imports.router, voice.router, voice.webhooks, timeline.router, alternatives.router,
                   backups.router, choices.router, connection.router, admin.router):
        app.include_router(router)
    app.include_router(forget_routes.router)  # delete forever and retention (B4, B5)
    app.include_router(version_routes.router)  # history and undo (B2)
    app.include_router(remembered_routes.router)  # memory where the person talks (W11)
    app.include_router(attachment_routes.router)  # attachments and one conversation's export (W14, W15)

    # The modules the first paint runs, preloaded at once instead of discovered import by import;
    # the other panels' are fetched when first shown (scripts.py). The app shell keeps them all.
    first_paint = scripts.first_paint()
    modules = scripts.all_modules() + [f"/vendor/{name}" for name in vendor.PRELOAD]
    vendor_dir = vendor.vendor_dir(settings)
    if vendor.missing(vendor_dir):
        log.warning("%s", vendor.missing_message(vendor_dir))

    @app.get("/", response_class=HTMLResponse, tags=["pages"])
    def index(request: Request) -> Response:
        """The web UI."""
        if vendor.missing(vendor_dir):
            # The page cannot render messages without them: say so plainly instead of a broken page.
            return HTMLResponse(f"<!doctype html><title>Hearth</title><p>{html.escape(vendor.missing_message(vendor_dir))}</p>",
                                status_code=503, headers=_page_headers())
        principal = auth.principal_of(request)
        return templates.TemplateResponse(request, "index.html", {
            "modules": first_paint,
            "csrf_token": principal.csrf_token,
            "password_configured": principal.method != "open",
            "max_message_chars": settings.max_message_chars,
        }, headers=_page_headers())

    @app.get("/login", response_class=HTMLResponse, tags=["pages"])
    def login_page(request: Request) -> Response:
        """The login form; redirects to the UI when no password is set."""
        principal = getattr(request.state, "principal", None)
        if not hearth.users.password_configured() or (principal and principal.method == "session"):
            return RedirectResponse("/", status_code=303)
        return templates.TemplateResponse(request, "login.html", {}, headers=_page_headers())

    pwa.install(app, modules)  # the installable app: manifest, icons, service worker
    app.router.routes.append(Route(MCP_PATH, endpoint=mcp_endpoint, methods=["GET", "POST", "DELETE"]))
    # Kept in memory: a page load asks for about forty of these (files.py).
    app.mount("/static", KeptFiles(directory=str(HERE / "static")), name="static")
    app.mount("/vendor", KeptFiles(directory=str(vendor_dir), check_dir=False), name="vendor")
    return app


def _page_headers() -> dict[str, str]:
    # Only our own scripts and styles; user text can never become markup or script.
    return {
        "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; object-src 'none';"
                                   " base-uri 'none'; frame-ancestors 'none'; form-action 'self'",
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
        "Cache-Control": "no-store",
    }
