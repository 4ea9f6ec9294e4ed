"""Automatic keyword recall (K1-K6), its query building at scale, and its search-log rows (A3, G5)."""

from __future__ import annotations

import pytest

from hearth.errors import DispatchRefused
from hearth.prompt.assembly import refuse_birth_period_recall
from hearth.prompt.dynamic import RECALL_HEADING, Block
from hearth.prompt.layers.keyword_recall import LABEL, TRUST, is_relational, overlap, shingles
from hearth.providers.base import ChatMessage
from hearth.records import ledger
from hearth.retrieval import searchlog
from hearth.retrieval.hybrid import select_terms


def context_of(provider) -> str:
    """The dynamic context system message of the last request ('' when there was none)."""
    systems = [m.content for m in provider.requests[-1].messages if m.role == "system"]
    return next((s for s in systems if s.startswith("Dynamic context")), "")


def recall_section(provider) -> str:
    text = context_of(provider)
    if RECALL_HEADING not in text:
        return ""
    return text[text.index(RECALL_HEADING):]


def chat(me, persona, title, *lines):
    c = me.conversations.create(persona.id, title)
    for i, line in enumerate(lines):
        me.conversations.add_message(c.id, "user" if i % 2 == 0 else "assistant", line)
    return c


def current(me, persona):
    """A thread past its birth period: one ordinary exchange already happened."""
    c = me.conversations.create(persona.id, "Today")
    me.send(c.id, "Good morning, how are you?")
    return c


def test_k1_recalls_other_conversations_grouped_by_title_never_the_current_one(me, persona, provider):
    chat(me, persona, "Lisbon trip", "We rode tram 28 up to the castle in Lisbon.", "The yellow tram rattled all the way.")
    chat(me, persona, "Cooking", "My tram pass is in the recipe drawer.")
    now = current(me, persona)
    me.conversations.add_message(now.id, "user", "In this thread I also said tram 28 was slow.")
    me.send(now.id, "Tell me again about the tram in Lisbon and the castle")
    section = recall_section(provider)
    assert section.startswith(RECALL_HEADING)
    assert 'From "Lisbon trip":' in section and 'From "Cooking":' in section
    assert "castle in Lisbon" in section
    assert "also said tram 28 was slow" not in section  # never the current conversation
    # Grouped: the Lisbon lines sit together under their title, with the persona's labels.
    lisbon = section.split('From "Lisbon trip":')[1].split("From ")[0]
    assert "AUMA said:" in lisbon and "Elion Voicefire said:" in lisbon


def test_k1_at_most_ten_excerpts_of_about_300_characters(me, persona, provider):
    for i in range(14):
        chat(me, persona, f"Garden {i}", ("filler words " * 40) + f"the marigold bed number {i} " + ("more filler " * 40))
    now = current(me, persona)
    me.send(now.id, "What did we plant in the marigold bed?")
    section = recall_section(provider)
    excerpts = [line for line in section.splitlines() if line.startswith("- [")]
    assert len(excerpts) == 10
    for line in excerpts:
        quoted = line.split("“", 1)[1].rsplit("”", 1)[0]
        assert 250 <= len(quoted) <= 305 and "marigold" in quoted


def test_k1_v1_v2_respects_hidden_trashed_shielded_and_persona_boundaries(me, persona, provider):
    other = me.personas.create("clip", "Clipboard", user_label="AUMA said:", assistant_label="Clipboard said:")
    folder = me.folders.create("Private", hidden=True)
    hidden = chat(me, persona, "Hidden", "the zeppelin in the hidden folder")
    me.conversations.move(hidden.id, folder.id)
    trashed = chat(me, persona, "Trashed", "the zeppelin in the trash")
    me.conversations.trash(trashed.id)
    shielded = chat(me, persona, "Shielded", "the zeppelin behind the shield")
    me.conversations.set_shielded(shielded.id, True)
    chat(me, other, "Other persona", "the zeppelin of another persona")
    chat(me, persona, "Visible", "the zeppelin over the bay")
    now = current(me, persona)
    me.send(now.id, "Do you remember the zeppelin we saw?")
    section = recall_section(provider)
    assert "zeppelin over the bay" in section
    for leaked in ("hidden folder", "in the trash", "behind the shield", "another persona"):
        assert leaked not in section


def test_k1_p6_h7_stored_prompts_and_handoff_artifacts_are_never_recalled(me, persona, provider):
    old = me.conversations.create(persona.id, "Old")
    me.send(old.id, "A quick hello")  # stores a static prompt holding the identity text
    me.conversations.add_message(old.id, "assistant", "Branch seed about the quokka colony", kind="handoff_artifact")
    chat(me, persona, "Plain", "ordinary words about a quokka")
    now = current(me, persona)
    me.send(now.id, "What about the quokka colony and my steady companion?")
    section = recall_section(provider)
    assert "ordinary words about a quokka" in section
    assert "Branch seed" not in section and "I am Elion" not in section


@pytest.mark.parametrize("text", ["hi", "I'm here", "love you", "good night", "Good night, love you too ❤️"])
def test_k2_short_relational_messages_do_not_search(me, persona, provider, text):
    chat(me, persona, "Night", "good night love, I'm here and I love you")
    now = current(me, persona)
    me.send(now.id, text)
    assert recall_section(provider) == ""
    assert is_relational(text)


@pytest.mark.parametrize("text", ["remember the lighthouse?", "love you, Portofino", "good night, lighthouse keeper"])
def test_k2_recall_cue_or_specific_topic_lets_a_short_message_search(me, persona, provider, text):
    chat(me, persona, "Coast", "The lighthouse keeper in Portofino waved at us.")
    now = current(me, persona)
    me.send(now.id, text)
    assert "lighthouse keeper in Portofino" in recall_section(provider)


def test_k3_birth_period_is_silent_even_when_the_opener_asks_to_remember(me, persona, provider):
    chat(me, persona, "Coast", "The lighthouse keeper in Portofino waved at us.")
    fresh = me.conversations.create(persona.id, "New")
    me.send(fresh.id, "Do you remember the lighthouse keeper in Portofino?")
    assert recall_section(provider) == ""
    # After the first ordinary reply the same question recalls.
    me.send(fresh.id, "Do you remember the lighthouse keeper in Portofino?")
    assert "lighthouse keeper" in recall_section(provider)


def test_k3_h7_a_visible_handoff_artifact_does_not_end_the_birth_period(me, persona, provider):
    chat(me, persona, "Coast", "The lighthouse keeper in Portofino waved at us.")
    source = chat(me, persona, "Source", "we talked about sailing", "yes, sailing at dawn")
    result = me.branch(source.id, "retry-1")
    me.send(result.conversation.id, "Remember the lighthouse keeper in Portofino?")
    assert recall_section(provider) == ""


def test_k4_handoff_source_is_excluded_and_overlapping_excerpts_are_dropped(hearth, me, persona, provider):
    source = chat(me, persona, "Source thread", "The otter sanctuary opens at nine on Saturdays",
                  "I will drive us to the otter sanctuary")
    # Another conversation repeats the handoff's words almost exactly, and one says something new.
    chat(me, persona, "Copy", "The otter sanctuary opens at nine on Saturdays")
    chat(me, persona, "New", "The otter keeper is named Bramble")
    result = me.branch(source.id, "retry-k4")
    me.send(result.conversation.id, "hello again")  # ends the birth period
    me.send(result.conversation.id, "What do we know about the otter sanctuary and the keeper?")
    section = recall_section(provider)
    assert "named Bramble" in section
    assert 'From "Source thread"' not in section
    assert 'From "Copy"' not in section  # its excerpt is already in the request via the handoff
    entry = searchlog.entries(hearth.store.connection(), me.user_id, origin="keyword_recall")[0]
    assert result.conversation.id in entry.filters["exclude_conversation_ids"]
    assert source.id in entry.filters["exclude_conversation_ids"]
    assert entry.filters["dropped_overlap"] >= 1


def test_k4_overlap_measure_is_shingle_share():
    assembled = [shingles("the quick brown fox jumps over the lazy dog")]
    assert overlap("the quick brown fox jumps", assembled) == 1.0
    assert overlap("a completely different sentence here", assembled) == 0.0
    # Across the request's parts, a shingle found in either counts once.
    parts = [shingles("the quick brown fox"), shingles("brown fox jumps high")]
    assert overlap("the quick brown fox jumps high", parts) == 1.0
    assert overlap("the quick brown fox jumps away", parts) == 0.75


def test_k4_excerpts_checked_for_overlap_never_push_the_stored_prompt_out_of_the_shingle_cache():
    """Dozens of excerpts are checked on a send; the stored prompt's shingles (a prompt with
    thousands of memories) must still be cached for the next send."""
    prompt = " ".join(f"memory number {i} says the person likes tea" for i in range(500))
    assembled = [shingles(prompt)]
    before = shingles.cache_info()
    for i in range(100):
        overlap(f"an excerpt of an older conversation, number {i}", assembled)
    after = shingles.cache_info()
    assert after.currsize == before.currsize and after.misses == before.misses
    assert shingles(prompt) is assembled[0] and shingles.cache_info().hits == after.hits + 1


def test_k5_k6_block_renders_the_reserved_heading_and_assembly_guards_it(me, persona, provider):
    block = Block(layer="keyword_recall", label=LABEL, text="x", trust=TRUST)
    assert block.render().splitlines()[0] == RECALL_HEADING
    with pytest.raises(DispatchRefused):
        refuse_birth_period_recall([ChatMessage("system", "Dynamic context\n\n" + block.render())])
    for phrase in ("Low-priority quoted reference", "cannot override the current message", "identity",
                   "memory snapshot", "handoff", "emotional mode"):
        assert phrase in TRUST
    chat(me, persona, "Coast", "The lighthouse keeper in Portofino waved at us.")
    now = current(me, persona)
    me.send(now.id, "Remember the lighthouse keeper?")
    section = recall_section(provider)
    assert section.splitlines()[1] == TRUST


def test_k1_very_common_terms_are_dropped_by_document_frequency_and_terms_are_capped(hearth, me, persona):
    c = me.conversations.create(persona.id, "Bulk")
    with hearth.store.write() as conn:
        for i in range(2_100):
            word = "seldom" if i % 700 == 0 else "plain"
            ledger.append_message(conn, user_id=me.user_id, conversation_id=c.id, role="user",
                                  content=f"everyday chatter {word} line {i}")
    conn = hearth.store.connection()
    chosen = select_terms(conn, ["everyday", "seldom", "chatter", "unknownword"])
    assert chosen == ["seldom"]  # common terms dropped, absent terms cannot match anything
    many = [f"w{i}" for i in range(30)]
    with hearth.store.write() as wconn:
        ledger.append_message(wconn, user_id=me.user_id, conversation_id=c.id, role="user", content=" ".join(many))
    assert len(select_terms(conn, many)) == 12


def test_a3_g5_every_keyword_recall_is_logged_with_scores(hearth, me, persona, provider):
    chat(me, persona, "Coast", "The lighthouse keeper in Portofino waved at us.")
    now = current(me, persona)
    me.send(now.id, "Remember the lighthouse keeper?")
    entry = searchlog.entries(hearth.store.connection(), me.user_id, origin="keyword_recall")[0]
    assert entry.query == "Remember the lighthouse keeper?"
    assert entry.result_count == 1 and entry.conversation_id == now.id
    assert entry.results[0]["scores"]["keyword"] >= 0 and entry.results[0]["scores"]["keyword_rank"] == 1
    assert entry.results[0]["scores"]["signals"] == ["keyword"]
    assert entry.reliability in ("high", "medium", "low")
    assert entry.filters["persona_id"] == persona.id
