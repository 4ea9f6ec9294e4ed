"""The owner's deliberate search (U1, V2): every eligible conversation and the archive, logged
like every search (A3)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Protocol, TypedDict

from hearth.errors import InvalidInput
from hearth.retrieval.hybrid import Filters, search
from hearth.validation import check_text

if TYPE_CHECKING:
    from hearth.store import Store


class Searcher(Protocol):
    """What the owner's search needs of one user's context (a ``records.context.Context`` is one):
    the store, the user every query carries, and the embedder, asked for only when it is used."""

    @property
    def store(self) -> Store: ...

    @property
    def user_id(self) -> int: ...

    @property
    def embedder(self) -> Any: ...


class _Dates(TypedDict):
    date_from: str | None
    date_to: str | None


def date_args(args: dict[str, Any]) -> _Dates:
    out: _Dates = {"date_from": None, "date_to": None}
    for key in ("date_from", "date_to"):
        value = args.get(key)
        if value in (None, ""):
            out[key] = None
        elif isinstance(value, str) and re.fullmatch(r"\d{4}-\d{2}-\d{2}", value.strip()):
            out[key] = value.strip()
        else:
            raise InvalidInput(f"{key} must be a date written YYYY-MM-DD")
    return out


def owner_search(ctx: Searcher, query: str, *, include_shielded: bool = False, archive: bool = True,
                 messages: bool = True, date_from: str | None = None, date_to: str | None = None,
                 collections: tuple[str, ...] = (), limit: int = 10, embed: bool = True, origin: str = "owner"):
    """The owner's deliberate search (U1, V2): every conversation of every persona that is not
    hidden or trashed, shielded ones only with ``include_shielded`` (off by default), and the archive.
    Logged like every search (A3)."""
    if not isinstance(query, str) or not query.strip():
        raise InvalidInput("search needs a non-empty query")
    check_text(query, "the search query")
    for collection in collections:
        check_text(collection, "a collection")
    if not 1 <= int(limit) <= 100:
        raise InvalidInput("limit must be between 1 and 100")
    dates = date_args({"date_from": date_from, "date_to": date_to})
    sources = tuple(s for s, on in (("messages", messages), ("chunks", archive)) if on)
    if not sources:
        raise InvalidInput("choose conversations, the archive, or both")
    filters = Filters(sources=sources, eligible_only=True, include_shielded=include_shielded,
                      collections=tuple(collections), **dates)
    # Made, not loaded: the local model loads on the first query it embeds, and a user with no
    # vectors to compare with has none embedded (``candidates.vector_lists``).
    embedder = ctx.embedder if embed else None
    with ctx.store.read() as conn:
        return search(conn, ctx.user_id, query.strip()[:1_000], filters=filters, limit=int(limit),
                      embedder=embedder, db_key=ctx.store.key, origin=origin, store=ctx.store)
