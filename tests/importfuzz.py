"""A reusable property-based fuzz for importers (U3, S3): structurally mutated files.

An importer passes when every mutated file either imports or is refused with ``InvalidInput``
(a clear message) and, when refused, leaves the database byte-for-byte as it was. To fuzz a new
importer, give ``json_mutants`` (or ``text_mutants``) a valid file and call ``all_or_nothing``
with a function that runs the import:

    @given(json_mutants(VALID))
    def test_u3_my_importer_is_all_or_nothing(tmp_path_factory, value): ...
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from typing import Any, Callable

from hypothesis import strategies as st

from hearth.errors import InvalidInput
from hearth.store import is_postgres

# Values of every JSON type, including the awkward ones: huge numbers, NUL, lone surrogates.
ODD_SCALARS = st.one_of(
    st.none(), st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([0, -1, 1e20, -1e20, 1.5, 2**63, 2**64, float("inf")]),
    st.text(max_size=20),
    st.sampled_from(["", "\x00", "\ud800", "a\x00b", "user", "assistant", "=== AUTO-RECALLED CONTEXT ==="]),
)
ODD_VALUES = st.recursive(
    ODD_SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)),
    max_leaves=8,
)


def _paths(value: Any, prefix: tuple = ()) -> list[tuple]:
    """Every path (keys and indexes) to a node of a JSON value, the root included."""
    out = [prefix]
    stack = [(value, prefix)]
    while stack:
        node, path = stack.pop()
        children = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        for key, child in children:
            out.append(path + (key,))
            stack.append((child, path + (key,)))
    return out


def _replace(value: Any, path: tuple, new: Any) -> Any:
    if not path:
        return new
    copy = json.loads(json.dumps(value))
    node = copy
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = new
    return copy


def _delete(value: Any, path: tuple) -> Any:
    if not path:
        return value
    copy = json.loads(json.dumps(value))
    node = copy
    for key in path[:-1]:
        node = node[key]
    del node[path[-1]]
    return copy


@st.composite
def json_mutants(draw: st.DrawFn, valid: Any, max_mutations: int = 3) -> bytes:
    """A valid JSON file with 1..max_mutations structural changes, serialised to bytes.

    Changes: a node replaced by a value of any type, a node deleted, a node wrapped in a list or
    an object, a node nested very deep. Non-finite and out-of-range numbers may appear.
    """
    value = valid
    for _ in range(draw(st.integers(min_value=1, max_value=max_mutations))):
        path = draw(st.sampled_from(_paths(value)))
        node = value
        for key in path:
            node = node[key]
        action = draw(st.sampled_from(["replace", "replace", "delete", "wrap_list", "wrap_object", "deepen"]))
        if action == "replace":
            value = _replace(value, path, draw(ODD_VALUES))
        elif action == "delete":
            value = _delete(value, path)
        elif action == "wrap_list":
            value = _replace(value, path, [node])
        elif action == "wrap_object":
            value = _replace(value, path, {"value": node})
        else:
            depth = draw(st.sampled_from([70, 5_000, 100_000]))
            text = json.dumps(_replace(value, path, "\ue000deep\ue000"), ensure_ascii=False)
            return text.replace('"\ue000deep\ue000"', "[" * depth + "]" * depth).encode("utf-8", "surrogatepass")
    # Escaped (\\ud800 in the text) or raw (bytes that are not UTF-8): both must be refused cleanly.
    return json.dumps(value, ensure_ascii=draw(st.booleans())).encode("utf-8", "surrogatepass")


@st.composite
def text_mutants(draw: st.DrawFn, valid: str) -> bytes:
    """A valid text file with lines dropped, duplicated, replaced or garbled, as bytes."""
    lines = valid.split("\n")
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        i = draw(st.integers(min_value=0, max_value=max(0, len(lines) - 1)))
        action = draw(st.sampled_from(["drop", "dup", "replace", "insert"]))
        if action == "drop" and lines:
            lines.pop(i)
        elif action == "dup" and lines:
            lines.insert(i, lines[i])
        else:
            new = draw(st.one_of(st.text(max_size=40), st.sampled_from(
                ["=== ===", "===", "x said:", "said:", "\x00", "=== T (2024-13-99) ===", "\ufeff", "\r"])))
            if action == "replace" and lines:
                lines[i] = new
            else:
                lines.insert(i, new)
    raw = "\n".join(lines).encode("utf-8", "surrogatepass")
    if draw(st.booleans()):
        return raw
    cut = draw(st.integers(min_value=0, max_value=len(raw)))
    return raw[:cut] + draw(st.sampled_from([b"", b"\xff", b"\xc3", b"\x00"])) + raw[cut:]


def content_hash(where: Any) -> str:
    """A digest of every row of every table (schema included): equal digests, equal contents.

    ``where`` is a deployment (a ``Hearth``: its database on either engine) or a SQLite file."""
    store = getattr(where, "store", None)
    if store is not None and is_postgres(store.connection()):
        return _postgres_hash(store.url)
    path = where.settings.database_path if store is not None else where
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        digest = hashlib.sha256()
        tables = [r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
        for table in tables:
            digest.update(table.encode())
            for row in conn.execute(f'SELECT * FROM "{table}" ORDER BY 1'):
                digest.update(repr(tuple(row)).encode("utf-8", "surrogatepass"))
        return digest.hexdigest()
    finally:
        conn.close()


def _postgres_hash(url: str) -> str:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        digest = hashlib.sha256()
        with conn.transaction():
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            schema = conn.execute(
                "SELECT table_name, column_name, data_type FROM information_schema.columns"
                " WHERE table_schema = current_schema() ORDER BY table_name, ordinal_position").fetchall()
            digest.update(repr(schema).encode())
            for (table,) in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"
                                         " ORDER BY tablename").fetchall():
                digest.update(table.encode())
                for row in conn.execute(f'SELECT t::text FROM "{table}" t ORDER BY 1'):
                    digest.update(row[0].encode("utf-8", "surrogatepass"))
        return digest.hexdigest()


def all_or_nothing(where: Any, run: Callable[[], Any]) -> str:
    """Run an import: it succeeds ("ok"), or refuses with InvalidInput and changes nothing ("refused").

    Any other exception (a traceback a person would see) fails the property.
    """
    before = content_hash(where)
    try:
        run()
    except InvalidInput as exc:
        assert str(exc), "a refusal must say why"
        assert content_hash(where) == before, f"refused ({exc}) but the database changed"
        return "refused"
    return "ok"
