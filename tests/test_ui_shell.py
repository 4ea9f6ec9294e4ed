"""The chat screen's shell in headless Chromium, at 1366 x 860 and 390 x 844 (W8, W9, W12, W13, W16).

W8: the conversation owns the screen (the message column's share of the viewport), a calm header
(the companion, the title, at most three controls and More), icon actions with names and tooltips
shown on hover, focus and on the last reply, and the diagnostics behind Details, closed by default.
"""
# ruff: noqa: F811  (the shared fixtures are imported from test_ui and named as parameters)

from __future__ import annotations

import re
from pathlib import Path

import pytest

from hearth import Hearth, Settings
from hearth.server import create_app
from tests.conftest import RecordingProvider
from tests.test_server import serve_in_thread
from tests.test_ui import (  # noqa: F401  (shared fixtures)
    AXE,
    UI_TIMEOUT_MS,
    axe_violations,
    base,
    browser,
    chat_with_messages,
    expect,
    goto,
    me,
    scripted,
    site,
)
from tests.test_ui_phone import DESKTOP, PHONE, SIZES, new_page

pytestmark = pytest.mark.ui



def visible_header_controls(page) -> list[str]:
    """The names of the header's controls a person sees with More folded."""
    return page.evaluate("""() => [...document.querySelectorAll('.chat-header :is(button, select, a[href], input)')]
        .filter((n) => n.checkVisibility() && n.getBoundingClientRect().width > 0)
        .map((n) => (n.getAttribute('aria-label') || n.textContent).trim())""")


@pytest.mark.parametrize("viewport", SIZES)
def test_w8_the_conversation_owns_the_screen_and_the_header_is_calm(browser, base, me, viewport):
    chat = chat_with_messages(me, "Sunday plans", ["Hello there", "What shall we cook?", "And after that?"])
    context, page = new_page(browser, viewport)
    try:
        goto(page, base + f"/#conversation-{chat.id}")
        expect(page.locator(".message.role-assistant")).to_have_count(3)
        column = page.locator("#messages").bounding_box()
        if viewport is DESKTOP or viewport["width"] > 900:
            assert column["height"] >= 0.70 * viewport["height"], column
            assert column["width"] >= 0.55 * viewport["width"], column
        else:
            assert column["height"] >= 0.70 * viewport["height"], column
        # The header: the companion's face and name, the title, Details and More, nothing else.
        expect(page.locator("#chat-companion .persona-avatar")).to_be_visible()
        expect(page.locator("#chat-meta")).to_contain_text("Elion")
        expect(page.locator("#chat-title")).to_have_text("Sunday plans")
        controls = visible_header_controls(page)
        assert len(controls) <= 4 and any(c.startswith("More") for c in controls), controls
        for hidden in ("#rename-conversation", "#pin-conversation", "#branch-conversation", "#move-folder",
                       "#end-conversation", "#trash-conversation"):
            expect(page.locator(hidden)).to_be_hidden()
        more = page.locator("#chat-more-toggle")
        more.click()
        expect(more).to_have_attribute("aria-expanded", "true")
        for shown in ("#rename-conversation", "#pin-conversation", "#branch-conversation", "#move-folder",
                      "#end-conversation", "#trash-conversation"):
            expect(page.locator(shown)).to_be_visible()
        page.keyboard.press("Escape")
        expect(page.locator("#rename-conversation")).to_be_hidden()
        expect(more).to_be_focused()

        # Diagnostics are closed by default: no request size, context meter or estimate in view.
        for figure in ("#details", "#size-panel", "#estimate", "#context-meter"):
            expect(page.locator(figure)).to_be_hidden()
        assert page.locator(".reply-details[open]").count() == 0
        page.locator("#details-toggle").click()
        expect(page.locator("#details")).to_be_visible()
        expect(page.locator("#details-toggle")).to_have_attribute("aria-expanded", "true")
        expect(page.locator("#estimate-text")).to_be_visible()
        page.locator("#sheet-close").click()
        expect(page.locator("#details")).to_be_hidden()

        # Message actions are icon buttons, each named (aria-label) with the same words as a tooltip.
        last = page.locator(".message.role-assistant").last
        actions = last.locator(".turn-actions button.icon-button")
        names = [actions.nth(i).get_attribute("aria-label") for i in range(actions.count())]
        assert {"Regenerate", "Copy", "More actions"} <= set(names), names
        for i in range(actions.count()):
            button = actions.nth(i)
            assert button.get_attribute("title") == button.get_attribute("aria-label")
            assert button.inner_text().strip() == ""  # an icon, no words beside it
        first = page.locator(".message.role-assistant").first
        opacity = "(n) => getComputedStyle(n.querySelector('.turn-actions')).opacity"
        assert last.evaluate(opacity) == "1"  # the last reply's actions are always there
        if viewport is DESKTOP:
            page.mouse.move(5, 5)
            assert first.evaluate(opacity) == "0"  # calm until wanted
            first.hover()
            assert first.evaluate(opacity) == "1"
            page.mouse.move(5, 5)
            first.locator(".copy-message").focus()
            assert first.evaluate(opacity) == "1"  # and on keyboard focus
        # The reply's own Details: closed, then the figures of its request.
        details = last.locator(".reply-details")
        assert details.evaluate("(n) => n.open") is False
        last.locator(".reply-details-summary").click()
        expect(last.locator(".reply-details-list")).to_contain_text("Model")
        expect(last.locator(".reply-details-list")).to_contain_text("Request size")
        assert page.script_errors == []
    finally:
        context.close()


# -- W12: the composer never loses a word ---------------------------------------------------------------
@pytest.mark.parametrize("viewport", SIZES)
def test_w12_a_draft_typed_while_a_reply_streams_survives_and_stop_keeps_the_partial_with_undo(
        browser, site, me, viewport):
    base, _hearth, provider = site
    chat = chat_with_messages(me, f"Drafts {viewport['width']}", ["Hello"])
    context, page = new_page(browser, viewport)
    try:
        goto(page, base + f"/#conversation-{chat.id}")
        provider.replies.append(scripted("One ", "two ", "three ", "four.", pause=1.0))
        box = page.locator("#composer-text")
        box.fill("Count to four")
        page.locator("#send").click()
        expect(page.locator(".message.streaming .body")).to_contain_text("One")
        expect(box).to_have_value("")  # the sent words are in the bubble
        box.type("A thought while you talk")
        box.press("Enter")  # blocked: the reply is still arriving, and the text stays
        expect(page.locator("#status")).to_contain_text("still arriving")
        expect(box).to_have_value("A thought while you talk")
        expect(page.locator(".message.streaming")).to_have_count(0)
        expect(page.locator(".message.role-assistant .body").last).to_have_text("One two three four.")
        expect(box).to_have_value("A thought while you talk")  # the reply ended: the draft is still there
        assert [m.content for m in me.conversations.messages(chat.id)][-2:] == ["Count to four", "One two three four."]

        # Stop keeps what arrived at once, with Undo; no dialog asks.
        provider.replies.append(scripted("Once ", "upon ", "a ", "time ", "there ", "was.", pause=0.5))
        box.press("Enter")
        expect(box).to_have_value("")
        expect(page.locator(".message.streaming .body")).to_contain_text("Once")
        box.type("Next")
        page.locator("#stop").click()
        undo = page.get_by_role("button", name="Undo")
        expect(undo).to_be_visible()
        expect(page.locator(".message.role-assistant.partial")).to_have_count(1)
        kept = me.conversations.messages(chat.id)[-1]
        assert kept.role == "assistant" and kept.metadata["partial"] is True and kept.content.startswith("Once")
        expect(box).to_have_value("Next")  # stopping never touches the draft
        undo.click()
        expect(page.locator(".message.role-assistant.partial")).to_have_count(0)
        expect(page.locator("#status")).to_contain_text("Undone")
        assert me.conversations.messages(chat.id)[-1].content == "A thought while you talk"
        expect(box).to_have_value("Next")
        assert page.script_errors == []
    finally:
        context.close()


# -- W9: people's words ---------------------------------------------------------------------------------
WORDS_FILE = Path(__file__).with_name("internal_words.txt")
INTERNAL = [line.strip() for line in WORDS_FILE.read_text(encoding="utf-8").splitlines()
            if line.strip() and not line.startswith("#")]
INTERNAL_RE = re.compile(r"(?<![\w-])(" + "|".join(re.escape(w) for w in INTERNAL) + r")(?:s|es)?(?![\w-])", re.I)
SNAKE_RE = re.compile(r"\b[a-z]+(?:_[a-z]+)+\b")
# "1 personas": a count of one before a plural noun (not a word that ends in -ss, like "class").
PLURAL_RE = re.compile(r"(?<![\d.,])\b1 (?!\w*ss\b)([A-Za-z]+s)\b")
NAV = ["chat", "memory", "personas", "layers", "recall", "timeline", "tools", "settings", "accounts"]

# Every visible text node, aria-label, title and placeholder of the page, outside the Details panel
# and the per-reply Details (where precise names belong).
VISIBLE_WORDS = """() => {
  const out = [];
  const skip = (n) => n.closest('#details, .reply-details, [data-details-only]');
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const parent = node.parentElement;
    const text = node.textContent.trim();
    if (!text || !parent || skip(parent) || parent.closest('script, style, template, option')) continue;
    if (!parent.checkVisibility({ checkOpacity: false, checkVisibilityCSS: true })) continue;
    if (parent.closest('.visually-hidden') === null && parent.getClientRects().length === 0) continue;
    out.push(text);
  }
  for (const node of document.querySelectorAll('[aria-label], [title], [placeholder]')) {
    if (skip(node) || !node.checkVisibility()) continue;
    for (const name of ['aria-label', 'title', 'placeholder']) if (node.getAttribute(name)) out.push(node.getAttribute(name));
  }
  for (const select of document.querySelectorAll('select')) {
    if (skip(select) || !select.checkVisibility()) continue;
    for (const option of select.options) out.push(option.textContent.trim());
  }
  return out;
}"""

# Words a line break cuts in two, in the sidebar and the timeline: a word whose characters lie on
# more than one line box.
SPLIT_WORDS = """(roots) => {
  const split = [];
  for (const root of roots.map((s) => document.querySelector(s)).filter(Boolean)) {
    const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      const parent = node.parentElement;
      if (!parent || !parent.checkVisibility() || parent.closest('.visually-hidden')) continue;
      for (const match of node.textContent.matchAll(/[\\p{L}\\p{N}]{2,}/gu)) {
        const range = document.createRange();
        range.setStart(node, match.index);
        range.setEnd(node, match.index + match[0].length);
        const tops = new Set([...range.getClientRects()].filter((r) => r.width > 0).map((r) => Math.round(r.top)));
        if (tops.size > 1) split.push(match[0]);
      }
    }
  }
  return split;
}"""


def internal_names(texts):
    found = set()
    for text in texts:
        for match in INTERNAL_RE.finditer(text):
            found.add((match.group(0), text[:80]))
        for match in SNAKE_RE.finditer(text):
            found.add((match.group(0), text[:80]))
    return found


def bad_plurals(texts):
    return {(m.group(0), t[:80]) for t in texts for m in PLURAL_RE.finditer(t)}


@pytest.fixture
def lived_in(me):
    """A deployment with a little of everything the panels show: threads with long titles, a
    memory, a status field, a word the companion recalls, a suggestion waiting, one persona of its own."""
    persona = me.personas.create(f"wren{len(me.personas.list())}", "Wren")
    long_title = "Supercalifragilisticexpialidocious adventures in the extraordinarily long afternoon"
    chat = chat_with_messages(me, long_title, ["We talked about Biscuit the cat", "And the marathon in May"])
    me.conversations.create(persona.id, title="Antidisestablishmentarianism-and-other-long-words-in-a-title")
    me.memories.add("My sister Nora lives in Lyon", "family", 6)
    if not any(f.name == "Mood" for f in me.layers.household.fields()):
        me.layers.household.add_field("Mood", ["calm", "busy"], value="calm")
    me.layers.fragments.add(["biscuit"], "Biscuit is an old ginger cat.", "pets")
    me.layers.review.remember([{"text": "Runs a marathon in May"}])
    return chat


@pytest.mark.parametrize("viewport", SIZES)
def test_w9_no_panel_shows_an_internal_name_plurals_agree_and_no_word_is_split(browser, base, lived_in, viewport):
    context, page = new_page(browser, viewport)
    found, plurals, split = {}, {}, {}
    try:
        for view in NAV:
            goto(page, base + (f"/#conversation-{lived_in.id}" if view == "chat" else f"/#{view}"))
            page.wait_for_timeout(300)  # the panel's data has arrived and rendered
            states = [view]
            texts = page.evaluate(VISIBLE_WORDS)
            if view == "chat":  # More is a panel of the chat too; the thread list is a drawer on a phone
                page.locator("#chat-more-toggle").click()
                texts += page.evaluate(VISIBLE_WORDS)
                page.keyboard.press("Escape")
                if viewport is PHONE:
                    page.get_by_role("button", name="Threads").click()
                    page.wait_for_timeout(300)
                    texts += page.evaluate(VISIBLE_WORDS)
                split[view] = page.evaluate(SPLIT_WORDS, ["#threads"])
                if viewport is PHONE:
                    page.keyboard.press("Escape")
            if view == "timeline":
                split[view] = page.evaluate(SPLIT_WORDS, ["#view-timeline"])
                widths = page.evaluate("""() => [...document.querySelectorAll('#timeline-list .message-text')]
                    .filter((n) => n.checkVisibility()).map((n) => n.getBoundingClientRect().width)""")
                list_width = page.locator("#timeline-list").bounding_box()["width"]
                assert widths and min(widths) >= 0.6 * list_width, (widths, list_width)  # never squeezed
            names = internal_names(texts)
            if names:
                found[" ".join(states)] = sorted(names)
            wrong = bad_plurals(texts)
            if wrong:
                plurals[view] = sorted(wrong)
        assert not found, "\n".join(f"{where}: {names}" for where, names in found.items())
        assert not plurals, "\n".join(f"{where}: {names}" for where, names in plurals.items())
        assert {k: v for k, v in split.items() if v} == {}, split
        assert page.script_errors == []
    finally:
        context.close()


# -- W13: everyday rendering ---------------------------------------------------------------------------
@pytest.mark.parametrize("viewport", SIZES)
def test_w13_code_is_highlighted_with_a_copy_button_and_katex_renders_maths_sanitised(browser, base, me, viewport):
    chat = me.conversations.create(next(p for p in me.personas.list() if p.name == "elion").id, title="Rendering")
    text = ("Code:\n\n```python\ndef greet(name):\n    return 'hi ' + name  # kind\n```\n\n"
            "Inline $e^{i\\pi}+1=0$ and a price of $5 and $10.\n\n$$\\frac{a}{b}$$\n\n"
            "Hostile: $\\href{javascript:alert(1)}{x}$ and ```<img src=x onerror=alert(1)>```")
    me.send(chat.id, text)
    context, page = new_page(browser, viewport, permissions=["clipboard-read", "clipboard-write"])
    try:
        goto(page, base + f"/#conversation-{chat.id}")
        mine = page.locator(".message.role-user").last
        block = mine.locator(".code-block")
        expect(block).to_have_count(1)
        expect(block.locator("code .hljs-keyword").first).to_have_text("def")  # coloured by class names
        expect(block.locator(".hljs-string").first).to_contain_text("'hi '")
        assert block.locator(".hljs-keyword").first.evaluate("(n) => getComputedStyle(n).color") != \
            block.locator("code").evaluate("(n) => getComputedStyle(n).color")
        copy = block.get_by_role("button", name="Copy code")
        assert copy.get_attribute("title") == "Copy code"
        copy.click()
        expect(block.get_by_role("button", name="Copied")).to_be_visible()
        assert page.evaluate("navigator.clipboard.readText()") == "def greet(name):\n    return 'hi ' + name  # kind"
        # Maths: MathML from KaTeX, inline and displayed; prices stay text.
        body = mine.locator(".body")
        expect(body.locator(".katex math")).to_have_count(3)
        expect(body.locator(".katex math msup").first).to_be_attached()
        expect(body.locator(".math-block math mfrac")).to_have_count(1)  # displayed (by the stylesheet)
        expect(body).to_contain_text("a price of $5 and $10.")
        # Sanitised as ever: no script ran, no javascript: link, no image from the code span.
        assert page.evaluate("typeof window.alert") == "function"
        assert body.locator("img, script, [onerror], a[href^='javascript']").count() == 0
        assert all((h or "").startswith(("http", "mailto")) for h in
                   body.locator("a").evaluate_all("(links) => links.map((a) => a.getAttribute('href'))"))
        assert page.script_errors == []
    finally:
        context.close()


# -- W16: voice only where it works ---------------------------------------------------------------------
FAKE_RECOGNITION = """(() => {
  class FakeRecognition extends EventTarget {
    start() {
      window.__dictating = (window.__dictating || 0) + 1;
      setTimeout(() => {
        const result = Object.assign([{ transcript: " hello from my voice" }], { isFinal: true });
        const event = new Event("result");
        event.resultIndex = 0;
        event.results = [result];
        this.dispatchEvent(event);
      }, 50);
    }
    stop() { this.dispatchEvent(new Event("end")); }
  }
  window.SpeechRecognition = FakeRecognition;
  delete window.webkitSpeechRecognition;
})();"""
NO_RECOGNITION = "delete window.SpeechRecognition; delete window.webkitSpeechRecognition;"


@pytest.mark.parametrize("viewport", SIZES)
def test_w16_without_realtime_voice_the_mic_dictates_where_the_browser_can_and_is_absent_where_not(
        browser, base, me, viewport):
    chat = chat_with_messages(me, f"Dictation {viewport['width']}", ["Hello"])
    context, page = new_page(browser, viewport)
    try:
        page.add_init_script(FAKE_RECOGNITION)
        goto(page, base + f"/#conversation-{chat.id}")
        assert page.evaluate("fetch('/api/voice/ability').then((r) => r.json())") == {"realtime": False}
        dictate = page.get_by_role("button", name="Dictate")
        expect(dictate).to_be_visible()
        assert dictate.get_attribute("title") == "Dictate"
        expect(page.locator("#voice-start")).to_be_hidden()  # no realtime provider: no Voice button
        page.locator("#composer-text").fill("Typed first.")
        dictate.click()
        expect(page.locator("#composer-text")).to_have_value("Typed first. hello from my voice")
        page.get_by_role("button", name="Stop dictating").click()
        expect(page.get_by_role("button", name="Dictate")).to_have_attribute("aria-pressed", "false")
        assert page.script_errors == []
    finally:
        context.close()
    context, page = new_page(browser, viewport)
    try:
        page.add_init_script(NO_RECOGNITION)
        goto(page, base + f"/#conversation-{chat.id}")
        expect(page.locator("#composer-text")).to_be_enabled()
        page.wait_for_timeout(300)  # the ability answer has come back
        expect(page.locator("#dictate")).to_have_count(0)  # nothing where the browser cannot
        expect(page.locator("#voice-start")).to_be_hidden()
        assert page.script_errors == []
    finally:
        context.close()


@pytest.mark.parametrize("viewport", SIZES)
def test_w16_with_realtime_voice_the_voice_button_shows(browser, tmp_path, viewport):
    settings = Settings.resolve({"home": str(tmp_path / "home"), "input_token_limit": 32_000,
                                 "openai_api_key": "sk-server-only"}, environ={})
    with Hearth(settings, provider=RecordingProvider()) as hearth, \
            serve_in_thread(create_app(settings, hearth)) as served:
        me = hearth.scope()
        chat = me.conversations.create(me.personas.create("elion", "Elion").id, title="Voice")
        context, page = new_page(browser, viewport)
        try:
            page.add_init_script(FAKE_RECOGNITION)
            goto(page, served + f"/#conversation-{chat.id}")
            expect(page.get_by_role("button", name="Talk by voice")).to_be_visible()
            expect(page.locator("#dictate")).to_have_count(0)  # the real thing instead of dictation
            assert page.script_errors == []
        finally:
            context.close()


# -- W6 again, on the new screens: axe-core at both sizes and in both themes ------------------------------
@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("viewport", SIZES)
def test_w8_w13_w6_axe_finds_no_wcag_21_aa_violation_on_the_new_screens(browser, base, me, viewport, scheme):
    if not AXE.exists():
        pytest.skip("axe-core is not installed (make dev runs npm ci)")
    chat = chat_with_messages(me, f"Axe {scheme} {viewport['width']}",
                              ["Code:\n\n```python\nprint('hi')  # a comment\n```\n\nand $a^2+b^2=c^2$"])
    context, page = new_page(browser, viewport, color_scheme=scheme, bypass_csp=True)
    found = {}

    def check(where):
        violations = axe_violations(page)
        if violations:
            found[where] = violations

    try:
        for view in NAV:
            goto(page, base + (f"/#conversation-{chat.id}" if view == "chat" else f"/#{view}"))
            page.wait_for_timeout(200)
            check(view)
        goto(page, base + f"/#conversation-{chat.id}")
        page.locator("#chat-more-toggle").click()
        check("More")
        page.keyboard.press("Escape")
        page.locator("#details-toggle").click()
        expect(page.locator("#details")).to_be_visible()
        check("Details")
        page.locator("#sheet-close").click()
        page.locator("#messages .message.role-assistant").last.locator(".reply-details-summary").click()
        check("reply Details")
        assert found == {}, found
    finally:
        context.close()
