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

_JSONRPC = {"application/json": {"schema": {"$ref": "#/components/schemas/JsonRpcMessage"}}}
# The MCP endpoint in the OpenAPI description (U8): it is served by the MCP SDK, not by an API
# route, so its operations are written here, beside the endpoint, by hand.
SCHEMAS: dict[str, Any] = {
    "JsonRpcMessage": {
        "title": "JsonRpcMessage",
        "description": "One JSON-RPC 2.0 message of the Model Context Protocol (or a batch of them): a request"
                       " (`method`, `params`, `id`), a notification (no `id`), a result or an error.",
        "type": "object",
        "required": ["jsonrpc"],
        "properties": {
            "jsonrpc": {"type": "string", "enum": ["2.0"]},
            "id": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
            "method": {"type": "string", "examples": ["initialize", "tools/list", "tools/call"]},
            "params": {"type": "object"},
            "result": {"type": "object"},
            "error": {"$ref": "#/components/schemas/JsonRpcError"},
        },
    },
    "JsonRpcError": {
        "title": "JsonRpcError",
        "description": "A protocol error: -32700 unparseable JSON, -32600 not a valid request, -32601 unknown"
                       " method, -32602 unknown tool or invalid arguments, -32603 internal error. A tool that"
                       " refuses its input answers a result with `isError: true` instead.",
        "type": "object",
        "required": ["code", "message"],
        "properties": {"code": {"type": "integer"}, "message": {"type": "string"}, "data": {}},
    },
}
_SECURITY: list[dict[str, list[str]]] = [{"HTTPBearer": []}]  # the scheme the API routes name (server/auth.py)
OPERATIONS: dict[str, Any] = {
    "post": {
        "tags": ["mcp"], "summary": "Call the MCP server (JSON-RPC over streamable HTTP)",
        "operationId": "mcp_post",
        "description": "One JSON-RPC message per request (`initialize`, `tools/list`, `tools/call`, ...), answered"
                       " as JSON (stateless: no session id is issued or needed). Requires an API token"
                       " (`Authorization: Bearer ...`) in every auth mode; the tools act as the token's user."
                       " The request must accept both `application/json` and `text/event-stream`.",
        "security": _SECURITY,
        "requestBody": {"required": True, "content": _JSONRPC},
        "responses": {
            "200": {"description": "The JSON-RPC result or error of the request", "content": _JSONRPC},
            "202": {"description": "A notification or a response was accepted (no body)"},
            "400": {"description": "Unparseable JSON (the body guard's error body) or not a JSON-RPC message"
                                   " (a JSON-RPC error)",
                    "content": {"application/json": {"schema": {"anyOf": [
                        {"$ref": "#/components/schemas/ErrorBody"},
                        {"$ref": "#/components/schemas/JsonRpcMessage"}]}}}},
            "406": {"description": "The Accept header lacks application/json or text/event-stream",
                    "content": _JSONRPC},
            "415": {"description": "The body is not application/json", "content": _JSONRPC},
        },
    },
    "get": {
        "tags": ["mcp"], "summary": "Open the server-to-client event stream (MCP streamable HTTP)",
        "operationId": "mcp_get",
        "description": "Server-sent events for messages the server starts. Hearth's tools never start one, so"
                       " the stream stays quiet; clients may skip it. Requires an API token.",
        "security": _SECURITY,
        "responses": {
            "200": {"description": "An event stream", "content": {"text/event-stream": {"schema": {"type": "string"}}}},
            "406": {"description": "The Accept header lacks text/event-stream", "content": _JSONRPC},
        },
    },
    "delete": {
        "tags": ["mcp"], "summary": "End an MCP session (not supported: the endpoint is stateless)",
        "operationId": "mcp_delete",
        "description": "There are no sessions to end, so this always answers 405 (after the token check).",
        "security": _SECURITY,
        "responses": {"405": {"description": "Session termination is not supported", "content": _JSONRPC}},
    },
}


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
