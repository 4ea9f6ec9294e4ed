"""Shared pieces of the HTTP schema: the strict request base model, bounded id types, the error body."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Path, Query
from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..errors import InvalidInput
from ..validation import MAX_ID, check_tree

__all__ = ["MAX_ID", "ErrorBody", "IdPath", "OptionalIdQuery", "RequestModel", "plain", "responses"]

IdPath = Annotated[int, Path(ge=1, le=MAX_ID, description="A numeric id owned by the caller")]
OptionalIdQuery = Annotated[int | None, Query(ge=1, le=MAX_ID)]


class RequestModel(BaseModel):
    """Base for request bodies: unknown fields are refused and types are not coerced."""

    model_config = ConfigDict(extra="forbid", strict=True)

    @model_validator(mode="after")
    def _storable_text(self) -> "RequestModel":
        # The library's text rule (no NUL, no lone surrogate) on every string the body carries,
        # so HTTP answers 422 with the same reason the library and CLI give.
        for name, value in self:
            try:
                check_tree(value, name)
            except InvalidInput as exc:
                raise ValueError(str(exc)) from None
        return self


class Count(BaseModel):
    prompts_rebuilt: int


class Estimate(BaseModel):
    """The chat header's compact estimate (R4): visible current-thread messages only."""

    messages: int
    tokens: int


def plain(obj: Any) -> Any:
    """A core dataclass as a plain dict for a response model."""
    return obj.to_dict() if hasattr(obj, "to_dict") else obj


# -- errors in the OpenAPI description (server/openapi.py adds the common ones to every operation) --
DESCRIPTIONS = {
    400: "The request cannot be parsed: malformed JSON, a body that is not UTF-8, a bad Content-Length",
    401: "Not logged in, or a missing, invalid or revoked API token",
    403: "Not allowed: a missing CSRF header, another site's Origin, or an owner-only action",
    404: "Unknown id, or an id that belongs to another user (answered alike)",
    409: "A valid request that clashes with the current state",
    413: "The request body (or uploaded file) is over its size limit",
    422: "A parsed request with an invalid value: wrongly typed, out of range, too long, or not storable text",
    429: "Too many attempts: wait Retry-After seconds",
    503: "The database is busy (retry after Retry-After) or cannot be written",
}


class ErrorBody(BaseModel):
    """Every error Hearth answers outside ``/v1``."""

    # Extra keys are allowed: a refused import also carries its report.
    model_config = ConfigDict(extra="allow", json_schema_extra={"additionalProperties": True})

    error: str = Field(description="A stable code, e.g. invalid_input, not_found, too_large")
    detail: str = Field(description="One readable sentence saying what was wrong")


def responses(*statuses: int, **descriptions: str) -> dict[int | str, dict[str, Any]]:
    """``responses=`` for a route that answers more than the rules give it, e.g. ``responses(404)``;
    a description may be given as ``s404="no such book"``."""
    return {status: {"model": ErrorBody, "description": descriptions.get(f"s{status}", DESCRIPTIONS[status])}
            for status in statuses}
