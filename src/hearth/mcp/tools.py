"""The MCP server (X2): Hearth's memory for Claude Desktop, IDE agents and any MCP client.

Built with the official ``mcp`` SDK (``MCPServer``). The same server runs over stdio
(``hearth mcp``, one user chosen by ``--user`` or ``--token``) and over streamable HTTP mounted in
``hearth serve`` at ``/mcp``, where the API token of each request decides the user (G2).

Tools only read, except the two proposals, which land in the review queue like every other
suggestion about the person (G4): applied at once only when the owner turned on
``auto_approve.memory``. A proposal is checked against the rules its approval would apply (text,
category, importance; a correction must change a memory that is still true), so nothing is queued
that the owner could never approve; a refusal is a tool error naming the field. Conversation
search follows the shield rules of the model's own search tool: shielded, hidden and trashed
conversations are never searched. Results cite conversation titles and dates. Resources: a
conversation's stored prompt and its last request size.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Callable

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceNotFoundError, ToolError
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS
from pydantic import StrictBool

from hearth import __version__
from hearth.errors import AuthError, Conflict, HearthError, InvalidInput, NotFound
from hearth.memory.duplicates import already_remembered
from hearth.memory.memories import check_memory  # the rule approval applies: a proposal meets it up front
from hearth.validation import check_text

if TYPE_CHECKING:
    from hearth.scope import Hearth, Scope

ScopeFor = Callable[[Any], "Scope"]  # the request context of a call -> the caller's scope

SEARCH_LIMIT = 8
MAX_LIMIT = 50
EXCERPT_CHARS = 500

INSTRUCTIONS = (
    "Hearth is the person's memory: past conversations with their companions, an archive of older "
    "chats and documents, long-term memories, household status and memory fragments. Search before "
    "you guess, cite what you use by its title and date, and propose memories or corrections rather "
    "than asserting them: the owner approves every change."
)


class HearthMCP(MCPServer):
    """An unknown tool is a protocol error (JSON-RPC -32602), not a tool result."""

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        if self._tool_manager.get_tool(name) is None:
            raise MCPError(code=INVALID_PARAMS, message=f"Unknown tool: {name}")
        return await super().call_tool(name, arguments, context)


def _day(stamp: str | None) -> str:
    return stamp[:10] if stamp else "undated"


def _excerpt(text: str) -> str:
    text = " ".join(text.split())
    return text[:EXCERPT_CHARS] + ("…" if len(text) > EXCERPT_CHARS else "")


def _limit(limit: int) -> int:
    if not 1 <= limit <= MAX_LIMIT:
        raise ToolError(f"limit must be between 1 and {MAX_LIMIT}")
    return limit


def build(hearth: "Hearth", scope_for: ScopeFor) -> MCPServer:
    """The MCP server over ``hearth``; ``scope_for(ctx)`` names the user of each call."""
    server = HearthMCP("hearth", title="Hearth", instructions=INSTRUCTIONS, version=__version__,
                       log_level="WARNING")

    def scope(ctx: Context) -> "Scope":
        try:
            return scope_for(ctx)
        except AuthError as exc:
            raise ToolError(str(exc)) from None

    def run(ctx: Context, action: Callable[["Scope"], str]) -> str:
        try:
            return action(scope(ctx))
        except HearthError as exc:  # bad input, unknown ids: a tool error the client can read
            raise ToolError(str(exc)) from None

    # -- search ------------------------------------------------------------------------------------
    def _search(s: "Scope", query: str, *, archive: bool, date_from: str | None, date_to: str | None,
                collections: list[str] | None, limit: int) -> str:
        from hearth.retrieval.deliberate import owner_search

        outcome = owner_search(hearth.context(s.user_id), query, include_shielded=False, archive=archive, messages=not archive,
                               date_from=date_from, date_to=date_to, collections=tuple(collections or ()),
                               limit=_limit(limit), origin="mcp:search_archive" if archive else "mcp:search_conversations")
        if not outcome.results:
            return "Nothing in the archive matched." if archive else "No matching conversations."
        lines = []
        for r in outcome.results:
            if r.kind == "message":
                lines.append(f"[{r.title or 'Untitled'}, {_day(r.date)}] (conversation {r.source_id}) "
                             f"{r.speaker}: {_excerpt(r.text)}")
            else:
                lines.append(f"[{r.title or 'Untitled'}, {_day(r.date)}] {_excerpt(r.text)}")
        what = "Archive results" if archive else "Results from past conversations"
        return f"{what} (reliability: {outcome.reliability}); cite them by title and date:\n" + "\n".join(lines)

    @server.tool(title="Search conversations")
    def search_conversations(query: str, ctx: Context, date_from: str | None = None, date_to: str | None = None,
                             limit: int = SEARCH_LIMIT) -> str:
        """Search the person's conversations with their companions (keyword and meaning). Shielded,
        hidden and trashed conversations are never searched. Each result is cited as
        [conversation title, date] (conversation id) speaker: excerpt. Dates are YYYY-MM-DD."""
        return run(ctx, lambda s: _search(s, query, archive=False, date_from=date_from, date_to=date_to,
                                          collections=None, limit=limit))

    @server.tool(title="Search the archive")
    def search_archive(query: str, ctx: Context, collections: list[str] | None = None,
                       date_from: str | None = None, date_to: str | None = None, limit: int = SEARCH_LIMIT) -> str:
        """Search the person's deep archive: imported conversations and documents. Each result is
        cited as [document name, date] excerpt."""
        return run(ctx, lambda s: _search(s, query, archive=True, date_from=date_from, date_to=date_to,
                                          collections=collections, limit=limit))

    @server.tool(title="List conversations")
    def list_conversations(ctx: Context, limit: int = 20) -> str:
        """The person's most recent conversations that are not shielded, hidden or trashed:
        id, title, companion and dates (for the conversation resources)."""
        def action(s: "Scope") -> str:
            names = {p.id: p.display_name or p.name for p in s.personas.list()}
            shown = [c for c in s.conversations.list(limit=_limit(limit) * 3) if c.eligible][:limit]
            if not shown:
                return "No conversations yet."
            return "Conversations, newest first:\n" + "\n".join(
                f"- {c.id}: {c.title or 'Untitled'} with {names.get(c.persona_id, '?')}, started "
                f"{_day(c.created_at)}, last {_day(c.updated_at)}{' (ended)' if c.state == 'ended' else ''}"
                for c in shown)
        return run(ctx, action)

    # -- memories ----------------------------------------------------------------------------------
    @server.tool(title="List memories")
    def list_memories(ctx: Context, include_ended: StrictBool = False) -> str:
        """The person's long-term memories in their manual order: id, [category], text, importance.
        Ended memories (no longer true) only with include_ended."""
        def action(s: "Scope") -> str:
            memories = [m for m in s.memories.list() if include_ended or m.current]
            if not memories:
                return "No memories yet."
            return "Long-term memories:\n" + "\n".join(
                f"- #{m.id} {f'[{m.category}] ' if m.category else ''}{m.text}"
                f"{f' (importance {m.importance})' if m.importance else ''}"
                f"{'' if m.current else f' (ended {_day(m.valid_until)})'}"
                f"{'' if m.eligible else ' (kept out of prompts)'}" for m in memories)
        return run(ctx, action)

    @server.tool(title="Read a memory")
    def read_memory(memory_id: int, ctx: Context) -> str:
        """One memory with its version history: what it said, and when each version was true."""
        def action(s: "Scope") -> str:
            m = s.memories.get(memory_id)
            lines = [f"Memory #{m.id}: {m.text}", f"Category: {m.category or '(none)'}; importance {m.importance}; "
                     f"true since {_day(m.valid_from)}{'' if m.current else f' until {_day(m.valid_until)}'}."]
            history = s.memories.history(memory_id)
            if len(history) > 1:
                lines.append("Versions:")
                lines += [f"- v{v.version} ({v.change} by {v.actor}, true {_day(v.valid_from)} to "
                          f"{_day(v.valid_until) if v.valid_until else 'now'}): {v.text}" for v in history]
            return "\n".join(lines)
        return run(ctx, action)

    def _proposed(s: "Scope", payload: dict[str, Any], reason: str) -> str:
        check_text(reason, "reason")  # stored with the proposal: the same text rule as everything else
        proposal = s.layers.review.propose("memory_add", payload, reason or "Proposed by an assistant over MCP.",
                                           source="model")
        if proposal is None:
            return "The same suggestion is already waiting for review, or the owner dismissed it before."
        if proposal.status == "approved":
            return (f"Applied at once (the owner turned on auto-approve for memories): proposal #{proposal.id}, "
                    f"memory #{proposal.result_id}.")
        return f"Queued for the owner's review as proposal #{proposal.id}; nothing changes until it is approved."

    @server.tool(title="Propose a memory")
    def propose_memory(text: str, ctx: Context, category: str = "", importance: int = 0, reason: str = "") -> str:
        """Suggest a new long-term memory about the person. It waits in the review queue until the
        owner approves it (applied at once only when the owner enabled auto-approve)."""
        def action(s: "Scope") -> str:
            # The review queue refuses what approval would refuse (memories.check_memory), and the
            # review rule runs now (U8): a repeat or a contradiction is answered, not queued.
            checked = check_memory(text, category, importance)[0]
            finding = s.layers.review.screen(checked)
            if finding is not None and finding.relation == "contradiction":
                return (f"Not queued: this would contradict memory #{finding.memory_id} "
                        f"(\u201c{_excerpt(finding.existing_text)}\u201d). If the person's life changed or "
                        f"the memory is wrong, propose a correction of memory {finding.memory_id} instead.")
            if already_remembered(checked, finding):
                assert finding is not None
                return f"Already remembered as memory #{finding.memory_id}; nothing was queued."
            return _proposed(s, {"text": text, "category": category, "importance": importance}, reason)
        return run(ctx, action)

    @server.tool(title="Propose a correction")
    def propose_correction(memory_id: int, text: str, ctx: Context, reason: str = "",
                           fact_changed: StrictBool = False) -> str:
        """Suggest new wording for an existing memory: a correction (it was never true as written),
        or with fact_changed=true a change in the person's life (the old version stays as history).
        Waits for the owner's approval like every suggestion."""
        def action(s: "Scope") -> str:
            current = s.memories.get(memory_id)  # an unknown (or another user's) id is refused now
            # What approving it would refuse is refused now: bad text, an ended memory, no change.
            checked = check_memory(text, current.category, current.importance)[0]
            if not current.current:
                raise Conflict(f"memory {memory_id} has ended; the owner restores a version to bring it back")
            if checked == current.text:
                raise InvalidInput(f"the proposed text is memory {memory_id}'s current text; nothing would change")
            payload: dict[str, Any] = {"text": checked, "memory_id": memory_id}
            if fact_changed:
                payload["fact_changed"] = True
            return _proposed(s, payload, reason)
        return run(ctx, action)

    # -- household status and fragments -----------------------------------------------------------
    @server.tool(title="Household status")
    def household_status(ctx: Context) -> str:
        """The present-tense household status: each field with its current value and since when."""
        def action(s: "Scope") -> str:
            fields = s.layers.household.fields()
            if not fields:
                return "No household status fields are set up."
            return "Household status:\n" + "\n".join(
                f"- {f.name}: {f.value if f.value is not None else '(unset)'}"
                f"{f' (since {_day(f.valid_from)})' if f.value is not None else ''}" for f in fields)
        return run(ctx, action)

    @server.tool(title="List fragments")
    def list_fragments(ctx: Context, category: str | None = None) -> str:
        """Memory fragments: short definitions that enter the companion's context when their trigger
        words appear. Id, [category], triggers and definition."""
        def action(s: "Scope") -> str:
            if category is not None:
                check_text(category, "category")  # a lone surrogate cannot even be looked up
            fragments = s.layers.fragments.list(category=category)
            if not fragments:
                return "No fragments."
            return "Fragments:\n" + "\n".join(
                f"- #{f.id} {f'[{f.category}] ' if f.category else ''}{', '.join(f.triggers)}: {f.definition}"
                f"{'' if f.enabled else ' (disabled)'}" for f in fragments)
        return run(ctx, action)

    # -- resources ---------------------------------------------------------------------------------
    def _conversation_resource(ctx: Context, conversation_id: str, read: Callable[["Scope", int], str]) -> str:
        try:
            number = int(conversation_id)
            if number < 1:
                raise ValueError
            return read(scope(ctx), number)
        except (ValueError, NotFound):
            raise ResourceNotFoundError(f"no conversation {conversation_id}") from None
        except ToolError as exc:
            raise ResourceNotFoundError(str(exc)) from None

    @server.resource("hearth://conversations/{conversation_id}/prompt", name="stored-prompt",
                     title="Stored prompt", mime_type="text/plain",
                     description="The conversation's stored static prompt (built on its first send)")
    def stored_prompt(conversation_id: str, ctx: Context) -> str:
        return _conversation_resource(ctx, conversation_id, lambda s, cid: s.stored_prompt(cid)
                                      or "(no stored prompt yet: it is built on the first send)")

    @server.resource("hearth://conversations/{conversation_id}/request-size", name="request-size",
                     title="Request size", mime_type="application/json",
                     description="The last request-size report of the conversation: numbers only")
    def request_size(conversation_id: str, ctx: Context) -> str:
        return _conversation_resource(ctx, conversation_id,
                                      lambda s, cid: json.dumps({"size": s.request_size(cid)}))

    return server


# -- who is calling --------------------------------------------------------------------------------
def fixed_user(hearth: "Hearth", user_id: int) -> ScopeFor:
    """stdio: one user for the whole session."""
    scope = hearth.scope(user_id)
    return lambda ctx: scope


def http_user(hearth: "Hearth") -> ScopeFor:
    """Streamable HTTP: the user the request's API token names (checked by the server's auth)."""

    def scope_for(ctx: Any) -> "Scope":
        request = ctx.request_context.request
        principal = getattr(request, "scope", {}).get("state", {}).get("principal") if request is not None else None
        if principal is None or principal.method != "token":
            raise AuthError("an API token is required")
        return hearth.scope(principal.user_id)

    return scope_for
