"""Thread recall tiers: T2 (last 30 messages, ~30,000 characters) and T3 (whole-thread search,
~90,000 characters), each for one turn only and labelled as factual recall from this thread."""

from __future__ import annotations

from hearth import Hearth
from hearth.prompt.layers.thread_recall import T2_LABEL, T3_LABEL, TRUST, tier
from hearth.records import ledger
from hearth.retrieval import searchlog


def context_of(provider) -> str:
    systems = [m.content for m in provider.requests[-1].messages if m.role == "system"]
    return next((s for s in systems if s.startswith("Dynamic context")), "")


def fill(hearth, me, conversation_id, contents):
    with hearth.store.write() as conn:
        for i, content in enumerate(contents):
            ledger.append_message(conn, user_id=me.user_id, conversation_id=conversation_id,
                                  role="user" if i % 2 == 0 else "assistant", content=content)


def test_t2_t3_cues_are_told_apart():
    assert tier("What did you say earlier about the garden?") == 2
    assert tier("You mentioned a recipe") == 2
    assert tier("Can you scroll back and find it?") == 2
    assert tier("Please search this whole conversation for the recipe") == 3
    assert tier("Go all the way back to when we started") == 3
    assert tier("I need to leave before dinner") == 0
    assert tier("How are you today?") == 0


def test_t2_earlier_cue_brings_the_last_30_messages_for_one_turn(hearth, me, persona, provider):
    c = me.conversations.create(persona.id, "Long")
    fill(hearth, me, c.id, [f"message number {i:02d} about things" for i in range(40)])
    me.send(c.id, "What did you say earlier about the garden?")
    context = context_of(provider)
    assert f"=== {T2_LABEL} ===" in context and TRUST in context
    assert "factual recall from the current conversation" in TRUST.lower()
    block = context.split(f"=== {T2_LABEL} ===")[1]
    assert "message number 10 " in block and "message number 39 " in block
    assert "message number 09 " not in block  # only the last 30
    assert "Elion Voicefire said:" in block and "AUMA said:" in block
    me.send(c.id, "Thanks, that helps a lot")
    assert T2_LABEL not in context_of(provider)  # one turn only


def test_t2_is_capped_at_about_30000_characters(hearth, me, persona, provider):
    c = me.conversations.create(persona.id, "Big")
    fill(hearth, me, c.id, [f"[{i:02d}] " + "x" * 2_500 for i in range(30)])
    me.send(c.id, "you mentioned something a while ago")
    block = context_of(provider).split(f"=== {T2_LABEL} ===")[1]
    assert "[29] " in block and "[00] " not in block
    body = sum(len(line) for line in block.splitlines() if line.startswith("["))
    assert 25_000 <= body <= 30_000 + 500


def test_t3_whole_thread_search_finds_the_oldest_match_with_neighbours(hearth, me, persona, provider):
    c = me.conversations.create(persona.id, "Very long")
    contents = [f"small talk {i}" for i in range(120)]
    contents[3] = "We named the sourdough starter Clementine"
    fill(hearth, me, c.id, contents)
    me.send(c.id, "Search this whole conversation for the sourdough starter name")
    context = context_of(provider)
    assert f"=== {T3_LABEL} ===" in context
    block = context.split(f"=== {T3_LABEL} ===")[1]
    assert "Clementine" in block and "small talk 2" in block and "small talk 4" in block
    entry = searchlog.entries(hearth.store.connection(), me.user_id, origin="thread_recall")[0]
    assert entry.filters["tier"] == 3 and entry.result_count == 3 and "sourdough" in entry.variants[0]


def test_t3_is_capped_at_about_90000_characters_and_starts_from_the_beginning(hearth, me, persona, provider):
    c = me.conversations.create(persona.id, "Huge")
    fill(hearth, me, c.id, [f"<{i:03d}> " + "y" * 4_000 for i in range(40)])
    me.send(c.id, "Go all the way back to the very start")
    block = context_of(provider).split(f"=== {T3_LABEL} ===")[1]
    assert "<000>" in block and "<039>" not in block
    body = sum(len(line) for line in block.splitlines() if line.startswith("<"))
    assert 80_000 <= body <= 90_000


def test_t2_d2_thread_recall_sits_before_keyword_recall(tmp_path, provider):
    from hearth import Settings

    settings = Settings.resolve({"home": str(tmp_path / "h"), "input_token_limit": 64_000}, environ={})
    with Hearth(settings, provider=provider) as hearth:
        me = hearth.scope()
        persona = me.personas.create("p", "P", user_label="A said:", assistant_label="P said:")
        other = me.conversations.create(persona.id, "Other")
        me.conversations.add_message(other.id, "user", "the pelican named Horace")
        c = me.conversations.create(persona.id, "Now")
        me.send(c.id, "the pelican flew by")
        me.send(c.id, "You mentioned the pelican earlier, remember Horace?")
        context = context_of(provider)
        assert context.index("THREAD RECALL") < context.index("AUTO-RECALLED CONTEXT")
