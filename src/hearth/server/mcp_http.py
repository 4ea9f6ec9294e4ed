"""The MCP server over streamable HTTP (X2), mounted in ``hearth serve`` at ``/mcp``.

The auth middleware has already required an API token for ``/mcp`` (any mode); the tools read the
token's user from the request. The SDK's session manager runs for the app's lifespan, stateless
and answering JSON, so no session lives in one process (several servers may share a database).
Host and origin checks are the auth middleware's, as for every route.
"""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, AsyncIterator

from mcp.server.transport_security import TransportSecuritySettings
from starlette.types import Receive, Scope, Send

from hearth.mcp.tools import build, http_user

from .errors import error_response

if TYPE_CHECKING:
    from hearth.scope import Hearth

PATH = "/mcp"


class McpEndpoint:
    """ASGI endpoint for ``/mcp``: a fresh MCP server and session manager per app lifespan."""

    def __init__(self, hearth: "Hearth"):
        self.hearth = hearth
        self.manager: Any = None

    @asynccontextmanager
    async def run(self) -> AsyncIterator[None]:
        server = build(self.hearth, http_user(self.hearth))
        server.streamable_http_app(streamable_http_path=PATH, stateless_http=True, json_response=True,
                                   transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False))
        manager = server.session_manager
        async with manager.run():
            self.manager = manager
            try:
                yield
            finally:
                self.manager = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.manager is None:
            response = error_response("unavailable", "the MCP endpoint runs only while the server is running", 503)
            await response(scope, receive, send)
            return
        await self.manager.handle_request(scope, receive, send)
