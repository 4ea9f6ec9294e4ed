"""Hostile input through every face (U3, S3): a clear 4xx or one CLI line, and nothing changes.

HTTP answers ``{error, detail}``: 400 only for a request that cannot be parsed, 413 for a body
over its limit, 422 for anything parsed but invalid (a too-long field included). The CLI prints
one ``Error:`` line and exits with code 2. The library raises ``InvalidInput`` with the same words.
"""

from __future__ import annotations

import json
import sqlite3
import threading

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from hearth import Hearth, InvalidInput, Settings, StoreBusy, StoreError
from hearth.cli import cli
from hearth.server import create_app
from hearth.validation import MAX_ID, check_id, check_text

from .importfuzz import content_hash

BASE = "http://127.0.0.1:8765"


@pytest.fixture
def client(hearth):
    with TestClient(create_app(hearth.settings, hearth), base_url=BASE, raise_server_exceptions=False) as c:
        yield c


@pytest.fixture
def chat(client, persona) -> dict:
    return client.post("/api/conversations", json={"persona_id": persona.id, "title": "Morning"}).json()


def raw(client, method: str, url: str, body: bytes):
    return client.request(method, url, content=body, headers={"Content-Type": "application/json"})


def assert_error(response, status: int, code: str | None = None, says: str | None = None) -> dict:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert set(body) == {"error", "detail"} and body["detail"], body
    if code:
        assert body["error"] == code, body
    if says:
        assert says in body["detail"], body
    return body


def unchanged(hearth):
    """A context that asserts the whole database is the same afterwards."""
    class _Same:
        def __enter__(self):
            self.before = content_hash(hearth)

        def __exit__(self, *exc):
            if exc[0] is None:
                assert content_hash(hearth) == self.before, "a rejected request changed data"
    return _Same()


# -- text: lone surrogates and NUL characters ----------------------------------------------------------
def test_u3_lone_surrogate_in_message_is_a_clear_422_and_changes_nothing(client, chat, hearth, me):
    with unchanged(hearth):
        for body in (b'{"text": "hi \\ud800"}', b'{"text": "\\udc00"}', b'{"text": "ok", "channel": "\\ud800"}'):
            assert_error(raw(client, "POST", f"/api/conversations/{chat['id']}/messages", body), 422,
                         "invalid_input", "lone surrogate")
        with pytest.raises(InvalidInput, match="lone surrogate"):
            me.send(chat["id"], "hi \ud800")
        with pytest.raises(InvalidInput, match="lone surrogate"):
            me.memories.add("a \udfff b")


def test_u3_nul_characters_are_refused_in_every_text_input_with_one_rule(client, chat, hearth, me, persona):
    cases = [
        ("POST", f"/api/conversations/{chat['id']}/messages", {"text": "hi\x00there"}),
        ("POST", "/api/memories", {"text": "Fleur\x00 is home"}),
        ("POST", "/api/memories", {"text": "ok", "category": "a\x00"}),
        ("PATCH", "/api/memories/1", {"text": "x\x00"}),
        ("POST", "/api/memories/import", {"items": [{"text": "fine"}, {"text": "bad\x00"}]}),
        ("POST", "/api/folders", {"name": "a\x00b"}),
        ("POST", "/api/conversations", {"title": "t\x00"}),
        ("POST", f"/api/conversations/{chat['id']}/rename", {"title": "t\x00"}),
        ("PATCH", f"/api/personas/{persona.id}", {"identity": "I am\x00"}),
        ("POST", "/api/status", {"name": "Fleur\x00"}),
        ("POST", "/api/fragments", {"triggers": ["kite"], "definition": "d\x00"}),
        ("PUT", f"/api/conversations/{chat['id']}/live-context", {"mood": "calm\x00"}),
        ("POST", f"/api/conversations/{chat['id']}/nudges", {"text": "ask\x00"}),
    ]
    client.post("/api/memories", json={"text": "existing"})
    with unchanged(hearth):
        for method, url, body in cases:
            assert_error(client.request(method, url, json=body), 422, "invalid_input", "NUL")
        for url in ("/api/search?q=kite%00", "/api/archive/documents?collection=a%00b", "/api/search-log?origin=%00"):
            assert_error(client.get(url), 422, "invalid_input", "NUL")
        # The library and the importers give the same answer.
        for call in (lambda: me.send(chat["id"], "a\x00b"), lambda: me.memories.add("a\x00b"),
                     lambda: me.folders.create("a\x00"), lambda: me.conversations.rename(chat["id"], "a\x00"),
                     lambda: me.conversations.add_message(chat["id"], "user", "\x00")):
            with pytest.raises(InvalidInput, match="NUL"):
                call()
        assert_error(client.post("/api/archive/import", params={"format": "labelled"},
                                 content=b"AUMA said:\nhi\x00"), 422, "invalid_input", "NUL")
        escaped = json.dumps([{"title": "t", "mapping": {"a": {"id": "a", "message": {
            "author": {"role": "user"}, "content": {"parts": ["hi\x00"]}}}}}]).encode()
        assert_error(client.post("/api/archive/import", content=escaped), 422, "invalid_input", "NUL")


# -- ids -------------------------------------------------------------------------------------------------
def test_u3_out_of_range_ids_are_422_at_the_edge_and_invalid_input_in_the_library(client, chat, hearth, me):
    too_big = 2**63
    with unchanged(hearth):
        for url in (f"/api/status/history?field_id={too_big}", f"/api/conversations/{too_big}",
                    f"/api/conversations?folder_id={too_big}", f"/api/search-log?before_id={too_big}",
                    f"/api/memories/{too_big}", "/api/status/history?field_id=0", "/api/conversations/0"):
            assert_error(client.get(url), 422, "invalid_input")
        # A path segment that is not digits is no id: no route matches it.
        assert_error(client.get("/api/conversations/-1"), 404, "not_found")
        for body in ({"persona_id": too_big}, {"folder_id": too_big}, {"folder_id": 0}):
            assert_error(client.post("/api/conversations", json=body), 422, "invalid_input")
        assert_error(client.post(f"/api/conversations/{chat['id']}/move", json={"folder_id": too_big}), 422)
        assert_error(client.post("/api/review/run", json={"conversation_id": too_big}), 422)
        for call in (lambda: me.conversations.get(too_big), lambda: me.memories.get(-5),
                     lambda: me.personas.get(too_big), lambda: me.conversations.message(0)):
            with pytest.raises(InvalidInput, match="between 1 and"):
                call()
    assert check_id(MAX_ID) == MAX_ID
    with pytest.raises(InvalidInput):
        check_id(True)


# -- ChatGPT archive uploads -------------------------------------------------------------------------------
GOOD_NODE = {"id": "a", "parent": None, "children": [],
             "message": {"author": {"role": "user"}, "content": {"parts": ["The kite flew."]}, "create_time": 1}}


def chatgpt_variant(change) -> bytes:
    conversation = {"title": "Kites", "current_node": "a", "mapping": {"a": json.loads(json.dumps(GOOD_NODE))}}
    change(conversation, conversation["mapping"]["a"], conversation["mapping"]["a"]["message"])
    return json.dumps([conversation]).encode()


HOSTILE_CHATGPT = {
    "author is a string": lambda c, n, m: m.__setitem__("author", "user"),
    "author is a list": lambda c, n, m: m.__setitem__("author", ["user"]),
    "content is a string": lambda c, n, m: m.__setitem__("content", "hello"),
    "content is a list": lambda c, n, m: m.__setitem__("content", ["hello"]),
    "metadata is a string": lambda c, n, m: m.__setitem__("metadata", "x"),
    "metadata is a list": lambda c, n, m: m.__setitem__("metadata", [1]),
    "role is a list": lambda c, n, m: m["author"].__setitem__("role", ["user"]),
    "current_node is a list": lambda c, n, m: c.__setitem__("current_node", ["a"]),
    "parent is a list": lambda c, n, m: n.__setitem__("parent", ["a"]),
    "create_time is 1e20": lambda c, n, m: m.__setitem__("create_time", 1e20),
    "conversation create_time is 1e20": lambda c, n, m: c.__setitem__("create_time", 1e20),
    "create_time mixes strings and numbers": lambda c, n, m: (
        c.__delitem__("current_node"), m.__setitem__("create_time", "yesterday"),
        c["mapping"].__setitem__("b", {**GOOD_NODE, "id": "b", "message": {**GOOD_NODE["message"], "create_time": 5}})),
}
DEEP = b"[" * 100_000 + b"]" * 100_000
DEEP_MAPPING = b'[{"mapping": ' + b'{"a": ' * 100_000 + b"1" + b"}" * 100_000 + b"}]"


def test_u3_hostile_chatgpt_uploads_import_or_refuse_clearly_and_never_500(client, hearth, persona):
    for name, change in HOSTILE_CHATGPT.items():
        response = client.post("/api/archive/import", params={"format": "chatgpt", "collection": "c"},
                               content=chatgpt_variant(change))
        assert response.status_code in (201, 422), (name, response.text)
        if response.status_code == 422:
            assert_error(response, 422)
    with unchanged(hearth):
        for body in (DEEP, DEEP_MAPPING):
            assert_error(client.post("/api/archive/import", content=body), 422, "invalid_input", "nested")


def test_u3_cli_import_of_hostile_chatgpt_files_is_one_line_exit_2(tmp_path, monkeypatch):
    monkeypatch.setenv("HEARTH_HOME", str(tmp_path / "home"))
    runner = CliRunner()
    assert runner.invoke(cli, ["init"]).exit_code == 0
    for n, (name, change) in enumerate(HOSTILE_CHATGPT.items()):
        path = tmp_path / f"c{n}.json"
        path.write_bytes(chatgpt_variant(change))
        result = runner.invoke(cli, ["import", "--format", "chatgpt", str(path)])
        assert result.exit_code == 0, (name, result.output)
        assert "Traceback" not in result.output
    for body in (DEEP, DEEP_MAPPING, b'[{"mapping": {"a": "not a node"}, "current_node": "a"}]'):
        path = tmp_path / "bad.json"
        path.write_bytes(body)
        result = runner.invoke(cli, ["import", str(path)])
        assert result.exit_code == 2, result.output
        assert result.output.startswith("Error: ") and result.output.strip().count("\n") == 0, result.output


# -- Hearth export restore -----------------------------------------------------------------------------------
def test_u3_s3_a_broken_hearth_export_is_refused_whole_before_any_write(hearth, me, persona, tmp_path, monkeypatch):
    from hearth.interop.export import export_user, import_user

    conversation = me.conversations.create(persona.id, title="Morning")
    me.conversations.add_message(conversation.id, "user", "Good morning")
    me.memories.add("Fleur is at home")
    good = json.loads(json.dumps(export_user(hearth.store, me.user_id)))

    def broken(change) -> dict:
        doc = json.loads(json.dumps(good))
        change(doc["tables"])
        return doc

    def column(tables, table, name):
        return tables[table]["columns"].index(name)

    cases = {
        "text in an integer column": lambda t: t["memories"]["rows"][0].__setitem__(
            column(t, "memories", "importance"), "very"),
        "duplicate column": lambda t: (t["memories"]["columns"].append("text"),
                                       [r.append("again") for r in t["memories"]["rows"]]),
        "table body is a list": lambda t: t.__setitem__("memories", [1, 2]),
        "column is an object": lambda t: t["memories"]["columns"].__setitem__(0, {"name": "id"}),
        "value is an object": lambda t: t["memories"]["rows"][0].__setitem__(column(t, "memories", "text"), {"a": 1}),
        "number past 64 bits": lambda t: t["memories"]["rows"][0].__setitem__(column(t, "memories", "id"), 2**64),
        "NUL in text": lambda t: t["messages"]["rows"][0].__setitem__(column(t, "messages", "content"), "a\x00"),
    }
    target_home = tmp_path / "target"
    with Hearth(Settings.resolve({"home": str(target_home)}, environ={})) as target:
        owner = target.scope().user_id
        for name, change in cases.items():
            before = content_hash(target)
            with pytest.raises(InvalidInput):
                import_user(target.store, owner, json.dumps(broken(change)).encode())
            assert content_hash(target) == before, name
        # The CLI says the same in one line with exit code 2.
        path = tmp_path / "broken.json"
        path.write_text(json.dumps(broken(cases["text in an integer column"])))
        monkeypatch.setenv("HEARTH_HOME", str(target_home))
        result = CliRunner().invoke(cli, ["import", str(path)])
        assert result.exit_code == 2 and result.output.startswith("Error: ") and "whole number" in result.output
        # The intact file still restores, and its memories read back.
        import_user(target.store, owner, json.dumps(good).encode())
        assert [m.text for m in target.scope().memories.list()] == ["Fleur is at home"]


# -- lengths: one status for a too-long field, 413 only for bodies -----------------------------------------------
def test_u3_a_too_long_field_is_422_everywhere_and_an_oversized_body_413(client, chat, hearth, me):
    limit = hearth.settings.max_message_chars
    with unchanged(hearth):
        assert_error(client.post(f"/api/conversations/{chat['id']}/messages", json={"text": "x" * (limit + 1)}),
                     422, "invalid_input", "longer than")
        assert_error(client.post("/api/memories", json={"text": "x" * 10_001}), 422, "invalid_input")
        assert_error(client.post("/api/fragments", json={"triggers": ["word " * 13], "definition": "d"}), 422)
        assert_error(client.post("/api/conversations", json={"title": "t" * 501}), 422)
        assert_error(client.post("/api/memories", content=b'{"text": "' + b"x" * 2_000_000 + b'"}',
                                 headers={"Content-Type": "application/json"}), 413, "too_large")
        with pytest.raises(InvalidInput, match="longer than"):
            check_text("x" * 11, "field", max_chars=10)


# -- the store seam: runtime errors are StoreError, never tracebacks ---------------------------------------------
@pytest.mark.sqlite_only
def test_u3_sqlite_runtime_errors_become_store_errors_at_the_seam(settings, tmp_path, monkeypatch):
    with Hearth(settings) as hearth:
        me = hearth.scope()
        persona = me.personas.create("elion", "Elion")
        conversation = me.conversations.create(persona.id)
        # busy: another connection holds the write lock past the timeout
        monkeypatch.setattr("hearth.store.connection.BUSY_TIMEOUT_MS", 50)
        blocker = sqlite3.connect(settings.database_path, isolation_level=None)
        blocker.execute("BEGIN IMMEDIATE")
        result: list[BaseException] = []

        def other_thread():
            hearth.store.connection().execute("PRAGMA busy_timeout=50")
            try:
                me.memories.add("waits")
            except BaseException as exc:  # noqa: BLE001  (recorded for the assertion below)
                result.append(exc)

        worker = threading.Thread(target=other_thread)
        worker.start()
        worker.join()
        blocker.execute("ROLLBACK")
        blocker.close()
        assert isinstance(result[0], StoreBusy) and "busy" in str(result[0])
        # disk full: the file may not grow past its current pages
        conn = hearth.store.connection()
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        conn.execute(f"PRAGMA max_page_count={pages}")
        with pytest.raises(StoreError, match="disk .* full"):
            me.memories.import_many([{"text": "x" * 5_000} for _ in range(50)])
        conn.execute("PRAGMA max_page_count=1073741823")
        # read-only: every connection the server opens refuses writes
        real_open = hearth.store._open

        def read_only():
            c = real_open()
            c.execute("PRAGMA query_only=1")
            return c

        hearth.store.close()
        monkeypatch.setattr(hearth.store, "_open", read_only)
        with TestClient(create_app(hearth.settings, hearth), base_url=BASE, raise_server_exceptions=False) as client:
            response = client.post(f"/api/conversations/{conversation.id}/rename", json={"title": "x"})
            assert response.status_code == 503 and response.json()["error"] == "store_error", response.text
            assert "read-only" in response.json()["detail"]
        with pytest.raises(StoreError, match="read-only"):
            me.memories.add("cannot")
