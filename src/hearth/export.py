"""Full export and import of one user's data (S5).

An export is one JSON document holding every row that belongs to the user: conversations,
messages with their metadata, events, memories and snapshots, fragments, statuses, archive
documents, and whatever later migrations add. It is table-driven: a table belongs to the user when
it has a ``user_id`` column, or when it references such a table (a snapshot row through its
conversation, say). Secrets (password hashes, sessions, API tokens), the job queue and derived
indexes (FTS tables, vector files) are left out; indexes are rebuilt from the rows on import.

Importing into an empty store reproduces the user's data with the same ids, in one transaction;
a broken file, a file from a different schema version, or a store that already holds data for the
user is refused with a clear error and changes nothing.
"""

from __future__ import annotations

import base64
import json
import sqlite3
from datetime import datetime, timezone
from typing import Any

from .errors import Conflict, InvalidInput
from .store import Store, migrations

FORMAT = "hearth-export"
FORMAT_VERSION = 1
# Never exported: secrets, per-deployment state, queued work.
EXCLUDED = frozenset({"users", "auth_sessions", "api_tokens", "schema_migrations", "app_state", "jobs"})


def _tables(conn: sqlite3.Connection) -> list[str]:
    """Ordinary tables, parents before children, without virtual tables and their shadows."""
    rows = conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
                        ).fetchall()
    virtual = [name for name, sql in rows if sql.upper().startswith("CREATE VIRTUAL TABLE")]
    names = [name for name, _ in rows
             if name not in virtual and not any(name.startswith(v + "_") for v in virtual)]
    order: list[str] = []

    def visit(name: str, path: tuple[str, ...] = ()) -> None:
        if name in order or name in path:
            return
        for parent in _parents(conn, name):
            if parent != name and parent in names:
                visit(parent, path + (name,))
        order.append(name)

    for name in sorted(names):
        visit(name)
    return [name for name in order if name not in EXCLUDED]


def _parents(conn: sqlite3.Connection, table: str) -> dict[str, list[tuple[str, str]]]:
    """{parent table: [(column, parent column), ...]} from the table's foreign keys."""
    out: dict[str, list[tuple[str, str]]] = {}
    for fk in conn.execute(f'PRAGMA foreign_key_list("{table}")'):
        out.setdefault(fk["table"], []).append((fk["from"], fk["to"] or "id"))
    return out


def _columns(conn: sqlite3.Connection, table: str) -> list[str]:
    return [r["name"] for r in conn.execute(f'PRAGMA table_info("{table}")')]


def _owner_filter(conn: sqlite3.Connection, table: str, scoped: dict[str, str]) -> str | None:
    """A WHERE clause selecting the user's rows of ``table``, or None if the table is not the user's."""
    if "user_id" in _columns(conn, table):
        return "user_id = :user_id"
    for parent, pairs in _parents(conn, table).items():
        if parent in scoped and parent != "users":
            column, parent_column = pairs[0]
            return f'"{column}" IN (SELECT "{parent_column}" FROM "{parent}" WHERE {scoped[parent]})'
    return None


def export_user(store: Store, user_id: int) -> dict[str, Any]:
    with store.read() as conn:
        scoped: dict[str, str] = {}
        tables: dict[str, Any] = {}
        for table in _tables(conn):
            where = _owner_filter(conn, table, scoped)
            if where is None:
                continue
            scoped[table] = where
            columns = _columns(conn, table)
            order = ", ".join(str(i) for i in range(1, len(columns) + 1))  # WITHOUT ROWID tables too
            rows = conn.execute(f'SELECT * FROM "{table}" WHERE {where} ORDER BY {order}',
                                {"user_id": user_id}).fetchall()
            tables[table] = {"columns": columns, "rows": [[_encode(v) for v in r] for r in rows]}
        return {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "schema_version": migrations.current_version(conn),
            "exported_at": datetime.now(timezone.utc).isoformat(),
            "tables": tables,
        }


def _encode(value: Any) -> Any:
    # JSON has no bytes: BLOBs (embeddings) travel as base64 in a tagged object.
    return {"$base64": base64.b64encode(value).decode("ascii")} if isinstance(value, bytes) else value


def _decode(value: Any) -> Any:
    if isinstance(value, dict):
        if set(value) != {"$base64"}:
            raise InvalidInput("the export holds an unexpected object value")
        try:
            return base64.b64decode(value["$base64"], validate=True)
        except (ValueError, TypeError):
            raise InvalidInput("the export holds damaged binary data") from None
    if isinstance(value, list):
        raise InvalidInput("the export holds an unexpected list value")
    return value


def _load(data: bytes | str | dict) -> dict[str, Any]:
    if isinstance(data, dict):
        return data
    try:
        text = data.decode("utf-8") if isinstance(data, bytes) else data
        return json.loads(text)
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"the export is not valid UTF-8 (byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise InvalidInput(f"the export is not valid JSON (line {exc.lineno}, column {exc.colno})") from None


def is_export(data: bytes) -> bool:
    """A cheap sniff: does this look like a Hearth export (without parsing a large file twice)?"""
    head = data[:200].decode("utf-8", "ignore").replace(" ", "")
    return head.startswith('{"format":"hearth-export"')


def import_user(store: Store, user_id: int, data: bytes | str | dict) -> dict[str, int]:
    """Load an export into an empty store for ``user_id``; returns rows imported per table."""
    doc = _load(data)
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise InvalidInput("this file is not a Hearth export")
    if doc.get("format_version") != FORMAT_VERSION:
        raise InvalidInput(f"unsupported export format version {doc.get('format_version')!r}")
    tables = doc.get("tables")
    if not isinstance(tables, dict):
        raise InvalidInput("the export has no tables")
    counts: dict[str, int] = {}
    with store.write() as conn:
        if doc.get("schema_version") != migrations.current_version(conn):
            raise InvalidInput(
                f"the export is from schema version {doc.get('schema_version')}, this store is at "
                f"{migrations.current_version(conn)}; import it with the Hearth version that wrote it"
            )
        if conn.execute("SELECT 1 FROM conversations LIMIT 1").fetchone() or conn.execute(
                "SELECT 1 FROM personas LIMIT 1").fetchone():
            raise Conflict("import needs an empty store: this one already holds conversations or personas")
        known = set(_tables(conn))
        for table in _tables(conn):
            if table not in tables:
                continue
            body = tables[table]
            columns, rows = body.get("columns"), body.get("rows")
            if not isinstance(columns, list) or not isinstance(rows, list):
                raise InvalidInput(f"table {table} in the export is malformed")
            existing = set(_columns(conn, table))
            if not set(columns) <= existing:
                raise InvalidInput(f"table {table} in the export has unknown columns")
            user_index = columns.index("user_id") if "user_id" in columns else None
            placeholders = ", ".join("?" * len(columns))
            quoted = ", ".join(f'"{c}"' for c in columns)
            sql = f'INSERT INTO "{table}" ({quoted}) VALUES ({placeholders})'
            for row in rows:
                if not isinstance(row, list) or len(row) != len(columns):
                    raise InvalidInput(f"a row of table {table} has the wrong shape")
                row = [_decode(v) for v in row]
                if user_index is not None:
                    row[user_index] = user_id
                try:
                    conn.execute(sql, row)
                except sqlite3.IntegrityError as exc:
                    raise InvalidInput(f"table {table} in the export breaks a constraint: {exc}") from None
            counts[table] = len(rows)
        unknown = set(tables) - known
        if unknown:
            raise InvalidInput(f"the export has tables this Hearth does not know: {', '.join(sorted(unknown))}")
        # Counters kept by triggers were copied and then counted again as rows arrived.
        conn.execute(
            "UPDATE conversations SET turn_count = (SELECT count(*) FROM messages m WHERE m.conversation_id ="
            " conversations.id AND m.kind IN ('chat', 'handoff_artifact') AND m.role IN ('user', 'assistant'))"
            " WHERE user_id = ?", (user_id,))
        problems = conn.execute("PRAGMA foreign_key_check").fetchall()
        if problems:
            raise InvalidInput(f"the export refers to rows it does not contain ({len(problems)} references)")
    return counts
