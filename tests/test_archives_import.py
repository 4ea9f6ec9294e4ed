"""Chats and archives in (X3, X4, A5, S8, G4): SillyTavern chat JSONL into conversations, ChatGPT
exports as .zip or conversations.json, Claude exports, persona labels, tool code and hidden turns
left out, embedding queued at once, memories mined into the review queue, zip safety, fuzzing."""

from __future__ import annotations

import io
import json
import zipfile

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hearth import Hearth, Settings
from hearth.cli import cli
from hearth.ops.jobs import JobQueue, Worker
from hearth.retrieval.archive import Archive
from hearth.retrieval.embedding_job import EMBED_JOB
from tests import samples


def counts(hearth) -> dict[str, int]:
    conn = hearth.store.connection()
    return {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
            for t in ("conversations", "messages", "archive_documents", "archive_chunks", "proposals",
                      "import_sources")}


@pytest.fixture
def mira(me):
    report = me.imports.file(samples.card_png(samples.card_v3(book=False)), "mira.png")
    return me.personas.get(report.ids["personas"][0])


def test_x3_sillytavern_chat_becomes_a_conversation_of_the_matching_persona(hearth, me, persona, mira):
    report = me.imports.file(samples.st_chat(), "Mira Vale - 2024-03-02.jsonl")
    assert report.status == "imported" and report.format == "st-chat"
    assert report.counts == {"conversations": 1, "messages": 4, "system_skipped": 1}
    conversation = me.conversations.get(report.ids["conversations"][0])
    assert conversation.persona_id == mira.id and conversation.title == "Mira Vale (2024-03-02)"
    messages = me.conversations.messages(conversation.id)
    assert [(m.role, m.created_at[:16]) for m in messages] == [
        ("assistant", "2024-03-02T18:04"), ("user", "2024-03-02T18:05"), ("assistant", "2024-03-02T18:06"),
        ("user", "2024-03-02T18:10")]
    assert "[Hidden system note]" not in [m.content for m in messages]
    swiped = messages[2]
    assert swiped.content == "Then the lighthouse cat stays upstairs."
    assert swiped.metadata["swipes"] == ["The cat can go outside.", "Then the lighthouse cat stays upstairs."]
    assert swiped.metadata["swipe_id"] == 1 and swiped.metadata["extra"] == {"api": "openai", "model": "m"}
    assert messages[1].metadata["speaker"] == "Sam"
    assert [j.kind for j in JobQueue(hearth.store).list(user_id=me.user_id)] == [EMBED_JOB]
    # Idempotent: the same file again adds nothing.
    before = counts(hearth)
    again = me.imports.file(samples.st_chat(), "copy.jsonl")
    assert again.status == "duplicate" and counts(hearth) == before


def test_x3_sillytavern_chat_needs_a_persona(me, persona):
    refused = me.imports.file(samples.st_chat("Nobody Known"), "chat.jsonl")
    assert refused.status == "refused" and "no persona is called 'Nobody Known'" in refused.reason
    chosen = me.imports.file(samples.st_chat("Nobody Known"), "chat.jsonl", persona=persona)
    assert me.conversations.get(chosen.ids["conversations"][0]).persona_id == persona.id


def test_x4_a1_a5_chatgpt_zip_and_json_label_turns_with_the_chosen_persona_and_leave_out_code(hearth, me, persona, mira):
    report = me.imports.file(samples.chatgpt_zip(), "chatgpt-export.zip", persona=persona)
    assert report.status == "imported" and report.format == "chatgpt" and report.counts["documents"] == 1
    [chunk] = Archive(hearth.store, me.user_id).chunks(report.ids["documents"][0])
    text = chunk["text"]
    assert text.startswith("AUMA said:\nMy brother Felix moves to Lisbon") and "Elion Voicefire said:" in text
    for hidden in ("HIDDEN SYSTEM PROMPT", "secret_tool_code", "TOOL OUTPUT"):
        assert hidden not in text
    # The same conversations as a bare conversations.json are the same documents: duplicates.
    again = me.imports.file(json.dumps(samples.chatgpt_conversations()).encode(), "conversations.json",
                            persona=persona)
    assert again.status == "duplicate" and again.counts["duplicates"] == 1


def test_x4_a1_claude_export_json_and_zip(hearth, me, persona):
    report = me.imports.file(json.dumps(samples.claude_conversations()).encode(), "conversations.json",
                             persona=persona)
    assert report.format == "claude" and report.counts["documents"] == 1
    document = Archive(hearth.store, me.user_id).get(report.ids["documents"][0])
    assert document.title == "Garden plans" and document.document_date.startswith("2024-04-10")
    [chunk] = Archive(hearth.store, me.user_id).chunks(document.id)
    assert "AUMA said:\nI love growing tomatoes" in chunk["text"]
    assert "Elion Voicefire said:\nTomatoes with Iris sounds lovely." in chunk["text"]
    assert "HIDDEN_TOOL" not in chunk["text"] and "TOOL RESULT" not in chunk["text"]
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        z.writestr("data-2024/conversations.json", json.dumps(samples.claude_conversations()))
        z.writestr("data-2024/users.json", "[]")
    zipped = me.imports.file(out.getvalue(), "claude.zip", persona=persona)
    assert zipped.format == "claude" and zipped.status == "duplicate"


def test_x4_s8_imports_queue_embedding_so_search_is_semantic_without_reindex(me, hearth, persona):
    from hearth.retrieval.hybrid import Filters, search
    from hearth.retrieval.semantic import pending_count, shared_embedder

    me.imports.file(samples.chatgpt_zip(), "export.zip", persona=persona)
    me.imports.file(json.dumps(samples.claude_conversations()).encode(), "claude.json", persona=persona)
    queued = [j for j in JobQueue(hearth.store).list(user_id=me.user_id) if j.kind == EMBED_JOB]
    assert len(queued) == 1 and queued[0].status == "pending"
    Worker(hearth).run_once()
    embedder = shared_embedder(hearth)
    conn = hearth.store.connection()
    assert pending_count(conn, embedder.name, me.user_id)["chunks"] == 0
    outcome = search(conn, me.user_id, "relocating to Portugal", filters=Filters(sources=("chunks",)),
                     embedder=embedder, db_key="x4")
    assert outcome.results[0].title == "Felix moving"
    assert "vector" in outcome.results[0].scores["signals"]


def test_x4_g4_mining_proposes_cited_memories_for_review_offline(me, persona, mira):
    report = me.imports.file(json.dumps(samples.claude_conversations()).encode(), "claude.json", persona=persona,
                             mine=True)
    assert report.counts["proposals"] == 2
    proposals = {p.payload["text"]: p for p in me.layers.review.list()}
    assert set(proposals) == {"The person loves growing tomatoes.", "The person's daughter is called Iris."}
    iris = proposals["The person's daughter is called Iris."]
    assert iris.kind == "memory_add" and iris.status == "pending" and iris.source == "offline"
    assert "Garden plans" in iris.reason and "2024-04-10" in iris.reason
    assert iris.evidence == "I love growing tomatoes; my daughter Iris helps."
    assert me.memories.list() == []  # nothing applied without approval
    chat = me.imports.file(samples.st_chat(), "chat.jsonl", mine=True)
    cited = [p for p in me.layers.review.list() if p.conversation_id == chat.ids["conversations"][0]]
    assert {p.payload["text"] for p in cited} == {"The person's sister is called Ada.",
                                                   "The person prefers tea without sugar, by the way."}
    me.layers.settings.set("auto_approve.memory", True)
    me.imports.file(samples.chatgpt_zip(), "export.zip", persona=persona, mine=True)
    assert {m.text for m in me.memories.list()} >= {"The person's brother is called Felix."}


def test_x4_g4_model_mining_with_a_key_cites_and_quotes(tmp_path, fake_provider_server):
    hearth = Hearth(Settings.resolve({"home": str(tmp_path / "h"), "provider": "openai-chat", "model": "fake",
                                      "base_url": fake_provider_server.openai_base_url, "openai_api_key": "k"},
                                     environ={}))
    try:
        me = hearth.scope()
        persona = me.personas.create("elion", "Elion", user_label="AUMA said:", assistant_label="Elion said:")
        fake_provider_server.script(text=[json.dumps({"memories": [
            {"text": "Their daughter Iris helps in the garden.", "category": "people",
             "evidence": "my daughter Iris helps", "reason": "Names a family member."},
            {"text": "The person owns a yacht.", "category": "facts", "evidence": "I own a yacht",
             "reason": "Invented."}]})])
        report = me.imports.file(json.dumps(samples.claude_conversations()).encode(), "claude.json",
                                 persona=persona, mine=True)
        assert report.counts["proposals"] == 1
        [proposal] = me.layers.review.list()
        assert proposal.source == "model" and proposal.payload["text"] == "Their daughter Iris helps in the garden."
        assert "Garden plans" in proposal.reason and "2024-04-10" in proposal.reason
        sent = fake_provider_server.requests[-1].body["messages"]
        assert "I love growing tomatoes" in sent[-1]["content"]
    finally:
        hearth.close()


def zip_of(members: dict[str, bytes], compression=zipfile.ZIP_DEFLATED) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression) as z:
        for name, data in members.items():
            z.writestr(name, data)
    return out.getvalue()


HOSTILE_ZIPS = {
    "bomb": lambda: zip_of({"conversations.json": b"[" + b" " * 50_000_000 + b"]"}),
    "traversal": lambda: zip_of({"../../etc/conversations.json": b"[]"}),
    "absolute": lambda: zip_of({"/tmp/conversations.json": b"[]"}),
    "backslash": lambda: zip_of({"..\\conversations.json": b"[]"}),
    "missing": lambda: zip_of({"notes.txt": b"hello"}),
    "truncated": lambda: samples.chatgpt_zip()[:200],
    "not json": lambda: zip_of({"conversations.json": b"{nope"}),
    "deep": lambda: zip_of({"a/b/c/conversations.json": b"[]"}),
}


@pytest.mark.parametrize("case", sorted(HOSTILE_ZIPS))
def test_x4_hostile_zips_are_refused_in_one_line_and_change_nothing(hearth, me, persona, case):
    before = counts(hearth)
    report = me.imports.file(HOSTILE_ZIPS[case](), f"{case}.zip", persona=persona)
    assert report.status == "refused", report
    assert report.reason and "\n" not in report.reason
    assert counts(hearth) == before
    if case == "bomb":
        assert "decompression bomb" in report.reason
    if case in ("traversal", "backslash", "absolute"):
        assert "file name" in report.reason


def test_x3_x4_cli_imports_several_files_with_a_persona_flag(tmp_path, hearth, persona):
    home = str(hearth.settings.home)
    card = tmp_path / "mira.png"
    card.write_bytes(samples.card_png(samples.card_v3(book=False)))
    chat = tmp_path / "mira.jsonl"
    chat.write_bytes(samples.st_chat())
    export = tmp_path / "export.zip"
    export.write_bytes(samples.chatgpt_zip())
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"user_name": "x", "character_name": "Mira Vale"}\n{broken\n')
    result = CliRunner().invoke(cli, ["--home", home, "import", str(card), str(chat), str(export), str(bad),
                                      "--persona", "elion", "--mine"])
    assert result.exit_code == 1, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert lines[0] == "mira.png (card): imported; 1 personas"
    assert lines[1].startswith("mira.jsonl (st-chat): imported; 1 conversations, 4 messages")
    assert lines[2].startswith("export.zip: Imported 1 document(s) (1 chunks); 0 already in the archive.")
    assert "memory suggestion(s) wait for review" in lines[2]
    assert lines[3] == "bad.jsonl: refused: bad.jsonl line 2 is not valid JSON (Expecting property name enclosed in " \
                       "double quotes)"


def test_x4_cli_asks_once_whose_the_assistant_turns_are(tmp_path, hearth, persona, monkeypatch):
    from hearth.cli import imports as cli_imports

    me = hearth.scope()
    me.personas.create("sage", "Sage", user_label="Robin said:", assistant_label="Sage said:")
    monkeypatch.setattr(cli_imports, "interactive", lambda: True)
    export = tmp_path / "export.zip"
    export.write_bytes(samples.chatgpt_zip())
    claude = tmp_path / "claude.json"
    claude.write_text(json.dumps(samples.claude_conversations()))
    result = CliRunner().invoke(cli, ["--home", str(hearth.settings.home), "import", str(export), str(claude)],
                                input="sage\n")
    assert result.exit_code == 0, result.output
    assert result.output.count("Which persona spoke the assistant turns?") == 1
    texts = [c["text"] for d in Archive(hearth.store, me.user_id).list() for c in Archive(hearth.store, me.user_id).chunks(d.id)]
    assert len(texts) == 2 and all("Sage said:" in t and "Robin said:" in t for t in texts)


jsonl_lines = st.lists(st.one_of(
    st.fixed_dictionaries({"name": st.text(max_size=5), "is_user": st.one_of(st.booleans(), st.integers()),
                           "mes": st.one_of(st.text(max_size=30), st.none(), st.integers()),
                           "send_date": st.one_of(st.text(max_size=30), st.integers(), st.floats(), st.none()),
                           "swipes": st.one_of(st.none(), st.lists(st.text(max_size=5), max_size=3), st.integers()),
                           "is_system": st.booleans()}),
    st.text(max_size=40)), max_size=6)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=jsonl_lines, cut=st.integers(0, 2000), header=st.booleans())
def test_x3_fuzzed_sillytavern_chats_never_crash_nor_import_partially(hearth, me, persona, lines, cut, header):
    rows = ([json.dumps({"user_name": "Sam", "character_name": "Elion"})] if header else [])
    rows += [json.dumps(line) if isinstance(line, dict) else line for line in lines]
    raw = "\n".join(rows).encode()
    for blob in (raw, raw[:cut], samples.st_chat("Elion")[:cut]):
        before = counts(hearth)
        report = me.imports.file(blob, "fuzz.jsonl", fmt="st-chat")
        assert report.status in ("imported", "duplicate", "refused")
        if report.status == "refused":
            assert report.reason and "\n" not in report.reason
            assert counts(hearth) == before


export_values = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 2_000_000_000) | st.text(max_size=12),
    lambda c: st.lists(c, max_size=3) | st.dictionaries(
        st.sampled_from(["mapping", "message", "author", "role", "content", "parts", "parent", "children",
                         "current_node", "create_time", "chat_messages", "sender", "text", "type", "uuid",
                         "name", "created_at", "metadata", "recipient", "content_type", "id"]), c, max_size=5),
    max_leaves=25)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(payload=export_values, fmt=st.sampled_from(["chatgpt", "claude", "auto"]), zipped=st.booleans(),
       duplicate=st.booleans())
def test_x4_fuzzed_exports_never_crash_nor_import_partially(hearth, me, persona, payload, fmt, zipped, duplicate):
    body = [payload, payload] if duplicate else payload
    data = json.dumps(body).encode()
    if zipped:
        data = zip_of({"conversations.json": data})
    before = counts(hearth)
    report = me.imports.file(data, "fuzz.json", fmt=fmt, persona=persona)
    assert report.status in ("imported", "duplicate", "refused")
    if report.status == "refused":
        assert report.reason and "\n" not in report.reason
        assert counts(hearth) == before


member_names = st.one_of(
    st.sampled_from(["conversations.json", "export/conversations.json", "../conversations.json",
                     "/abs/conversations.json", "a\\..\\conversations.json", "C:/conversations.json",
                     "x/../../conversations.json", "a/b/c/conversations.json"]),
    st.text(alphabet="./\\ab:", min_size=1, max_size=12).map(lambda s: s + "/conversations.json"))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(names=st.lists(member_names, min_size=1, max_size=3), padding=st.integers(0, 3_000_000))
def test_x4_fuzzed_zip_names_and_sizes_never_escape_nor_import_partially(hearth, me, persona, names, padding):
    body = json.dumps(samples.chatgpt_conversations()).encode() + b" " * padding
    members = {name: body for name in names}
    before = counts(hearth)
    report = me.imports.file(zip_of(members), "fuzz.zip", persona=persona)
    assert report.status in ("imported", "duplicate", "refused")
    if report.status == "refused":
        assert report.reason and "\n" not in report.reason
        assert counts(hearth) == before
    unsafe = any(".." in n.replace("\\", "/").split("/") or n.startswith("/") or "\\" in n or n[1:2] == ":"
                 for n in names)
    if unsafe:
        assert report.status == "refused"


def test_x3_x4_five_megabyte_fields_are_refused_whole(hearth, me, persona):
    huge = "x" * 5_000_000
    book = samples.lorebook()
    book["entries"]["3"]["content"] = huge
    chat = samples.st_chat("Elion").decode().splitlines()
    line = json.loads(chat[2])
    line["mes"] = huge
    chat[2] = json.dumps(line)
    card = samples.card_v3()
    card["data"]["character_book"]["entries"][0]["content"] = huge
    for data, name in ((json.dumps(book).encode(), "lore.json"), ("\n".join(chat).encode(), "chat.jsonl"),
                       (samples.card_png(card), "card.png")):
        before = counts(hearth)
        report = me.imports.file(data, name)
        assert report.status == "refused" and ("at most" in report.reason or "longer than" in report.reason), report
        assert counts(hearth) == before
