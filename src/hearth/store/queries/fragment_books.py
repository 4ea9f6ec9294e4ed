"""Fragment books and their scope (``fragment_books``, ``fragment_book_personas``): which
personas' conversations a book (a fragment category) may fire in."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from hearth.store import Connection

from .fragments import Fragment

# A user's enabled fragments whose book is in scope for one persona: a category without a row is
# for all; otherwise the row says all, or lists the persona (unique index and primary key).
IN_SCOPE_SQL = (
    "SELECT f.* FROM fragments f LEFT JOIN fragment_books b ON b.user_id = f.user_id AND b.name = f.category"
    " WHERE f.user_id = ? AND f.enabled = 1 AND (b.id IS NULL OR b.scope = 'all' OR EXISTS ("
    "SELECT 1 FROM fragment_book_personas s WHERE s.book_id = b.id AND s.persona_id = ?)) ORDER BY f.id")
# Does any of a user's books leave someone out? If not, every persona compiles the same library.
ANY_SCOPED_SQL = "SELECT 1 FROM fragment_books WHERE user_id = ? AND scope <> 'all' LIMIT 1"


@dataclass(frozen=True)
class BookRow:
    id: int
    name: str
    scope: str
    character_id: int | None


def in_scope(conn: Connection, user_id: int, persona_id: int) -> list[Fragment]:
    """The user's enabled fragments whose book is in scope for the persona, by id."""
    return [Fragment.from_row(r) for r in conn.execute(IN_SCOPE_SQL, (user_id, persona_id))]


def any_scoped(conn: Connection, user_id: int) -> bool:
    """Whether any of the user's books is not for all personas."""
    return conn.execute(ANY_SCOPED_SQL, (user_id,)).fetchone() is not None


def for_user(conn: Connection, user_id: int) -> list[BookRow]:
    return [BookRow(r[1], r[0], r[2], r[3]) for r in conn.execute(
        "SELECT name, id, scope, character_id FROM fragment_books WHERE user_id = ?", (user_id,))]


def members(conn: Connection, user_id: int) -> dict[int, list[int]]:
    """book id -> the personas listed for it, by persona id."""
    out: dict[int, list[int]] = {}
    for book_id, persona_id in conn.execute(
            "SELECT s.book_id, s.persona_id FROM fragment_book_personas s JOIN fragment_books b ON b.id = s.book_id"
            " WHERE b.user_id = ? ORDER BY s.persona_id", (user_id,)):
        out.setdefault(book_id, []).append(persona_id)
    return out


def names_of_character(conn: Connection, user_id: int, persona_id: int) -> list[str]:
    """The names of the books a persona's card brought in."""
    return [r[0] for r in conn.execute(
        "SELECT name FROM fragment_books WHERE user_id = ? AND character_id = ? ORDER BY name", (user_id, persona_id))]


def character_of(conn: Connection, user_id: int, name: str) -> int | None:
    """The persona whose card brought the book in (None: none, or no such book)."""
    row = conn.execute("SELECT character_id FROM fragment_books WHERE user_id = ? AND name = ?",
                       (user_id, name)).fetchone()
    return None if row is None else row[0]


def is_character_book(conn: Connection, user_id: int, name: str) -> bool:
    return conn.execute("SELECT 1 FROM fragment_books WHERE user_id = ? AND name = ?"
                        " AND character_id IS NOT NULL", (user_id, name)).fetchone() is not None


def name_taken(conn: Connection, user_id: int, name: str) -> bool:
    """Whether a fragment category or a book already has this name."""
    return conn.execute("SELECT 1 FROM fragments WHERE user_id = ? AND category = ?"
                        " UNION ALL SELECT 1 FROM fragment_books WHERE user_id = ? AND name = ?",
                        (user_id, name, user_id, name)).fetchone() is not None


def put(conn: Connection, user_id: int, name: str, scope: str, character_id: int | None, now: str) -> int:
    """Create the book or set its scope and character; returns its id."""
    conn.execute("INSERT INTO fragment_books (user_id, name, scope, character_id, created_at, updated_at)"
                 " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (user_id, name) DO UPDATE SET scope = excluded.scope,"
                 " character_id = excluded.character_id, updated_at = excluded.updated_at",
                 (user_id, name, scope, character_id, now, now))
    return conn.execute("SELECT id FROM fragment_books WHERE user_id = ? AND name = ?", (user_id, name)).fetchone()[0]


def set_personas(conn: Connection, book_id: int, persona_ids: Sequence[int]) -> None:
    """The book's personas are these and no others."""
    conn.execute("DELETE FROM fragment_book_personas WHERE book_id = ?", (book_id,))
    conn.executemany("INSERT INTO fragment_book_personas (book_id, persona_id) VALUES (?, ?)",
                     [(book_id, pid) for pid in persona_ids])


# The books' own reads of a user's personas (who may be chosen, and their short names).
def owns_persona(conn: Connection, user_id: int, persona_id: int) -> bool:
    return conn.execute("SELECT 1 FROM personas WHERE id = ? AND user_id = ?",
                        (persona_id, user_id)).fetchone() is not None


def persona_names(conn: Connection, user_id: int) -> dict[int, str]:
    """persona id -> short name, for the user's personas."""
    return dict(conn.execute("SELECT id, name FROM personas WHERE user_id = ?", (user_id,)).fetchall())
