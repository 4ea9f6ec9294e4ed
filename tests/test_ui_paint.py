"""The chat page's first paint in headless Chromium: what it fetches before it is ready (W4).

The 10,000-thread list and the 5,000-message thread painted within a second is a benchmark goal
(benchmarks/web_ui.py, docs/benchmarks.md); what can be proven deterministically is here: the page
runs only the chat's modules before it is ready, each named ahead in the page, the other panels'
modules fetched once it is idle; and every read of the first screen is asked for once, the reads the
entry asks ahead being the very ones the modules take.
"""
# ruff: noqa: F811  (the shared fixtures are imported from test_ui and named as parameters)

from __future__ import annotations

import re

import httpx
import pytest

from hearth.server import scripts, vendor
from tests.test_ui import base, browser, chat_with_messages, expect, goto, me, site  # noqa: F401
from tests.test_ui_phone import DESKTOP, new_page

pytestmark = pytest.mark.ui

# Installed before the page's scripts: what had arrived the moment the page said it was ready.
AT_READY = """
document.addEventListener('DOMContentLoaded', () => {
  new MutationObserver((_, observer) => {
    if (document.body.dataset.ready !== 'true') return;
    observer.disconnect();
    window.__atReady = performance.getEntriesByType('resource').map((r) => {
      const url = new URL(r.name);
      return url.pathname + url.search;
    });
  }).observe(document.body, { attributes: true, attributeFilter: ['data-ready'] });
});
"""
PANELS = {f"/static/{name}.js" for name in ("memory", "personas", "layers", "recall", "timeline", "tools", "imports",
                                              "backups", "settings", "admin", "welcome")}


def test_w4_the_first_paint_runs_only_the_chat_modules_and_asks_each_read_once(browser, base, me):
    chat = chat_with_messages(me, "Painted", ["Hello there", "And again"])
    first = scripts.first_paint()
    # The page names exactly the first paint's modules ahead, the vendor files markdown.js imports
    # among them; the panels are not among them.
    assert re.findall(r'<link rel="modulepreload" href="([^"]+)">', httpx.get(base + "/").text) == first
    assert [m for m in first if m.startswith("/vendor/")] == [f"/vendor/{name}" for name in vendor.PRELOAD]
    assert PANELS <= set(scripts.all_modules()) and not PANELS & set(first)

    context, page = new_page(browser, DESKTOP)
    context.add_init_script(AT_READY)
    asked: list[str] = []
    page.on("request", lambda r: asked.append(r.url.split("/", 3)[3]) if r.method == "GET" else None)
    try:
        goto(page, base + f"/#conversation-{chat.id}")
        expect(page.locator("#messages .message")).to_have_count(4)
        # Every script had arrived (and run) when the page said it was ready.
        modules = {path for path in page.evaluate("window.__atReady") if path.endswith(".js")}
        assert modules == set(first) | {"/static/theme.js"}, modules ^ (set(first) | {"/static/theme.js"})
        # Once the page is idle, the other panels' modules are fetched ahead (not run).
        page.wait_for_function("""(panels) => {
            const seen = new Set(performance.getEntriesByType('resource').map((r) => new URL(r.name).pathname));
            return panels.every((p) => seen.has(p));
        }""", arg=sorted(PANELS | {"/static/labels.js"}))
        reads = [f"/{path}" for path in asked if path.startswith("api/")]
        assert len(reads) == len(set(reads)), sorted(reads)  # nothing asked twice
        thread = f"/api/conversations/{chat.id}"
        for path in (thread, f"{thread}/messages?newest=150", f"{thread}/request-size", f"{thread}/snapshot",
                     "/api/conversations?loose=true&pinned=false&limit=50", "/api/conversations?pinned=true&limit=50",
                     "/api/folders", "/api/personas?include_archived=true", "/api/auth/me", "/api/voice/ability"):
            assert path in reads, (path, sorted(reads))
        # The lists and the thread's messages were each read by one request (an early read the
        # modules did not take would have made them ask again, by another address).
        assert len([r for r in reads if r.startswith("/api/conversations?")]) == 2, sorted(reads)
        assert len([r for r in reads if "/messages" in r]) == 1, sorted(reads)
        expect(page.locator("#view-memory")).to_be_hidden()
        # A panel opened for the first time runs its module then, and works as before.
        page.locator('.main-nav a[data-view="settings"]').click()
        expect(page.locator("#settings-heading")).to_be_focused()
        page.locator('.main-nav a[data-view="memory"]').click()
        expect(page.locator("#memory-heading")).to_be_focused()
        expect(page.locator("#view-settings")).to_be_hidden()
        page.locator('.main-nav a[data-view="chat"]').click()
        expect(page.locator("#messages .message")).to_have_count(4)
        assert page.script_errors == []
    finally:
        context.close()
