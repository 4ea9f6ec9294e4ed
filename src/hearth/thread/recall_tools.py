"""The model's deliberate search and read tools (A4): past conversations, the archive and the
library, each cited by title and date, bound to one user's store and embedder."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from hearth.errors import InvalidInput, NotFound
from hearth.prompt.layers.archive_recall import speakers
from hearth.prompt.layers.keyword_recall import persona_names
from hearth.providers.base import ToolSpec
from hearth.retrieval.deliberate import date_args
from hearth.retrieval.hybrid import Filters, search
from hearth.thread.files import Library
from hearth.thread.tools import Tool, ToolContext

if TYPE_CHECKING:
    from hearth.records.context import Context

TOOL_RESULTS = 8


def _query_arg(args: dict[str, Any], tool: str) -> str:
    query = args.get("query")
    if not isinstance(query, str) or not query.strip():
        raise InvalidInput(f"{tool} needs a non-empty 'query'")
    return query.strip()[:1_000]


def _cite(results: list) -> str:
    """One line per result: [title, date] speaker: excerpt (A4: cited by title and date)."""
    lines = []
    for r in results:
        text = " ".join(r.text.split())
        text = text[:500] + ("…" if len(text) > 500 else "")
        who = f"{r.speaker}: " if r.kind == "message" else ""
        lines.append(f"[{r.title}, {r.date[:10] if r.date else 'undated'}] {who}{text}")
    return "\n".join(lines)


class RecallTools:
    """The model's deliberate search and read tools, bound to one user's store and embedder."""

    def __init__(self, user: Context, embedder: Callable[[], Any] | None):
        self._user = user
        self.store = user.store
        self.embedder = embedder

    def _persona(self, ctx: ToolContext):
        return self._user.personas.get(ctx.persona_id)

    def past_conversations(self, ctx: ToolContext, args: dict[str, Any]) -> str:
        """Other conversations of this companion; never shielded, hidden or trashed ones (V2)."""
        query = _query_arg(args, "search_past_conversations")
        persona = self._persona(ctx)
        filters = Filters(sources=("messages",), exclude_conversation_ids=(ctx.conversation_id,),
                          persona_id=ctx.persona_id, eligible_only=True, include_shielded=False, **date_args(args))
        outcome = search(ctx.conn, self._user.user_id, query, filters=filters, limit=TOOL_RESULTS,
                         embedder=self.embedder() if self.embedder else None, db_key=self.store.key,
                         origin="tool:search_past_conversations", store=self.store,
                         conversation_id=ctx.conversation_id, ignore_names=persona_names(persona),
                         speaker_names=speakers(persona))
        if not outcome.results:
            return "No matching past conversations."
        for r in outcome.results:
            r.speaker = (persona.user_label if r.speaker == "user" else persona.assistant_label).rstrip(":")
        return (f"Results from past conversations (reliability: {outcome.reliability}); cite them by title "
                f"and date, and use the dates exactly as given:\n" + _cite(outcome.results))

    def search_archive(self, ctx: ToolContext, args: dict[str, Any]) -> str:
        query = _query_arg(args, "search_archive")
        if not self._persona(ctx).archive_access:
            return "Archive access is turned off for this companion."
        collections = args.get("collections") or ()
        if not isinstance(collections, (list, tuple)) or not all(isinstance(c, str) for c in collections):
            raise InvalidInput("collections must be a list of collection names")
        filters = Filters(sources=("chunks",), collections=tuple(collections)[:20], **date_args(args))
        outcome = search(ctx.conn, self._user.user_id, query, filters=filters, limit=TOOL_RESULTS,
                         embedder=self.embedder() if self.embedder else None, db_key=self.store.key,
                         origin="tool:search_archive", store=self.store, conversation_id=ctx.conversation_id)
        if not outcome.results:
            return "Nothing in the archive matched."
        return (f"Archive results (reliability: {outcome.reliability}); cite them by document name and date, "
                f"and use the dates exactly as given:\n" + _cite(outcome.results))

    def read_library_file(self, ctx: ToolContext, args: dict[str, Any]) -> str:
        library = Library(self._user.settings.home, self._user.user_id)
        path = args.get("path") or ""
        if not path:
            files = library.list()
            if not files:
                return "The library is empty."
            return "Library files:\n" + "\n".join(f"- {f['path']} ({f['bytes']} bytes)" for f in files)
        try:
            return f'Library file "{path}":\n' + library.read(path)
        except NotFound as exc:
            return f"Error: {exc}"

    def tools(self) -> list[Tool]:
        date_props = {
            "date_from": {"type": "string", "description": "only results on or after this date, YYYY-MM-DD"},
            "date_to": {"type": "string", "description": "only results on or before this date, YYYY-MM-DD"},
        }
        return [
            Tool(ToolSpec(
                name="search_past_conversations",
                description=("Search the person's other conversations with you for what was said before "
                             "(keyword and meaning). Returns short excerpts cited by conversation title and date."),
                parameters={"type": "object", "properties": {
                    "query": {"type": "string", "description": "what to look for, in words or a phrase"},
                    **date_props}, "required": ["query"], "additionalProperties": False},
            ), self.past_conversations),
            Tool(ToolSpec(
                name="search_archive",
                description=("Search the person's deep archive (imported conversations and documents). Returns "
                             "excerpts cited by document name and date."),
                parameters={"type": "object", "properties": {
                    "query": {"type": "string", "description": "what to look for"},
                    "collections": {"type": "array", "items": {"type": "string"},
                                    "description": "limit to these collections (optional)"},
                    **date_props}, "required": ["query"], "additionalProperties": False},
            ), self.search_archive),
            Tool(ToolSpec(
                name="read_library_file",
                description=("Read a text file from the person's library, or list the library when no path is "
                             "given. Paths are relative to the library folder."),
                parameters={"type": "object", "properties": {
                    "path": {"type": "string", "description": "relative path of the file; empty to list"}},
                    "additionalProperties": False},
            ), self.read_library_file),
        ]


