"""Tools offered to the model (A4) and the code that runs them.

A tool is a ``ToolSpec`` the provider sees and a function that answers with text. Tool results are
quoted reference for the model, cited by conversation title and date; they are never saved as chat
bubbles.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from hearth.errors import InvalidInput, NotFound
from hearth.providers.base import ToolCall, ToolSpec
from hearth.store import Connection

if TYPE_CHECKING:
    from hearth.store import Store

MAX_RESULT_CHARS = 12_000


@dataclass(frozen=True)
class ToolContext:
    store: "Store"
    user_id: int
    conversation_id: int
    persona_id: int

    @property
    def conn(self) -> Connection:
        # Asked for at use: a streamed reply may run each step on a different server thread, and
        # every thread has its own connection.
        return self.store.connection()


@dataclass(frozen=True)
class Tool:
    spec: ToolSpec
    run: Callable[[ToolContext, dict[str, Any]], str]


class Toolbox:
    """The tools of one scope: past-conversation search, archive search and library reading
    (``thread.recall_tools.RecallTools``), as ``wiring.wire`` lists them."""

    def __init__(self, user_id: int, tools: list[Tool] | None = None):
        self.user_id = user_id
        self.tools: dict[str, Tool] = {}
        for tool in tools or []:
            self.add(tool)

    def add(self, tool: Tool) -> None:
        self.tools[tool.spec.name] = tool

    def specs(self) -> list[ToolSpec]:
        return [t.spec for t in self.tools.values()]

    def run(self, ctx: ToolContext, call: ToolCall) -> str:
        """Run one call; a bad call becomes a plain error result the model can read, not a crash."""
        if ctx.user_id != self.user_id:
            raise NotFound(f"no conversation {ctx.conversation_id}")  # another user's turn (G2)
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
