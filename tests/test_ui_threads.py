"""Finding chats in the web page (W4, U1, W5, W6): the sidebar search over message text with its
snippet, pinned threads, tag chips and the tag: filter, and an imported thread that opens read only
(X4), at 1366 x 860 and 390 x 844 in headless Chromium, each view checked by axe-core."""

from __future__ import annotations

import json
import re

import pytest

from tests import samples
from tests.test_ui import (  # noqa: F401  (shared fixtures)
    AXE,
    UI_TIMEOUT_MS,
    axe_violations,
    browser,
    elion,
    eventually,
    expect,
    goto,
    site,
)

pytestmark = pytest.mark.ui

SIZES = {"wide": (1366, 860), "phone": (390, 844)}
HOSTILE = "<img src=x onerror=alert(1)>"


@pytest.fixture(params=list(SIZES))
def sized(request, browser):  # noqa: F811
    """(page, size name) in a fresh context of that size; axe may be injected (CSP bypassed)."""
    width, height = SIZES[request.param]
    phone = request.param == "phone"
    context = browser.new_context(viewport={"width": width, "height": height}, is_mobile=phone, has_touch=phone,
                                  bypass_csp=True)
    page = context.new_page()
    page.set_default_timeout(UI_TIMEOUT_MS)
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    yield page, request.param
    assert errors == [], errors
    context.close()


def open_threads(page, size):
    """The thread list: always there when wide, a drawer on a phone."""
    if size == "phone" and not page.locator("#threads").is_visible():
        page.get_by_role("button", name="Threads").click()
        expect(page.locator("#threads")).to_be_visible()


def open_header(page, size):
    """The chat header's tags and actions: behind More at every size (W8)."""
    toggle = page.locator("#chat-more-toggle")
    if toggle.get_attribute("aria-expanded") != "true":
        toggle.click()
        expect(toggle).to_have_attribute("aria-expanded", "true")


def no_axe_violations(page, where, found):
    if AXE.exists():
        violations = axe_violations(page)
        if violations:
            found[where] = violations


def test_w4_w6_sidebar_search_finds_message_text_pins_and_tags(sized, site):  # noqa: F811
    page, size = sized
    base, hearth, _ = site
    me = hearth.scope()
    word = f"tidepool{size}"
    persona = elion(me)
    match = me.conversations.create(persona.id, title=f"Sunday {size}")
    me.conversations.add_message(match.id, "user", "Shall we go to the harbour?")
    me.conversations.add_message(match.id, "assistant",
                                 f"We talked about the weather for a while, then found a *{word}* full of crabs {HOSTILE}.")
    other = me.conversations.create(persona.id, title=f"Groceries {size}")
    me.conversations.add_message(other.id, "user", "Milk and bread.")
    walks, family = f"walks-{size}", f"family-{size}"  # the module's threads share one deployment
    found: dict = {}

    goto(page, base + "/#chat")
    open_threads(page, size)
    page.fill("#filter-text", word[:-2])  # the last word may still be being typed
    expect(page.locator("#conversation-list-heading")).to_have_text("Matching conversations")
    rows = page.locator("#conversation-list .conversation")
    expect(rows).to_have_count(1)
    expect(rows.locator(".conversation-title")).to_have_text(f"Sunday {size}")
    snippet = rows.locator(".conversation-snippet")
    expect(snippet).to_contain_text(f"found a {word} full of crabs {HOSTILE}.")  # as text, marks gone
    expect(snippet.locator("mark")).to_have_text([word])
    assert page.locator("#threads img:not(.persona-avatar img)").count() == 0
    no_axe_violations(page, f"{size} search", found)

    # Pin it from the list: it moves to the Pinned group.
    page.fill("#filter-text", "")
    expect(page.locator("#conversation-list-heading")).to_have_text("Conversations")
    page.get_by_role("button", name=f"Pin Sunday {size}", exact=True).click()
    pinned = page.locator("#pinned-list .conversation-title")
    expect(pinned).to_have_text([f"Sunday {size}"])
    expect(page.locator("#conversation-list .conversation-title", has_text=f"Sunday {size}")).to_have_count(0)
    eventually(lambda: me.conversations.get(match.id).pinned_at is not None)
    page.locator("#pinned-list .conversation").first.click()
    expect(page.locator("#chat-title")).to_have_text(f"Sunday {size}")

    # The header: Unpin / Pin, and tags added with the Add tag field.
    open_header(page, size)
    expect(page.locator("#pin-conversation")).to_have_text("Unpin")
    page.get_by_role("button", name="Add tag").click()
    page.get_by_label("New tag").fill(walks.title())
    page.get_by_label("New tag").press("Enter")
    expect(page.locator("#chat-tags .chip-find")).to_have_text([walks])
    expect(page.get_by_label("New tag")).to_be_focused()  # the field stays open for the next one
    page.get_by_label("New tag").fill(family)
    page.get_by_role("button", name="Add", exact=True).click()
    expect(page.locator("#chat-tags .chip-find")).to_have_text([walks, family])
    page.get_by_label("New tag").fill("two words")
    page.get_by_label("New tag").press("Enter")
    expect(page.locator("#status")).to_contain_text("a tag is 1-40")
    eventually(lambda: me.conversations.get(match.id).tags == (walks, family))
    page.get_by_label("New tag").press("Escape")
    expect(page.get_by_role("button", name="Add tag")).to_be_focused()
    no_axe_violations(page, f"{size} header", found)
    page.locator("#pin-conversation").click()
    expect(page.locator("#pin-conversation")).to_have_text("Pin")
    eventually(lambda: me.conversations.get(match.id).pinned_at is None)

    # Chips in the list; tag: filters, with words too; a header chip fills in the filter.
    open_threads(page, size)
    item = page.locator("#conversation-list li", has_text=f"Sunday {size}")
    expect(item.locator(".tag-chip")).to_have_text([walks, family])
    page.fill("#filter-text", f"tag:{walks}")
    expect(page.locator("#conversation-list .conversation-title")).to_have_text([f"Sunday {size}"])
    page.fill("#filter-text", f"tag:{family} {word}")
    expect(page.locator("#conversation-list .conversation-title")).to_have_text([f"Sunday {size}"])
    page.fill("#filter-text", f"tag:{family} harbour")
    expect(page.locator("#conversation-list .conversation-title")).to_have_text([f"Sunday {size}"])
    page.fill("#filter-text", f"tag:{family} milk")
    expect(page.locator("#conversation-list li.empty")).to_have_text("No conversation matches.")
    no_axe_violations(page, f"{size} tag filter", found)
    page.fill("#filter-text", "")
    expect(page.locator("#conversation-list-heading")).to_have_text("Conversations")
    if size == "phone":
        page.keyboard.press("Escape")
        expect(page.locator("#threads")).to_be_hidden()
    open_header(page, size)
    page.get_by_role("button", name=f"Find conversations tagged {walks}").click()
    open_threads(page, size)
    expect(page.locator("#filter-text")).to_have_value(f"tag:{walks}")
    expect(page.locator("#conversation-list .conversation-title")).to_have_text([f"Sunday {size}"])
    if size == "phone":
        page.keyboard.press("Escape")
        expect(page.locator("#threads")).to_be_hidden()
    open_header(page, size)
    page.get_by_role("button", name=f"Remove tag {family}").click()
    expect(page.locator("#chat-tags .chip-find")).to_have_text([walks])
    eventually(lambda: me.conversations.get(match.id).tags == (walks,))
    assert not page.evaluate("document.documentElement.scrollWidth > window.innerWidth + 1")
    assert found == {}, json.dumps(found, indent=1)


def test_x4_w6_an_imported_chat_opens_read_only_and_continues_in_a_new_chat(sized, site):  # noqa: F811
    page, size = sized
    base, hearth, _ = site
    me = hearth.scope()
    report = me.imports.file(samples.st_chat("Elion"), f"Elion {size}.jsonl", persona=elion(me))
    imported = me.conversations.get(report.ids["conversations"][0])
    found: dict = {}
    goto(page, base + f"/#conversation-{imported.id}")
    expect(page.locator("#imported-notice")).to_be_visible()
    expect(page.locator("#imported-notice")).to_contain_text("Imported — read only")
    expect(page.locator("#composer")).to_be_hidden()
    expect(page.locator("#chat-meta")).to_contain_text("Imported")
    expect(page.locator(".message.role-user")).to_have_count(2)
    expect(page.locator("#messages .message .turn-actions").first).to_be_attached()  # the turns' actions are drawn
    expect(page.locator("#messages").get_by_role("button", name=re.compile(r"^(Edit|Regenerate)"))).to_have_count(0)
    open_header(page, size)
    expect(page.locator("#end-conversation")).to_be_disabled()
    no_axe_violations(page, f"{size} imported", found)
    before = {c.id for c in me.conversations.list(limit=1000)}

    page.get_by_role("button", name="Continue in a new chat").click()
    expect(page.locator("#imported-notice")).to_be_hidden()
    expect(page.locator("#composer")).to_be_visible()
    expect(page.locator(".message.handoff")).to_have_count(1)
    expect(page.locator("#status")).to_contain_text("in a new chat")
    expect(page.locator("#composer-text")).to_be_enabled()
    created = [c for c in me.conversations.list(limit=1000) if c.id not in before]
    assert len(created) == 1 and not created[0].imported
    assert me.handoff(created[0].id)["source_conversation_id"] == imported.id
    assert found == {}, json.dumps(found, indent=1)
