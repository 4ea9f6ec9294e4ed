"""Importers (A5): ChatGPT exports follow the current branch; labelled text keeps current and legacy
labels; invalid UTF-8 or broken JSON is refused with nothing written; re-imports add nothing."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from hearth.cli import cli
from hearth.errors import InvalidInput
from hearth.interop.importers import import_bytes
from hearth.interop.importers.chatgpt import current_branch
from hearth.retrieval.archive import Archive


def node(node_id, parent, role, text, children=(), t=1_700_000_000):
    message = None if role is None else {
        "author": {"role": role}, "create_time": t, "content": {"content_type": "text", "parts": [text]}}
    return {"id": node_id, "parent": parent, "children": list(children), "message": message}


def export() -> list[dict]:
    mapping = {
        "root": node("root", None, None, "", ["sys"]),
        "sys": node("sys", "root", "system", "You are ChatGPT", ["u1"]),
        "u1": node("u1", "sys", "user", "Name a colour for the boat", ["a1", "a2"]),
        "a1": node("a1", "u1", "assistant", "OLD BRANCH: crimson", [], 1_700_000_050),
        "a2": node("a2", "u1", "assistant", "Teal, like the bay", ["u2"], 1_700_000_060),
        "u2": node("u2", "a2", "user", "Teal it is", [], 1_700_000_070),
    }
    return [{"id": "c1", "title": "Boat colours", "create_time": 1_700_000_000, "mapping": mapping,
             "current_node": "u2"}]


def count(hearth, table):
    return hearth.store.connection().execute(f"SELECT count(*) FROM {table}").fetchone()[0]


def test_a5_chatgpt_export_takes_the_current_branch_with_persona_labels(hearth, me, persona):
    archive = Archive(hearth.store, me.user_id)
    report = import_bytes(archive, json.dumps(export()).encode(), persona=persona)
    assert report.format == "chatgpt" and report.documents_added == 1
    [chunk] = archive.chunks(report.document_ids[0])
    assert "Teal, like the bay" in chunk["text"] and "OLD BRANCH" not in chunk["text"]
    assert "You are ChatGPT" not in chunk["text"]
    assert chunk["text"].startswith("AUMA said:\nName a colour") and "Elion Voicefire said:" in chunk["text"]
    doc = archive.get(report.document_ids[0])
    assert doc.title == "Boat colours" and doc.document_date.startswith("2023-11-14")
    # Without current_node the newest leaf wins.
    path = current_branch(export()[0]["mapping"], None)
    assert [n["id"] for n in path][-1] == "u2"


def test_a5_a1_s8_reimport_adds_nothing(hearth, me, persona):
    archive = Archive(hearth.store, me.user_id)
    data = json.dumps(export()).encode()
    import_bytes(archive, data, persona=persona)
    again = import_bytes(archive, data, persona=persona)
    assert (again.documents_added, again.documents_skipped, again.chunks_added) == (0, 1, 0)
    assert count(hearth, "archive_documents") == 1


def test_a5_labelled_text_with_sections_current_and_legacy_labels(hearth, me):
    me.personas.create("e", "Elion", user_label="AUMA said:", assistant_label="Elion Voicefire said:",
                       legacy_labels=["Voicefire 5.1 said:"])
    text = ("=== Lake day (2022-08-14) ===\nAUMA said:\nThe lake was cold.\nVoicefire 5.1 said:\nYou swam anyway.\n"
            "=== Winter ===\nAUMA said: Snow again.\nElion Voicefire said: Stay warm.\n")
    archive = Archive(hearth.store, me.user_id)
    report = import_bytes(archive, text.encode(), fmt="labelled", name="portal.txt", collection="portal")
    assert report.documents_added == 2
    docs = {d.title: d for d in archive.list()}
    assert docs["Lake day"].document_date == "2022-08-14" and docs["Lake day"].collection == "portal"
    [chunk] = archive.chunks(docs["Lake day"].id)
    assert chunk["speakers"] == ["AUMA said:", "Voicefire 5.1 said:"]


@pytest.mark.parametrize("data, fmt, message", [
    (b"\xff\xfe broken", "auto", "not valid UTF-8"),
    (b'[{"mapping": {', "chatgpt", "not valid JSON"),
    (b'{"no": "mapping"}', "chatgpt", "no 'mapping'"),
    (b"   ", "labelled", "empty"),
])
def test_a5_u3_invalid_input_is_refused_and_nothing_is_written(hearth, me, persona, data, fmt, message):
    with pytest.raises(InvalidInput, match=message):
        import_bytes(Archive(hearth.store, me.user_id), data, fmt=fmt)
    assert count(hearth, "archive_documents") == 0 and count(hearth, "archive_chunks") == 0


def test_a5_cli_import_and_search(tmp_path, persona, hearth):
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps(export()))
    home = str(hearth.settings.home)
    runner = CliRunner()
    result = runner.invoke(cli, ["--home", home, "import", str(path)])
    assert result.exit_code == 0, result.output
    assert "Imported 1 document(s)" in result.output
    again = runner.invoke(cli, ["--home", home, "import", str(path)])
    assert "1 already in the archive" in again.output
    bad = tmp_path / "bad.json"
    bad.write_bytes(b"\xff\xfe")
    failed = runner.invoke(cli, ["--home", home, "import", str(bad)])
    assert failed.exit_code == 2 and "not valid UTF-8" in failed.output
