"""One table from Hearth's error tree to HTTP statuses, and the JSON error body.

Every error leaves the server as ``{"error": code, "detail": message}`` with the status from
``STATUS``. The most specific class wins, so a ``TooLarge`` (an ``InvalidInput``) answers 413.
A foreign id is a ``NotFound`` like an unknown one (G2): nobody can probe for another user's data.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from ..errors import (
    AuthError,
    ConfigError,
    Conflict,
    DispatchRefused,
    Forbidden,
    HearthError,
    InvalidInput,
    NotFound,
    ProviderError,
    RateLimited,
    StoreBusy,
    StoreError,
    TooLarge,
    UnknownModel,
)
from ..store import DriverError
from ..store.connection import translate

log = logging.getLogger(__name__)

# Most specific first; the first matching class decides the status.
STATUS: tuple[tuple[type[HearthError], int], ...] = (
    (TooLarge, 413),
    (UnknownModel, 400),
    (InvalidInput, 422),
    (NotFound, 404),
    (Conflict, 409),
    (RateLimited, 429),
    (Forbidden, 403),
    (AuthError, 401),
    (ProviderError, 502),
    (DispatchRefused, 500),
    # The database cannot serve the request (busy, disk full, read-only, damaged, from a newer
    # Hearth): the server is unavailable, the request was not at fault.
    (StoreError, 503),
    (ConfigError, 500),
    (HearthError, 500),
)

# Codes for framework-level errors that are not HearthErrors.
HTTP_CODES = {400: "bad_request", 401: "unauthorized", 403: "forbidden", 404: "not_found",
              405: "method_not_allowed", 413: "too_large", 415: "unsupported_media_type",
              429: "rate_limited"}


def status_for(error: HearthError) -> int:
    for cls, status in STATUS:
        if isinstance(error, cls):
            return status
    return 500


def error_body(code: str, detail: str) -> dict[str, str]:
    return {"error": code, "detail": detail}


# The OpenAI-compatible routes (X1) answer errors in OpenAI's shape, so their clients can read them.
OPENAI_PREFIX = "/v1/"
OPENAI_TYPES = {401: "authentication_error", 403: "permission_error", 429: "rate_limit_error"}
OPENAI_CODES = {"unauthorized": "invalid_api_key"}


def is_openai_path(path: str) -> bool:
    return path.startswith(OPENAI_PREFIX) or path == OPENAI_PREFIX.rstrip("/")


def openai_error_body(code: str, detail: str, status: int, param: str | None = None) -> dict[str, Any]:
    kind = OPENAI_TYPES.get(status) or ("api_error" if status >= 500 else "invalid_request_error")
    return {"error": {"message": detail, "type": kind, "param": param, "code": OPENAI_CODES.get(code, code)}}


def error_response(code: str, detail: str, status: int, headers: dict[str, str] | None = None,
                   path: str = "", param: str | None = None) -> JSONResponse:
    if is_openai_path(path):
        status = 400 if status == 422 else status  # OpenAI answers every invalid request with 400
        body: dict[str, Any] = openai_error_body(code, detail, status, param)
    else:
        body = error_body(code, detail)
    return JSONResponse(body, status_code=status, headers=headers)


def hearth_error_response(error: HearthError, path: str = "") -> JSONResponse:
    status = status_for(error)
    if status == 422 and is_openai_path(path):
        status = 400  # OpenAI answers every invalid request with 400
    if status >= 500:
        # The class name only: messages may name files, never conversation text, but stay terse.
        log.error("request failed with %s", type(error).__name__)
    headers = None
    if isinstance(error, RateLimited) and error.retry_after:
        headers = {"Retry-After": str(int(error.retry_after))}
    elif isinstance(error, StoreBusy):
        headers = {"Retry-After": "1"}
    return error_response(error.code, str(error) or error.code, status, headers, path)


def _describe(errors: list[dict[str, Any]]) -> tuple[str, str]:
    """Turn pydantic/FastAPI validation errors into (code, one readable line)."""
    for err in errors:
        if err.get("type") == "json_invalid":
            reason = (err.get("ctx") or {}).get("error", "malformed JSON")
            pos = err.get("loc", ("body", "?"))[-1]
            return "invalid_json", f"request body is not valid JSON: {reason} at position {pos}"
    parts = []
    for err in errors[:5]:
        loc = ".".join(str(p) for p in err.get("loc", ()) if p != "body")
        message = str(err.get("msg", "invalid")).removeprefix("Value error, ")
        if err.get("type") == "string_unicode":  # the same words as the library's text rule
            message = "contains a lone surrogate or other text that is not valid Unicode"
        parts.append(f"{loc}: {message}" if loc else message)
    more = f" (and {len(errors) - 5} more)" if len(errors) > 5 else ""
    return "invalid_input", "; ".join(parts) + more


def install(app: FastAPI) -> None:
    """Register the handlers that turn every error into the JSON body above."""

    @app.exception_handler(HearthError)
    async def _hearth(request: Request, exc: HearthError) -> JSONResponse:
        return hearth_error_response(exc, request.url.path)

    async def _database(request: Request, exc: Exception) -> JSONResponse:
        # Raised outside a store transaction (which translates on its own): the same translation.
        error = translate(exc)
        if error is None:
            raise exc
        return hearth_error_response(error, request.url.path)

    for kind in (DriverError, UnicodeEncodeError, OverflowError):
        app.add_exception_handler(kind, _database)

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = list(exc.errors())
        code, detail = _describe(errors)
        if is_openai_path(request.url.path):  # OpenAI answers every invalid request with 400
            param = ".".join(str(p) for p in errors[0].get("loc", ()) if p != "body") if errors else None
            return error_response(code, detail, 400, path=request.url.path, param=param or None)
        return error_response(code, detail, 400 if code == "invalid_json" else 422)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = HTTP_CODES.get(exc.status_code, "error")
        detail = exc.detail if isinstance(exc.detail, str) else code
        if exc.status_code == 404 and detail == "Not Found":
            detail = f"no such route: {request.method} {request.url.path}"
        return error_response(code, detail, exc.status_code, getattr(exc, "headers", None), request.url.path)
