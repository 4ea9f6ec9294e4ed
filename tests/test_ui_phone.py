"""A phone that reaches everything, and words for people, in headless Chromium (W5, W6, U1, E8, A3).

At 390 × 844: every panel is reached through the folded section list (by pointer and by keyboard)
with its heading in view; the chat header is one line and More unfolds the rest; after Stop the
stopped reply, its notice and Undo are in view above the composer, as are the last
reply's buttons. At 1366 × 860: the timeline and the recall panel show no Markdown marks, no
internal event names or origins and no scores until "Show details" is on (kept over a reload).
axe-core finds nothing in the new states. Screenshots go to build/test-artifacts/.
"""
# ruff: noqa: F811  (the shared fixtures are imported from test_ui and named as parameters)

from __future__ import annotations

import json
import re

import pytest

from tests.test_ui import (  # noqa: F401  (shared fixtures)
    AXE,
    UI_TIMEOUT_MS,
    axe_violations,
    base,
    browser,
    chat_with_messages,
    elion,
    eventually,
    expect,
    goto,
    me,
    scripted,
    shot,
    site,
)

pytestmark = pytest.mark.ui

PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1366, "height": 860}
SIZES = [pytest.param(DESKTOP, id="desktop"), pytest.param(PHONE, id="phone")]  # the two sizes W8-W16 check
PANELS = [("Memory", "memory"), ("Personas", "personas"), ("What I know", "layers"), ("Recall", "recall"),
          ("Timeline", "timeline"), ("Tools", "tools"), ("Settings", "settings"), ("Accounts", "accounts"),
          ("Chat", "chat")]
# An internal dotted name (context.request_size, span.opened, tool:search_archive...).
DOTTED = re.compile(r"\b[a-z]+(?:_[a-z]+)*[.:][a-z]+(?:_[a-z]+)*\b")


def new_page(browser, viewport, **options):
    phone = viewport["width"] < 900
    context = browser.new_context(viewport=viewport, is_mobile=phone, has_touch=phone, **options)
    page = context.new_page()
    page.set_default_timeout(UI_TIMEOUT_MS)
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.script_errors = errors
    return context, page


def in_view(page, locator) -> bool:
    box = locator.bounding_box()
    size = page.viewport_size
    return (box is not None and box["x"] >= 0 and box["y"] >= 0
            and box["x"] + box["width"] <= size["width"] + 0.5 and box["y"] + box["height"] <= size["height"] + 0.5)


def heading_of(view):
    return f"#view-{view} h1" if view != "chat" else "#chat-title"


# -- W5: every panel reachable on a phone ---------------------------------------------------------
def test_w5_w6_every_panel_is_reached_on_a_phone_through_the_section_list_by_pointer_and_keyboard(browser, base, me):
    chat = chat_with_messages(me, "Reachable", ["Hello from a phone"])
    context, page = new_page(browser, PHONE)
    try:
        goto(page, base + f"/#conversation-{chat.id}")
        toggle = page.get_by_role("button", name="Sections: Chat")
        expect(toggle).to_have_attribute("aria-expanded", "false")
        assert in_view(page, toggle)
        # Folded: the links take no room and no focus; nothing scrolls sideways.
        expect(page.locator("#main-nav-list")).to_be_hidden()
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1")
        for number, (name, view) in enumerate(PANELS):
            page.locator("#nav-toggle").click()
            expect(page.locator("#nav-toggle")).to_have_attribute("aria-expanded", "true")
            links = page.locator("#main-nav-list a")
            expect(links).to_have_count(len(PANELS))
            for link in links.all():
                assert in_view(page, link), link.text_content()  # every section is on screen
            if number == 0:
                shot(page, "w5-390-sections")
            page.get_by_role("link", name=name, exact=True).click()
            expect(page.locator("#main-nav-list")).to_be_hidden()
            heading = page.locator(heading_of(view))
            expect(heading).to_be_visible()
            assert in_view(page, heading), view
            expect(page.locator("#nav-current")).to_have_text(name)
        # By keyboard: Enter opens the list on the current section, Tab walks it, Enter goes.
        page.locator("#nav-toggle").focus()
        page.keyboard.press("Enter")
        expect(page.locator('#main-nav-list a[data-view="chat"]')).to_be_focused()
        for _ in range(len(PANELS)):
            page.keyboard.press("Tab")
            if page.evaluate("document.activeElement.dataset.view") == "tools":
                break
        expect(page.locator('#main-nav-list a[data-view="tools"]')).to_be_focused()
        page.keyboard.press("Enter")
        expect(page.locator("#tools-heading")).to_be_focused()
        expect(page.locator("#nav-current")).to_have_text("Tools")
        # Escape folds the list and gives the focus back to its button.
        page.locator("#nav-toggle").click()
        expect(page.locator('#main-nav-list a[data-view="tools"]')).to_be_focused()
        page.keyboard.press("Escape")
        expect(page.locator("#main-nav-list")).to_be_hidden()
        expect(page.locator("#nav-toggle")).to_be_focused()
        # Tabbing out of the list folds it too.
        page.keyboard.press("Enter")
        for _ in range(len(PANELS)):
            page.keyboard.press("Tab")
        expect(page.locator("#main-nav-list")).to_be_hidden()
        assert page.script_errors == []
    finally:
        context.close()
    # A wide window keeps the links in the bar, and no section button.
    context, page = new_page(browser, DESKTOP)
    try:
        goto(page, base + "/#memory")
        expect(page.locator("#nav-toggle")).to_be_hidden()
        expect(page.locator('#main-nav-list a[data-view="tools"]')).to_be_visible()
    finally:
        context.close()


# -- W5: the chat header is one line ----------------------------------------------------------------
def one_row(page):
    """(the header's content height, the tallest visible child, the rows its visible children take)."""
    return page.evaluate("""() => {
        const header = document.querySelector('section[aria-labelledby=chat-title] > .chat-header');
        const style = getComputedStyle(header);
        const inner = header.clientHeight - parseFloat(style.paddingTop) - parseFloat(style.paddingBottom);
        const boxes = [...header.children].filter((c) => c.getClientRects().length).map((c) => c.getBoundingClientRect());
        const tallest = Math.max(...boxes.map((b) => b.height));
        const top = Math.min(...boxes.map((b) => b.top));
        const rows = new Set(boxes.map((b) => Math.round((b.top - top) / tallest)));
        return [inner, tallest, rows.size];
    }""")


def test_w5_the_chat_header_is_one_line_on_a_phone_and_more_unfolds_the_rest(browser, base, me):
    chat = chat_with_messages(me, "A conversation title long enough to need more than one line on a phone",
                              ["Hello"])
    me.conversations.set_shielded(chat.id, True)
    context, page = new_page(browser, PHONE)
    try:
        goto(page, base + f"/#conversation-{chat.id}")
        expect(page.locator("#estimate-text")).to_have_text(re.compile(r"^2 messages"))
        expect(page.locator("#context-meter")).to_be_visible(visible=False)
        inner, tallest, rows = one_row(page)
        assert rows == 1 and abs(inner - tallest) <= 1, (inner, tallest, rows)  # one line box
        title = page.locator("#chat-title")
        assert page.evaluate("(t) => t.scrollWidth > t.clientWidth", title.element_handle())  # cut with …
        for name in ("Details", "More about this conversation"):
            assert in_view(page, page.get_by_role("button", name=name, exact=True))
        expect(page.get_by_role("button", name="Rename")).to_be_hidden()
        shot(page, "w5-390-chat-header")
        more = page.get_by_role("button", name="More about this conversation")
        more.click()
        expect(more).to_have_attribute("aria-expanded", "true")
        for name in ("Rename", "Branch / Fresh Chat", "Release shield", "End conversation", "Move to trash"):
            expect(page.get_by_role("button", name=name, exact=True)).to_be_visible()
            assert in_view(page, page.get_by_role("button", name=name, exact=True)), name
        expect(page.locator("#chat-meta")).to_contain_text("Shielded from automatic continuity")
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1")
        shot(page, "w5-390-chat-more")
        # Escape folds it again, back on More; a rename from the unfolded header works.
        page.get_by_role("button", name="Rename").focus()
        page.keyboard.press("Escape")
        expect(more).to_have_attribute("aria-expanded", "false")
        expect(more).to_be_focused()
        more.click()
        page.get_by_role("button", name="Rename").click()
        expect(page.locator("#rename-title")).to_be_focused()
        page.keyboard.press("Escape")  # cancels the rename, the header stays unfolded
        expect(more).to_have_attribute("aria-expanded", "true")
        # The figures (estimate, context meter) are in the Details sheet (W8), reached from the header.
        page.get_by_role("button", name="Details", exact=True).click()
        expect(page.locator("#estimate")).to_be_visible()
        page.get_by_role("button", name="Close details").click()
        assert page.script_errors == []
    finally:
        context.close()


# -- W5, W2: after Stop the choice is in view ---------------------------------------------------------
def above_composer(page, locator) -> bool:
    box = locator.bounding_box()
    composer = page.locator("#composer").bounding_box()
    messages = page.locator("#messages").bounding_box()
    return (box is not None and box["y"] >= messages["y"] - 0.5
            and box["y"] + box["height"] <= min(composer["y"], messages["y"] + messages["height"]) + 0.5)


def test_w5_w2_after_stop_the_stopped_reply_and_its_undo_are_in_view_above_the_composer(browser, site, me):
    base, _hearth, provider = site
    chat = chat_with_messages(me, "Stop on a phone", [f"Line {i} of a long enough thread" for i in range(8)])
    context, page = new_page(browser, PHONE)
    try:
        goto(page, base + f"/#conversation-{chat.id}")
        last_actions = page.locator(".message.role-assistant").last.locator(".turn-actions")
        expect(last_actions.get_by_role("button", name="Regenerate")).to_be_visible()
        eventually(lambda: above_composer(page, last_actions))  # the last reply's buttons: never under the composer
        long_story = [f"Paragraph {i} of a long story, told slowly.\n\n" for i in range(30)]
        provider.replies.append(scripted(*long_story, pause=0.15))
        page.fill("#composer-text", "Tell me a long story")
        page.click("#send")
        expect(page.locator(".message.streaming .body")).to_contain_text("Paragraph 6")
        page.get_by_role("button", name="Stop").click()
        # What arrived is kept at once (W12), with Undo focused beside the notice.
        undo = page.get_by_role("button", name="Undo")
        expect(undo).to_be_focused()
        expect(page.locator(".message.role-assistant.partial")).to_have_count(1)
        # Once the page settles (the composer's buttons change back), each is in view.
        for control in (undo, page.locator(".message.role-assistant").last.locator(".stopped p")):
            eventually(lambda control=control: above_composer(page, control))
        shot(page, "w5-390-stopped")
        expect(page.locator(".message.role-assistant").last.get_by_role("button", name="Regenerate")).to_be_visible()
        eventually(lambda: above_composer(page, page.locator(".message.role-assistant").last.locator(".turn-actions")))
        # A reply that ends normally: its buttons, drawn after it, are in view too.
        provider.replies.append(scripted(*long_story[:12]))
        page.fill("#composer-text", "And another one")
        page.click("#send")
        expect(page.locator(".message.streaming")).to_have_count(0)
        last_actions = page.locator(".message.role-assistant").last.locator(".turn-actions")
        expect(last_actions.get_by_role("button", name="Regenerate")).to_be_visible()
        eventually(lambda: above_composer(page, last_actions))
        assert page.script_errors == []
    finally:
        context.close()


# -- E8, A3: words for people on the timeline and in recall ---------------------------------------------
@pytest.fixture
def marked_threads(me):
    older = chat_with_messages(me, "Harbour notes", ["The **lighthouse keeper** waved from the pier",
                                                     "# Plans\n\n- paint the *stairs*\n- fix the lamp"])
    now = chat_with_messages(me, "Today at the harbour", ["Good morning"])
    me.send(now.id, "Do you remember the **lighthouse keeper**?")
    return older, now


def visible_text(page, selector):
    return page.locator(selector).evaluate("(n) => n.innerText")


def assert_words_only(text, kinds):
    assert "**" not in text and not re.search(r"(^|\n)\s*#{1,6}\s", text), text
    for kind in kinds:
        assert kind not in text, kind
    assert not DOTTED.search(text), DOTTED.search(text)


def test_e8_a3_w6_timeline_and_recall_speak_words_until_details_are_shown(browser, base, me, marked_threads):
    context, page = new_page(browser, DESKTOP, bypass_csp=True)  # (axe is injected as a script)
    try:
        page.add_init_script("localStorage.removeItem('hearth.showDetails')")
        goto(page, base + "/#timeline")
        timeline = page.locator("#timeline-list")
        expect(timeline.locator(".message-text", has_text="The lighthouse keeper waved from the pier").first).to_be_visible()
        kinds = set(page.locator("#timeline-list .event[data-kind]").evaluate_all("(ns) => ns.map((n) => n.dataset.kind)"))
        assert {"context.request_size", "context.usage", "span.opened"} <= kinds
        text = visible_text(page, "#timeline-list")
        assert_words_only(text, {k for k in kinds if "." in k})
        assert "Request size" in text and "Model usage" in text and "Activity started" in text
        assert "paint the stairs" in text  # the list item's words, without its marks
        expect(timeline.locator(".event-kind")).to_have_count(0)
        shot(page, "w5-1366-timeline-words")
        axe_clean(page, "timeline words")

        # Details bring back the internal names and the raw figures, and stay on over a reload.
        page.get_by_label("Show details", exact=True).check()
        usage = timeline.locator('.event[data-kind="context.usage"]').last
        expect(usage.locator(".event-kind")).to_have_text("context.usage")
        usage.locator("summary").click()
        expect(usage.locator(".pair-key")).to_contain_text(["input", "output"])
        shot(page, "w5-1366-timeline-details")
        axe_clean(page, "timeline details")

        # Recall: the same preference, already on after the page is reloaded there.
        goto(page, base + "/#recall")
        expect(page.get_by_label("Show details (scores, query variants, filters)")).to_be_checked()
        page.get_by_label("Show details (scores, query variants, filters)").uncheck()
        page.fill("#search-query", "lighthouse keeper")
        page.get_by_role("button", name="Search", exact=True).click()
        expect(page.locator("#search-status")).to_contain_text("reliability")
        expect(page.locator("#search-results .result-text").first).to_be_visible()
        entries = page.locator("#searchlog-list .log-entry")
        expect(entries.first).to_contain_text("Your search")
        expect(page.locator("#searchlog-list")).to_contain_text("Automatic: your other conversations")
        entries.filter(has_text="Do you remember").first.locator("button").click()
        expect(page.locator("#searchlog-detail dt")).to_contain_text(["Origin", "Results", "Candidates", "Reliability"])
        words = "\n".join(visible_text(page, s) for s in ("#search-results", "#searchlog-list", "#searchlog-detail"))
        assert_words_only(words, {"keyword_recall", "archive_recall", "thread_recall"})
        assert "lighthouse keeper" in words and "Do you remember the lighthouse keeper?" in words
        expect(page.locator("#view-recall .score")).to_have_count(0)
        assert "fused" not in words and "Variants" not in words
        shot(page, "w5-1366-recall-words")
        axe_clean(page, "recall words")

        page.get_by_label("Show details (scores, query variants, filters)").check()
        expect(page.locator('#search-results .score[data-signal="fused"]').first).to_be_visible()
        expect(page.locator("#searchlog-list")).to_contain_text("keyword_recall")
        expect(page.locator("#searchlog-detail")).to_contain_text("Variants")
        shot(page, "w5-1366-recall-details")
        axe_clean(page, "recall details")
        assert page.script_errors == []
    finally:
        context.close()


def axe_clean(page, where):
    if not AXE.exists():
        return  # the axe test below says why it is skipped
    violations = axe_violations(page)
    assert violations == [], json.dumps({where: violations}, indent=1)


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_w6_axe_finds_nothing_in_the_phone_section_list_the_unfolded_header_timeline_and_recall(
        browser, base, me, scheme, marked_threads):
    if not AXE.exists():
        pytest.skip("axe-core is not installed (make dev runs npm ci)")
    _older, now = marked_threads
    context, page = new_page(browser, PHONE, color_scheme=scheme, bypass_csp=True)
    try:
        goto(page, base + f"/#conversation-{now.id}")
        axe_clean(page, "chat")
        page.locator("#nav-toggle").click()
        axe_clean(page, "section list")
        page.keyboard.press("Escape")
        page.get_by_role("button", name="More about this conversation").click()
        expect(page.get_by_role("button", name="Rename")).to_be_visible()
        axe_clean(page, "unfolded header")
        for view in ("timeline", "recall"):
            goto(page, base + f"/#{view}")
            page.wait_for_timeout(150)
            axe_clean(page, view)
            shot(page, f"w5-390-{view}-{scheme}")
    finally:
        context.close()
