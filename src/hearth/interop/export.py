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
from datetime import datetime, timezone
from typing import Any

from hearth.errors import Conflict, ConstraintError, InvalidInput
from hearth.store import Connection, Store, catalog
from hearth.store.queries import user_export
from hearth.validation import check_tree, load_json

FORMAT = "hearth-export"
FORMAT_VERSION = 1
# Never exported: secrets (saved model connections among them), per-deployment state, queued work,
# and addresses still waiting for their verification code (with the code's hash) and the count of
# codes sent (U9).
EXCLUDED = frozenset({"users", "auth_sessions", "api_tokens", "model_connections", "schema_migrations",
                      "app_state", "jobs", "contact_claims", "contact_code_sends"})


def _tables(conn: Connection) -> list[str]:
    """Ordinary tables, parents before children, without virtual tables and their shadows."""
    order = catalog.dependency_order(conn, catalog.tables(conn))
    return [name for name in order if name not in EXCLUDED]


def _columns(conn: Connection, table: str) -> list[str]:
    return [name for name, _ in catalog.columns(conn, table)]


def export_user(store: Store, user_id: int) -> dict[str, Any]:
    with store.read() as conn:
        scoped: dict[str, str] = {}
        tables: dict[str, Any] = {}
        for table in _tables(conn):
            where = user_export.owner_filter(conn, table, scoped)
            if where is None:
                continue
            scoped[table] = where
            columns = _columns(conn, table)
            rows = user_export.rows(conn, table, where, user_id, len(columns))
            tables[table] = {"columns": columns, "rows": [[_encode(v) for v in r] for r in rows]}
        return {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "schema_version": store.schema_version(),
            "exported_at": datetime.now(timezone.utc).isoformat(),
            "tables": tables,
        }


def _encode(value: Any) -> Any:
    # JSON has no bytes: BLOBs (embeddings) travel as base64 in a tagged object.
    return {"$base64": base64.b64encode(value).decode("ascii")} if isinstance(value, bytes) else value


def _decode(value: Any, affinity: str, where: str) -> Any:
    """One exported value for a column of this affinity, or ``InvalidInput`` saying where."""
    if value is None:
        return None
    if isinstance(value, dict):
        if set(value) != {"$base64"} or affinity != "blob" or not isinstance(value["$base64"], str):
            raise InvalidInput(f"{where} holds an unexpected object value")
        try:
            return base64.b64decode(value["$base64"], validate=True)
        except (ValueError, TypeError):
            raise InvalidInput(f"{where} holds damaged binary data") from None
    if isinstance(value, (list, bool)):
        raise InvalidInput(f"{where} holds an unexpected {type(value).__name__} value")
    if affinity == "integer" and not isinstance(value, int):
        raise InvalidInput(f"{where} must be a whole number")
    if affinity == "real" and not isinstance(value, (int, float)):
        raise InvalidInput(f"{where} must be a number")
    if affinity == "text" and not isinstance(value, str):
        raise InvalidInput(f"{where} must be text")
    if isinstance(value, float) and value != value:
        raise InvalidInput(f"{where} is not a number")
    return value


def _affinity(declared: str) -> str:
    """SQLite's column affinity rules (section 3.1 of its datatype page), by declared type."""
    declared = declared.upper()
    if "INT" in declared:
        return "integer"
    if any(word in declared for word in ("CHAR", "CLOB", "TEXT")):
        return "text"
    if not declared or "BLOB" in declared:
        return "blob"
    if any(word in declared for word in ("REAL", "FLOA", "DOUB")):
        return "real"
    return "numeric"


def _load(data: bytes | str | dict) -> dict[str, Any]:
    if isinstance(data, dict):
        check_tree(data, "the export")
        return data
    try:
        text = data.decode("utf-8") if isinstance(data, bytes) else data
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"the export is not valid UTF-8 (byte {exc.start})") from None
    return load_json(text, "the export")


def is_export(data: bytes) -> bool:
    """A cheap sniff: does this look like a Hearth export (without parsing a large file twice)?"""
    head = data[:200].decode("utf-8", "ignore").replace(" ", "")
    return head.startswith('{"format":"hearth-export"')


def _checked_tables(conn: Connection, tables: Any) -> list[tuple[str, list[str], list[list[Any]]]]:
    """The whole export, shape and types, checked before anything is written: (table, columns, rows)."""
    if not isinstance(tables, dict):
        raise InvalidInput("the export has no tables")
    known = _tables(conn)
    unknown = set(tables) - set(known)
    if unknown:
        raise InvalidInput(f"the export has tables this Hearth does not know: {', '.join(sorted(unknown))}")
    checked = []
    for table in known:
        if table not in tables:
            continue
        body = tables[table]
        if not isinstance(body, dict):
            raise InvalidInput(f"table {table} in the export is not an object")
        columns, rows = body.get("columns"), body.get("rows")
        if not isinstance(columns, list) or not isinstance(rows, list):
            raise InvalidInput(f"table {table} in the export is malformed")
        if not all(isinstance(c, str) for c in columns):
            raise InvalidInput(f"table {table} in the export has a column name that is not text")
        if len(set(columns)) != len(columns):
            raise InvalidInput(f"table {table} in the export names a column twice")
        declared = {name: _affinity(kind) for name, kind in catalog.columns(conn, table)}
        if not set(columns) <= set(declared):
            raise InvalidInput(f"table {table} in the export has unknown columns")
        affinities = [declared[c] for c in columns]
        decoded = []
        for n, row in enumerate(rows, start=1):
            if not isinstance(row, list) or len(row) != len(columns):
                raise InvalidInput(f"row {n} of table {table} has the wrong shape")
            decoded.append([_decode(v, a, f"table {table}, row {n}, column {c}")
                            for v, a, c in zip(row, affinities, columns)])
        checked.append((table, columns, decoded))
    return checked


def import_user(store: Store, user_id: int, data: bytes | str | dict) -> dict[str, int]:
    """Load an export into an empty store for ``user_id``; returns rows imported per table.

    The whole file is checked (shape, column names, value types) before the first row is written,
    and the rows go in as one transaction: a file refused half-way leaves the store as it was.
    """
    doc = _load(data)
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise InvalidInput("this file is not a Hearth export")
    if doc.get("format_version") != FORMAT_VERSION:
        raise InvalidInput(f"unsupported export format version {doc.get('format_version')!r}")
    counts: dict[str, int] = {}
    with store.write() as conn:
        if doc.get("schema_version") != store.schema_version():
            raise InvalidInput(
                f"the export is from schema version {doc.get('schema_version')}, this store is at "
                f"{store.schema_version()}; import it with the Hearth version that wrote it"
            )
        if user_export.holds_threads(conn):
            raise Conflict("import needs an empty store: this one already holds conversations or personas")
        for table, columns, rows in _checked_tables(conn, doc.get("tables")):
            user_index = columns.index("user_id") if "user_id" in columns else None
            if user_index is not None:
                for row in rows:
                    row[user_index] = user_id
            try:
                user_export.insert_rows(conn, table, columns, rows)
            except ConstraintError as exc:
                raise InvalidInput(f"table {table} in the export breaks a constraint: {exc}") from None
            counts[table] = len(rows)
        # Counters kept by triggers were copied and then counted again as rows arrived.
        user_export.recount_turns(conn, user_id)
        # Rows came with their ids: new rows must get ids after them.
        store.engine.advance_identities(conn, list(counts))
        # An engine that checks every reference as each row arrives raised a ConstraintError above.
        problems = store.engine.foreign_key_violations(conn)
        if problems:
            raise InvalidInput(f"the export refers to rows it does not contain ({problems} references)")
    return counts
