"""Shared pieces of the HTTP schema: the strict request base model and bounded id types."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Path, Query
from pydantic import BaseModel, ConfigDict, model_validator

from ..errors import InvalidInput
from ..validation import MAX_ID, check_tree

__all__ = ["MAX_ID", "IdPath", "OptionalIdQuery", "RequestModel", "plain"]

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
