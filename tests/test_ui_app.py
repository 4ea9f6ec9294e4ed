"""The everyday message controls and the installable app, in headless Chromium (W2, W5, W6).

Copy and Copy as Markdown, the More menu (Delete forever behind the milder actions) by keyboard,
Read aloud through the browser's speech synthesis (stubbed in the page: the browser's own process
seam) with a voice per persona, the keyboard shortcut list, the theme picker, and the web manifest
with a service worker that keeps only the app shell. Each runs on a desktop (1366 × 860) and a
phone (390 × 844) viewport.
"""

from __future__ import annotations

import io
import re

import httpx
import pytest
from PIL import Image

from hearth.server import create_app
from tests.test_server import serve_in_thread
from tests.test_ui import (  # noqa: F401  (shared fixtures)
    AXE,
    PASSWORD,
    UI_TIMEOUT_MS,
    axe_violations,
    base,
    browser,
    elion,
    eventually,
    expect,
    goto,
    me,
    open_hearth,
    shot,
    site,
)

pytestmark = pytest.mark.ui

SIZES = [pytest.param((1366, 860), id="1366"), pytest.param((390, 844), id="390")]
REPLY = "Some *emphasis* and a list:\n\n- one\n- two"

# The browser's speech synthesis, replaced before any page script runs: it records what it is asked
# to say and in which voice, and ends an utterance when cancelled (as the real one does) or when the
# test says the reading finished.
SPEECH_STUB = """
(() => {
  window.__speech = [];
  const voices = [
    { name: "Fake Calm", voiceURI: "fake-calm", lang: "en-US", default: true, localService: true },
    { name: "Fake Bright", voiceURI: "fake-bright", lang: "en-GB", default: false, localService: true },
  ];
  class Utterance extends EventTarget {
    constructor(text) { super(); this.text = text; this.voice = null; this.lang = ""; }
  }
  class Synth extends EventTarget {
    constructor() { super(); this.current = null; }
    get speaking() { return this.current !== null; }
    getVoices() { return voices; }
    speak(u) { window.__speech.push({ text: u.text, voice: u.voice ? u.voice.name : null }); this.current = u; }
    cancel() { window.__speech.push({ cancel: true }); this.finish("error"); }
    finish(type = "end") { const u = this.current; this.current = null; if (u) u.dispatchEvent(new Event(type)); }
  }
  Object.defineProperty(window, "speechSynthesis", { value: new Synth(), configurable: true });
  window.SpeechSynthesisUtterance = Utterance;
})();
"""


def context_for(chromium, size, **options):
    width, height = size
    phone = width < 900
    context = chromium.new_context(viewport={"width": width, "height": height}, is_mobile=phone, has_touch=phone,
                                  **options)
    return context


def open_page(context, url):
    page = context.new_page()
    page.set_default_timeout(UI_TIMEOUT_MS)
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.script_errors = errors
    goto(page, url)
    return page


def thread(scope, title):
    conversation = scope.conversations.create(elion(scope).id, title=title)
    scope.conversations.add_message(conversation.id, "user", "Hello *there*")
    scope.conversations.add_message(conversation.id, "assistant", REPLY)
    return conversation


def reload(page):
    page.reload()
    page.wait_for_selector("body[data-ready=true]")


def clipboard(page):
    return page.evaluate("navigator.clipboard.readText()")


@pytest.mark.parametrize("size", SIZES)
def test_w2_copy_and_copy_as_markdown_and_delete_forever_only_in_the_more_menu_by_keyboard(
        browser, base, me, size):  # noqa: F811
    chat = thread(me, f"Copy check {size[0]}")
    context = context_for(browser, size, permissions=["clipboard-read", "clipboard-write"])
    try:
        page = open_page(context, base + f"/#conversation-{chat.id}")
        reply = page.locator(".message.role-assistant").last
        expect(reply.locator(".body li")).to_have_count(2)

        # Copy: the message as it reads, without the Markdown marks.
        reply.get_by_role("button", name="Copy", exact=True).click()
        expect(page.locator("#status")).to_have_text("The message copied.")
        copied = clipboard(page)
        assert "*" not in copied and "Some emphasis and a list:" in copied and "one" in copied and "two" in copied

        # Nothing deletes beside Edit: Delete forever is only in the menu, which is closed.
        mine = page.locator(".message.role-user").last
        named = mine.locator(".turn-actions button:visible")
        assert [named.nth(i).get_attribute("aria-label") for i in range(named.count())] == [
            "Edit this message", "Copy", "Read aloud", "More actions"]  # icons, named (W8)
        messages = page.locator("#messages")
        expect(messages.get_by_role("button", name=re.compile("Delete forever"))).to_have_count(0)
        expect(messages.get_by_role("menuitem")).to_have_count(0)

        # The menu by keyboard: Enter opens it on its first item, arrows move (and wrap), Escape closes
        # it and gives the focus back.
        more = reply.get_by_role("button", name="More actions")
        expect(more).to_have_attribute("aria-haspopup", "menu")
        more.focus()
        page.keyboard.press("Enter")
        expect(more).to_have_attribute("aria-expanded", "true")
        items = reply.get_by_role("menuitem")
        assert items.all_text_contents() == ["Copy as Markdown", "Delete forever"]  # the dangerous one last
        expect(items.nth(0)).to_be_focused()
        page.keyboard.press("ArrowDown")
        expect(items.nth(1)).to_be_focused()
        page.keyboard.press("ArrowDown")
        expect(items.nth(0)).to_be_focused()
        page.keyboard.press("Escape")
        expect(reply.get_by_role("menu")).to_be_hidden()
        expect(more).to_have_attribute("aria-expanded", "false")
        expect(more).to_be_focused()

        # Space opens it too; Enter chooses: Copy as Markdown puts the message's source on the clipboard.
        page.keyboard.press(" ")
        expect(items.nth(0)).to_be_focused()
        page.keyboard.press("Enter")
        expect(page.locator("#status")).to_have_text("The Markdown copied.")
        assert clipboard(page) == REPLY
        expect(more).to_be_focused()

        # ArrowUp opens it on the last item: Delete forever asks for the phrase in the bubble; Cancel
        # removes nothing and gives the focus back to the menu button.
        page.keyboard.press("ArrowUp")
        expect(items.nth(1)).to_be_focused()
        expect(items.nth(1)).to_have_accessible_name("Delete forever: this reply")
        page.keyboard.press("Enter")
        expect(reply.locator(".forget-confirm")).to_contain_text("This removes 1 message")
        expect(reply.get_by_role("textbox", name="Type FORGET FOREVER to confirm")).to_be_focused()
        shot(page, f"w2-{size[0]}-delete-confirm")
        reply.get_by_role("button", name="Cancel").click()
        expect(reply.locator(".forget-confirm")).to_have_count(0)
        expect(more).to_be_focused()
        assert [m.content for m in me.conversations.messages(chat.id)] == ["Hello *there*", REPLY]

        # The mouse: a click opens it, a click elsewhere closes it.
        more.click()
        expect(reply.get_by_role("menu")).to_be_visible()
        shot(page, f"w2-{size[0]}-more-menu")
        page.locator("#chat-title").click()
        expect(reply.get_by_role("menu")).to_be_hidden()
        assert page.script_errors == []
    finally:
        context.close()


@pytest.mark.parametrize("size", SIZES)
def test_w2_read_aloud_speaks_in_the_voice_chosen_for_the_persona_and_stops(browser, base, me, size):  # noqa: F811
    chat = thread(me, f"Read aloud {size[0]}")
    persona = elion(me)
    context = context_for(browser, size)
    context.add_init_script(SPEECH_STUB)
    try:
        page = open_page(context, base + f"/#conversation-{chat.id}")
        reply = page.locator(".message.role-assistant").last
        expect(reply.locator(".body li")).to_have_count(2)

        # The voice for this persona, in the Details panel (a column when wide, a sheet on a phone).
        page.locator("#details-toggle").click()
        voice = page.get_by_label("Voice for Elion")
        expect(voice).to_be_visible()
        assert voice.locator("option").all_text_contents() == ["Browser default", "Fake Calm (en-US)",
                                                               "Fake Bright (en-GB)"]
        voice.select_option("fake-bright")
        assert page.evaluate(f"localStorage.getItem('hearth.voice.{persona.id}')") == "fake-bright"
        if size[0] < 900:
            page.get_by_role("button", name="Close details").click()

        # The reply is read in that voice, as plain text; its button becomes Stop reading.
        reply.get_by_role("button", name="Read aloud").click()
        page.wait_for_function("window.__speech.length > 0")
        spoken = page.evaluate("window.__speech")
        assert len(spoken) == 1 and spoken[0]["voice"] == "Fake Bright"
        assert "*" not in spoken[0]["text"] and spoken[0]["text"].startswith("Some emphasis and a list:")
        stop = reply.get_by_role("button", name="Stop reading")
        expect(stop).to_be_visible()
        shot(page, f"w2-{size[0]}-reading")
        stop.click()
        page.wait_for_function("window.__speech.at(-1).cancel === true")
        expect(reply.get_by_role("button", name="Read aloud")).to_be_visible()

        # Your own message is read in the browser's default voice; Escape stops it; a reading that
        # ends by itself gives the button back.
        mine = page.locator(".message.role-user").last
        mine.get_by_role("button", name="Read aloud").click()
        expect(mine.get_by_role("button", name="Stop reading")).to_be_visible()
        assert page.evaluate("window.__speech.at(-1)") == {"text": "Hello there", "voice": None}
        expect(mine.get_by_role("button", name="Stop reading")).to_be_visible()
        page.keyboard.press("Escape")
        expect(mine.get_by_role("button", name="Read aloud")).to_be_visible()
        reply.get_by_role("button", name="Read aloud").click()
        expect(reply.get_by_role("button", name="Stop reading")).to_be_visible()
        page.evaluate("speechSynthesis.finish()")
        expect(reply.get_by_role("button", name="Read aloud")).to_be_visible()

        # The choice is kept in this browser, for this persona.
        reload(page)
        expect(page.locator("#voice-select")).to_have_value("fake-bright")
        assert page.script_errors == []
    finally:
        context.close()


@pytest.mark.parametrize("size", SIZES)
def test_w6_question_mark_opens_the_shortcut_list_which_keeps_the_focus_and_closes_with_escape(
        browser, base, me, size):  # noqa: F811
    chat = thread(me, f"Shortcuts {size[0]}")
    context = context_for(browser, size)
    try:
        page = open_page(context, base + f"/#conversation-{chat.id}")
        composer = page.locator("#composer-text")
        expect(composer).to_be_enabled()

        # In a text field "?" is just typed.
        composer.focus()
        page.keyboard.type("Why?")
        expect(composer).to_have_value("Why?")
        expect(page.get_by_role("dialog")).to_have_count(0)

        # Elsewhere it opens the list, which names the shortcuts and keeps the focus inside.
        page.locator("#chat-title").focus()
        page.keyboard.press("?")
        dialog = page.get_by_role("dialog", name="Keyboard shortcuts")
        expect(dialog).to_be_visible()
        keys = dialog.locator("kbd").all_text_contents()
        for key in ("?", "/", "n", "c", "Enter", "Shift + Enter", "Escape"):
            assert key in keys, key
        close = dialog.get_by_role("button", name="Close")
        expect(close).to_be_focused()
        for press in ("Tab", "Tab", "Shift+Tab"):
            page.keyboard.press(press)
            assert page.evaluate("document.activeElement.closest('dialog') !== null"), press
        shot(page, f"w6-{size[0]}-shortcuts")
        page.keyboard.press("Escape")
        expect(dialog).to_be_hidden()
        expect(page.locator("#chat-title")).to_be_focused()

        # The single keys: search chats, New Chat, the message box (on a phone, the drawer opens).
        page.keyboard.press("/")
        expect(page.locator("#filter-text")).to_be_focused()
        page.locator("#filter-text").press("Escape")  # out of the field again (closes the phone's drawer)
        page.locator("#chat-title").focus()
        page.keyboard.press("n")
        expect(page.locator("#new-title")).to_be_focused()
        expect(page.locator("#new-title")).to_have_value("")
        page.keyboard.press("Escape")
        page.locator("#chat-title").focus()
        page.keyboard.press("c")
        expect(composer).to_be_focused()
        expect(composer).to_have_value("Why?")

        # From another panel, "c" comes back to the open thread's message box.
        goto(page, base + "/#memory")
        page.locator("#memory-heading").focus()
        page.keyboard.press("c")
        expect(page.locator("#chat-title")).to_have_text(f"Shortcuts {size[0]}")
        expect(composer).to_be_focused()
        if size[0] >= 900:  # the top bar's button (hidden on a phone, where the key still works)
            page.get_by_role("button", name="Keyboard shortcuts (?)").click()
            expect(dialog).to_be_visible()
            dialog.get_by_role("button", name="Close").click()
            expect(dialog).to_be_hidden()
        assert page.script_errors == []
    finally:
        context.close()


def background(page):
    return page.evaluate("getComputedStyle(document.body).backgroundColor")


LIGHT_BG, DARK_BG = "rgb(250, 246, 241)", "rgb(29, 25, 23)"
# Records the theme in force when <body> first appears: nothing can be painted before that.
FIRST_PAINT = """
new MutationObserver((_, observer) => {
  if (document.body && window.__themeAtBody === undefined) {
    window.__themeAtBody = document.documentElement.dataset.theme || null;
    observer.disconnect();
  }
}).observe(document, { childList: true, subtree: true });
"""


@pytest.mark.parametrize("size", SIZES)
def test_w6_theme_picker_changes_the_colours_before_the_first_paint_persists_and_passes_axe(
        browser, base, me, size):  # noqa: F811
    if not AXE.exists():
        pytest.skip("axe-core is not installed (make dev runs npm ci)")
    chat = thread(me, f"Themes {size[0]}")
    # bypass_csp: axe is injected as a script tag.
    context = context_for(browser, size, color_scheme="light", bypass_csp=True)
    context.add_init_script(FIRST_PAINT)
    found = {}
    try:
        page = open_page(context, base + f"/#conversation-{chat.id}")
        theme = page.get_by_label("Theme", exact=True)
        expect(theme).to_have_value("system")
        assert background(page) == LIGHT_BG

        # Dark, chosen while the system is light: the colours change at once and over a reload, where
        # the theme is in force before the page has a body.
        theme.select_option("dark")
        eventually(lambda: background(page) == DARK_BG)
        assert page.evaluate("localStorage.getItem('hearth.theme')") == "dark"
        reload(page)
        assert page.evaluate("window.__themeAtBody") == "dark"
        assert background(page) == DARK_BG
        expect(theme).to_have_value("dark")
        assert page.evaluate("getComputedStyle(document.documentElement).colorScheme") == "dark"
        for state, violations in axe_states(page, "dark", size).items():
            if violations:
                found[state] = violations

        # Light, while the system is dark.
        page.emulate_media(color_scheme="dark")
        theme.select_option("light")
        eventually(lambda: background(page) == LIGHT_BG)
        reload(page)
        assert page.evaluate("window.__themeAtBody") == "light" and background(page) == LIGHT_BG
        for state, violations in axe_states(page, "light", size).items():
            if violations:
                found[state] = violations

        # System: follows the system, also when it changes.
        theme.select_option("system")
        eventually(lambda: background(page) == DARK_BG)
        page.emulate_media(color_scheme="light")
        eventually(lambda: background(page) == LIGHT_BG)
        assert page.evaluate("localStorage.getItem('hearth.theme')") is None
        assert page.script_errors == []
    finally:
        context.close()
    assert found == {}, found


def axe_states(page, theme, size):
    """axe-core on the chat page as it is, with a More menu open, and with the shortcut list open."""
    results = {f"{theme} chat": axe_violations(page)}
    reply = page.locator(".message.role-assistant").last
    reply.get_by_role("button", name="More actions").click()
    expect(reply.get_by_role("menu")).to_be_visible()
    results[f"{theme} menu"] = axe_violations(page)
    shot(page, f"w6-{size[0]}-{theme}-menu")
    page.keyboard.press("Escape")
    page.locator("#chat-title").focus()
    page.keyboard.press("?")
    expect(page.get_by_role("dialog", name="Keyboard shortcuts")).to_be_visible()
    results[f"{theme} shortcuts"] = axe_violations(page)
    shot(page, f"w6-{size[0]}-{theme}-shortcuts")
    page.keyboard.press("Escape")
    return results


SHELL_PREFIXES = ("/static/", "/vendor/", "/icons/")


def test_w5_manifest_and_service_worker_register_and_keep_only_the_app_shell(browser, base, me):  # noqa: F811
    chat = thread(me, "Installable")
    context = browser.new_context(viewport={"width": 1366, "height": 860})
    try:
        page = open_page(context, base + f"/#conversation-{chat.id}")

        # The manifest: name, start, standalone display, theme colour and icons that are real PNGs of
        # the sizes it names (drawn by the server), all public.
        href = page.locator("link[rel=manifest]").get_attribute("href")
        manifest = httpx.get(base + href)
        assert manifest.status_code == 200 and manifest.headers["content-type"].startswith("application/manifest+json")
        data = manifest.json()
        assert data["name"] == "Hearth" and data["start_url"] == "/" and data["display"] == "standalone"
        assert re.fullmatch(r"#[0-9a-f]{6}", data["theme_color"])
        purposes = set()
        for icon in data["icons"]:
            answer = httpx.get(base + icon["src"])
            assert answer.status_code == 200 and answer.headers["content-type"] == "image/png"
            with Image.open(io.BytesIO(answer.content)) as image:
                assert image.format == "PNG" and f"{image.width}x{image.height}" == icon["sizes"]
            purposes.add(icon["purpose"])
        assert {"any", "maskable"} <= purposes and {"192x192", "512x512"} <= {i["sizes"] for i in data["icons"]}

        # The service worker registers at the root once the page has started; the page it was registered
        # from goes on without it, the next one is served by it.
        scope = page.evaluate("navigator.serviceWorker.ready.then((r) => r.scope)")
        assert scope == base + "/"
        assert page.evaluate("navigator.serviceWorker.controller") is None
        reload(page)
        assert page.evaluate("navigator.serviceWorker.controller.scriptURL") == base + "/sw.js"

        # A conversation opened and a reply streamed through the controlled page: it arrives whole.
        page.fill("#composer-text", "Through the worker")
        page.click("#send")
        expect(page.locator(".message.role-user .body").last).to_have_text("Through the worker")
        expect(page.locator(".message.streaming")).to_have_count(0)
        expect(page.locator(".message.role-assistant .body").last).to_have_text(re.compile(r"^Reply \d+$"))
        assert me.conversations.messages(chat.id)[-1].role == "assistant"

        # The cache holds the shell and nothing else: no API answer, no conversation.
        cached = page.evaluate(CACHED)
        assert "/" in cached and "/static/app.js" in cached and "/vendor/purify.js" in cached
        assert "/manifest.webmanifest" in cached
        for path in cached:
            assert not path.startswith(("/api", "/v1", "/channels")), path
            assert path in ("/", "/manifest.webmanifest") or path.startswith(SHELL_PREFIXES), path
        assert page.script_errors == []
    finally:
        context.close()


CACHED = """async () => {
    const paths = [];
    for (const name of await caches.keys()) {
        const cache = await caches.open(name);
        for (const request of await cache.keys()) paths.push(new URL(request.url).pathname);
    }
    return paths;
}"""


def test_w5_with_a_password_the_service_worker_keeps_login_streaming_and_logout_working(browser, tmp_path):  # noqa: F811
    hearth, _ = open_hearth(tmp_path)
    owner = hearth.users.owner()
    hearth.users.set_password(owner.id, PASSWORD)
    hearth.scope().personas.create("elion", "Elion")
    chat = thread(hearth.scope(), "Behind a password")
    context = browser.new_context(viewport={"width": 1366, "height": 860})
    page = context.new_page()
    page.set_default_timeout(UI_TIMEOUT_MS)
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))

    def log_in():
        page.wait_for_url(base + "/login")
        page.fill("#login-password", PASSWORD)
        page.click("button[type=submit]")
        page.wait_for_url(re.compile(re.escape(base) + r"/(#.*)?$"))  # back where the session ended, maybe
        page.wait_for_selector("body[data-ready=true]")

    try:
        with serve_in_thread(create_app(hearth.settings, hearth)) as base:
            page.goto(base + "/")
            log_in()
            page.evaluate("navigator.serviceWorker.ready.then(() => true)")
            assert "/" in page.evaluate(CACHED)  # the page, kept while logged in
            goto(page, base + f"/#conversation-{chat.id}")
            page.reload()
            page.wait_for_selector("body[data-ready=true]")
            assert page.evaluate("navigator.serviceWorker.controller !== null")
            # A streamed reply through the controlled page, with the session and its CSRF token.
            page.fill("#composer-text", "Still streaming")
            page.click("#send")
            expect(page.locator(".message.streaming")).to_have_count(0)
            expect(page.locator(".message.role-assistant .body").last).to_have_text(re.compile(r"^Reply \d+$"))
            # Logging out drops the kept page (it held that session's form token); the page is not
            # served from the copy afterwards: the server sends the browser to the login form.
            page.click("#logout")
            page.wait_for_url(base + "/login")
            eventually(lambda: "/" not in page.evaluate(CACHED))
            page.goto(base + "/")
            log_in()
            expect(page.locator(".message.role-user .body").last).to_have_text("Still streaming")
            assert all(not path.startswith("/api") for path in page.evaluate(CACHED))
        assert errors == []
    finally:
        context.close()
        hearth.close()
