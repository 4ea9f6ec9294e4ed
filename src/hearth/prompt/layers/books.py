"""Fragment books and their scope (X3, F1): which personas' conversations a book may fire in.

A book is a fragment category: a card's character book and a World Info file each arrive as one
(their name is the fragments' category). As in SillyTavern, a card's own book belongs to its
character and a World Info book is global unless attached to chosen personas:

* ``all``: every persona (a World Info file's default, and any category that has no scope row);
* ``character``: only the persona the card made (``character_id``); a card export writes this
  book back inside the card;
* ``personas``: chosen personas.

``fragment_book_personas`` lists who may see a book that is not for all (the character
included), so the fragment layer compiles a persona's library with one indexed filter
(``store.queries.fragment_books.in_scope``). Changing a scope bumps the fragment library
version, so the next send compiles again.
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from hearth.errors import InvalidInput, NotFound
from hearth.records import ledger
from hearth.store import Store, utcnow
from hearth.store.queries import fragment_books
from hearth.store.queries import fragments as fragment_rows
from hearth.validation import check_id

SCOPES = ("all", "character", "personas")
MAX_BOOK_NAME = 60  # a category's limit

@dataclass(frozen=True)
class Book:
    name: str
    scope: str  # all, character or personas
    character_id: int | None  # the persona whose card brought the book in
    persona_ids: tuple[int, ...]  # who sees it (the character for ``character``; none for ``all``)
    fragments: int

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "scope": self.scope, "character_id": self.character_id,
                "persona_ids": list(self.persona_ids), "fragments": self.fragments}


def book_name(text: Any) -> str:
    """A book's name as a category stores it (spaces collapsed); empty is no book."""
    if not isinstance(text, str) or not text.strip():
        raise InvalidInput("a book needs a name (fragments without a category are in no book)")
    name = " ".join(text.split())
    if len(name) > MAX_BOOK_NAME:
        raise InvalidInput(f"a book name may be at most {MAX_BOOK_NAME} characters")
    return name


class Books:
    def __init__(self, store: Store, user_id: int, bump: Callable[[Any, int], int]):
        self.store = store
        self.user_id = user_id
        self._bump = bump  # the fragment library's version (``fragments.bump_version``)

    # -- reading ----------------------------------------------------------------------------------
    def list(self) -> builtins.list[Book]:
        """Every book: each category that holds fragments, and each scoped one, by name."""
        conn = self.store.connection()
        counts = fragment_rows.category_counts(conn, self.user_id)
        rows = {b.name: (b.id, b.scope, b.character_id) for b in fragment_books.for_user(conn, self.user_id)}
        members = fragment_books.members(conn, self.user_id)
        out = []
        for name in sorted(set(counts) | set(rows), key=str.casefold):
            book_id, scope, character_id = rows.get(name, (None, "all", None))
            ids = tuple(members.get(book_id, ())) if book_id is not None and scope != "all" else ()
            out.append(Book(name, scope, character_id, ids, counts.get(name, 0)))
        return out

    def get(self, name: str) -> Book:
        wanted = book_name(name)
        for book in self.list():
            if book.name == wanted:
                return book
        raise NotFound(f"no book {wanted!r} (a book is a fragment category)")

    def of_character(self, persona_id: int) -> builtins.list[str]:
        """The names of the books a persona's card brought in."""
        return fragment_books.names_of_character(self.store.connection(), self.user_id, persona_id)

    # -- changing ---------------------------------------------------------------------------------
    def set_scope(self, name: str, scope: str, persona_ids: Sequence[int] = ()) -> Book:
        """Give a book a scope: ``all``, ``character`` (its card's persona) or chosen ``personas``.

        Chosen personas that are exactly the book's character are its ``character`` scope."""
        if scope not in SCOPES:
            raise InvalidInput(f"a book's scope is one of {', '.join(SCOPES)}")
        with self.store.write() as conn:
            book = self.get(name)
            chosen: builtins.list[int] = []
            if scope == "personas":
                if isinstance(persona_ids, (str, bytes)) or not persona_ids:
                    raise InvalidInput("choose at least one persona for the book, or give it to all personas")
                for pid in persona_ids:
                    self._own_persona(conn, pid)
                    if pid not in chosen:
                        chosen.append(pid)
                if chosen == [book.character_id]:
                    scope = "character"
            elif scope == "character":
                if book.character_id is None:
                    raise InvalidInput(f"the book {book.name!r} did not come from a character card;"
                                       " choose its personas instead")
                chosen = [book.character_id]
            self._write(conn, book.name, scope, book.character_id, chosen)
            return self.get(book.name)

    def _write(self, conn: Any, name: str, scope: str, character_id: int | None, chosen: Sequence[int]) -> None:
        now = utcnow()
        book_id = fragment_books.put(conn, self.user_id, name, scope, character_id, now)
        fragment_books.set_personas(conn, book_id, chosen)
        self._bump(conn, self.user_id)
        # Ids and numbers only: a book's name is the person's text.
        ledger.append(conn, user_id=self.user_id, kind="fragment_book.scoped",
                      payload={"book_id": book_id, "scope": scope, "personas": len(chosen)})

    def _own_persona(self, conn: Any, persona_id: Any) -> None:
        if not fragment_books.owns_persona(conn, self.user_id, check_id(persona_id, "persona id")):
            raise NotFound(f"no persona {persona_id}")

    def _taken(self, conn: Any, name: str) -> bool:
        return fragment_books.name_taken(conn, self.user_id, name)

    def _free_name(self, conn: Any, wanted: str, owner: str) -> str:
        base, n = f"{wanted} ({owner})", 1
        while True:
            suffix = "" if n == 1 else f" {n}"
            name = " ".join((base[:MAX_BOOK_NAME - len(suffix)] + suffix).split())
            if not self._taken(conn, name):
                return name
            n += 1

    def for_character(self, wanted: str, persona_id: int, display_name: str) -> str:
        """A card's own book, scoped to the persona the card made: the name its entries take as
        their category. A name another book or category already holds gets the character's name
        added, so the new book does not join (and rescope) someone else's."""
        with self.store.write() as conn:
            self._own_persona(conn, persona_id)
            name = " ".join(wanted.split())[:MAX_BOOK_NAME] or " ".join(display_name.split())[:MAX_BOOK_NAME]
            if self._taken(conn, name):
                name = self._free_name(conn, name, display_name)
            self._write(conn, name, "character", persona_id, [persona_id])
            return name

    def for_world_info(self, wanted: str, import_prefix: str) -> str:
        """The category a World Info file's entries take: where its earlier import put them, else
        its own name, unless a card's own book holds that name (then it gets a name of its own, so
        a global book does not join a character's)."""
        conn = self.store.connection()
        earlier = fragment_rows.category_by_import(conn, self.user_id, _like_prefix(import_prefix))
        if earlier is not None:
            return earlier
        name = " ".join(wanted.split())[:MAX_BOOK_NAME]
        character = fragment_books.is_character_book(conn, self.user_id, name)
        return self._free_name(conn, name, "World Info") if character else name

    # -- export and import of a scope -------------------------------------------------------------
    def describe(self, name: str) -> dict[str, Any]:
        """A book's scope as a lorebook export records it: personas by their short name."""
        book = self.get(name)
        out: dict[str, Any] = {"scope": book.scope}
        if book.scope != "all":
            names = fragment_books.persona_names(self.store.connection(), self.user_id)
            out["personas"] = [names[pid] for pid in book.persona_ids if pid in names]
        return out

    def restore(self, name: str, recorded: Any) -> int:
        """Apply a scope a lorebook export recorded (:meth:`describe`); returns how many of its
        personas this deployment does not have. A book whose personas are all missing is kept
        from everyone rather than given to all: it was meant for someone in particular."""
        if not isinstance(recorded, dict) or recorded.get("scope") not in SCOPES:
            raise InvalidInput("extensions.hearth.scope must be all, character or personas")
        scope = recorded["scope"]
        wanted = recorded.get("personas", [])
        if not isinstance(wanted, builtins.list) or not all(isinstance(p, str) for p in wanted):
            raise InvalidInput("extensions.hearth.personas must be a list of persona names")
        with self.store.write() as conn:
            if scope == "all":
                self._write(conn, book_name(name), "all", self._character(conn, name), [])
                return 0
            ids = {persona_name: pid for pid, persona_name in fragment_books.persona_names(conn, self.user_id).items()}
            chosen = [ids[p] for p in dict.fromkeys(wanted) if p in ids]
            character = chosen[0] if scope == "character" and chosen else self._character(conn, name)
            if scope == "character" and not chosen:
                scope = "personas"
            self._write(conn, book_name(name), scope, character, chosen)
            return len(set(wanted)) - len(chosen)

    def _character(self, conn: Any, name: str) -> int | None:
        return fragment_books.character_of(conn, self.user_id, name)


def _like_prefix(prefix: str) -> str:
    return prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
