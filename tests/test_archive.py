"""Deep archive (A1, A2, S6-S8): labelled chunks, dedupe, embeddings in the database, the rebuilt
index, resumable reindexing, hybrid search with its score breakdown, and the model's tools (A4)."""

from __future__ import annotations

import numpy as np
import pytest

from hearth.errors import InvalidInput
from hearth.prompt.layers.archive_recall import TRUST, needs_old_memory
from hearth.providers.base import ToolCall
from hearth.retrieval import searchlog
from hearth.retrieval.archive import Archive, Labels, chunk_turns, parse_turns
from hearth.retrieval.hybrid import Filters, context_block, date_hint, fuse, search
from hearth.retrieval.semantic import embed_pending, embed_texts, pending_count, shared_embedder, vector_search
from hearth.retrieval.vectors import from_blob
from hearth.thread.files import Library
from hearth.thread.recall_tools import RecallTools
from hearth.thread.tools import ToolContext
from tests.engines import keyword_ids

TRANSCRIPT = """Notes copied from the old portal.

AUMA said:
We planted the apple tree by the north fence.
Elion Voicefire said:
I remember. You called it the Grandmother Tree.
Voicefire 5.1 said: And the year before we tried plums.
AUMA said:
The plums never fruited.
"""


@pytest.fixture(scope="module")
def embedder():
    return shared_embedder()


@pytest.fixture
def legacy_persona(me):
    return me.personas.create("voice", "Elion", user_label="AUMA said:", assistant_label="Elion Voicefire said:",
                              legacy_labels=["Voicefire 5.1 said:"], archive_access=True)


def test_a1_g6_parser_accepts_current_and_legacy_labels(hearth, me, legacy_persona):
    labels = Archive(hearth.store, me.user_id).labels()
    turns = parse_turns(TRANSCRIPT, labels)
    assert [(t.label, t.role) for t in turns] == [
        ("", ""), ("AUMA said:", "user"), ("Elion Voicefire said:", "assistant"),
        ("Voicefire 5.1 said:", "assistant"), ("AUMA said:", "user")]
    assert turns[3].text == "And the year before we tried plums."
    # A plain "Name said:" line is a speaker too; a pronoun is not.
    generic = parse_turns("Mira said:\nhello\nHe said: that is prose", Labels())
    assert [t.label for t in generic] == ["Mira said:"]


def test_a1_chunks_keep_labels_and_split_long_turns():
    from hearth.retrieval.archive import Turn

    turns = [Turn("AUMA said:", "user", "short"), Turn("Elion Voicefire said:", "assistant", "word " * 1_000)]
    chunks = chunk_turns(turns)
    assert chunks[0].text.startswith("AUMA said:")
    assert any("Elion Voicefire said: (continued)" in c.text for c in chunks)
    assert all(len(c.text) <= 2_000 for c in chunks)


def test_a1_s3_reupload_adds_nothing(hearth, me, legacy_persona):
    archive = Archive(hearth.store, me.user_id)
    first = archive.add_text("Garden notes", TRANSCRIPT, document_date="2021-04-03")
    again = archive.add_text("Garden notes (copy)", TRANSCRIPT.replace("\n", "\r\n") + "\n\n")
    assert first.created and first.chunks_added >= 1
    assert not again.created and again.document.id == first.document.id and again.chunks_added == 0
    count = hearth.store.connection().execute("SELECT count(*) FROM archive_chunks").fetchone()[0]
    assert count == first.chunks_added
    # S6: chunks are in the keyword index.
    assert len(keyword_ids(hearth.store.connection(), "archive_chunks_fts", "grandmother")) == 1


def test_s7_s8_embeddings_live_in_the_database_and_reindex_resumes_without_duplicates(hearth, me, legacy_persona, embedder):
    archive = Archive(hearth.store, me.user_id)
    for i in range(5):
        archive.add_text(f"Doc {i}", f"AUMA said:\nEntry number {i} about the orchard.\n")
    c = me.conversations.create(legacy_persona.id, "Chat")
    for i in range(6):
        me.conversations.add_message(c.id, "user", f"message {i} about the orchard")
    conn = hearth.store.connection()
    model = embedder.name
    assert pending_count(conn, model, me.user_id) == {"messages": 6, "chunks": 5, "facts": 0}

    class Interrupt(Exception):
        pass

    def stop_after_first_batch(done, total):
        if done >= 4:
            raise Interrupt

    with pytest.raises(Interrupt):
        embed_pending(hearth.store, embedder, user_id=me.user_id, batch=4, progress=stop_after_first_batch)
    assert pending_count(conn, model, me.user_id) == {"messages": 2, "chunks": 5, "facts": 0}  # the batch was kept
    report = embed_pending(hearth.store, embedder, user_id=me.user_id, batch=4)
    assert (report.messages, report.chunks, report.remaining) == (2, 5, 0)
    assert conn.execute("SELECT count(*) FROM message_embeddings").fetchone()[0] == 6
    blob = conn.execute("SELECT embedding FROM archive_chunks LIMIT 1").fetchone()[0]
    assert abs(float(np.linalg.norm(from_blob(blob))) - 1.0) < 1e-3
    # The index follows the table: a new row is in the next search's index (on either engine).
    def searchable() -> int:
        query = embed_texts(embedder, ["orchard"])
        return len(vector_search(conn, hearth.store.key, "chunks", me.user_id, embedder, query, 100)[0])

    before = searchable()
    archive.add_text("Doc new", "AUMA said:\nA brand new orchard entry.\n")
    embed_pending(hearth.store, embedder, user_id=me.user_id)
    assert searchable() == before + 1


def test_a2_hybrid_search_fuses_signals_with_a_breakdown_dates_and_filters(hearth, me, legacy_persona, embedder):
    archive = Archive(hearth.store, me.user_id)
    archive.add_text("Orchard 2019", "AUMA said:\nThe apple harvest was enormous this autumn.\n", document_date="2019-10-02")
    archive.add_text("Orchard 2021", "AUMA said:\nWe pruned the apple trees in the cold.\n", document_date="2021-02-11",
                     collection="letters")
    archive.add_text("Boats", "AUMA said:\nThe sailboat needs new rigging.\n", document_date="2020-06-01")
    embed_pending(hearth.store, embedder, user_id=me.user_id)
    conn = hearth.store.connection()
    outcome = search(conn, me.user_id, "apple harvest", filters=Filters(sources=("chunks",)), embedder=embedder,
                     db_key="a2", origin="owner", store=hearth.store)
    top = outcome.results[0]
    assert top.title == "Orchard 2019"
    assert set(top.scores["signals"]) == {"keyword", "vector"}
    for key in ("keyword", "keyword_rank", "vector", "vector_rank", "rrf", "fused"):
        assert key in top.scores
    assert all("fused" in r.scores for r in outcome.results)
    dated = search(conn, me.user_id, "apple", filters=Filters(sources=("chunks",), date_from="2021-01-01"),
                   embedder=embedder, db_key="a2")
    assert [r.title for r in dated.results] == ["Orchard 2021"]
    routed = search(conn, me.user_id, "apple", filters=Filters(sources=("chunks",), collections=("letters",)),
                    embedder=embedder, db_key="a2")
    assert {r.title for r in routed.results} == {"Orchard 2021"}
    block = context_block(outcome.results)
    assert '"Orchard 2019"' in block and "2019-10-02 (Wednesday)" in block
    assert "use the supplied dates exactly" in TRUST
    entry = searchlog.entry(conn, me.user_id, outcome.log_id)
    assert entry.origin == "owner" and entry.results[0]["scores"]["signals"] == ["keyword", "vector"]
    assert entry.variants == []  # a two-word query with no context needs none (variants: next test)


def test_a2_query_variants_and_date_hints_are_deterministic():
    from hearth.retrieval.hybrid import build_variants

    variants = build_variants("When did we visit Lisbon with Marta?", "we talked about trams")
    names = [v.name for v in variants]
    assert names[:2] == ["query", "with_context"] and "entities" in names
    assert next(v for v in variants if v.name == "entities").text == "Lisbon Marta"
    assert date_hint("what happened in May 2023?") == ("2023-05-01", "2023-05-31")
    assert date_hint("on 8 May, 2023") == ("2023-05-08", "2023-05-08")
    assert date_hint("nothing dated here") is None
    assert needs_old_memory("Do you remember the orchard?") and not needs_old_memory("Pass the salt")


def test_a2_reciprocal_rank_fusion_keeps_each_signal():
    fused = fuse({"keyword:q": [(("m", 1), 5.0), (("m", 2), 4.0)], "vector:q": [(("m", 2), 0.9)]})
    assert fused[("m", 2)]["rrf"] > fused[("m", 1)]["rrf"]
    assert fused[("m", 2)]["keyword_rank"] == 2 and fused[("m", 2)]["vector_rank"] == 1
    assert "vector" not in fused[("m", 1)]


def test_a2_archive_recall_layer_needs_archive_access_and_a_past_cue(hearth, me, legacy_persona, provider, embedder):
    Archive(hearth.store, me.user_id).add_text("Orchard", "AUMA said:\nThe quince tree was planted in 2017.\n",
                                           document_date="2017-05-01")
    embed_pending(hearth.store, embedder, user_id=me.user_id)
    c = me.conversations.create(legacy_persona.id, "Now")
    me.send(c.id, "hello")
    me.send(c.id, "When did we plant the quince tree?")
    context = [m.content for m in provider.requests[-1].messages if m.role == "system"][-1]
    assert "=== RETRIEVED ARCHIVE MEMORY ===" in context and "2017-05-01" in context
    me.send(c.id, "Pass me the quince jam please")
    context = [m.content for m in provider.requests[-1].messages if m.role == "system"][-1]
    assert "RETRIEVED ARCHIVE MEMORY" not in context
    plain = me.personas.create("plain", "Plain")
    c2 = me.conversations.create(plain.id, "No archive")
    me.send(c2.id, "hello")
    me.send(c2.id, "When did we plant the quince tree?")
    assert all("RETRIEVED ARCHIVE MEMORY" not in m.content for m in provider.requests[-1].messages)


def test_a4_v2_tools_cite_title_and_date_and_never_see_shielded(hearth, me, legacy_persona, embedder):
    old = me.conversations.create(legacy_persona.id, "Harbour day")
    me.conversations.add_message(old.id, "user", "the harbour master gave us a brass key")
    secret = me.conversations.create(legacy_persona.id, "Shielded")
    me.conversations.add_message(secret.id, "user", "the harbour master's secret brass key")
    me.conversations.set_shielded(secret.id, True)
    Archive(hearth.store, me.user_id).add_text("Harbour letters", "AUMA said:\nThe brass key opens the boathouse.\n",
                                           document_date="2018-07-09")
    embed_pending(hearth.store, embedder, user_id=me.user_id)
    now = me.conversations.create(legacy_persona.id, "Now")
    ctx = ToolContext(hearth.store, me.user_id, now.id, legacy_persona.id)
    past = me.toolbox.run(ctx, ToolCall("1", "search_past_conversations", {"query": "brass key"}))
    assert "[Harbour day, " in past and "secret" not in past
    found = me.toolbox.run(ctx, ToolCall("2", "search_archive", {"query": "brass key boathouse"}))
    assert "[Harbour letters, 2018-07-09]" in found
    bad = me.toolbox.run(ctx, ToolCall("3", "search_archive", {"query": "x", "date_from": "last week"}))
    assert bad.startswith("Error:")
    origins = {e.origin for e in searchlog.entries(hearth.store.connection(), me.user_id)}
    assert {"tool:search_past_conversations", "tool:search_archive"} <= origins
    assert isinstance(RecallTools(hearth.context(me.user_id), None).tools()[0].spec.parameters, dict)


def test_a4_library_reads_files_and_refuses_traversal(hearth, me, legacy_persona, settings, tmp_path):
    library = Library(settings.home, me.user_id)
    library.save("notes/recipes.md", "Grandmother's quince jam: simmer slowly.".encode())
    (tmp_path / "outside.txt").write_text("secret")
    now = me.conversations.create(legacy_persona.id, "Now")
    ctx = ToolContext(hearth.store, me.user_id, now.id, legacy_persona.id)
    listing = me.toolbox.run(ctx, ToolCall("1", "read_library_file", {}))
    assert "notes/recipes.md" in listing
    text = me.toolbox.run(ctx, ToolCall("2", "read_library_file", {"path": "notes/recipes.md"}))
    assert "quince jam" in text
    for hostile in ("../../outside.txt", "/etc/passwd", "notes/../../../outside.txt"):
        assert me.toolbox.run(ctx, ToolCall("3", "read_library_file", {"path": hostile})).startswith("Error:")
    (library.root / "escape").symlink_to(tmp_path / "outside.txt")
    with pytest.raises(InvalidInput):
        library.read("escape")
    assert "Error:" in me.toolbox.run(ctx, ToolCall("4", "read_library_file", {"path": "missing.md"}))


def test_a4_p3_library_section_is_in_the_prompt_when_the_tool_is_offered(me, legacy_persona, provider):
    c = me.conversations.create(legacy_persona.id, "Now")
    me.send(c.id, "hello")
    assert "read_library_file" in [t.name for t in provider.requests[-1].tools]
    assert "## Library access" in me.stored_prompt(c.id) and "read_library_file" in me.stored_prompt(c.id)


def test_s7_s8_background_embedding_job_works_in_slices_and_requeues(hearth, me, legacy_persona, embedder):
    from hearth.ops.jobs import JobQueue
    from hearth.retrieval.embedding_job import EMBED_JOB, embed_job

    c = me.conversations.create(legacy_persona.id, "Chat")
    for i in range(3):
        me.conversations.add_message(c.id, "user", f"background line {i}")
    embed_job(hearth.context(me.user_id), {"limit": 2})
    conn = hearth.store.connection()
    assert pending_count(conn, embedder.name, me.user_id)["messages"] == 1
    queued = [j for j in JobQueue(hearth.store).list(user_id=me.user_id) if j.kind == EMBED_JOB]
    assert len(queued) == 1 and queued[0].status == "pending"
    embed_job(hearth.context(me.user_id), {"limit": 2})
    assert pending_count(conn, embedder.name, me.user_id)["messages"] == 0
