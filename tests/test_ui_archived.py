"""An imported ChatGPT conversation opens in the web page as a read-only thread (A5, X4, W4, U1, W1,
W5, W6): from the thread list's Imported group and from an archive search result, its turns with
speaker and time, Markdown through the sanitiser, earlier turns on request, no message box, and
Continue in a new chat; at 1366 x 860 and 390 x 844 in headless Chromium, checked by axe-core."""

from __future__ import annotations

import json

import pytest

from hearth.retrieval.archive import speaker_name
from tests.test_archive_threads import chatgpt_export
from tests.test_ui import (  # noqa: F401  (shared fixtures)
    browser,
    elion,
    eventually,
    expect,
    goto,
    site,
)
from tests.test_ui_threads import no_axe_violations, open_threads, sized  # noqa: F401

pytestmark = pytest.mark.ui


def long_export(title: str, turns: int, word: str) -> list[dict]:
    mapping = {"root": {"id": "root", "message": None, "parent": None, "children": ["n0"]}}
    for i in range(turns):
        mapping[f"n{i}"] = {
            "id": f"n{i}", "parent": "root" if i == 0 else f"n{i - 1}",
            "children": [f"n{i + 1}"] if i < turns - 1 else [],
            "message": {"id": f"n{i}", "author": {"role": "user" if i % 2 == 0 else "assistant"},
                        "create_time": 1_700_000_000 + 60 * i, "metadata": {}, "recipient": "all",
                        "content": {"content_type": "text", "parts": [f"Harbour log entry {i}, {word}"]}}}
    return [{"id": title, "title": title, "create_time": 1_700_000_000, "mapping": mapping,
             "current_node": f"n{turns - 1}"}]


def test_x4_w4_w6_an_imported_chatgpt_conversation_opens_read_only_and_continues_in_a_new_chat(sized, site):  # noqa: F811
    page, size = sized
    base, hearth, _ = site
    me = hearth.scope()
    persona = elion(me)
    export = chatgpt_export()
    export[0]["title"] = f"Kitten names {size}"  # the module's tests share one deployment
    kitten = me.imports.file(json.dumps(export).encode(), "conversations.json", persona=persona).ids["documents"][0]
    harbour = me.imports.file(json.dumps(long_export(f"Harbour log {size}", 150, f"gullwing{size}")).encode(), "c.json",
                              persona=persona).ids["documents"][0]
    found: dict = {}

    # From the thread list: the Imported group, loaded when opened.
    goto(page, base + "/#chat")
    open_threads(page, size)
    page.locator("#imported-group summary").click()
    page.locator("#imported-list .conversation", has_text=f"Kitten names {size}").click()
    expect(page.locator("#archived")).to_be_visible()
    expect(page.locator("#archived-title")).to_have_text(f"Kitten names {size}")
    if size == "phone":
        expect(page.locator("#threads")).to_be_hidden()  # the drawer closes on a choice
    assert page.url.endswith(f"#archived-{kitten}")
    turns = page.locator("#archived .archived-turn")
    expect(turns).to_have_count(4)
    expect(turns.nth(0).locator(".who")).to_contain_text(speaker_name(persona.user_label))
    expect(turns.nth(1).locator(".who")).to_contain_text(speaker_name(persona.assistant_label))
    expect(turns.nth(1).locator("time")).to_have_attribute("datetime", "2024-06-01T10:00:20Z")
    expect(turns.nth(1).locator("em")).to_have_text("Pepper")  # Markdown, rendered
    expect(turns.nth(1).locator("strong")).to_have_text("Miso")
    expect(turns.nth(3)).to_contain_text("<script>alert(1)</script>")  # shown as text, never run
    assert page.locator("#archived script, #archived img").count() == 0
    expect(page.locator("#archived .imported-notice")).to_contain_text("Imported — read only")
    expect(page.locator("#composer")).to_be_hidden()
    assert page.locator("textarea:visible").count() == 0  # read only: nowhere to write
    expect(page.locator("#archived .chat-meta")).to_contain_text("Imported from ChatGPT")
    expect(page.locator("#archived .archived-earlier")).to_have_count(0)
    no_axe_violations(page, f"{size} imported conversation", found)

    # From an archive search result: a long one, its newest 100 turns first, earlier ones on request.
    goto(page, base + "/#recall")
    page.fill("#search-query", f"gullwing{size}")
    page.locator("#search-form button[type=submit]").click()
    page.locator("#search-results a", has_text=f"Harbour log {size}").first.click()
    expect(page.locator("#archived-title")).to_have_text(f"Harbour log {size}")
    expect(turns).to_have_count(100)
    expect(turns.last).to_contain_text("Harbour log entry 149,")
    page.get_by_role("button", name="Show earlier turns").click()
    expect(turns).to_have_count(150)
    expect(turns.first).to_contain_text("Harbour log entry 0,")
    expect(page.get_by_role("button", name="Show earlier turns")).to_have_count(0)
    assert page.url.endswith(f"#archived-{harbour}")

    # Continue in a new chat: the chat takes the place back, with the handoff first.
    goto(page, base + f"/#archived-{kitten}")
    expect(page.locator("#archived-title")).to_have_text(f"Kitten names {size}")
    before = {c.id for c in me.conversations.list(limit=1000)}
    page.get_by_role("button", name="Continue in a new chat").click()
    expect(page.locator("#archived")).to_be_hidden()
    expect(page.locator("#composer")).to_be_visible()
    expect(page.locator("#composer-text")).to_be_enabled()
    handoff = page.locator(".message.handoff")
    expect(handoff).to_have_count(1)
    expect(handoff).to_contain_text("Miso it is.")
    expect(handoff.get_by_role("link", name="Open the imported conversation")).to_have_attribute(
        "href", f"#archived-{kitten}")
    expect(page.locator("#status")).to_contain_text("in a new chat")
    created = [c for c in me.conversations.list(limit=1000) if c.id not in before]
    assert len(created) == 1 and created[0].title == f"Kitten names {size} (continued)"
    assert me.handoff(created[0].id)["source_document_id"] == kitten
    no_axe_violations(page, f"{size} continued", found)
    assert not page.evaluate("document.documentElement.scrollWidth > window.innerWidth + 1")
    assert found == {}, json.dumps(found, indent=1)
