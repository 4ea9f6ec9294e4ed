"""Shared pieces of the HTTP schema: the strict request base model and bounded id types."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Path, Query
from pydantic import BaseModel, ConfigDict

# SQLite integers are signed 64-bit; a larger id would fail in the driver instead of answering 4xx.
MAX_ID = 2**63 - 1

IdPath = Annotated[int, Path(ge=1, le=MAX_ID, description="A numeric id owned by the caller")]
OptionalIdQuery = Annotated[int | None, Query(ge=1, le=MAX_ID)]


class RequestModel(BaseModel):
    """Base for request bodies: unknown fields are refused and types are not coerced."""

    model_config = ConfigDict(extra="forbid", strict=True)


class Count(BaseModel):
    prompts_rebuilt: int


class Estimate(BaseModel):
    """The chat header's compact estimate (R4): visible current-thread messages only."""

    messages: int
    tokens: int


def plain(obj: Any) -> Any:
    """A core dataclass as a plain dict for a response model."""
    return obj.to_dict() if hasattr(obj, "to_dict") else obj
