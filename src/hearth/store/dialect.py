"""Module SQL adapted for psycopg: what is left of SQLite's dialect once modules write forms both
engines read (``RETURNING id``, ``IS [NOT] DISTINCT FROM``, ``lower(x) LIKE lower(?)``,
``lower(x) = lower(?)``, ``ON CONFLICT DO NOTHING``, JSON through ``Engine.json_get``,
``json_int`` and ``json_set``).

Mostly DB-API differences: ``?`` and ``:name`` placeholders become ``%s``/``%(name)s`` (a literal
``%`` doubled), the two ``BEGIN`` forms ``Store`` uses become PostgreSQL's transaction openers, and
a one-row INSERT gets ``ON CONFLICT DO NOTHING`` so a duplicate is raised as ``ConstraintError``
without aborting the transaction (as on SQLite). Still rewritten, until modules write them
otherwise: scalar ``max``/``min``, ``instr``, ``LIMIT -1``, an empty ``IN ()``, bare columns in
``DO UPDATE SET`` and the ``sqlite_master`` table list. The store's connection passes each
statement through ``to_postgres`` once (cached).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

_STRING = re.compile(r"'(?:[^']|'')*'")
_INSERT = re.compile(r"^\s*INSERT\s+INTO\s+(\w+)", re.IGNORECASE)
_NAMED = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)")
_DO_UPDATE = re.compile(r"\bDO\s+UPDATE\s+SET\b", re.IGNORECASE)
_IDENT = re.compile(r"(?<![.\w:'])([A-Za-z_]\w*)\b(?!\s*[.(])")
_NOT_COLUMNS = frozenset({
    "case", "when", "then", "else", "end", "and", "or", "not", "null", "is", "in", "excluded", "true",
    "false", "where", "returning", "distinct", "from", "as", "between", "like", "ilike", "coalesce",
})
_TABLE_LIST = re.compile(r"FROM\s+sqlite_master\s+WHERE\s+type\s*=\s*'table'", re.IGNORECASE)
_EMPTY_IN = re.compile(r"(\bNOT\s+)?\bIN\s*\(\s*\)", re.IGNORECASE)
_ONE_ROW = re.compile(r"\)\s*VALUES\s*\(", re.IGNORECASE)
_MORE_ROWS = re.compile(r"\)\s*,\s*\(")
_SCALAR_MINMAX = re.compile(r"\b(max|min)\(\s*([\w.?]+)\s*,\s*([\w.?]+)\s*\)", re.IGNORECASE)
_INSTR = re.compile(r"\binstr\(", re.IGNORECASE)
_LIMIT_PARAM = re.compile(r"\bLIMIT\s+\?", re.IGNORECASE)


@dataclass(frozen=True)
class Statement:
    """A statement ready for psycopg."""

    sql: str
    begin: str = ""  # "write" or "read" for the two transaction openers Store uses
    # A one-row INSERT is sent with ON CONFLICT DO NOTHING and a row that was not inserted is
    # reported as SQLite's IntegrityError: the caller can handle the duplicate and go on in the
    # same transaction (PostgreSQL would otherwise abort the whole transaction on the error).
    conflict_raises: str = ""


@lru_cache(maxsize=4096)
def to_postgres(sql: str) -> Statement:
    """Rewrite one SQLite statement for PostgreSQL (cached: module SQL is a fixed set of strings)."""
    stripped = sql.strip().rstrip(";").strip()
    upper = stripped.upper()
    if upper == "BEGIN IMMEDIATE":
        return Statement("BEGIN", begin="write")
    if upper in ("BEGIN", "BEGIN DEFERRED"):
        return Statement("BEGIN ISOLATION LEVEL REPEATABLE READ", begin="read")
    # Work on the text outside string literals only, so a literal '?' or 'LIKE' stays as written.
    stripped = _TABLE_LIST.sub("FROM (SELECT tablename AS name FROM pg_tables WHERE schemaname = current_schema())"
                               " sqlite_master WHERE TRUE", stripped)
    update, target = _DO_UPDATE.search(stripped), _INSERT.match(stripped)
    if update and target:
        stripped = stripped[:update.end()] + _qualify(stripped[update.end():], target.group(1))
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
    return Statement(out, conflict_raises=conflict_raises)


def _qualify(assignments: str, table: str) -> str:
    """Name the target table on the right of each ``col = expr`` in ``DO UPDATE SET``: SQLite
    reads a bare column there as the existing row's, PostgreSQL calls it ambiguous."""
    stop = re.search(r"\b(WHERE|RETURNING)\b", assignments, re.IGNORECASE)
    head, tail = (assignments[:stop.start()], assignments[stop.start():]) if stop else (assignments, "")
    parts = []
    for part in _split_top(head):
        if "=" in part:
            left, right = part.split("=", 1)
            right = _IDENT.sub(lambda m: m.group(1) if m.group(1).lower() in _NOT_COLUMNS or m.group(1).isupper()
                               else f"{table}.{m.group(1)}", right)
            part = f"{left}={right}"
        parts.append(part)
    return ",".join(parts) + (" " + tail if tail and not head.endswith(" ") else tail)


def _split_top(text: str) -> list[str]:
    depth, start, out = 0, 0, []
    for i, ch in enumerate(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            out.append(text[start:i])
            start = i + 1
    out.append(text[start:])
    return out


def _returning_position(sql: str) -> int:
    found = re.search(r"\bRETURNING\b", sql, re.IGNORECASE)
    return found.start() if found else len(sql)


def _rewrite_code(code: str) -> str:
    code = code.replace("%", "%%")
    code = _SCALAR_MINMAX.sub(lambda m: f"{'GREATEST' if m.group(1).lower() == 'max' else 'LEAST'}"
                                        f"({m.group(2)}, {m.group(3)})", code)
    code = _INSTR.sub("strpos(", code)
    # SQLite reads LIMIT -1 as no limit; PostgreSQL reads LIMIT NULL that way.
    code = _LIMIT_PARAM.sub("LIMIT NULLIF(?::bigint, -1)", code)
    # SQLite accepts an empty list (IN: false, NOT IN: true); an empty array says the same and
    # takes the type of the column it meets.
    code = _EMPTY_IN.sub(lambda m: "<> ALL ('{}')" if m.group(1) else "= ANY ('{}')", code)
    code = code.replace("?", "%s")
    code = _NAMED.sub(r"%(\1)s", code)
    return code
