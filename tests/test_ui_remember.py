"""Memory where the person talks (W11) in headless Chromium, at 1366 x 860 and 390 x 844: the quiet
notice that appears after a reply whose turn suggested memories, each suggestion kept, edited or
left out in place and reaching the memory list; and a reply's "What I remembered", listing a memory,
the lore its words brought in and a turn recalled from an earlier conversation, each link opening
its source. Screenshots go to build/test-artifacts/.
"""
# ruff: noqa: F811  (the shared fixtures are imported from test_ui and named as parameters)

from __future__ import annotations

import re

import pytest

from hearth.providers.base import StreamEvent, Usage
from tests.test_ui import (  # noqa: F401  (shared fixtures)
    AXE,
    axe_violations,
    base,
    browser,
    elion,
    eventually,
    expect,
    goto,
    me,
    shot,
    site,
)
from tests.test_ui_phone import SIZES, new_page

pytestmark = pytest.mark.ui



def suggesting(me, conversation_id: int, items: list[tuple[str, str]]):
    """A reply during whose turn a tool suggests memories for the thread (as an MCP client or the
    extraction would): they wait in the review queue with the person's words as evidence."""
    def reply(request):
        for text, evidence in items:
            me.layers.review.propose("memory_add", {"text": text}, "Said in this chat.", evidence=evidence,
                                     conversation_id=conversation_id, source="model")
        yield StreamEvent("text", text="I will remember that.")
        yield StreamEvent("usage", usage=Usage(input_tokens=10, output_tokens=3))
    return reply


def send_in_page(page, text):
    page.locator("#composer-text").fill(text)
    page.locator("#composer-text").press("Enter")
    expect(page.locator("#messages .message.role-assistant").last).to_have_attribute("data-message-id", re.compile(r"^\d+$"))
    expect(page.locator("#messages .message.streaming")).to_have_count(0)


def open_disclosure(reply):
    box = reply.locator("details.remembered")
    expect(box).to_be_visible()
    if box.get_attribute("open") is None:  # the thread may still be drawn as it was left
        box.locator("summary").click()
    expect(box).to_have_attribute("open", "")


@pytest.mark.parametrize("viewport", SIZES)
def test_w11_the_notice_appears_after_a_reply_that_suggested_and_each_item_is_decided_in_place(browser, site, me,
                                                                                               viewport):
    base, _hearth, provider = site
    tag = viewport["width"]
    chat = me.conversations.create(elion(me).id, title=f"Notice {tag}")
    # Different facts at each size: the same fact twice would wait as a possible duplicate (B3).
    items = ([("Mia is the person's sister.", "My sister Mia called"),
              ("The person runs on Sundays.", "I run every Sunday"),
              ("The person dislikes olives.", "olives, never")] if tag > 900 else
             [("Tom is the person's brother.", "My brother Tom called"),
              ("The person bakes bread on Fridays.", "I bake every Friday"),
              ("The person is afraid of geese.", "geese, never")])
    edited = "The person runs 10 km every Sunday." if tag > 900 else "The person bakes rye bread on Fridays."
    said = ("My sister Mia called, I run every Sunday, and olives, never." if tag > 900 else
            "My brother Tom called, I bake every Friday, and geese, never.")
    provider.replies.append(suggesting(me, chat.id, items))
    context, page = new_page(browser, viewport)
    try:
        goto(page, base + f"/#conversation-{chat.id}")
        notice = page.locator("#memory-notice")
        expect(notice).to_be_hidden()  # nothing waits yet: nothing shows
        send_in_page(page, said)
        toggle = notice.get_by_role("button", name="Hearth noticed 3 things to remember")
        expect(toggle).to_be_visible()
        expect(toggle).to_have_attribute("aria-expanded", "false")  # quiet: closed until asked
        shot(page, f"remember-notice-{'phone' if tag < 900 else 'desktop'}")
        # Details counts them beside the thread's memories, so "0 memories" is not the whole story.
        page.locator("#details-toggle").click()
        expect(page.locator("#snapshot-info")).to_contain_text("3 suggestions waiting")
        page.locator("#sheet-close").click()
        toggle.click()
        rows = notice.locator(".memory-notice-item")
        expect(rows).to_have_count(3)
        expect(notice.locator(".memory-notice-quote")).to_contain_text([f"“{e}”" for _t, e in reversed(items)])
        shot(page, f"remember-notice-open-{'phone' if tag < 900 else 'desktop'}")

        # Keep as suggested.
        notice.get_by_role("button", name=f"Keep: {items[0][0]}").click()
        expect(notice.get_by_role("button", name="Hearth noticed 2 things to remember")).to_be_visible()
        # Edit, then keep the person's version.
        notice.get_by_role("button", name=f"Edit: {items[1][0]}").click()
        notice.get_by_label("Say it your way").fill(edited)
        notice.get_by_role("button", name="Keep my version").click()
        expect(notice.get_by_role("button", name="Hearth noticed 1 thing to remember")).to_be_visible()
        # Not now: dismissed through the review queue, so it is not suggested again unchanged.
        notice.get_by_role("button", name=f"Not now: {items[2][0]}").click()
        expect(notice).to_be_hidden()  # all handled: the notice is gone
        expect(page.locator("#status")).to_contain_text("will not suggest it again")

        kept = [m.text for m in me.memories.list()]
        assert items[0][0] in kept and edited in kept
        assert items[2][0] not in kept and items[1][0] not in kept
        statuses = {p.payload["text"]: p.status for p in me.layers.review.list(None)
                    if p.conversation_id == chat.id}
        assert statuses[items[2][0]] == "dismissed"
        # The decisions reached the memory list.
        goto(page, base + "/#memory")
        expect(page.locator("#memory-list .memory-text", has_text=items[0][0])).to_be_visible()
        expect(page.locator("#memory-list .memory-text", has_text=edited)).to_be_visible()
        # Opening the thread again finds nothing waiting.
        goto(page, base + f"/#conversation-{chat.id}")
        expect(page.locator("#messages .message")).not_to_have_count(0)
        page.wait_for_timeout(300)
        expect(notice).to_be_hidden()
        assert page.script_errors == []
    finally:
        context.close()


@pytest.mark.parametrize("viewport", SIZES)
def test_w11_what_i_remembered_lists_a_memory_a_fired_fragment_and_a_recall_snippet_with_working_links(
        browser, site, me, viewport):
    base, _hearth, provider = site
    word = "quokka" if viewport["width"] > 900 else "wombat"
    memory = me.memories.add(f"The person's {word} plush is called Biscuit.")
    fragment = me.layers.fragments.add([word], f"A {word} lives on Rottnest Island.", "animals")
    earlier = me.conversations.create(elion(me).id, title=f"Island trip {word}")
    said = me.conversations.add_message(earlier.id, "user", f"We saw a {word} near the lighthouse at dawn.")
    me.conversations.add_message(earlier.id, "assistant", "What a morning.")
    chat = me.conversations.create(elion(me).id, title=f"Today {word}")
    me.send(chat.id, "Good morning, how are you?")  # past the birth period, so recall may speak (K3)
    context, page = new_page(browser, viewport)
    try:
        goto(page, base + f"/#conversation-{chat.id}")
        send_in_page(page, f"Tell me again about the {word} near the lighthouse")
        reply = page.locator("#messages .message.role-assistant").last
        disclosure = reply.locator("details.remembered")
        expect(disclosure).to_be_visible()
        expect(disclosure).not_to_have_attribute("open", "")  # closed by default
        disclosure.locator("summary").click()
        memories = disclosure.locator(".remembered-memories")
        expect(memories.get_by_role("heading", name="Things I know about you")).to_be_visible()
        expect(memories).to_contain_text(memory.text)
        lore = disclosure.locator(".remembered-fragments")
        expect(lore.get_by_role("heading", name="Lore that came up")).to_be_visible()
        expect(lore).to_contain_text("Rottnest Island")
        recall = disclosure.locator(".remembered-recall")
        expect(recall.get_by_role("heading", name="From earlier conversations")).to_be_visible()
        expect(recall).to_contain_text("near the lighthouse at dawn")
        expect(recall).to_contain_text(f"Island trip {word}")
        shot(page, f"remember-disclosure-{'phone' if viewport['width'] < 900 else 'desktop'}")

        # The recalled turn opens in its own thread, brought into view and marked.
        recall.get_by_role("link", name=f"Open in “Island trip {word}”").click()
        expect(page).to_have_url(f"{base}/#conversation-{earlier.id}")
        source = page.locator(f'#messages .message[data-message-id="{said.id}"]')
        expect(source).to_have_class(re.compile(r"remembered-target"))
        expect(source).to_be_focused()

        # Back in the thread, drawn from the server this time: the reply's metadata says what it
        # remembered; the memory link opens it in Memory.
        goto(page, base + f"/#conversation-{chat.id}")
        reply = page.locator("#messages .message.role-assistant").last
        open_disclosure(reply)
        reply.locator(".remembered-memories .remembered-item", has_text=memory.text).get_by_role(
            "link", name="Open in Memory").click()
        expect(page).to_have_url(f"{base}/#memory")
        target = page.locator(f'#memory-list .memory-item[data-id="{memory.id}"]')
        expect(target).to_have_class(re.compile(r"remembered-target"))
        # And the lore link opens What I know at the entry that fired.
        page.go_back()
        reply = page.locator("#messages .message.role-assistant").last
        open_disclosure(reply)
        reply.locator(".remembered-fragments").get_by_role("link", name="Open in What I know").click()
        expect(page).to_have_url(f"{base}/#layers")
        expect(page.locator(f'[data-fragment-id="{fragment.id}"]')).to_have_class(re.compile(r"remembered-target"))
        assert page.script_errors == []
    finally:
        context.close()


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("viewport", SIZES)
def test_w11_w6_axe_finds_no_wcag_21_aa_violation_in_the_notice_or_the_disclosure(browser, site, me, viewport,
                                                                                  scheme):
    if not AXE.exists():
        pytest.skip("axe-core is not installed (make dev runs npm ci)")
    base, _hearth, provider = site
    tag = f"{viewport['width']}-{scheme}"
    me.memories.add(f"The person keeps bees ({tag}).")
    chat = me.conversations.create(elion(me).id, title=f"Axe {tag}")
    provider.replies.append(suggesting(me, chat.id, [(f"The person's hive is called Hum ({tag}).", "my hive Hum")]))
    context, page = new_page(browser, viewport, color_scheme=scheme, bypass_csp=True)
    try:
        goto(page, base + f"/#conversation-{chat.id}")
        send_in_page(page, "My hive Hum is buzzing today.")
        page.get_by_role("button", name="Hearth noticed 1 thing to remember").click()
        open_disclosure(page.locator("#messages .message.role-assistant").last)
        expect(page.locator(".remembered-memories")).to_be_visible()
        assert axe_violations(page) == []
        page.locator(".memory-notice").get_by_role("button", name=re.compile("^Edit: ")).click()
        assert axe_violations(page) == []
    finally:
        context.close()
