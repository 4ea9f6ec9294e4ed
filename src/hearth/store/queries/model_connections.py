"""Statements of ``model_connections``: the model connection each person chose (W10)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hearth.store.connection import utcnow
from hearth.store.engine import Connection, Row


def key_hint(key: str) -> str:
    """What a page may show of a key: its kind and last four characters (``sk-…abcd``), or less for
    a short one, so a screenshot or a shoulder never gives the key away."""
    if not key:
        return ""
    if len(key) < 16:
        return "…" + key[-2:]
    prefix = key.split("-", 1)[0] + "-" if "-" in key[:8] else ""
    return f"{prefix}…{key[-4:]}"


@dataclass(frozen=True)
class ModelConnection:
    user_id: int
    provider: str  # offline | openai | openai-chat (any OpenAI-compatible server) | anthropic
    model: str
    base_url: str
    api_key: str  # never leaves the server whole: use ``key_hint``
    updated_at: str = ""

    @classmethod
    def from_row(cls, row: Row) -> "ModelConnection":
        return cls(row["user_id"], row["provider"], row["model"], row["base_url"], row["api_key"],
                   row["updated_at"])

    @property
    def key_hint(self) -> str:
        return key_hint(self.api_key)

    def __repr__(self) -> str:  # a stray log line or traceback must not carry the key
        return (f"ModelConnection(user_id={self.user_id}, provider={self.provider!r}, model={self.model!r}, "
                f"base_url={self.base_url!r}, api_key={self.key_hint!r})")

    __str__ = __repr__

    def settings_values(self) -> dict[str, Any]:
        """The ``Settings`` fields this connection sets (the others stay the deployment's)."""
        openai_key = self.api_key if self.provider in ("openai", "openai-chat") else ""
        anthropic_key = self.api_key if self.provider == "anthropic" else ""
        return {"provider": self.provider, "model": self.model, "base_url": self.base_url,
                "openai_api_key": openai_key, "anthropic_api_key": anthropic_key}


def get(conn: Connection, user_id: int) -> ModelConnection | None:
    row = conn.execute("SELECT * FROM model_connections WHERE user_id = ?", (user_id,)).fetchone()
    return ModelConnection.from_row(row) if row else None


def replace(conn: Connection, user_id: int, provider: str, model: str, base_url: str, api_key: str) -> None:
    """The user's one connection, in place of any stored before."""
    conn.execute("DELETE FROM model_connections WHERE user_id = ?", (user_id,))
    conn.execute("INSERT INTO model_connections (user_id, provider, model, base_url, api_key, updated_at)"
                 " VALUES (?, ?, ?, ?, ?, ?)", (user_id, provider, model, base_url, api_key, utcnow()))


def delete(conn: Connection, user_id: int) -> int:
    return conn.execute("DELETE FROM model_connections WHERE user_id = ?", (user_id,)).rowcount
