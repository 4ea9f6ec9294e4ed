"""The OpenAPI description, made to match what the server really answers (U4).

FastAPI documents a 422 body in its own list shape and nothing else; Hearth answers every error
as ``{"error", "detail"}`` (OpenAI's shape on ``/v1``) and from middleware the routes never see:
the body guard (400, 413, 422 for a NUL in the query), the auth guard (401, 403) and the store
(503 when busy or unusable). This module adds those answers to every operation they can reach,
by one set of rules, so the description is what a generated client or a schema fuzz can trust:

* every operation: 422 (a NUL in the query string), 503 (the database is busy or unusable);
* every operation behind the auth guard: 401 (no or wrong credentials), 403 (not allowed);
* every state-changing method: 400 (unparseable body), 413 (body over its limit), 403 (another
  site's Origin, a missing CSRF header) and 409 (clashes with the current state);
* every operation that names an id (in its path, query or body): 404 (unknown or foreign id).

Routes may document more themselves (``responses=``); those are kept.
"""

from __future__ import annotations

import copy
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from .auth import is_public
from .errors import is_openai_path
from .mcp_http import OPERATIONS as MCP_OPERATIONS
from .mcp_http import PATH as MCP_PATH
from .mcp_http import SCHEMAS as MCP_SCHEMAS
from .models import DESCRIPTIONS, ErrorBody

UNSAFE = frozenset({"post", "put", "patch", "delete"})


def install(app: FastAPI) -> None:
    """Make ``app.openapi()`` return the completed description (built once, on first use)."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = get_openapi(title=app.title, version=app.version, summary=app.summary,
                                 description=app.description, routes=app.routes)
            app.openapi_schema = complete(schema)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def complete(schema: dict[str, Any]) -> dict[str, Any]:
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    components["ErrorBody"] = ErrorBody.model_json_schema(ref_template="#/components/schemas/{model}")
    # The MCP endpoint is served by the MCP SDK, outside the API routes; its operations are written
    # beside it (server/mcp_http.py) and get the same middleware answers as every route below.
    components.update(copy.deepcopy(MCP_SCHEMAS))
    schema.setdefault("paths", {})[MCP_PATH] = copy.deepcopy(MCP_OPERATIONS)
    schemes = schema["components"].setdefault("securitySchemes", {})
    schemes.setdefault("HTTPBearer", {"type": "http", "scheme": "bearer",
                                      "description": "API token: `Authorization: Bearer hth_...`"})
    for path, operations in schema.get("paths", {}).items():
        for method, operation in operations.items():
            _document(path, method, operation, components)
    # FastAPI's own validation-error shapes are never sent.
    for unused in ("HTTPValidationError", "ValidationError"):
        components.pop(unused, None)
    return schema


def _document(path: str, method: str, operation: dict[str, Any], components: dict[str, Any]) -> None:
    responses = operation.setdefault("responses", {})
    openai = is_openai_path(path)
    statuses = {422, 503}
    if not is_public(path):
        statuses |= {401, 403}
    if method in UNSAFE:
        statuses |= {400, 403, 409, 413}
    if _names_an_id(path, operation, components):
        statuses.add(404)
    if openai:
        # OpenAI's clients expect 400 for every invalid request: /v1 never answers 422.
        statuses.discard(422)
        responses.pop("422", None)
        statuses.add(400)
    ref = {"$ref": "#/components/schemas/" + ("OpenAIError" if openai else "ErrorBody")}
    for status in sorted(statuses):
        key = str(status)
        existing = responses.get(key)
        if existing is None or (status == 422 and not openai):
            description = existing["description"] if existing and status != 422 else DESCRIPTIONS[status]
            responses[key] = {"description": description, "content": {"application/json": {"schema": ref}}}


def _names_an_id(path: str, operation: dict[str, Any], components: dict[str, Any]) -> bool:
    if "{" in path:
        return True
    if any(_is_id(p.get("name", "")) for p in operation.get("parameters", [])):
        return True
    body = operation.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema", {})
    return any(_is_id(name) for name in _properties(body, components))


def _properties(schema: dict[str, Any], components: dict[str, Any], depth: int = 0) -> list[str]:
    if depth > 4:
        return []
    if "$ref" in schema:
        schema = components.get(schema["$ref"].rsplit("/", 1)[-1], {})
    names = list(schema.get("properties", {}))
    for key in ("anyOf", "oneOf", "allOf"):
        for option in schema.get(key, []):
            names += _properties(option, components, depth + 1)
    for value in schema.get("properties", {}).values():
        names += _properties(value, components, depth + 1)
        names += _properties(value.get("items", {}), components, depth + 1)
    return names


def _is_id(name: str) -> bool:
    return name == "id" or name.endswith(("_id", "_ids")) or name == "ids"
