"""Characters that behave as their card says (X3, X1, P3, K3, H6, R2): the greeting opens each new
thread and its alternates swipe, example dialogue and the card's system prompt reach the stored
prompt, post-history instructions travel after the history, macros fill with the person's display
name, and a client's own greeting is saved once. Cards go through the real import path (PNG cards
built with Pillow in tests/samples.py)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import openai
import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from hearth.cli import cli
from hearth.prompt.dynamic import RECALL_HEADING
from hearth.prompt.macros import Macros, char_name, humanize
from hearth.server import create_app
from hearth.store import migrations
from hearth.text import estimate_tokens
from tests import samples

MIRA_GREETING = "*sets the kettle on* You made it before the tide turned."
MIRA_ALTERNATE = "*waves from the gallery* Up here!"


def import_mira(me, card=None):
    report = me.imports.file(samples.card_png(card or samples.card_v3(book=False)), "mira.png")
    assert report.status == "imported", report.reason
    return me.personas.get(report.ids["personas"][0])


def card_with(**fields):
    card = samples.card_v3(book=False)
    card["data"].update(fields)
    return card


def chat_turns(me, conversation_id):
    return [m for m in me.conversations.messages(conversation_id) if m.kind == "chat"]


# -- the greeting and its alternates ----------------------------------------------------------------
def test_x3_new_chat_opens_with_the_cards_greeting_and_alternates_swipe(me, provider):
    mira = import_mira(me)
    chat = me.new_chat(mira.id).conversation
    (greeting,) = chat_turns(me, chat.id)
    assert (greeting.role, greeting.kind, greeting.content) == ("assistant", "chat", MIRA_GREETING)
    assert greeting.metadata["greeting"] == "card"
    versions = me.alternatives(greeting.id)
    assert [(v.position, v.content, v.chosen) for v in versions] == [
        (0, MIRA_GREETING, True), (1, MIRA_ALTERNATE, False)]
    # Swiping picks the alternate; it is what the thread shows and what the model reads.
    me.choose_alternative(greeting.id, 1)
    assert me.conversations.message(greeting.id).content == MIRA_ALTERNATE
    me.send(chat.id, "Hello up there")
    turns = [(m.role, m.content) for m in provider.requests[-1].messages if m.role != "system"]
    assert turns == [("assistant", MIRA_ALTERNATE), ("user", "Hello up there")]
    # A greeting is swiped, not regenerated: once the person spoke, the reply regenerates as ever.
    assert [m.role for m in chat_turns(me, chat.id)] == ["assistant", "user", "assistant"]


def test_x3_greeting_is_only_for_new_chats_on_the_web_and_cli_and_not_for_a_card_without_one(me):
    mira = import_mira(me)
    assert chat_turns(me, me.new_chat(mira.id, channel="cli").conversation.id)[0].content == MIRA_GREETING
    for channel in ("api", "sms", "voice", "inner"):
        assert chat_turns(me, me.new_chat(mira.id, channel=channel).conversation.id) == []
    assert chat_turns(me, me.conversations.create(mira.id).id) == []  # a bare conversation (imports, tests)
    plain = me.personas.create("plain", "Plain")
    assert chat_turns(me, me.new_chat(plain.id).conversation.id) == []
    # An empty first message leaves the alternates: the first of them greets.
    quiet = import_mira(me, card_with(name="Quiet", first_mes="  ", alternate_greetings=["", "Oh. Hello."]))
    (only,) = chat_turns(me, me.new_chat(quiet.id).conversation.id)
    assert only.content == "Oh. Hello." and [a.content for a in me.alternatives(only.id)] == ["Oh. Hello."]


def test_x3_h6_continuity_new_chat_greets_and_a_thread_left_at_its_greeting_is_not_carried(me, provider):
    mira = import_mira(me)
    first = me.new_chat(mira.id).conversation
    me.send(first.id, "The ferry leaves at dawn tomorrow")
    second = me.new_chat(mira.id)
    assert second.source_conversation_id == first.id  # the handoff carries the first thread
    assert chat_turns(me, second.conversation.id)[0].content == MIRA_GREETING  # and the greeting opens it
    # The second thread was opened and left: its greeting alone is nothing to carry.
    third = me.new_chat(mira.id)
    assert third.source_conversation_id == first.id
    me.send(third.conversation.id, "hello")
    assert "The ferry leaves at dawn tomorrow" in me.stored_prompt(third.conversation.id)


def test_x3_k3_a_greeting_does_not_end_the_birth_period(me, provider):
    mira = import_mira(me)
    other = me.conversations.create(mira.id, "Coast")
    me.conversations.add_message(other.id, "user", "The lighthouse keeper in Portofino waved at us.")
    chat = me.new_chat(mira.id, continue_=False).conversation

    def recalled() -> bool:
        return any(RECALL_HEADING in m.content for m in provider.requests[-1].messages if m.role == "system")

    me.send(chat.id, "Do you remember the lighthouse keeper in Portofino?")
    assert not recalled()
    me.send(chat.id, "Do you remember the lighthouse keeper in Portofino?")
    assert recalled()  # after the first real reply the same question recalls


# -- example dialogue, system prompt, post-history instructions -----------------------------------------
def test_x3_r2_example_dialogue_system_prompt_and_post_history_reach_the_provider_and_the_size_report(me, provider):
    mira = import_mira(me, card_with(
        mes_example="<START>\n{{user}}: Any ships?\n{{char}}: One, far out.\n<START>\n{{user}}: Tea?\n{{char}}: Always.",
        post_history_instructions="Stay in {{char}}'s voice; keep replies under three paragraphs."))
    chat = me.new_chat(mira.id).conversation
    reply = me.send(chat.id, "Evening, Mira")
    messages = provider.requests[-1].messages
    static = messages[0].content
    # {{char}} is the V3 card's nickname ("Mira"), as the V3 spec asks, else the display name.
    assert static.startswith("## Custom instructions\nWrite as Mira, in the first person.\n\n")
    example = static.split("## Example dialogue\n")[1].split("\n\n## ")[0]
    assert example.endswith("[Example 1]\nthe person: Any ships?\nMira: One, far out.\n\n"
                            "[Example 2]\nthe person: Tea?\nMira: Always.")
    assert static.index("## Identity") < static.index("## Example dialogue") < static.index("## Cross-thread")
    # The post-history instructions: a system message after the history and the dynamic context,
    # right before the person's message.
    post = "Stay in Mira's voice; keep replies under three paragraphs."
    assert [(m.role, m.content) for m in messages[-2:]] == [("system", post), ("user", "Evening, Mira")]
    assert [m.content for m in messages].count(post) == 1
    size = reply.size
    assert size["post_history_tokens"] == estimate_tokens(len(post))
    sections = size["static_sections"]
    assert sections["example_dialogue"] == estimate_tokens(len("## Example dialogue\n" + example))
    assert sections["custom_instructions"] > 0 and "memories" not in sections
    total = sum(len(m.content) for m in messages) + sum(
        len(t.name) + len(t.description) + len(json.dumps(t.parameters)) for t in provider.requests[-1].tools)
    assert size["total_tokens"] == estimate_tokens(total)  # derived from the strings that were sent
    assert me.request_size(chat.id)["post_history_tokens"] == size["post_history_tokens"]


def test_x3_cli_chat_opens_a_new_thread_with_the_greeting(hearth, me):
    mira = import_mira(me)
    done = CliRunner().invoke(cli, ["--home", str(hearth.settings.home), "chat", "--persona", mira.name, "-m", "hi"],
                              catch_exceptions=False)
    assert done.exit_code == 0 and f"Mira Vale.\n{MIRA_GREETING}\n[offline reply" in done.output


def test_x3_a_persona_without_card_fields_sends_no_post_history_or_example(me, provider, persona):
    reply = me.send(me.new_chat(persona.id).conversation.id, "hi")
    assert reply.size["post_history_tokens"] == 0 and "example_dialogue" not in reply.size["static_sections"]
    assert "## Example dialogue" not in provider.requests[-1].messages[0].content
    # {{char}}: the display name, or a V3 card's nickname when it has one.
    assert char_name(persona) == "Elion"
    assert char_name(me.personas.create("wren", "Wren Hale", card={"nickname": " Wren "})) == "Wren"


# -- macros ----------------------------------------------------------------------------------------
def test_x3_macros_fill_every_supported_form():
    at = datetime(2024, 3, 2, 18, 4, tzinfo=timezone.utc)
    fill = Macros(char="Mira", user="Sam", now=at, idle=timedelta(minutes=5), seed=7)
    assert fill.fill("{{user}} and {{char}}; <USER> and <BOT>; {{User}} {{CHAR}}") == "Sam and Mira; Sam and Mira; Sam Mira"
    assert fill.fill("{{time}} | {{date}} | {{weekday}} | {{isotime}} | {{isodate}}") == \
        "6:04 PM | March 2, 2024 | Saturday | 18:04 | 2024-03-02"
    assert fill.fill("idle {{idle_duration}}") == "idle 5 minutes"
    assert Macros("M").fill("{{idle_duration}}") == "just now"
    assert fill.fill("a{{// a note\nover two lines }}b{{noop}}c") == "abc"
    assert fill.fill("one\n\n{{trim}}\ntwo{{newline}}three") == "onetwo\nthree"
    assert fill.fill("{{random:tea,coffee,cocoa}}") in ("tea", "coffee", "cocoa")
    assert fill.fill("{{random::salt, pepper::thyme}}") in ("salt, pepper", "thyme")
    assert fill.fill("{{random:a\\,b}}") == "a,b"
    assert {Macros("M").fill("{{random:x,y}}") for _ in range(200)} == {"x", "y"}  # fresh each fill
    stable = Macros("M", seed=3, stable=True)
    assert len({stable.fill("{{random:a,b,c,d,e,f}}") for _ in range(20)}) == 1  # the stored prompt's rule
    assert len({fill.fill("{{pick::a::b::c::d::e::f}}") for _ in range(20)}) == 1  # pick: stable in a thread
    # Unknown macros stay as written; what a macro is filled with is not read again.
    assert fill.fill("{{unknown}} {{random}}") == "{{unknown}} {{random}}"
    assert Macros(char="{{user}}", user="Sam").fill("{{char}}") == "{{user}}"
    assert [humanize(timedelta(seconds=s)) for s in (10, 60, 3600, 5 * 3600, 86400, 3 * 86400, 400 * 86400)] == [
        "a few seconds", "a minute", "an hour", "5 hours", "a day", "3 days", "a year"]


def test_x3_display_name_fills_user_macros_and_a_change_rebuilds_the_prompts_that_use_it(hearth, me, provider, persona):
    mira = import_mira(me, card_with(
        first_mes="Hello, {{user}}.{{// a note for whoever edits this card }}",
        post_history_instructions="Today is {{weekday}}; {{user}} last wrote {{idle_duration}} ago."))
    assert "{{user}}" in mira.identity  # kept as written, filled at build
    assert me.set_display_name("  Sam ") == 0
    assert hearth.users.get(me.user_id).display_name == "Sam"
    chat = me.new_chat(mira.id).conversation
    assert chat_turns(me, chat.id)[0].content == "Hello, Sam."
    me.send(chat.id, "hi")
    static = me.stored_prompt(chat.id)
    assert "writes letters to Sam." in static and "{{" not in static
    weekday = datetime.now(timezone.utc).strftime("%A")
    assert provider.requests[-1].messages[-2].content == f"Today is {weekday}; Sam last wrote just now ago."
    me.send(chat.id, "again")
    assert "Sam last wrote a few seconds ago." in provider.requests[-1].messages[-2].content
    # Another name rebuilds the prompts that name the person, not the others.
    plain = me.new_chat(persona.id).conversation
    me.send(plain.id, "hi")
    before = me.stored_prompt(plain.id)
    assert me.set_display_name("Alex") == 1
    assert "writes letters to Alex." in me.stored_prompt(chat.id) and me.stored_prompt(plain.id) == before
    assert me.set_display_name("Alex") == 0
    assert me.set_display_name(None) == 1
    assert "writes letters to the person." in me.stored_prompt(chat.id)
    for bad in ("x" * 101, "two\nlines", "nul\x00"):
        with pytest.raises(Exception, match="display name"):
            me.set_display_name(bad)
    assert hearth.users.get(me.user_id).display_name is None


def test_x3_display_name_is_set_by_the_cli_and_over_http(hearth, me):
    runner = CliRunner()
    home = str(hearth.settings.home)
    done = runner.invoke(cli, ["--home", home, "user", "name", "Sam Rivers"], catch_exceptions=False)
    assert done.exit_code == 0 and "Display name set to Sam Rivers" in done.output
    assert hearth.users.get(me.user_id).display_name == "Sam Rivers"
    shown = runner.invoke(cli, ["--home", home, "user", "name"], catch_exceptions=False)
    assert shown.output.strip() == "Sam Rivers"
    refused = runner.invoke(cli, ["--home", home, "user", "name", "x" * 101])
    assert refused.exit_code == 2 and "display name" in refused.output
    client = TestClient(create_app(hearth.settings, hearth), base_url="http://127.0.0.1:8765")
    assert client.get("/api/auth/me").json()["display_name"] == "Sam Rivers"
    changed = client.patch("/api/auth/me", json={"display_name": "Sam"})
    assert changed.status_code == 200 and changed.json()["display_name"] == "Sam"
    bad = client.patch("/api/auth/me", json={"display_name": "a\nb"})
    assert bad.status_code == 422 and hearth.users.get(me.user_id).display_name == "Sam"
    assert client.patch("/api/auth/me", json={"display_name": None}).json()["display_name"] is None
    cleared = runner.invoke(cli, ["--home", home, "user", "name", "--clear"], catch_exceptions=False)
    assert "Display name cleared" in cleared.output


def test_x3_migration_22_gives_imported_personas_their_macros_back(hearth, me):
    """Cards imported before kept "the person" and the card's name baked in; the migration's data
    step gives them their macros back unless the owner edited the text since."""
    baked = import_mira(me)
    edited = import_mira(me, card_with(name="Edited"))
    old = "Mira Vale keeps the lighthouse on Gull Rock and writes letters to the person.\n\nMira Vale's personality: " \
          "dry wit, patient, notices the weather before anyone else\n\nScenario: A winter storm has cut the island off for a week."
    with hearth.store.write() as conn:
        conn.execute("UPDATE personas SET identity = ?, custom_instructions = ? WHERE id = ?",
                     (old, "Write as Mira Vale, in the first person.", baked.id))
        conn.execute("UPDATE personas SET identity = 'My own words for {{char}}.', custom_instructions = ''"
                     " WHERE id = ?", (edited.id,))
        migrations.unbake_card_macros(conn)
    again = me.personas.get(baked.id)
    assert again.identity == import_mira(me, card_with(name="Mira Vale", nickname="fresh")).identity
    assert again.identity.startswith("{{char}} keeps the lighthouse") and "{{char}}'s personality" in again.identity
    assert again.custom_instructions == "Write as {{char}}, in the first person."
    kept = me.personas.get(edited.id)
    assert (kept.identity, kept.custom_instructions) == ("My own words for {{char}}.", "")


# -- a client's own greeting (X1) ------------------------------------------------------------------------
def test_x1_x3_a_clients_greeting_is_saved_once_as_the_companions_first_turn(hearth, me, provider):
    mira = import_mira(me)  # the persona's own card greeting is not added: the client shows its own
    token = hearth.users.create_token(me.user_id, "sillytavern")
    client = openai.OpenAI(base_url="http://127.0.0.1:8765/v1", api_key=token, max_retries=0,
                           http_client=TestClient(create_app(hearth.settings, hearth),
                                                  base_url="http://127.0.0.1:8765"))
    greeting = {"role": "assistant", "content": "*looks up from the logbook* Storm's coming, {{user}}."}
    opening = [{"role": "system", "content": "You are Mira."}, greeting, {"role": "user", "content": "Hi Mira"}]
    raw = client.chat.completions.with_raw_response.create(model=mira.name, messages=opening)
    conversation_id = int(raw.headers["x-hearth-conversation-id"])
    first = raw.parse().choices[0].message.content
    turns = chat_turns(me, conversation_id)
    assert [(m.role, m.content) for m in turns] == [
        ("assistant", greeting["content"]), ("user", "Hi Mira"), ("assistant", first)]
    assert turns[0].metadata["greeting"] == "client" and turns[0].channel == "api"
    # The model read it as the companion's first turn.
    assert [(m.role, m.content) for m in provider.requests[-1].messages if m.role != "system"] == [
        ("assistant", greeting["content"]), ("user", "Hi Mira")]
    # The resent history finds the same conversation and does not save the greeting again.
    again = client.chat.completions.with_raw_response.create(model=mira.name, messages=opening + [
        {"role": "assistant", "content": first}, {"role": "user", "content": "Shall I bar the door?"}])
    assert int(again.headers["x-hearth-conversation-id"]) == conversation_id
    assert [m.role for m in chat_turns(me, conversation_id)] == ["assistant", "user", "assistant", "user", "assistant"]
    # A second chat with the same opening is its own conversation, told apart by Hearth's first reply.
    other = client.chat.completions.with_raw_response.create(model=mira.name, messages=opening)
    other_id = int(other.headers["x-hearth-conversation-id"])
    assert other_id != conversation_id
    third = client.chat.completions.with_raw_response.create(model=mira.name, messages=opening + [
        {"role": "assistant", "content": first}, {"role": "user", "content": "Shall I bar the door?"},
        {"role": "assistant", "content": chat_turns(me, conversation_id)[-1].content},
        {"role": "user", "content": "Done."}])
    assert int(third.headers["x-hearth-conversation-id"]) == conversation_id
    assert [m.content for m in chat_turns(me, other_id)][0] == greeting["content"]
