"""Hostile-input sweep (U5): pathological text to every route and MCP tool that takes text.

Starts a real ``hearth serve`` (offline provider) on a fresh home and sends inputs of ``--size``
characters (100 kB by default) in each hostile shape: a run of line breaks, `{{pick}}` macros, a run of unclosed
``{{//`` comments, nested brackets, one long word, and a regex bomb (``a`` repeated then ``!``,
against a lorebook key ``/(a+)+$/``). A card is imported with the text as its description, first
message and example dialogue, then New Chat and a first send, as in the hostile table of U5.

Prints per route the median and the maximum time over the shapes (and the answers' status codes),
beside a floor: the same route with the same size of plain words. The goal is no request over 1 s.
A route may refuse an input over its limit (413, 422): that answer is timed too. A query string
(the search box) carries the first 8,000 characters, as longer URLs are refused before Hearth.

Run: ``python benchmarks/hostile.py [--size 100000] [--repeats 1] [--json]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from common import machine  # noqa: E402
from servers import environment, free_port, wait_up  # noqa: E402

from hearth import Hearth, Settings  # noqa: E402

SHAPES: dict[str, Callable[[int], str]] = {
    "newlines": lambda n: "x" + "\n" * (n - 2) + "x",
    "open comments": lambda n: ("{{//" * (n // 4 + 1))[:n],
    "nested brackets": lambda n: ("[(" * (n // 4 + 1))[:n // 2] + (")]" * (n // 4 + 1))[:n // 2],
    "long word": lambda n: "a" * n,
    "regex bomb": lambda n: "a" * (n - 1) + "!",
    # Every macro seeds a choice of its own (stable per conversation): the most work per character.
    "pick macros": lambda n: ("{{pick::a::b}}" * (n // 14 + 1))[:n],
}
FLOOR = "plain words"
PERSONA_CHARS = 50_000  # a card's description becomes the persona's identity, which holds this much
URL_CHARS = 8_000  # a query string is cut here: HTTP clients and servers refuse longer URLs anyway


def plain(n: int) -> str:
    return ("the knight rode along the shore " * (n // 32 + 1))[:n]


def card(name: str, text: str) -> bytes:
    """A character card (V2) carrying ``text`` where macros are filled, with a lorebook regex key."""
    return json.dumps({"spec": "chara_card_v2", "spec_version": "2.0", "data": {
        "name": name, "description": text[:PERSONA_CHARS], "first_mes": text, "mes_example": text, "personality": "",
        "scenario": "", "character_book": {"entries": [
            {"keys": ["/(a+)+$/"], "content": "The bomb entry.", "enabled": True, "insertion_order": 1}]}}}).encode()


class Sweep:
    def __init__(self, client: httpx.Client, base: str, token: str, persona_id: int, conversation_id: int):
        self.client, self.base, self.persona_id, self.conversation_id = client, base, persona_id, conversation_id
        self.headers = {"Authorization": f"Bearer {token}"}
        self.times: dict[str, dict[str, list[float]]] = {}
        self.statuses: dict[str, set[int]] = {}
        self.serial = 0

    def timed(self, route: str, shape: str, method: str, path: str, **kwargs: Any) -> httpx.Response:
        headers = self.headers | kwargs.pop("headers", {})
        start = time.perf_counter()
        response = self.client.request(method, self.base + path, headers=headers, timeout=300, **kwargs)
        took = time.perf_counter() - start
        self.times.setdefault(route, {}).setdefault(shape, []).append(took)
        self.statuses.setdefault(route, set()).add(response.status_code)
        return response

    def mcp(self, tool: str, shape: str, arguments: dict[str, Any]) -> None:
        self.serial += 1
        self.timed(f"MCP {tool}", shape, "POST", "/mcp",
                   headers={"Accept": "application/json, text/event-stream"},
                   json={"jsonrpc": "2.0", "id": self.serial, "method": "tools/call",
                         "params": {"name": tool, "arguments": arguments}})

    def run(self, shape: str, text: str) -> None:
        c, p = self.conversation_id, self.persona_id
        self.timed("POST messages (send)", shape, "POST", f"/api/conversations/{c}/messages", json={"text": text})
        self.timed("PUT instructions", shape, "PUT", f"/api/conversations/{c}/instructions", json={"text": text})
        self.timed("POST memories", shape, "POST", "/api/memories", json={"text": text})
        self.timed("POST fragments", shape, "POST", "/api/fragments", json={"triggers": ["knight"], "definition": text})
        self.timed("POST fragments/match", shape, "POST", "/api/fragments/match", json={"text": text})
        self.timed("GET search", shape, "GET", "/api/search", params={"q": text[:URL_CHARS]})
        self.timed("GET conversations?q", shape, "GET", "/api/conversations", params={"q": text[:URL_CHARS]})
        self.timed("PATCH persona", shape, "PATCH", f"/api/personas/{p}", json={"identity": text})
        self.timed("POST presets", shape, "POST", "/api/presets", json={"name": f"p{self.serial}", "text": text})
        self.serial += 1
        self.timed("POST archive/import", shape, "POST", "/api/archive/import",
                   params={"name": "hostile.txt"}, content=("User: " + text).encode())
        self.timed("POST forget/search-log", shape, "POST", "/api/forget/search-log", json={"phrase": text})
        self.timed("POST /v1/chat/completions", shape, "POST", "/v1/chat/completions",
                   json={"model": "elion", "messages": [{"role": "system", "content": text},
                                                         {"role": "user", "content": "hello"}]})
        imported = self.timed("POST imports (card)", shape, "POST", "/api/imports",
                              params={"name": f"hostile-{self.serial}.json"}, content=card(f"Hostile {self.serial}", text))
        persona = (imported.json().get("ids", {}).get("personas") or [None])[0] if imported.is_success else None
        if persona is not None:
            chat = self.timed("POST conversations (New Chat, greeting)", shape, "POST", "/api/conversations",
                              json={"persona_id": persona})
            if chat.is_success:
                self.timed("first send (card description)", shape, "POST",
                           f"/api/conversations/{chat.json()['id']}/messages", json={"text": "a" * 40 + "!"})
        self.mcp("search_conversations", shape, {"query": text})
        self.mcp("search_archive", shape, {"query": text})
        self.mcp("propose_memory", shape, {"text": text})


def prepare(home: Path) -> tuple[str, int, int]:
    with Hearth(Settings.resolve({"home": str(home)}, environ={})) as hearth:
        owner = hearth.users.owner()
        token = hearth.users.create_token(owner.id, "hostile")
        me = hearth.scope()
        persona = me.personas.create("elion", "Elion", identity="A steady companion.")
        conversation = me.conversations.create(persona.id, title="Hostile")
        me.send(conversation.id, "Good morning")
        return token, persona.id, conversation.id


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as root:
        home = Path(root) / "home"
        token, persona_id, conversation_id = prepare(home)
        port = free_port()
        server = subprocess.Popen([sys.executable, "-m", "hearth", "serve", "--port", str(port)],
                                  env=environment(home, ""), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            wait_up(port, server)
            with httpx.Client() as client:
                sweep = Sweep(client, f"http://127.0.0.1:{port}", token, persona_id, conversation_id)
                # Untimed: the first search loads the embedding model (tens of seconds on a busy machine).
                client.get(f"http://127.0.0.1:{port}/api/search", params={"q": "warm"}, headers=sweep.headers,
                           timeout=600)
                for _ in range(args.repeats):
                    sweep.run(FLOOR, plain(args.size))
                    for shape, make in SHAPES.items():
                        sweep.run(shape, make(args.size))
        finally:
            server.terminate()
            try:
                server.wait(timeout=20)
            except subprocess.TimeoutExpired:
                server.kill()
    rows = []
    for route, by_shape in sweep.times.items():
        hostile = [t for shape, times in by_shape.items() if shape != FLOOR for t in times]
        worst = max(((max(times), shape) for shape, times in by_shape.items() if shape != FLOOR), default=(0.0, ""))
        floor = statistics.median(by_shape.get(FLOOR, [0.0]))
        rows.append({"route": route, "median_ms": round(statistics.median(hostile) * 1000, 1),
                     "max_ms": round(worst[0] * 1000, 1), "worst_shape": worst[1],
                     "floor_ms": round(floor * 1000, 1), "statuses": sorted(sweep.statuses[route])})
    slowest = max(r["max_ms"] for r in rows)
    if args.json:
        print(json.dumps({"size": args.size, "machine": machine(), "routes": rows, "max_ms": slowest}))
        return
    print(f"{args.size:,} characters per input; {machine()}")
    print(f"{'route':42} {'median ms':>10} {'max ms':>9} {'worst shape':>16} {'floor ms':>9}  statuses")
    for r in rows:
        print(f"{r['route']:42} {r['median_ms']:10.1f} {r['max_ms']:9.1f} {r['worst_shape']:>16} "
              f"{r['floor_ms']:9.1f}  {r['statuses']}")
    print(f"slowest request: {slowest:.0f} ms ({'under' if slowest < 1000 else 'OVER'} the 1 s goal)")


if __name__ == "__main__":
    main()
