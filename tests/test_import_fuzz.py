"""Property-based fuzz of every importer over structurally mutated files (U3, S3).

Each mutated file must import, or be refused with a clear ``InvalidInput`` that leaves the
database exactly as it was; never a traceback, never a partial write. The mutations and the
all-or-nothing check live in ``tests/importfuzz.py`` for new importers to reuse.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings

from hearth import Hearth, Settings
from hearth.interop.export import export_user, import_user
from hearth.interop.importers import import_bytes
from hearth.retrieval.archive import Archive

from .importfuzz import all_or_nothing, json_mutants, text_mutants

CHATGPT = [
    {
        "title": "Kites", "create_time": 1_700_000_000.5, "id": "c1", "current_node": "n3",
        "mapping": {
            "root": {"id": "root", "message": None, "parent": None, "children": ["n1"]},
            "n1": {"id": "n1", "parent": "root", "children": ["n2"], "message": {
                "author": {"role": "user"}, "create_time": 1_700_000_001,
                "content": {"content_type": "text", "parts": ["The kite got stuck in the oak."]},
                "metadata": {}}},
            "n2": {"id": "n2", "parent": "n1", "children": ["n3"], "message": {
                "author": {"role": "assistant"}, "create_time": 1_700_000_002,
                "content": {"parts": ["We used the long pole."]}, "metadata": {}}},
            "n3": {"id": "n3", "parent": "n2", "children": [], "message": {
                "author": {"role": "user"}, "create_time": 1_700_000_003,
                "content": {"text": "And it flew again."}, "metadata": {"is_visually_hidden_from_conversation": False}}},
        },
    },
    {"title": "Tea", "mapping": {"a": {"id": "a", "parent": None, "children": [], "message": {
        "author": {"role": "user"}, "content": {"parts": ["Jasmine, please."]}}}}},
]

LABELLED = """=== Portal thread (2024-03-02) ===
AUMA said:
The kite got stuck in the oak.
Elion Voicefire said:
We will use the long pole.
=== Second ===
AUMA said:
Tea later?
"""

FUZZ = hsettings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))


def _open(home: Path) -> Hearth:
    hearth = Hearth(Settings.resolve({"home": str(home)}, environ={}))
    hearth.scope().personas.create("elion", "Elion", user_label="AUMA said:",
                                   assistant_label="Elion Voicefire said:")
    return hearth


@pytest.fixture(scope="module")
def archive(tmp_path_factory):
    """One deployment for every example of a module: a refused import must leave it as it was."""
    with _open(tmp_path_factory.mktemp("fuzz-archive")) as hearth:
        yield hearth


@FUZZ
@given(data=json_mutants(CHATGPT))
def test_u3_s3_chatgpt_import_of_a_mutated_file_is_all_or_nothing(archive, data):
    scope = archive.scope()
    all_or_nothing(archive, lambda: import_bytes(
        Archive(archive.store, scope.user_id), data, fmt="chatgpt", name="conversations.json",
        persona=scope.personas.default()))


@FUZZ
@given(data=json_mutants(CHATGPT))
def test_u3_s3_auto_detected_import_of_a_mutated_file_is_all_or_nothing(archive, data):
    scope = archive.scope()
    all_or_nothing(archive, lambda: import_bytes(
        Archive(archive.store, scope.user_id), data, name="upload", persona=scope.personas.default()))


@FUZZ
@given(data=text_mutants(LABELLED))
def test_u3_s3_labelled_import_of_a_mutated_file_is_all_or_nothing(archive, data):
    scope = archive.scope()
    all_or_nothing(archive, lambda: import_bytes(
        Archive(archive.store, scope.user_id), data, fmt="labelled", name="notes.txt"))


def _export() -> dict:
    with tempfile.TemporaryDirectory(prefix="hearth-fuzz-src-") as home, _open(Path(home)) as source:
        me = source.scope()
        conversation = me.conversations.create(me.personas.default().id, title="Morning")
        me.conversations.add_message(conversation.id, "user", "Good morning")
        me.conversations.add_message(conversation.id, "assistant", "Morning, love.")
        me.memories.add("Fleur is at home", category="family", importance=3)
        return json.loads(json.dumps(export_user(source.store, me.user_id)))


EXPORT = _export()
# Mutate the tables only: the header (format, versions) is checked first and would hide the rest.
EXPORT_TABLES = {k: v for k, v in EXPORT["tables"].items() if v["rows"]}


@FUZZ
@given(json_mutants(EXPORT_TABLES))
def test_u3_s3_hearth_export_restore_of_a_mutated_file_is_all_or_nothing(tables_bytes):
    with tempfile.TemporaryDirectory(prefix="hearth-fuzz-dst-") as home:
        with Hearth(Settings.resolve({"home": home}, environ={})) as target:
            owner = target.scope().user_id
            text = tables_bytes.decode("utf-8", "surrogatepass")
            header = {k: v for k, v in EXPORT.items() if k != "tables"}
            document = json.dumps(header)[:-1] + ', "tables": ' + text + "}"
            all_or_nothing(target, lambda: import_user(
                target.store, owner, document.encode("utf-8", "surrogatepass")))
