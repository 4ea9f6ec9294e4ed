"""The web UI in headless Chromium: first paint and readiness of the chat page on a large deployment,
where the time goes, the sidebar search, and typing latency while a reply streams (W4, W5 goals).

    python benchmarks/web_ui.py [--conversations 10000] [--messages 5000] [--runs 7] [--searches 15]
                                [--no-typing]

Builds a deployment in a temporary directory (10,000 conversations of two messages each, five of
them pinned and tagged, and one 5,000-message thread of Markdown-ish text), serves it on 127.0.0.1
with uvicorn, and drives Debian's chromium through Playwright:

* first paint: a fresh page (cold cache) opens the big thread; measured are first contentful paint,
  the frame in which the thread list is first painted and the frame in which the thread's newest
  messages are (``list_painted``, ``messages_painted``; ``both_painted`` is the later of the two),
  and the time until the page says it is ready (thread list, messages, side panel shown and the
  message box usable). Each run also records
  where the time went: DOMContentLoaded (the entry module has run; the app shell's modules load
  after it), the last byte of the last script fetched before ready and how many there were, the
  thread's messages request (start to last byte, and its size; the page asks for it before its
  modules have arrived), and main-thread work in long tasks. The floor is the same
  page on a deployment with one conversation of two messages, measured in the same run.
* sidebar search: words typed into *Find a conversation*, timed from the input event to the frame
  in which the matching list (each thread with its message's snippet) is painted, 200 ms of it the
  filter's pause after typing; also the search request alone, over HTTP from this script. Three
  queries: a rare word (in one thread), a common word (in every thread, so the index answers
  10,000 threads and the page shows the newest 50) and a word's start. The floor is the same on
  the one-thread deployment.
* typing latency: 60 keys typed into the message box, each timed from the key event to its
  ``input`` event (the main thread's queueing delay) and to the next frame the page paints, while a
  reply streams 6,000 small pieces in paragraphs of 60 (Markdown drawn as it grows); the peer is the
  same typing with nothing streaming, in the same page.

Prints one JSON object; the goal is first paint and readiness under one second on the large
deployment.
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import uvicorn

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from common import machine, summary  # noqa: E402

from hearth import Hearth, Settings
from hearth.providers.base import StreamEvent, Usage  # noqa: E402
from hearth.records import ledger
from hearth.server import create_app  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run", "--headless"]
TEXT = ("*smiles* That sounds **lovely**. We could walk to the harbour after lunch, then:\n\n"
        "- tea at the kiosk\n- the lighthouse\n- home before dark\n\nWhat do you think?")


class StreamingProvider:
    """Streams many small pieces quickly, like a fast model."""

    name = "bench"
    model = "bench"
    pieces = 6000

    def stream(self, request):
        for i in range(self.pieces):
            if i % 10 == 0:
                time.sleep(0.004)
            # Paragraphs of 60 pieces, as a long reply has them.
            yield StreamEvent("text", text=("\n\n" if i % 60 == 59 else "word " if i % 12 else "**bold** "))
        yield StreamEvent("usage", usage=Usage(10, self.pieces))


PLACES = ("harbour", "market", "lighthouse", "orchard", "station", "library", "bakery", "river")
TOPICS = ("the weather", "an old friend", "the garden", "a book", "dinner plans", "the holidays", "music")
SEARCHES = {"rare": "zephyrquill", "common": "harbour", "prefix": "lightho"}


def build(home: Path, conversations: int, messages: int) -> tuple[Hearth, int]:
    settings = Settings.resolve({"home": str(home), "input_token_limit": 32_000}, environ={})
    hearth = Hearth(settings, provider=StreamingProvider())
    me = hearth.scope()
    persona = me.personas.create("elion", "Elion")
    # Every thread has an exchange (so the keyword index holds 10,000 threads' turns); "harbour" is
    # in every one, "zephyrquill" in one; five threads are pinned and tagged.
    with hearth.store.write() as conn:
        for i in range(conversations - 1):
            c = me.conversations.create(persona.id, title=f"Conversation {i}")
            place, topic = PLACES[i % len(PLACES)], TOPICS[i % len(TOPICS)]
            rare = " We heard the zephyrquill." if i == conversations // 2 else ""
            ledger.append_message(conn, user_id=me.user_id, conversation_id=c.id, role="user",
                                  content=f"Shall we meet at the harbour, then walk to the {place}?{rare}")
            ledger.append_message(conn, user_id=me.user_id, conversation_id=c.id, role="assistant",
                                  content=f"*smiles* Yes, and we can talk about {topic} on the way.")
            if i >= conversations - 6:
                me.conversations.pin(c.id)
                me.conversations.set_tags(c.id, ["walks", f"week-{i % 3}"])
        big = me.conversations.create(persona.id, title="The long one")
    with hearth.store.write() as conn:
        for i in range(messages):
            role = "user" if i % 2 == 0 else "assistant"
            ledger.append_message(conn, user_id=me.user_id, conversation_id=big.id, role=role,
                                  content=f"{i}: {TEXT}" if role == "assistant" else f"Message {i}, *waves*")
    return hearth, big.id


class Server:
    def __init__(self, hearth: Hearth):
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        sock.close()
        self.server = uvicorn.Server(uvicorn.Config(create_app(hearth.settings, hearth), host="127.0.0.1",
                                                    port=self.port, log_level="warning", lifespan="off"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        while not self.server.started:
            time.sleep(0.02)
        return f"http://127.0.0.1:{self.port}"

    def __exit__(self, *exc) -> None:
        self.server.should_exit = True
        self.thread.join(5)


PHASES = """() => {
  const nav = performance.getEntriesByType('navigation')[0];
  const list = window.__listPaint ?? -1;
  const messages = window.__messagesPaint ?? -1;
  const thread = performance.getEntriesByType('resource').find((r) => r.name.includes('/messages?newest='));
  const long = (window.__long || []).filter(([start]) => start <= window.__readyAt);
  const scripts = performance.getEntriesByType('resource')
    .filter((r) => /\/(static|vendor)\/[^?]*\.js$/.test(r.name) && r.startTime <= window.__readyAt);
  return {
    fcp: performance.getEntriesByName('first-contentful-paint')[0]?.startTime ?? -1,
    drawn: window.__drawnAt ?? -1,
    list_painted: list,
    messages_painted: messages,
    both_painted: list < 0 || messages < 0 ? -1 : Math.max(list, messages),
    ready_in_page: window.__readyAt ?? -1,
    dom_content_loaded: nav.domContentLoadedEventEnd,
    scripts_loaded: scripts.reduce((end, r) => Math.max(end, r.responseEnd), 0),
    scripts_before_ready: scripts.length,
    thread_request: thread ? thread.responseEnd - thread.startTime : -1,
    thread_request_end: thread ? thread.responseEnd : -1,
    thread_bytes: thread ? thread.encodedBodySize : 0,
    long_tasks: long.reduce((sum, [, d]) => sum + d, 0),
    longest_task: long.reduce((max, [, d]) => Math.max(max, d), 0),
    drawn_messages: document.querySelectorAll('#messages .message').length,
  };
}"""

# Installed before the page's own scripts: long tasks, the moment the first bubbles are in the
# list, the frames in which the thread list and the bubbles are first painted (the animation frame
# after they are in the document: its paint follows), and the moment the page says it is ready.
OBSERVE = """
window.__long = [];
new PerformanceObserver((list) => {
  for (const e of list.getEntries()) window.__long.push([e.startTime, e.duration]);
}).observe({ type: 'longtask', buffered: true });
document.addEventListener('DOMContentLoaded', () => {
  new MutationObserver((_, observer) => {
    if (document.querySelector('#messages .message') && window.__drawnAt === undefined) {
      window.__drawnAt = performance.now();
      requestAnimationFrame((t) => { window.__messagesPaint = t; });
    }
    if (document.querySelector('#threads .conversation') && window.__listAt === undefined) {
      window.__listAt = performance.now();
      requestAnimationFrame((t) => { window.__listPaint = t; });
    }
    if (document.body.dataset.ready === 'true') {
      window.__readyAt = performance.now();
      observer.disconnect();
    }
  }).observe(document.body, { subtree: true, childList: true, attributes: true, attributeFilter: ['data-ready'] });
});
"""


def merge(results: list[dict]) -> dict:
    """One summary from single runs of ``first_paint`` (their raw samples are kept in ``samples``)."""
    out: dict = {}
    for key in results[0]["samples"]:
        values = [v for r in results for v in r["samples"][key]]
        out[key] = summary(values) if key in TIMED else round(statistics.median(values), 1)
    return out


TIMED = ("first_contentful_paint", "messages_drawn", "list_painted", "messages_painted", "both_painted", "ready",
         "ready_wall")


def first_paint(browser, url: str, runs: int) -> dict:
    """Times from the start of navigation as the page's clock sees them; ``ready_wall`` is the same
    moment seen from this script (it adds the driver's polling, which a loaded machine stretches)."""
    fcp, drawn, ready, wall = [], [], [], []
    phases: dict[str, list[float]] = {}
    painted: dict[str, list[float]] = {}
    for _ in range(runs):
        context = browser.new_context(viewport={"width": 1280, "height": 800})
        context.add_init_script(OBSERVE)
        page = context.new_page()
        start = time.perf_counter()
        page.goto(url)
        page.wait_for_selector("body[data-ready=true]", timeout=60_000)
        wall.append((time.perf_counter() - start) * 1000)
        seen = page.evaluate(PHASES)
        fcp.append(seen.pop("fcp"))
        drawn.append(seen.pop("drawn"))
        ready.append(seen.pop("ready_in_page"))
        for key in ("list_painted", "messages_painted", "both_painted"):
            painted.setdefault(key, []).append(seen.pop(key))
        # What the page does once the thread's messages have arrived (drawing them, the list, the panel).
        seen["after_thread_data"] = ready[-1] - seen["thread_request_end"]
        for key, value in seen.items():
            phases.setdefault(key, []).append(value)
        context.close()
    samples = {"first_contentful_paint": fcp, "messages_drawn": drawn, **painted, "ready": ready, "ready_wall": wall,
               **phases}
    return {"samples": samples}


SEARCH_PROBE = """async (query) => {
  const box = document.getElementById('filter-text');
  const heading = document.getElementById('conversation-list-heading');
  box.value = '';
  box.dispatchEvent(new Event('input'));
  await new Promise((resolve) => {
    const wait = () => heading.textContent === 'Conversations' ? resolve() : setTimeout(wait, 20);
    wait();
  });
  const list = document.getElementById('conversation-list');
  const shown = () => heading.textContent === 'Matching conversations'
    && list.querySelector('.conversation-snippet mark, li.empty');
  const start = performance.now();
  box.value = query;
  box.dispatchEvent(new Event('input'));
  return await new Promise((resolve) => {
    new MutationObserver((_, observer) => {
      if (!shown()) return;
      observer.disconnect();
      requestAnimationFrame((t) => resolve({ painted: t - start, rows: list.querySelectorAll('.conversation').length }));
    }).observe(list, { childList: true, subtree: true });
  });
}"""


def sidebar_search(browser, url: str, runs: int) -> dict:
    """Each query typed ``runs`` times into the sidebar filter of one open page; the time from the
    input event to the painted matching list (the filter waits 200 ms after typing stops)."""
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    page.goto(url)
    page.wait_for_selector("body[data-ready=true]", timeout=60_000)
    out: dict = {}
    for name, query in SEARCHES.items():
        times, rows = [], 0
        for _ in range(runs):
            seen = page.evaluate(SEARCH_PROBE, query)
            times.append(seen["painted"])
            rows = seen["rows"]
        out[name] = {**summary(times), "rows": rows}
    context.close()
    return out


def search_requests(base: str, runs: int) -> dict:
    """The list request of each query alone (its first page of 50 with snippets), over HTTP."""
    import httpx

    out: dict = {}
    with httpx.Client(base_url=base, timeout=60) as client:
        for name, query in SEARCHES.items():
            client.get("/api/conversations", params={"q": query, "limit": 50})  # warm
            times = []
            for _ in range(runs):
                t0 = time.perf_counter()
                found = client.get("/api/conversations", params={"q": query, "limit": 50})
                times.append((time.perf_counter() - t0) * 1000)
                found.raise_for_status()
            out[name] = {**summary(times), "rows": len(found.json())}
    return out


TYPE_PROBE = """() => {
  window.__input = [];
  window.__paint = [];
  if (window.__probing) return;
  window.__probing = true;
  const box = document.getElementById('composer-text');
  let down = 0;
  box.addEventListener('keydown', (e) => {
    down = e.timeStamp;
    requestAnimationFrame(() => requestAnimationFrame(() => window.__paint.push(performance.now() - e.timeStamp)));
  });
  box.addEventListener('input', () => { if (down) window.__input.push(performance.now() - down); down = 0; });
}"""


def typing(page, keys: int, streaming: bool) -> dict:
    """Keys typed into the message box; while streaming, the box stays usable (Send waits)."""
    box = page.locator("#composer-text")
    if streaming:
        box.fill("Tell me a long story")
        page.click("#send")
        page.wait_for_selector(".message.streaming .body strong", timeout=30_000)
    page.evaluate(TYPE_PROBE)
    box.focus()
    typed = 0
    for i in range(keys):
        page.keyboard.type("ab"[i % 2], delay=25)
        typed += 1
        if streaming and not page.locator(".message.streaming").count():
            break
    page.wait_for_timeout(100)
    still = streaming and page.locator(".message.streaming").count() > 0
    out = {"input_event": summary(page.evaluate("window.__input")), "next_paint": summary(page.evaluate("window.__paint")),
           "keys": typed, "still_streaming_at_end": still}
    box.fill("")
    return out


def typing_pair(browser, url: str, out: dict) -> None:
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    page.goto(url)
    page.wait_for_selector("body[data-ready=true]")
    out["typing_idle_peer"] = typing(page, 60, False)
    out["typing_while_streaming"] = typing(page, 60, True)
    page.wait_for_selector(".message.streaming", state="detached", timeout=120_000)
    for key in ("input_event", "next_paint"):
        out[f"typing_{key}_ratio"] = round(out["typing_while_streaming"][key]["median_ms"]
                                           / max(out["typing_idle_peer"][key]["median_ms"], 0.001), 2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--conversations", type=int, default=10_000)
    parser.add_argument("--messages", type=int, default=5_000)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--searches", type=int, default=15, help="Times each sidebar query is typed and asked")
    parser.add_argument("--no-typing", action="store_true", help="Leave out the typing-while-streaming part")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    out: dict = {"machine": machine(), "conversations": args.conversations, "messages": args.messages}
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        big, big_id = build(Path(tmp) / "big", args.conversations, args.messages)
        small, small_id = build(Path(tmp) / "small", 1, 2)
        out["build_s"] = round(time.perf_counter() - t0, 1)
        with sync_playwright() as p, Server(big) as big_url, Server(small) as small_url:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
            first_paint(browser, f"{small_url}/#conversation-{small_id}", 1)  # warm the browser
            # Large and floor runs alternate, so the shared machine's drifting load falls on both alike.
            large, floor = [], []
            for _ in range(args.runs):
                large.append(first_paint(browser, f"{big_url}/#conversation-{big_id}", 1))
                floor.append(first_paint(browser, f"{small_url}/#conversation-{small_id}", 1))
            out["first_paint_large"] = merge(large)
            out["first_paint_floor_small"] = merge(floor)
            ratio = out["first_paint_large"]["ready"]["median_ms"] / out["first_paint_floor_small"]["ready"]["median_ms"]
            out["first_paint_ready_ratio"] = round(ratio, 2)
            both = out["first_paint_large"]["both_painted"]["median_ms"]
            out["list_and_thread_painted_median_ms"] = both
            out["list_and_thread_painted_goal_met"] = both <= 1000
            out["sidebar_search_large"] = sidebar_search(browser, f"{big_url}/#conversation-{big_id}", args.searches)
            out["sidebar_search_floor_small"] = sidebar_search(browser, f"{small_url}/#conversation-{small_id}",
                                                               args.searches)
            out["search_request_large"] = search_requests(big_url, args.searches * 2)
            out["search_request_floor_small"] = search_requests(small_url, args.searches * 2)
            if not args.no_typing:
                typing_pair(browser, f"{big_url}/#conversation-{big_id}", out)
            browser.close()
        big.close()
        small.close()
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
