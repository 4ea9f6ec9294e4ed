"""The web UI in headless Chromium: first paint of the chat page on a large deployment, and typing
latency while a reply streams (W4, W5 speed goals).

    python benchmarks/web_ui.py [--conversations 10000] [--messages 5000] [--runs 7]

Builds a deployment in a temporary directory (10,000 conversations and one 5,000-message thread
of Markdown-ish text), serves it on 127.0.0.1 with uvicorn, and drives Debian's chromium through
Playwright:

* first paint: a fresh page opens the big thread; measured are first contentful paint and the
  time until the page says it is ready (thread list, messages and side panel shown). The floor is
  the same page on a deployment with one conversation of two messages, measured in the same run.
* typing latency: 60 keys typed into the message box, each timed from the key event to the next
  frame the page paints, while a reply streams 6,000 small pieces (Markdown re-rendered as it
  grows); the peer is the same typing with nothing streaming.

Prints one JSON object; the goal is first paint under one second on the large deployment.
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path

import uvicorn

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from common import machine, summary  # noqa: E402

from hearth import (  # noqa: E402
    Hearth,
    Settings,
    ledger,  # noqa: E402
)
from hearth.providers.base import StreamEvent, Usage  # noqa: E402
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
            yield StreamEvent("text", text=("word " if i % 12 else "**bold** "))
        yield StreamEvent("usage", usage=Usage(10, self.pieces))


def build(home: Path, conversations: int, messages: int) -> tuple[Hearth, int]:
    settings = Settings.resolve({"home": str(home), "input_token_limit": 32_000}, environ={})
    hearth = Hearth(settings, provider=StreamingProvider())
    me = hearth.scope()
    persona = me.personas.create("elion", "Elion")
    with me.store.write():
        for i in range(conversations - 1):
            me.conversations.create(persona.id, title=f"Conversation {i}")
        big = me.conversations.create(persona.id, title="The long one")
    with me.store.write() as conn:
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


def first_paint(browser, url: str, runs: int) -> dict:
    fcp, ready = [], []
    for _ in range(runs):
        context = browser.new_context(viewport={"width": 1280, "height": 800})
        page = context.new_page()
        start = time.perf_counter()
        page.goto(url)
        page.wait_for_selector("body[data-ready=true]", timeout=60_000)
        ready.append((time.perf_counter() - start) * 1000)
        fcp.append(page.evaluate(
            "performance.getEntriesByName('first-contentful-paint')[0]?.startTime ?? -1"))
        context.close()
    return {"first_contentful_paint": summary(fcp), "ready": summary(ready)}


TYPE_PROBE = """() => {
  window.__lat = [];
  document.getElementById('composer-text').addEventListener('keydown', (e) => {
    const t = e.timeStamp;
    requestAnimationFrame(() => requestAnimationFrame(() => window.__lat.push(performance.now() - t)));
  });
}"""


def typing(page, keys: int, streaming: bool, conversation_id: int) -> dict:
    page.evaluate(TYPE_PROBE)
    box = page.locator("#composer-text")
    if streaming:
        box.fill("Tell me a long story")
        page.click("#send")
        page.wait_for_selector(".message.streaming .body strong", timeout=30_000)
        # The box is disabled while a reply streams; type in the other field people use meanwhile:
        # the thread filter, whose keys the same main thread handles.
        box = page.locator("#filter-text")
        page.evaluate("""() => document.getElementById('filter-text').addEventListener('keydown', (e) => {
            const t = e.timeStamp;
            requestAnimationFrame(() => requestAnimationFrame(() => window.__lat.push(performance.now() - t)));
        })""")
    box.focus()
    for i in range(keys):
        page.keyboard.type("ab"[i % 2], delay=25)
        if streaming and not page.locator(".message.streaming").count():
            break
    page.wait_for_timeout(100)
    samples = page.evaluate("window.__lat")
    page.locator("#filter-text").fill("")
    return summary(samples) | {"still_streaming": streaming and page.locator(".message.streaming").count() > 0}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--conversations", type=int, default=10_000)
    parser.add_argument("--messages", type=int, default=5_000)
    parser.add_argument("--runs", type=int, default=7)
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
            out["first_paint_large"] = first_paint(browser, f"{big_url}/#conversation-{big_id}", args.runs)
            out["first_paint_floor_small"] = first_paint(browser, f"{small_url}/#conversation-{small_id}", args.runs)
            ratio = out["first_paint_large"]["ready"]["median_ms"] / out["first_paint_floor_small"]["ready"]["median_ms"]
            out["first_paint_ready_ratio"] = round(ratio, 2)
            page = browser.new_page(viewport={"width": 1280, "height": 800})
            page.goto(f"{big_url}/#conversation-{big_id}")
            page.wait_for_selector("body[data-ready=true]")
            out["typing_idle_peer"] = typing(page, 60, False, big_id)
            out["typing_while_streaming"] = typing(page, 60, True, big_id)
            page.wait_for_selector(".message.streaming", state="detached", timeout=120_000)
            browser.close()
        big.close()
        small.close()
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
