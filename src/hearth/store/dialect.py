"""Module SQL adapted for psycopg: what is left of SQLite's dialect once modules write forms both
engines read (``RETURNING id``, ``IS [NOT] DISTINCT FROM``, ``lower(x) LIKE lower(?)``,
``lower(x) = lower(?)``, ``ON CONFLICT DO NOTHING``, ``CASE`` for the later of two values,
qualified columns in ``DO UPDATE SET``; JSON and containment through ``Engine.json_get``,
``json_int``, ``json_set`` and ``contains``).

DB-API differences: ``?`` and ``:name`` placeholders become ``%s``/``%(name)s`` (a literal ``%``
doubled), the two ``BEGIN`` forms ``Store`` uses become PostgreSQL's transaction openers, and a
one-row INSERT gets ``ON CONFLICT DO NOTHING`` so a duplicate is raised as ``ConstraintError``
without aborting the transaction (as on SQLite). One SQL rewrite is left: an empty ``IN ()``,
which SQLite reads as an empty list and a module may build from a list that happens to be empty.
The store's connection passes each statement through ``to_postgres`` once (cached).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from .ahead import reads_only

_STRING = re.compile(r"'(?:[^']|'')*'")
_INSERT = re.compile(r"^\s*INSERT\s+INTO\s+(\w+)", re.IGNORECASE)
_NAMED = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)")
_EMPTY_IN = re.compile(r"(\bNOT\s+)?\bIN\s*\(\s*\)", re.IGNORECASE)
_ONE_ROW = re.compile(r"\)\s*VALUES\s*\(", re.IGNORECASE)
_MORE_ROWS = re.compile(r"\)\s*,\s*\(")


@dataclass(frozen=True)
class Statement:
    """A statement ready for psycopg."""

    sql: str
    begin: str = ""  # "write" or "read" for the two transaction openers Store uses
    # A one-row INSERT is sent with ON CONFLICT DO NOTHING and a row that was not inserted is
    # reported as SQLite's IntegrityError: the caller can handle the duplicate and go on in the
    # same transaction (PostgreSQL would otherwise abort the whole transaction on the error).
    conflict_raises: str = ""
    reads_only: bool = False  # a read a snapshot may send ahead (store/ahead.py)


@lru_cache(maxsize=4096)
def to_postgres(sql: str) -> Statement:
    """Rewrite one SQLite statement for PostgreSQL (cached: module SQL is a fixed set of strings)."""
    stripped = sql.strip().rstrip(";").strip()
    upper = stripped.upper()
    if upper == "BEGIN IMMEDIATE":
        return Statement("BEGIN", begin="write")
    if upper in ("BEGIN", "BEGIN DEFERRED"):
        return Statement("BEGIN ISOLATION LEVEL REPEATABLE READ", begin="read")
    # Work on the text outside string literals only, so a literal '?' stays as written.
    pieces: list[str] = []
    last = 0
    for match in _STRING.finditer(stripped):
        pieces.append(_rewrite_code(stripped[last:match.start()]))
        pieces.append(match.group(0).replace("%", "%%"))
        last = match.end()
    pieces.append(_rewrite_code(stripped[last:]))
    out = "".join(pieces)
    conflict_raises = ""
    insert = _INSERT.match(out)
    if insert:
        single_row = _ONE_ROW.search(out) is not None and not _MORE_ROWS.search(out)
        if single_row and not re.search(r"\bON\s+CONFLICT\b", out, re.IGNORECASE):
            conflict_raises = insert.group(1).lower()
            position = _returning_position(out)
            out = out[:position].rstrip() + " ON CONFLICT DO NOTHING" + (" " + out[position:] if position < len(out) else "")
    return Statement(out, conflict_raises=conflict_raises, reads_only=reads_only(out))


def _returning_position(sql: str) -> int:
    found = re.search(r"\bRETURNING\b", sql, re.IGNORECASE)
    return found.start() if found else len(sql)


def _rewrite_code(code: str) -> str:
    code = code.replace("%", "%%")
    # SQLite accepts an empty list (IN: false, NOT IN: true); an empty array says the same and
    # takes the type of the column it meets.
    code = _EMPTY_IN.sub(lambda m: "<> ALL ('{}')" if m.group(1) else "= ANY ('{}')", code)
    code = code.replace("?", "%s")
    code = _NAMED.sub(r"%(\1)s", code)
    return code
