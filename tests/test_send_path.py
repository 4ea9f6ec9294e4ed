"""The send path: stored static prompt, dynamic context, assembly, budget and size report."""

from __future__ import annotations

import json
import logging
import threading

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from hearth import Hearth, ProviderError
from hearth.prompt.dynamic import QUOTED_RECALL_HEADING, RECALL_HEADING
from hearth.prompt.static import SECTIONS
from hearth.providers.base import StreamEvent
from tests.engines import keyword_ids


def system_messages(request):
    return [m.content for m in request.messages if m.role == "system"]


def test_p1_snapshot_is_captured_at_creation_and_later_memories_do_not_join(me, persona, provider):
    me.memories.add("Likes rain")
    conversation = me.conversations.create(persona.id)
    me.memories.add("Has a cat named Ellis")  # after creation, before the first send
    me.send(conversation.id, "hello")
    prompt = me.stored_prompt(conversation.id)
    assert "Likes rain" in prompt and "Ellis" not in prompt


def test_p2_first_send_stores_exactly_one_system_message_and_later_sends_reuse_it(hearth, me, persona, provider):
    conversation = me.conversations.create(persona.id)
    me.send(conversation.id, "one")
    first = me.stored_prompt(conversation.id)
    me.send(conversation.id, "two")
    conn = hearth.store.connection()
    rows = conn.execute("SELECT id, content FROM messages WHERE conversation_id = ? AND role = 'system'",
                        (conversation.id,)).fetchall()
    assert len(rows) == 1 and rows[0]["content"] == first
    assert [r.messages[0].content for r in provider.requests] == [first, first]


def test_p2_racing_first_sends_store_one_prompt(tmp_path):
    settings_path = str(tmp_path / "home")
    hearth = Hearth.open(settings_path)
    me = hearth.scope()
    persona = me.personas.create("p")
    conversations = [me.conversations.create(persona.id) for _ in range(5)]
    barrier = threading.Barrier(4)
    errors = []

    def sender(conversation_id):
        try:
            barrier.wait()
            me.send(conversation_id, "first!")
        except Exception as exc:  # collected and asserted below
            errors.append(exc)

    for conversation in conversations:
        threads = [threading.Thread(target=sender, args=(conversation.id,)) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        barrier.reset()
    assert errors == []
    conn = hearth.store.connection()
    for conversation in conversations:
        count = conn.execute("SELECT count(*) FROM messages WHERE conversation_id = ? AND kind = 'static_prompt'",
                             (conversation.id,)).fetchone()[0]
        assert count == 1
    # And the database itself refuses a second one.
    with pytest.raises(Exception, match="UNIQUE"):
        me.conversations.add_message(conversations[0].id, "system", "second prompt", kind="static_prompt")


def test_p3_sections_follow_spec_order_and_absent_sections_have_no_heading(me, provider):
    persona = me.personas.create(
        "full", "Full", identity="I am Full.", custom_instructions="Be brief.", tone="Playful",
        archive_access=True, web_search=True, characters=[{"name": "Ellis", "description": "a grey cat"}],
        card={"mes_example": "<START>\n{{user}}: Tea?\n{{char}}: Always."},
    )
    me.memories.add("Drinks tea", "habits", 4)
    conversation = me.conversations.create(persona.id)
    me.send(conversation.id, "hi")
    prompt = me.stored_prompt(conversation.id)
    headings = [line[3:] for line in prompt.splitlines() if line.startswith("## ")]
    expected = [title for key, title in SECTIONS if key != "continuity"]
    assert headings == expected
    assert "- [habits] Drinks tea (importance 4)" in prompt

    me.memories.delete(me.memories.list()[0].id)
    plain = me.personas.create("plain", "Plain", tone="Natural")
    conversation = me.conversations.create(plain.id)
    me.send(conversation.id, "hi")
    prompt = me.stored_prompt(conversation.id)
    for absent in ("Personality and tone", "Custom instructions", "Identity", "Archive access",
                   "Long-term memories", "Saved characters", "Web search", "Continuity from a prior thread"):
        assert f"## {absent}" not in prompt


def test_p3_section_text_is_persona_configuration(me, provider):
    persona = me.personas.create("p", sections={"integrity": "Always sign with a star.", "artifacts": ""})
    conversation = me.conversations.create(persona.id)
    me.send(conversation.id, "hi")
    prompt = me.stored_prompt(conversation.id)
    assert "## Persona integrity\nAlways sign with a star." in prompt
    assert "## Artifact creation" not in prompt


def test_p4_no_recent_activity_section_exists(me, persona, provider):
    other = me.conversations.create(persona.id, "Other thread")
    me.send(other.id, "we talked about the harbour")
    conversation = me.conversations.create(persona.id)
    me.send(conversation.id, "hi")
    everything = "\n".join(m.content for m in provider.requests[-1].messages)
    assert "recent activity" not in everything.lower()
    assert "harbour" not in me.stored_prompt(conversation.id)


def test_p6_stored_prompt_is_never_a_bubble_nor_in_the_visible_estimate(me, persona):
    conversation = me.conversations.create(persona.id)
    me.send(conversation.id, "hello")
    visible = me.conversations.messages(conversation.id)
    assert [m.role for m in visible] == ["user", "assistant"]
    estimate = me.visible_estimate(conversation.id)
    assert estimate["messages"] == 2
    assert estimate["tokens"] == -(-sum(len(m.content) for m in visible) // 4)


def test_p6_stored_prompt_is_not_keyword_searchable(hearth, me, persona):
    persona = me.personas.update(persona.id, identity="I am the unmistakable zanzibar companion.")
    conversation = me.conversations.create(persona.id)
    me.send(conversation.id, "hello")
    assert keyword_ids(hearth.store.connection(), "messages_fts", "zanzibar") == []
    assert "zanzibar" in me.stored_prompt(conversation.id)  # it is there, only not indexed


def test_d1_dynamic_context_is_a_second_system_message_right_before_the_newest_turn(hearth, me, provider):
    persona = me.personas.create("p", characters=[{"name": "Ellis", "description": "a grey cat who hates rain"}])
    conversation = me.conversations.create(persona.id)
    me.send(conversation.id, "first")
    me.send(conversation.id, "how is Ellis today?")
    messages = provider.requests[-1].messages
    assert [m.role for m in messages] == ["system", "user", "assistant", "system", "user"]
    assert messages[-2].content.count("=== PINNED CHARACTER CONTEXT ===") == 1
    assert "a grey cat who hates rain" in messages[-2].content
    # Never stored as a conversation message.
    stored = hearth.store.connection().execute("SELECT count(*) FROM messages WHERE lower(content) LIKE '%pinned character%'")
    assert stored.fetchone()[0] == 0


def test_d1_no_dynamic_message_when_no_layer_has_content(me, persona, provider):
    conversation = me.conversations.create(persona.id)
    me.send(conversation.id, "nothing special")
    assert [m.role for m in provider.requests[-1].messages] == ["system", "user"]


def test_d1_characters_can_be_pinned_for_one_message(me, provider):
    persona = me.personas.create("p", characters=[{"name": "Nova", "description": "a starship"}])
    conversation = me.conversations.create(persona.id)
    me.send(conversation.id, "tell me a story", pin_characters=("Nova",))
    assert "a starship" in provider.requests[-1].messages[-2].content
    me.send(conversation.id, "and another")
    assert all("PINNED CHARACTER" not in m.content for m in provider.requests[-1].messages)


def test_t1_r1_full_history_travels_until_the_budget_requires_trimming(tmp_path, provider):
    from hearth import Settings

    hearth = Hearth(Settings.resolve({"home": str(tmp_path), "input_token_limit": 3000,
                                      "output_token_reserve": 500}, environ={}), provider=provider)
    me = hearth.scope()
    persona = me.personas.create("p")
    conversation = me.conversations.create(persona.id)
    for i in range(12):
        me.conversations.add_message(conversation.id, "user" if i % 2 == 0 else "assistant", f"turn {i} " + "x" * 100)
    me.send(conversation.id, "short history fits")
    assert len([m for m in provider.requests[-1].messages if m.role in ("user", "assistant")]) == 13
    assert me.request_size(conversation.id)["history_trimmed_messages"] == 0

    for i in range(60):
        me.conversations.add_message(conversation.id, "user" if i % 2 == 0 else "assistant", f"long {i} " + "y" * 400)
    me.send(conversation.id, "now it must trim")
    request = provider.requests[-1]
    turns = [m for m in request.messages if m.role in ("user", "assistant")]
    size = me.request_size(conversation.id)
    assert size["history_trimmed_messages"] > 0
    assert size["total_tokens"] <= 3000 - 500
    assert turns[-1].content == "now it must trim"
    assert turns[-2].content.startswith("long 59")  # the newest turns survive; the oldest go first
    assert len(turns) - 1 == size["history_messages"]


def test_r1_tool_definitions_are_offered(me, persona, provider):
    conversation = me.conversations.create(persona.id)
    me.send(conversation.id, "hi")
    names = [t.name for t in provider.requests[-1].tools]
    assert "search_past_conversations" in names and len(names) == len(set(names))


def test_r2_size_report_is_derived_from_the_strings_sent(me, persona, provider):
    persona = me.personas.update(persona.id, characters=[{"name": "Ellis", "description": "a cat"}])
    conversation = me.conversations.create(persona.id)
    me.send(conversation.id, "hello Ellis")
    size = me.request_size(conversation.id)
    request = provider.requests[-1]
    static, context = request.messages[0].content, request.messages[-2].content
    assert size["static_prompt_tokens"] == -(-len(static) // 4)
    assert size["dynamic_context_tokens"] == -(-len(context) // 4)
    assert size["history_tokens"] == 0 and size["handoff_tokens"] == 0
    assert size["handoff_already_included"] is False
    assert size["tools_count"] == len(request.tools) and size["tools_tokens"] > 0
    assert size["remaining_tokens"] == size["input_limit_tokens"] - size["total_tokens"]
    assert size["estimate_method"] == "chars/4"
    assert set(size["dynamic_blocks"]) == {"characters"}


@hsettings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(secret=st.text(alphabet=st.characters(categories=("L", "N")), min_size=12, max_size=40))
def test_r3_diagnostics_hold_numbers_and_fixed_names_never_text(tmp_path_factory, secret):
    from hearth import Settings

    secret = "Ж" + secret  # never a fixed English name such as "capabilities"
    home = tmp_path_factory.mktemp("r3")
    records = []
    handler = logging.Handler()
    handler.emit = records.append
    logging.getLogger().addHandler(handler)
    logging.getLogger().setLevel(logging.DEBUG)
    try:
        with Hearth(Settings.resolve({"home": str(home)}, environ={})) as hearth:
            me = hearth.scope()
            persona = me.personas.create("p", identity=f"identity {secret}",
                                         characters=[{"name": "Kit", "description": f"char {secret}"}])
            me.memories.add(f"memory {secret}")
            conversation = me.conversations.create(persona.id)
            events = list(me.send_stream(conversation.id, f"Kit says {secret}"))
            diagnostics = [e.data for e in events if e.type == "diagnostics"]
            assert len(diagnostics) == 1
            payload = json.dumps(diagnostics[0])
            assert secret not in payload
            for value in diagnostics[0].values():
                assert isinstance(value, (int, bool, dict)) or value == "chars/4"
            stored = hearth.store.connection().execute(
                "SELECT payload FROM events WHERE kind = 'context.request_size'").fetchone()[0]
            assert secret not in stored
    finally:
        logging.getLogger().removeHandler(handler)
    assert all(secret not in r.getMessage() for r in records)


def test_r4_header_estimate_counts_visible_messages_only(me, persona):
    persona = me.personas.update(persona.id, identity="x" * 4000)
    conversation = me.conversations.create(persona.id)
    me.send(conversation.id, "abcd" * 10)
    estimate = me.visible_estimate(conversation.id)
    visible = me.conversations.messages(conversation.id)
    assert estimate == {"messages": 2, "tokens": -(-sum(len(m.content) for m in visible) // 4)}
    assert estimate["tokens"] < 100  # the 4,000-character prompt is not counted


def test_k5_user_text_quoting_the_recall_heading_is_relabelled_not_refused(me, provider):
    persona = me.personas.create("p", identity=f"My notes say {RECALL_HEADING} sometimes.")
    me.memories.add(f"Quoted {RECALL_HEADING} in a memory")
    conversation = me.conversations.create(persona.id)
    me.send(conversation.id, f"I typed {RECALL_HEADING} myself")
    sent = "\n".join(m.content for m in provider.requests[-1].messages)
    assert RECALL_HEADING not in sent
    assert sent.count(QUOTED_RECALL_HEADING) == 3


def test_pr5_provider_error_keeps_the_user_message_and_leaves_no_partial_reply(hearth, me, persona, provider):
    def failing(request):
        yield StreamEvent("text", text="half a rep")
        raise ProviderError("The model provider is overloaded (503); try again.", "server")

    provider.replies.append(failing)
    conversation = me.conversations.create(persona.id)
    with pytest.raises(ProviderError, match="overloaded"):
        me.send(conversation.id, "please answer")
    messages = me.conversations.messages(conversation.id)
    assert [(m.role, m.content) for m in messages] == [("user", "please answer")]
    kinds = [r[0] for r in hearth.store.connection().execute("SELECT kind FROM events ORDER BY id")]
    assert "provider.error" in kinds
    reply = me.retry(conversation.id)  # resend without saving the message twice
    assert [m.role for m in me.conversations.messages(conversation.id)] == ["user", "assistant"]
    assert reply.user_message.id == messages[0].id


def test_tool_loop_runs_a_tool_and_continues(hearth, me, persona, provider):
    from hearth.providers.base import ToolCall

    old = me.conversations.create(persona.id, "Boats")
    me.conversations.add_message(old.id, "user", "the red sailboat was named Marigold")

    def call_tool(request):
        yield StreamEvent("tool_call", tool_call=ToolCall("c1", "search_past_conversations", {"query": "sailboat"}))

    def answer(request):
        tool_result = [m for m in request.messages if m.role == "tool"][-1].content
        yield StreamEvent("text", text="Found: " + ("Marigold" if "Marigold" in tool_result else "nothing"))

    provider.replies += [call_tool, answer]
    conversation = me.conversations.create(persona.id)
    reply = me.send(conversation.id, "what was the boat called?")
    assert reply.assistant_message.content == "Found: Marigold"
    assert "[Boats," in [m for m in provider.requests[-1].messages if m.role == "tool"][0].content
    events = [r[0] for r in hearth.store.connection().execute("SELECT kind FROM events WHERE kind = 'tool.call'")]
    assert events == ["tool.call"]


def test_t1_cached_history_follows_edits_and_deletions(hearth, me, persona, provider):
    conversation = me.conversations.create(persona.id)
    me.send(conversation.id, "first message")
    me.send(conversation.id, "second message")
    first = me.conversations.messages(conversation.id)[0]
    with hearth.store.write() as conn:
        conn.execute("UPDATE messages SET content = 'first message, corrected' WHERE id = ?", (first.id,))
    me.send(conversation.id, "third")
    contents = [m.content for m in provider.requests[-1].messages if m.role in ("user", "assistant")]
    assert contents[0] == "first message, corrected"
    with hearth.store.write() as conn:
        conn.execute("DELETE FROM messages WHERE id = ?", (first.id,))
    me.send(conversation.id, "fourth")
    contents = [m.content for m in provider.requests[-1].messages if m.role in ("user", "assistant")]
    assert "first message, corrected" not in contents
    assert contents[-1] == "fourth" and len(contents) == 6


def test_t1_e3_history_after_a_capsule_is_cached_and_a_newer_capsule_reads_afresh(hearth, me, persona):
    """Once a continuity capsule covers the older turns, each send reads only the turns added
    since the last send, not every turn since the capsule again; a newer capsule's bound is never
    served the older window."""
    from hearth.thread.turns import TurnCache

    conversation = me.conversations.create(persona.id)
    ids = [me.conversations.add_message(conversation.id, "user" if i % 2 == 0 else "assistant", f"turn {i}").id
           for i in range(10)]
    cache = TurnCache()
    conn = hearth.store.connection()
    first, left_out = cache.read(conn, conversation.id, ids[8], 10_000, after_id=ids[3])
    assert [t.content for t in first] == [f"turn {i}" for i in range(4, 8)] and left_out == 0
    second, _ = cache.read(conn, conversation.id, ids[9] + 1, 10_000, after_id=ids[3])
    assert [t.content for t in second] == [f"turn {i}" for i in range(4, 10)]
    assert all(a is b for a, b in zip(first, second))  # the cached turns, not a second read of them
    newer, _ = cache.read(conn, conversation.id, ids[9] + 1, 10_000, after_id=ids[6])
    assert [t.content for t in newer] == ["turn 7", "turn 8", "turn 9"]
    tight, left_out = cache.read(conn, conversation.id, ids[9] + 1, 11, after_id=ids[3])
    assert [t.content for t in tight] == ["turn 9"] and left_out == 5


def test_t1_the_cached_window_keeps_provider_messages_in_step_and_assembly_does_not_walk_the_turns(hearth, me, persona):
    from hearth.prompt.assembly import HistoryTurns, assemble
    from hearth.prompt.dynamic import RenderedContext
    from hearth.thread.turns import TurnCache

    conversation = me.conversations.create(persona.id)
    ids = [me.conversations.add_message(conversation.id, "user" if i % 2 == 0 else "assistant", f"turn {i} " * (i + 1)).id
           for i in range(12)]
    cache = TurnCache()
    conn = hearth.store.connection()
    reads = [cache.read(conn, conversation.id, ids[6], 10_000)[0],  # read afresh
             cache.read(conn, conversation.id, ids[11] + 1, 10_000)[0],  # the window and the turns since
             cache.read(conn, conversation.id, ids[11] + 1, 200)[0]]  # trimmed from the front
    for history in reads:
        assert history.chats == [t.chat for t in history] and history.sizes == [t.tokens for t in history]
        assert history.lengths == [len(t.chat.content) for t in history]
    assert [t.id for t in reads[2]] == ids[-len(reads[2]):] and len(reads[2]) < 12

    def request(history):
        return assemble(static_prompt="You are kind.", handoff_chars=0, history=history,
                        context=RenderedContext((), "", ""), user_text="hello", tools=[],
                        input_limit_tokens=200, output_reserve_tokens=50, birth_period=False)

    plain = request(list(reads[1]))
    # Assembly takes the carried lists: turn objects it cannot read are never touched.
    carried = request(HistoryTurns([object()] * len(reads[1]), reads[1].chats, reads[1].sizes, reads[1].lengths))
    assert carried.request.messages == plain.request.messages and carried.size == plain.size
    assert plain.size.history_trimmed_messages > 0


def test_lc2_streamed_deltas_never_show_a_nudge_marker_split_across_chunks(me, persona, provider):
    def reply(request):
        for chunk in ("How did the ", "interview go? [", "n:3f", "2a] Tell me."):
            yield StreamEvent("text", text=chunk)

    provider.replies.append(reply)
    conversation = me.conversations.create(persona.id)
    events = list(me.send_stream(conversation.id, "hi"))
    shown = "".join(e.data["text"] for e in events if e.type == "delta")
    assert shown == "How did the interview go? Tell me."
