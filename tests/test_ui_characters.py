"""A character card's greeting in headless Chromium (X3, W2): your name set on the Personas page
fills it, New Chat opens with it, its alternate greetings swipe, and it offers no Regenerate (it
answers nothing)."""

from __future__ import annotations

import re

import pytest

from tests import samples
from tests.test_ui import browser, expect, goto, page, site  # noqa: F401  (shared fixtures)

pytestmark = pytest.mark.ui


def test_x3_w2_new_chat_shows_the_greeting_and_its_alternates_swipe(site, page):  # noqa: F811
    base, hearth, provider = site
    me = hearth.scope()
    card = samples.card_v3(book=False)
    card["data"]["first_mes"] = "*sets the kettle on* You made it, {{user}}."
    report = me.imports.file(samples.card_png(card), "mira.png")
    mira = me.personas.get(report.ids["personas"][0])
    # Your name, from the Personas page: what {{user}} becomes.
    goto(page, base + "/#personas")
    page.get_by_label("What companions call you").fill("Sam")
    page.locator("#profile-form").get_by_role("button", name="Save").click()
    expect(page.locator("#personas-status")).to_have_text("Companions call you Sam.")
    assert hearth.users.get(me.user_id).display_name == "Sam"
    goto(page, base + "/#chat")
    page.select_option("#persona-select", str(mira.id))
    page.get_by_role("button", name="New Chat").click()
    greeting = page.locator(".message.role-assistant").first
    expect(greeting.locator(".body")).to_have_text("sets the kettle on You made it, Sam.")
    expect(greeting.locator(".swipe-count")).to_have_text("1 / 2")
    expect(greeting.get_by_role("button", name="Regenerate")).to_have_count(0)
    greeting.get_by_role("button", name="Next version").click()
    expect(greeting.locator(".swipe-count")).to_have_text("2 / 2")
    expect(greeting.locator(".body")).to_have_text("waves from the gallery Up here!")
    chat = me.conversations.list(persona_id=mira.id)[0]
    assert me.conversations.messages(chat.id)[0].content == "*waves from the gallery* Up here!"
    # The person answers the chosen greeting; the model reads it as the companion's first turn.
    page.fill("#composer-text", "Coming up!")
    page.get_by_role("button", name="Send").click()
    expect(page.locator(".message.role-assistant").nth(1).locator(".body")).to_have_text(re.compile(r"^Reply \d+$"))
    assert [(m.role, m.content) for m in provider.requests[-1].messages if m.role != "system"] == [
        ("assistant", "*waves from the gallery* Up here!"), ("user", "Coming up!")]
