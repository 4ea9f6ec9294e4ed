"""Attachments (W14) and one conversation's export (W15) in headless Chromium, at 1366 x 860 and
390 x 844: a text file attached with the Attach button and a picture pasted into the message box
wait as chips (one removed again), go with the message to the model, and show under the sent
bubble, from the server too after a reload; the conversation's More menu downloads it as Markdown
and as JSON, and the JSON imported again opens read only with Continue. Screenshots go to
build/test-artifacts/.
"""
# ruff: noqa: F811  (the shared fixtures are imported from test_ui and named as parameters)

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

import pytest

from tests.test_ui import (  # noqa: F401  (shared fixtures)
    AXE,
    axe_violations,
    base,
    browser,
    details,
    elion,
    eventually,
    expect,
    goto,
    me,
    more,
    shot,
    site,
)
from tests.test_ui_phone import SIZES, new_page

pytestmark = pytest.mark.ui

# A 2 x 2 PNG, so the picture really decodes in the page.
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAIAAAACCAIAAAD91JpzAAAAFklEQVR4nGM8EaXBwMDAxMDAwMDAAAAQQgFOem6GEAAAAABJRU5ErkJggg==")

PASTE_IMAGE = """async ([b64, name]) => {
  const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
  const data = new DataTransfer();
  data.items.add(new File([bytes], name, { type: "image/png" }));
  const box = document.getElementById("composer-text");
  box.focus();
  box.dispatchEvent(new ClipboardEvent("paste", { clipboardData: data, bubbles: true, cancelable: true }));
}"""


DROP_FILES = """(count) => {
  const data = new DataTransfer();
  for (let i = 0; i < count; i++) data.items.add(new File(["x"], `part${i}.txt`, { type: "text/plain" }));
  const composer = document.getElementById("composer");
  composer.dispatchEvent(new DragEvent("dragover", { dataTransfer: data, bubbles: true, cancelable: true }));
  composer.dispatchEvent(new DragEvent("drop", { dataTransfer: data, bubbles: true, cancelable: true }));
}"""


def size_name(viewport) -> str:
    return "phone" if viewport["width"] < 900 else "desktop"


@pytest.mark.parametrize("viewport", SIZES)
def test_w14_files_attached_by_button_and_paste_wait_as_chips_reach_the_model_and_show_on_the_message(
        browser, site, me, viewport):
    base, _hearth, provider = site
    tag = size_name(viewport)
    chat = me.conversations.create(elion(me).id, title=f"Attach {tag}")
    context, page = new_page(browser, viewport)
    try:
        goto(page, base + f"/#conversation-{chat.id}")
        expect(page.locator("#composer-text")).to_be_enabled()
        button = page.get_by_role("button", name="Attach files")
        expect(button).to_be_visible()
        with page.expect_file_chooser() as chooser:
            button.click()
        chooser.value.set_files([
            {"name": "notes.txt", "mimeType": "text/plain", "buffer": b"Bring the blue kettle."},
            {"name": "extra.md", "mimeType": "text/markdown", "buffer": b"# not needed"},
        ])
        chips = page.locator("#attach-chips .attach-chip")
        expect(chips).to_have_count(2)
        page.get_by_role("button", name="Remove extra.md").click()
        expect(chips).to_have_count(1)
        page.evaluate(PASTE_IMAGE, [base64.b64encode(PNG).decode(), "kettle.png"])
        expect(chips).to_have_count(2)
        expect(chips.nth(0)).to_contain_text("notes.txt")
        expect(chips.nth(1)).to_contain_text("kettle.png")
        expect(page.locator("#composer-text")).to_have_value("")  # a pasted picture is not text
        page.locator("#composer-text").fill("What do you make of these?")
        shot(page, f"attach-chips-{tag}")
        page.locator("#composer-text").press("Enter")
        sent = page.locator("#messages .message.role-user").last
        expect(sent).to_have_attribute("data-message-id", re.compile(r"^\d+$"))
        expect(page.locator("#messages .message.streaming")).to_have_count(0)
        expect(chips).to_have_count(0)  # the composer is empty again
        files = sent.locator(".message-attachments .attach-chip")
        expect(files).to_have_count(2)
        expect(files.nth(0)).to_contain_text("notes.txt")
        picture = sent.locator("img.attach-picture")
        expect(picture).to_have_attribute("alt", "kettle.png")
        eventually(lambda: picture.evaluate("(img) => img.complete && img.naturalWidth === 2"))
        last = provider.requests[-1].messages[-1]
        assert last.images and last.images[0].data == PNG
        assert "Bring the blue kettle." in last.content and last.content.startswith("What do you make of these?")
        shot(page, f"attach-sent-{tag}")
        # The Details panel counts them in the request size (R2).
        details(page)
        expect(page.locator('#size-panel .size-row[data-key="attachments_count"] dd')).to_have_text("2")
        expect(page.locator('#size-panel .size-row[data-key="attachments_tokens"] dt')).to_have_text(
            "Attachments (counted above)")
        page.emulate_media(color_scheme="dark")
        shot(page, f"attach-sent-{tag}-dark")
        page.emulate_media(color_scheme="light")
        # From the server after a reload: the picture through its own address, the file as a download.
        page.reload()
        page.wait_for_selector("body[data-ready=true]")
        sent = page.locator("#messages .message.role-user").last
        picture = sent.locator("img.attach-picture")
        expect(picture).to_have_attribute("src", re.compile(rf"^/api/conversations/{chat.id}/attachments/\d+$"))
        eventually(lambda: picture.evaluate("(img) => img.complete && img.naturalWidth === 2"))
        link = sent.get_by_role("link", name="notes.txt")
        expect(link).to_have_attribute("download", "notes.txt")
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1")
        assert page.script_errors == []
    finally:
        context.close()


@pytest.mark.parametrize("viewport", SIZES)
def test_w14_files_dropped_and_refused_by_the_server_stay_in_the_composer_with_the_reason(browser, site, me,
                                                                                           viewport):
    base, hearth, _provider = site
    tag = size_name(viewport)
    chat = me.conversations.create(elion(me).id, title=f"Too many {tag}")
    context, page = new_page(browser, viewport)
    try:
        goto(page, base + f"/#conversation-{chat.id}")
        # Dropped on the composer this time.
        page.evaluate(DROP_FILES, hearth.settings.attachment_max_count + 1)
        page.locator("#composer-text").fill("All of them")
        page.locator("#composer-text").press("Enter")
        expect(page.locator("#status")).to_contain_text("at most 4 attachments")
        expect(page.locator("#attach-chips .attach-chip")).to_have_count(5)  # nothing was lost
        expect(page.locator("#composer-text")).to_have_value("All of them")
        assert me.conversations.messages(chat.id) == []
    finally:
        context.close()


@pytest.mark.parametrize("viewport", SIZES)
def test_w15_more_exports_markdown_and_json_and_the_json_opens_again_read_only_with_continue(
        browser, site, me, viewport, tmp_path):
    base, _hearth, _provider = site
    tag = size_name(viewport)
    chat = me.conversations.create(elion(me).id, title=f"Kettle {tag}")
    me.send(chat.id, "Here are my notes", attached=[{"name": "notes.txt", "media_type": "text/plain",
                                                    "text": "Bring the blue kettle."}])
    context, page = new_page(browser, viewport, accept_downloads=True)
    try:
        goto(page, base + f"/#conversation-{chat.id}")
        expect(page.locator("#messages .message")).to_have_count(2)
        more(page)
        shot(page, f"export-more-{tag}")
        page.emulate_media(color_scheme="dark")
        shot(page, f"export-more-{tag}-dark")
        page.emulate_media(color_scheme="light")
        with page.expect_download() as markdown:
            page.get_by_role("button", name="Export as Markdown").click()
        assert markdown.value.suggested_filename == f"Kettle-{tag}-{chat.id}.md"
        expect(page.locator("#chat-more-toggle")).to_have_attribute("aria-expanded", "false")  # More folds
        expect(page.locator("#chat-more-toggle")).to_be_focused()
        text = Path(markdown.value.path()).read_text(encoding="utf-8")
        assert text.startswith(f"# Kettle {tag}\n") and "Attached: notes.txt" in text and "Here are my notes" in text
        more(page)
        with page.expect_download() as exported:
            page.get_by_role("button", name="Export as JSON").click()
        data = Path(exported.value.path()).read_bytes()
        document = json.loads(data)
        assert document["format"] == "hearth-chat" and document["messages"][0]["attachments"][0]["name"] == "notes.txt"
        # Imported again, it opens read only, and Continue starts a new chat from it.
        report = me.imports.file(data, f"kettle-{tag}.json")
        copy_id = report.ids["conversations"][0]
        goto(page, base + f"/#conversation-{copy_id}")
        notice = page.locator("#imported-notice")
        expect(notice).to_be_visible()
        sent = page.locator("#messages .message.role-user").first
        expect(sent.get_by_role("link", name="notes.txt")).to_be_visible()
        expect(page.locator("#attach-button")).to_be_hidden()  # no composer on a read-only thread
        shot(page, f"export-reimported-{tag}")
        page.locator("#imported-continue").click()
        expect(page).not_to_have_url(re.compile(rf"#conversation-{copy_id}$"))
        expect(page.locator("#composer-text")).to_be_enabled()
        eventually(lambda: any(not c.imported and c.id > copy_id for c in me.conversations.list()))
        assert page.script_errors == []
    finally:
        context.close()


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("viewport", SIZES)
def test_w14_axe_finds_no_wcag_21_aa_violation_with_chips_and_sent_files(browser, site, me, viewport, scheme):
    if not AXE.exists():
        pytest.skip("axe-core is not installed (make dev runs npm ci)")
    base, _hearth, _provider = site
    chat = me.conversations.create(elion(me).id, title=f"Axe files {scheme} {viewport['width']}")
    me.send(chat.id, "Two files", attached=[{"name": "notes.txt", "media_type": "text/plain", "text": "Kettle."},
                                            {"name": "kettle.png", "media_type": "image/png",
                                             "data": base64.b64encode(PNG).decode()}])
    context, page = new_page(browser, viewport, color_scheme=scheme, bypass_csp=True)
    try:
        goto(page, base + f"/#conversation-{chat.id}")
        expect(page.locator("#messages .message-attachments .attach-chip")).to_have_count(2)
        page.evaluate(PASTE_IMAGE, [base64.b64encode(PNG).decode(), "pasted.png"])
        expect(page.locator("#attach-chips .attach-chip")).to_have_count(1)
        assert axe_violations(page) == []
        # A picture alone is a message: Enter sends it with the box empty.
        page.locator("#composer-text").press("Enter")
        expect(page.locator("#messages .message.role-user")).to_have_count(2)
        expect(page.locator("#attach-chips .attach-chip")).to_have_count(0)
        expect(page.locator("#messages .message.streaming")).to_have_count(0)
        eventually(lambda: len(me.conversations.messages(chat.id)) == 4)
    finally:
        context.close()
