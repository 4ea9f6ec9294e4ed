"""Tools offered to the model (A4) and the code that runs them.

A tool is a ``ToolSpec`` the provider sees and a function that answers with text. Tool results are
quoted reference for the model, cited by conversation title and date; they are never saved as chat
bubbles. The model's past-conversation search never sees shielded, hidden or trashed material (V2).
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from .errors import InvalidInput
from .providers.base import ToolCall, ToolSpec
from .retrieval.keyword import excerpt, search_messages, terms

if TYPE_CHECKING:
    from .store import Store

MAX_RESULT_CHARS = 12_000


@dataclass(frozen=True)
class ToolContext:
    store: "Store"
    user_id: int
    conversation_id: int
    persona_id: int

    @property
    def conn(self) -> sqlite3.Connection:
        # Asked for at use: a streamed reply may run each step on a different server thread, and
        # every thread has its own connection.
        return self.store.connection()


@dataclass(frozen=True)
class Tool:
    spec: ToolSpec
    run: Callable[[ToolContext, dict[str, Any]], str]


def _search_past_conversations(ctx: ToolContext, args: dict[str, Any]) -> str:
    query = args.get("query")
    if not isinstance(query, str) or not query.strip():
        raise InvalidInput("search_past_conversations needs a non-empty 'query'")
    words = terms(query)
    hits = search_messages(ctx.conn, ctx.user_id, words, limit=8,
                           exclude_conversation_ids=(ctx.conversation_id,), include_shielded=False)
    if not hits:
        return "No matching past conversations."
    lines = []
    for hit in hits:
        title = hit.title or "Untitled conversation"
        lines.append(f"[{title}, {hit.created_at[:10]}] {hit.role}: {excerpt(hit.content, words)}")
    return "\n".join(lines)


SEARCH_PAST_CONVERSATIONS = Tool(
    ToolSpec(
        name="search_past_conversations",
        description=(
            "Search the person's other conversations for what was said before. Returns short excerpts "
            "cited by conversation title and date."
        ),
        parameters={
            "type": "object",
            "properties": {"query": {"type": "string", "description": "words or a phrase to look for"}},
            "required": ["query"],
            "additionalProperties": False,
        },
    ),
    _search_past_conversations,
)


class Toolbox:
    def __init__(self, tools: list[Tool] | None = None):
        self.tools = {t.spec.name: t for t in (tools if tools is not None else [SEARCH_PAST_CONVERSATIONS])}

    def specs(self) -> list[ToolSpec]:
        return [t.spec for t in self.tools.values()]

    def run(self, ctx: ToolContext, call: ToolCall) -> str:
        """Run one call; a bad call becomes a plain error result the model can read, not a crash."""
        tool = self.tools.get(call.name)
        if tool is None:
            return f"Error: there is no tool named {call.name!r}."
        try:
            result = tool.run(ctx, call.arguments if isinstance(call.arguments, dict) else {})
        except InvalidInput as exc:
            return f"Error: {exc}"
        return result[:MAX_RESULT_CHARS]


def arguments_json(arguments: dict[str, Any]) -> str:
    return json.dumps(arguments, ensure_ascii=False, sort_keys=True)
