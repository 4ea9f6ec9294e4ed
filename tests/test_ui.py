"""The web UI in headless Chromium (U1 first page, U2 login, U3 escaping).

Uses Debian's ``chromium`` through Playwright's Python package; skips when either is missing.
A real uvicorn server serves the app on a free 127.0.0.1 port.
"""

from __future__ import annotations

import os
import re
import shutil
import time

import pytest

from hearth.providers.base import StreamEvent, Usage
from hearth.server import create_app
from tests.test_server import HOSTILE, failing_reply, serve_in_thread

pytestmark = pytest.mark.ui

CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if os.path.exists("/usr/bin/chromium") else None)
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run", "--disable-quic", "--headless"]
SCREENSHOT = "/tmp/hearth-ui.png"
PASSWORD = "correct horse battery"


@pytest.fixture
def browser():
    if CHROMIUM is None:
        pytest.skip("chromium is not installed (apt-get install chromium)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        yield browser
        browser.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    page.set_default_timeout(10_000)
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.script_errors = errors
    page.dialogs = dialogs
    yield page
    context.close()


def expect(target):
    from playwright.sync_api import expect as playwright_expect

    return playwright_expect(target)


def slow_reply(request):
    """A reply in several pieces, so the page really renders a stream."""
    for piece in ("Good ", "morning ", "to ", "you."):
        time.sleep(0.05)
        yield StreamEvent("text", text=piece)
    yield StreamEvent("usage", usage=Usage(input_tokens=50, output_tokens=4))


def test_u1_u3_chat_page_streams_reply_shows_sizes_and_escapes_titles(page, hearth, provider, persona):
    hearth.scope().personas.create("sage", "Sage")
    provider.replies.extend([slow_reply, failing_reply()])
    with serve_in_thread(create_app(hearth.settings, hearth)) as base:
        page.goto(base + "/")
        page.wait_for_selector("body[data-ready=true]")
        # Several personas: the picker is shown and lists them by display name.
        assert page.locator("#persona-field").is_visible()
        assert page.locator("#persona-select option").all_text_contents() == ["Elion", "Sage"]

        page.fill("#new-title", HOSTILE)
        page.get_by_role("button", name="New conversation").click()
        expect(page.locator("#chat-title")).to_have_text(HOSTILE)
        # The hostile title is text, never markup.
        assert page.locator("#chat-title").text_content() == HOSTILE
        assert page.locator(".conversation-title").first.text_content() == HOSTILE
        assert page.locator("img").count() == 0

        page.fill("#composer-text", "Hello there")
        page.click("#send")
        expect(page.locator(".message.role-assistant .body").last).to_have_text("Good morning to you.")
        expect(page.locator(".message.streaming")).to_have_count(0)
        assert page.locator(".message.role-assistant .who").last.text_content() == "Elion"
        assert page.locator("#composer-text").input_value() == ""
        # Request size numbers from the diagnostics event.
        total = page.locator('#size-panel [data-key="total_tokens"] dd').text_content()
        assert int(total.replace(",", "")) > 0
        limit = page.locator('#size-panel [data-key="input_limit_tokens"] dd').text_content()
        assert limit.replace(",", "").replace(".", "").replace("\u202f", "") == "32000"
        expect(page.locator("#estimate-text")).to_have_text(re.compile(r"^2 messages · ~\d+ tokens$"))
        page.screenshot(path=SCREENSHOT, full_page=True)

        # A provider failure shows a clear message; "Try again" answers the saved message.
        page.fill("#composer-text", "Still there?")
        page.keyboard.press("Enter")
        expect(page.locator(".message.failed .error")).to_contain_text("429")
        page.get_by_role("button", name="Try again").click()
        expect(page.locator("#estimate-text")).to_have_text(re.compile(r"^4 messages"))
        bodies = page.locator(".message .body").all_text_contents()
        assert bodies[-2:] == ["Still there?", "Reply 3"]
        assert page.dialogs == [] and page.script_errors == []

    # What the page showed is what was stored.
    me = hearth.scope()
    chat = me.conversations.list()[0]
    assert chat.title == HOSTILE
    assert [m.content for m in me.conversations.messages(chat.id)] == [
        "Hello there", "Good morning to you.", "Still there?", "Reply 3"]


def test_u2_login_flow_in_the_browser(page, hearth):
    owner = hearth.users.owner()
    hearth.users.set_password(owner.id, PASSWORD)
    with serve_in_thread(create_app(hearth.settings, hearth)) as base:
        page.goto(base + "/")
        page.wait_for_url(base + "/login")
        page.fill("#login-password", "not the password")
        page.click("button[type=submit]")
        expect(page.locator("#login-error")).to_contain_text("wrong user name or password")

        page.fill("#login-password", PASSWORD)
        page.click("button[type=submit]")
        page.wait_for_url(base + "/")
        page.wait_for_selector("body[data-ready=true]")
        cookies = {c["name"]: c for c in page.context.cookies()}
        assert cookies["hearth_session"]["httpOnly"] and cookies["hearth_session"]["sameSite"] == "Strict"

        # A state change from the page carries the CSRF token and works.
        page.fill("#new-title", "After login")
        page.get_by_role("button", name="New conversation").click()
        expect(page.locator("#chat-title")).to_have_text("After login")

        page.click("#logout")
        page.wait_for_url(base + "/login")
        page.goto(base + "/")
        page.wait_for_url(base + "/login")
