"""The store seam (S9, S12): engine specifics and every SQL statement live under src/hearth/store/.

Outside ``store/`` no module runs a statement (they are in ``store/queries/``), imports ``sqlite3``
or ``psycopg`` or tests which engine it runs on (``is_postgres``); both engines raise Hearth's
errors, and ``app_state`` has one reader and writer.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from hearth.errors import ConstraintError
from hearth.store import engine_of, inserted_id, state, utcnow

SRC = Path(__file__).resolve().parent.parent / "src"
STORE = "hearth/store/"
DRIVERS = ("sqlite3", "psycopg")
# Modules outside store/ allowed to name an engine: none. PostgreSQL's keyword search
# (retrieval/pgsearch.py) is selected through ``Engine.keyword_index`` and names no driver.
ALLOWED: frozenset[str] = frozenset()


STATEMENT_CALLS = ("execute", "executemany", "executescript")


def _runs_statements(path: Path) -> bool:
    return any(isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
               and node.func.attr in STATEMENT_CALLS
               for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))))


def test_s12_no_module_outside_the_store_runs_a_statement():
    running = sorted(path.relative_to(SRC).as_posix() for path in (SRC / "hearth").rglob("*.py")
                     if not path.relative_to(SRC).as_posix().startswith(STORE) and _runs_statements(path))
    assert not running, f"statements outside src/hearth/store/ (they belong in store/queries/): {running}"


def test_s12_the_statement_check_sees_calls_on_any_connection(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text("def f(store):\n    store.connection().execute('SELECT 1')\n", encoding="utf-8")
    assert _runs_statements(sample)
    sample.write_text("def f(conn):\n    return queries.personas.get(conn, 1)\n", encoding="utf-8")
    assert not _runs_statements(sample)


def _engine_mentions(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found += [f"import {a.name}" for a in node.names if a.name.split(".")[0] in DRIVERS]
        elif isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").split(".")[0] in DRIVERS:
            found.append(f"from {node.module} import ...")
        elif isinstance(node, ast.ImportFrom) and any(a.name == "is_postgres" for a in node.names):
            found.append("imports is_postgres")
        elif isinstance(node, ast.Name) and node.id == "is_postgres":
            found.append("calls is_postgres")
        elif isinstance(node, ast.Attribute) and node.attr == "is_postgres":
            found.append("calls is_postgres")
    return sorted(set(found))


def test_s9_no_module_outside_the_store_names_an_engine():
    offenders = {}
    for path in sorted((SRC / "hearth").rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        if rel.startswith(STORE) or rel in ALLOWED:
            continue
        found = _engine_mentions(path)
        if found:
            offenders[rel] = found
    assert not offenders, f"engine-specific code outside src/hearth/store/: {offenders}"


def test_s9_the_seam_check_sees_driver_imports_and_engine_tests(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text("import sqlite3\nfrom psycopg import sql\nfrom hearth.store import is_postgres\n"
                      "def f(c):\n    if is_postgres(c):\n        return 1\n", encoding="utf-8")
    assert _engine_mentions(sample) == ["calls is_postgres", "from psycopg import ...", "import sqlite3",
                                        "imports is_postgres"]


def test_s9_the_store_names_its_engine_once_for_every_connection(hearth):
    conn = hearth.store.connection()
    assert engine_of(conn) is hearth.store.engine
    assert hearth.store.engine.name in ("sqlite", "postgresql")


def test_s9_a_duplicate_is_a_constraint_error_and_the_transaction_goes_on(hearth):
    with hearth.store.write() as conn:
        state.put(conn, "seam.test", "one")
        conn.execute("INSERT INTO app_state (key, value) VALUES (?, ?)", ("seam.other", '"x"'))
        with pytest.raises(ConstraintError):
            conn.execute("INSERT INTO app_state (key, value) VALUES (?, ?)", ("seam.other", '"y"'))
        state.put(conn, "seam.test", "two")  # the same transaction, still usable
    conn = hearth.store.connection()
    assert state.get(conn, "seam.test") == "two"
    assert state.get(conn, "seam.other") == "x"


def test_s9_an_insert_returns_its_id_and_a_duplicate_still_lets_the_transaction_go_on(hearth):
    with hearth.store.write() as conn:
        first = inserted_id(conn.execute("INSERT INTO users (name, created_at) VALUES (?, ?) RETURNING id",
                                         ("seam-a", utcnow())))
        with pytest.raises(ConstraintError):
            conn.execute("INSERT INTO users (name, created_at) VALUES (?, ?) RETURNING id", ("seam-a", utcnow()))
        second = conn.execute("INSERT INTO users (name, created_at) VALUES (?, ?) RETURNING id",
                              ("seam-b", utcnow())).fetchone()[0]
    assert second > first
    names = {r[0]: r[1] for r in hearth.store.connection().execute("SELECT id, name FROM users")}
    assert names[first] == "seam-a" and names[second] == "seam-b"


def test_s9_state_keeps_json_values_under_keys(hearth):
    with hearth.store.write() as conn:
        state.put(conn, "seam.json", {"a": [1, 2]})
        state.put(conn, "seam.gone", 1)
        state.delete(conn, "seam.gone")
    conn = hearth.store.connection()
    assert state.get(conn, "seam.json") == {"a": [1, 2]}
    assert state.get(conn, "seam.gone") is None
    assert state.get(conn, "seam.missing", []) == []
