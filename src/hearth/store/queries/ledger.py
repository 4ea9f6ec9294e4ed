"""Statements of the ledger (S2): a thread's message row (``messages``), as every area reads it."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from hearth.store.engine import Row


@dataclass(frozen=True)
class Message:
    id: int
    user_id: int
    conversation_id: int
    role: str
    kind: str
    content: str
    channel: str
    created_at: str
    metadata: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_row(cls, row: Row) -> "Message":
        return cls(
            id=row["id"],
            user_id=row["user_id"],
            conversation_id=row["conversation_id"],
            role=row["role"],
            kind=row["kind"],
            content=row["content"],
            channel=row["channel"],
            created_at=row["created_at"],
            metadata=json.loads(row["metadata"]),
        )

    @property
    def visible(self) -> bool:
        """Shown as a chat bubble: everything except stored prompts and tool results (P6)."""
        return self.kind in ("chat", "handoff_artifact")
