"""The offline provider (PR3): answers without any model, so the whole stack works with no key.

The reply is labelled on its first line and reports what the companion was given: message count,
static prompt section headings (``## Title`` lines of the first system message), dynamic-context
block labels (``=== LABEL ===`` lines) with their line counts, whether a rolling thread summary is
present, history turns, offered tools and request size. Under the headings and labels it shows the
start of each section's text, trimmed (``DETAIL_LINES`` lines of at most ``QUOTE_CHARS``
characters), so a new user sees every layer at work; the reply goes only into that user's own
thread. Output is deterministic.

Tool loop without a key: a user message containing ``/tool <name> <json args>`` makes it call that
tool; when the last message is a tool result it says a result of N characters arrived.
"""

from __future__ import annotations

import json
import re
from typing import Iterator

from ..text import estimate_tokens
from .base import ChatMessage, ProviderRequest, StreamEvent, ToolCall, Usage

LABEL = "[offline reply: no model is configured]"
SUMMARY_PREFIX = "Rolling thread summary for this conversation only"
QUOTE_CHARS = 80
DETAIL_LINES = 2  # per section or block: enough to see it working, short enough not to echo it back

_HEADING = re.compile(r"^##\s+(.+?)\s*$", re.MULTILINE)
_BLOCK = re.compile(r"^===\s*(.+?)\s*===\s*$")
_TOOL_COMMAND = re.compile(r"/tool\s+([A-Za-z0-9_.\-]+)(?:[ \t]+(.*))?", re.DOTALL)


def request_chars(request: ProviderRequest) -> int:
    total = 0
    for message in request.messages:
        total += len(message.content)
        total += sum(len(json.dumps(c.arguments)) for c in message.tool_calls)
    return total


class OfflineProvider:
    name = "offline"

    def __init__(self, model: str = "offline") -> None:
        self.model = model or "offline"

    def list_models(self) -> list[str]:
        return [self.model]  # nothing to choose between

    def stream(self, request: ProviderRequest) -> Iterator[StreamEvent]:
        messages = request.messages
        call = _tool_command(messages)
        if isinstance(call, ToolCall):
            lines = [LABEL, f"Calling the tool {call.name} as asked."]
        elif isinstance(call, str):  # a malformed /tool command: explain instead of calling
            lines = [LABEL, call]
        elif messages and messages[-1].role == "tool":
            lines = [LABEL, _tool_result_line(messages)]
        else:
            lines = describe(request)
        reply = "\n".join(lines)
        for index, line in enumerate(lines):
            yield StreamEvent("text", text=line if index == len(lines) - 1 else line + "\n")
        if isinstance(call, ToolCall):
            yield StreamEvent("tool_call", tool_call=call)
        yield StreamEvent("usage", usage=Usage(input_tokens=estimate_tokens(request_chars(request)),
                                               output_tokens=estimate_tokens(len(reply))))


def describe(request: ProviderRequest) -> list[str]:
    """The lines of the report about a request (headings and labels only, never section bodies)."""
    messages = request.messages
    systems = [m for m in messages if m.role == "system"]
    headings = _HEADING.findall(systems[0].content) if systems else []
    blocks = _blocks(systems[1:] if headings else systems)
    summary = any(m.content.startswith(SUMMARY_PREFIX) for m in systems)
    latest = max((i for i, m in enumerate(messages) if m.role == "user"), default=-1)
    turns = sum(1 for m in messages[:max(latest, 0)] if m.role in ("user", "assistant"))
    chars = request_chars(request)

    lines = [LABEL]
    if latest >= 0:
        lines.append(f'You said: "{_quote(messages[latest].content)}"')
    lines.append(f"Messages in the request: {len(messages)}.")
    lines.append("Prompt sections: " + (", ".join(headings) if headings else "none") + ".")
    if headings:
        lines.extend(_details(_sections(systems[0].content)))
    described = [f"{label} ({len(body)} line{'' if len(body) == 1 else 's'})" for label, body in blocks]
    lines.append("Context blocks: " + (", ".join(described) if described else "none") + ".")
    lines.extend(_details(blocks))
    lines.append(f"Rolling thread summary: {'present' if summary else 'absent'}.")
    lines.extend(_details([("Summary", [m.content[len(SUMMARY_PREFIX):].lstrip(" :")])
                           for m in systems if m.content.startswith(SUMMARY_PREFIX)]))
    lines.append(f"History turns: {turns}.")
    lines.append("Tools offered: " + (", ".join(t.name for t in request.tools) if request.tools else "none") + ".")
    lines.append(f"Request size: {chars} characters (about {estimate_tokens(chars)} tokens).")
    lines.append("Set OPENAI_API_KEY, ANTHROPIC_API_KEY or HEARTH_BASE_URL to talk to a model.")
    return lines


def _blocks(systems: list[ChatMessage]) -> list[tuple[str, list[str]]]:
    """(label, non-empty body lines) for every ``=== LABEL ===`` block."""
    found: list[tuple[str, list[str]]] = []
    for message in systems:
        label: str | None = None
        body: list[str] = []
        for line in message.content.splitlines():
            match = _BLOCK.match(line)
            if match:
                if label is not None:
                    found.append((label, body))
                label, body = match.group(1), []
            elif label is not None and line.strip():
                body.append(line)
        if label is not None:
            found.append((label, body))
    return found


def _sections(prompt: str) -> list[tuple[str, list[str]]]:
    """(heading, non-empty body lines) for every ``## Heading`` section of the static prompt."""
    found: list[tuple[str, list[str]]] = []
    for line in prompt.splitlines():
        match = _HEADING.match(line)
        if match:
            found.append((match.group(1), []))
        elif found and line.strip():
            found[-1][1].append(line)
    return found


def _details(parts: list[tuple[str, list[str]]]) -> list[str]:
    """One Markdown list item per section: its first lines, each trimmed."""
    return [f"- {name}: " + " / ".join(_quote(line.lstrip("-* ")) for line in body[:DETAIL_LINES])
            + (" / …" if len(body) > DETAIL_LINES else "")
            for name, body in parts if body]


def _quote(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= QUOTE_CHARS else flat[:QUOTE_CHARS].rstrip() + "…"


def _tool_command(messages: list[ChatMessage]) -> ToolCall | str | None:
    """A ToolCall for ``/tool name {json}`` in the last message, an explanation if malformed."""
    if not messages or messages[-1].role != "user":
        return None
    match = _TOOL_COMMAND.search(messages[-1].content)
    if match is None:
        return None
    name, raw = match.group(1), (match.group(2) or "").strip()
    arguments: object = {}
    if raw:
        try:
            # raw_decode: text after the JSON object is allowed and ignored.
            arguments, _ = json.JSONDecoder().raw_decode(raw)
        except json.JSONDecodeError:
            arguments = None
    if not isinstance(arguments, dict):
        return f"The /tool command for {name} needs its arguments as one JSON object."
    # Deterministic id: the position in the request identifies the call within a conversation.
    return ToolCall(id=f"offline_call_{len(messages)}", name=name, arguments=arguments)


def _tool_result_line(messages: list[ChatMessage]) -> str:
    result = messages[-1]
    name = "a tool"
    for message in messages:
        for call in message.tool_calls:
            if call.id == result.tool_call_id:
                name = f"the tool {call.name}"
    return f"A tool result of {len(result.content)} characters arrived from {name}."
