"""Choices in the web page (W3, U1, W5, W6): the first-run welcome on a fresh deployment (create a
companion, or import a character card), the chat header's model picker and prompt presets, at
1366 x 860 and 390 x 844 in headless Chromium, each view checked by axe-core.

Each test serves its own deployment; the model picker's deployment talks to the fake provider
server through the official SDK, so the model list and the chosen model travel over real HTTP.
"""

from __future__ import annotations

import json

import pytest

from hearth import Hearth, Settings
from tests.conftest import RecordingProvider
from tests.test_ui import UI_TIMEOUT_MS, browser, check_axe, eventually, expect, no_sideways_scroll, ready, serve  # noqa: F401
from tests.test_ui_threads import sized  # noqa: F401  (the page at 1366 x 860 and 390 x 844)

pytestmark = pytest.mark.ui

CARD = {"spec": "chara_card_v2", "spec_version": "2.0",
        "data": {"name": "Mira", "description": "A lighthouse keeper who keeps a log of every ship.",
                 "first_mes": "The lamp is lit. Come in out of the wind."}}


def open_header(page, size):
    """The conversation actions: behind More at every size (W8)."""
    toggle = page.locator("#chat-more-toggle")
    if toggle.get_attribute("aria-expanded") != "true":
        toggle.click()
        expect(toggle).to_have_attribute("aria-expanded", "true")


# -- U1: the first run -------------------------------------------------------------------------------------
def name_yourself(welcome):
    """The welcome's first step (W10): the person's name."""
    welcome.get_by_label("Your name").fill("Sam")
    welcome.get_by_role("button", name="Continue").click()


def stay_offline(welcome):
    """The welcome's last step (W10): no model for now (tests/test_ui_connect.py connects one)."""
    welcome.get_by_text("Offline for now").click()
    welcome.get_by_role("button", name="Save and start chatting").click()


def test_u1_w5_w6_a_fresh_deployment_welcomes_and_creates_a_companion(sized, tmp_path):  # noqa: F811
    page, size = sized
    settings = Settings.resolve({"home": str(tmp_path / "home"), "input_token_limit": 32_000}, environ={})
    with Hearth(settings) as hearth, serve(hearth) as base:  # offline: one model, so no picker
        me = hearth.scope()
        if size == "phone":
            default = me.personas.default()  # as `hearth init` leaves it: the untouched default
        found: dict = {}
        ready(page, base + "/")
        welcome = page.locator("#welcome")
        expect(welcome).to_be_visible()
        expect(page.get_by_role("heading", name="Welcome to Hearth")).to_be_visible()
        expect(page.locator("#messages")).to_be_hidden()  # no empty chat
        expect(page.locator("#composer")).to_be_hidden()
        assert no_sideways_scroll(page)
        check_axe(page, f"welcome {size}", found)

        name_yourself(welcome)
        welcome.get_by_label("Name", exact=True).fill("Juniper <b>Moss</b>")
        welcome.get_by_label("Who they are (a sentence or two)").fill("A calm friend who notices small things.")
        welcome.get_by_role("button", name="Create and continue").click()
        stay_offline(welcome)
        expect(welcome).to_be_hidden()
        expect(page.locator("#composer-text")).to_be_enabled()
        expect(page.locator("#composer-text")).to_be_focused()
        personas = me.personas.list()
        assert [p.display_name for p in personas] == ["Juniper <b>Moss</b>"]  # the default, if any, archived
        assert personas[0].identity == "A calm friend who notices small things."
        if size == "phone":
            assert me.personas.get(default.id).archived_at is not None
        chats = me.conversations.list()
        assert len(chats) == 1 and chats[0].persona_id == personas[0].id
        expect(page.locator("#chat-meta")).to_contain_text("Juniper <b>Moss</b>")  # text, never markup
        open_header(page, size)
        expect(page.locator("#model-select")).to_be_hidden()  # offline offers one model
        assert no_sideways_scroll(page)
        check_axe(page, f"first chat {size}", found)
        page.reload()
        page.wait_for_selector("body[data-ready=true]")
        expect(welcome).to_be_hidden()  # set up now: the welcome does not come back
        assert found == {}, json.dumps(found, indent=1)


def test_u1_w5_the_welcome_imports_a_character_card_whose_greeting_opens_the_chat(sized, tmp_path):  # noqa: F811
    page, size = sized
    settings = Settings.resolve({"home": str(tmp_path / "home"), "input_token_limit": 32_000}, environ={})
    card = tmp_path / "mira.json"
    card.write_text(json.dumps(CARD))
    not_a_card = tmp_path / "notes.json"
    not_a_card.write_text(json.dumps({"hello": "world"}))
    with Hearth(settings) as hearth, serve(hearth) as base:
        me = hearth.scope()
        default = me.personas.default()
        ready(page, base + "/")
        expect(page.locator("#welcome")).to_be_visible()
        name_yourself(page.locator("#welcome"))
        page.get_by_role("button", name="Import and continue").click()
        expect(page.locator("#welcome-status")).to_have_text("Choose a card file first.")
        page.get_by_label("Card file").set_input_files(str(not_a_card))
        page.get_by_role("button", name="Import and continue").click()
        expect(page.locator("#welcome-status")).to_have_attribute("data-kind", "error")
        assert [p.id for p in me.personas.list()] == [default.id]  # refused: nothing changed
        page.get_by_label("Card file").set_input_files(str(card))
        page.get_by_role("button", name="Import and continue").click()
        stay_offline(page.locator("#welcome"))
        expect(page.locator("#welcome")).to_be_hidden()
        expect(page.locator(".message.role-assistant .body").first).to_have_text(CARD["data"]["first_mes"])
        assert [p.display_name for p in me.personas.list()] == ["Mira"]
        assert me.personas.get(default.id).archived_at is not None
        assert no_sideways_scroll(page)


# -- W3: the model picker and prompt presets ----------------------------------------------------------------
@pytest.fixture
def chat_site(tmp_path, fake_provider_server):
    """(base, hearth, conversation, fake): an OpenAI-compatible provider that lists three models."""
    fake_provider_server.models = ["llama3.1", "qwen2.5", "mistral-nemo", "nomic-embed-text"]
    settings = Settings.resolve({"home": str(tmp_path / "home"), "provider": "openai-chat", "model": "llama3.1",
                                 "base_url": fake_provider_server.openai_base_url, "input_token_limit": 32_000},
                                environ={})
    with Hearth(settings) as hearth, serve(hearth) as base:
        me = hearth.scope()
        chat = me.conversations.create(me.personas.create("elion", "Elion").id, title="Evening")
        yield base, hearth, chat, fake_provider_server


def test_w3_w5_w6_the_model_picker_in_the_header_sets_the_chats_model(sized, chat_site):  # noqa: F811
    page, size = sized
    base, hearth, chat, fake = chat_site
    me = hearth.scope()
    found: dict = {}
    ready(page, base + f"/#conversation-{chat.id}")
    picker = page.locator("#model-select")
    expect(picker).to_be_hidden()  # the header keeps one line: the picker is behind More (W8)
    if size == "phone":
        box = page.locator("section[aria-labelledby=chat-title] > .chat-header").bounding_box()
        assert box is not None and box["height"] < 80
    open_header(page, size)
    expect(picker).to_be_visible()
    expect(picker.locator("option")).to_have_text(["llama3.1 (default)", "mistral-nemo", "qwen2.5"])
    assert picker.evaluate("(s) => s.labels[0].textContent") == "Model for this conversation"
    assert no_sideways_scroll(page)
    check_axe(page, f"header with the picker {size}", found)
    picker.select_option("qwen2.5")
    expect(page.locator("#status")).to_have_text("Replies now come from qwen2.5.")
    eventually(lambda: me.conversations.get(chat.id).model == "qwen2.5")
    page.locator("#chat-more-toggle").click()  # fold the header again to write
    page.locator("#composer-text").fill("Which model is this?")
    page.locator("#send").click()
    expect(page.locator(".message.role-assistant .body").last).to_have_text("Hello from the fake.")
    sent = [r.body for r in fake.requests if r.path == "/v1/chat/completions"]
    assert sent[-1]["model"] == "qwen2.5"
    page.reload()
    page.wait_for_selector("body[data-ready=true]")
    open_header(page, size)
    expect(picker).to_have_value("qwen2.5")  # kept by the conversation
    picker.select_option("")
    eventually(lambda: me.conversations.get(chat.id).model is None)
    assert found == {}, json.dumps(found, indent=1)


def test_w3_p5_w6_presets_are_saved_applied_and_inserted_from_the_header(sized, tmp_path):  # noqa: F811
    page, size = sized
    settings = Settings.resolve({"home": str(tmp_path / "home"), "input_token_limit": 32_000}, environ={})
    provider = RecordingProvider()
    with Hearth(settings, provider=provider) as hearth, serve(hearth) as base:
        me = hearth.scope()
        chat = me.conversations.create(me.personas.create("elion", "Elion").id, title="Story time")
        me.send(chat.id, "Once upon a time")
        found: dict = {}
        ready(page, base + f"/#conversation-{chat.id}")
        open_header(page, size)
        toggle = page.locator("#presets-toggle")
        toggle.click()
        expect(toggle).to_have_attribute("aria-expanded", "true")
        panel = page.locator("#presets-panel")
        expect(panel).to_be_visible()
        expect(page.locator("#presets-current")).to_have_text("This conversation follows its persona's instructions.")
        panel.get_by_label("Name").fill("Roleplay narrator")
        panel.get_by_label("Text").fill("Narrate in the third person, present tense.")
        panel.get_by_role("button", name="Save preset").click()
        expect(panel.locator(".preset .preset-name")).to_have_text(["Roleplay narrator"])
        panel.get_by_label("Name").fill("Be <i>brief</i>")
        panel.get_by_label("Text").fill("Answer in two sentences at most.")
        panel.get_by_role("button", name="Save preset").click()
        expect(panel.locator(".preset .preset-name")).to_have_text(["Be <i>brief</i>", "Roleplay narrator"])
        assert no_sideways_scroll(page)
        check_axe(page, f"presets panel {size}", found)

        panel.get_by_role("button", name="Use for this chat: Roleplay narrator").click()
        expect(page.locator("#presets-current")).to_have_text("This conversation uses the preset “Roleplay narrator”.")
        assert me.presets.conversation_instructions(chat.id) == "Narrate in the third person, present tense."
        assert "Narrate in the third person" in me.stored_prompt(chat.id)  # rebuilt before the answer (P5)

        panel.get_by_role("button", name="Insert Be <i>brief</i> into the message").click()
        expect(panel).to_be_hidden()
        text = page.locator("#composer-text")
        expect(text).to_have_value("Answer in two sentences at most.")
        expect(text).to_be_focused()
        page.locator("#send").click()
        eventually(lambda: len(provider.requests) == 2)
        request = provider.requests[-1]
        assert request.messages[-1].content.endswith("Answer in two sentences at most.")
        assert "Narrate in the third person" in request.messages[0].content

        open_header(page, size)
        toggle.click()
        panel.get_by_role("button", name="Use the persona's instructions").click()
        expect(page.locator("#presets-current")).to_have_text("This conversation follows its persona's instructions.")
        assert me.presets.conversation_instructions(chat.id) is None
        page.keyboard.press("Escape")
        expect(panel).to_be_hidden()
        expect(toggle).to_be_focused()
        assert found == {}, json.dumps(found, indent=1)


# -- PR3: what a new user sees with no key ----------------------------------------------------------------
def test_pr3_w5_the_offline_reply_shows_the_text_each_layer_gave(sized, tmp_path):  # noqa: F811
    page, size = sized
    settings = Settings.resolve({"home": str(tmp_path / "home"), "input_token_limit": 32_000}, environ={})
    with Hearth(settings) as hearth, serve(hearth) as base:  # the offline provider: no key
        me = hearth.scope()
        wren = me.personas.create("wren", "Wren", identity="Wren keeps the **garden** journal.")
        me.memories.add("The person's sister is called Mia.", "people", 5)
        chat = me.conversations.create(wren.id, title="First evening")
        ready(page, f"{base}/#conversation-{chat.id}")
        page.fill("#composer-text", "What do you know about my family?")
        page.click("#send")
        reply = page.locator(".message.role-assistant .body").last
        expect(reply).to_contain_text("[offline reply: no model is configured]")
        # The trimmed text of the prompt's sections, not only their names, rendered as Markdown.
        expect(reply).to_contain_text("Identity: Wren keeps the garden journal.")
        expect(reply).to_contain_text("sister is called Mia")
        expect(reply.locator("li").first).to_be_visible()
        assert no_sideways_scroll(page)
