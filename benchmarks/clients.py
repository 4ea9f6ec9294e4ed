"""Cost of the client faces (X1, X2), each beside its floor measured in the same run.

    python benchmarks/clients.py [--sends 200] [--samples 2] [--queries 150] [--json]

1. ``POST /v1/chat/completions`` (non-streaming and streaming, the client resending its whole
   history each time, pinned by header) against a direct library send (``Scope.send``) and
   Hearth's own SSE send route, all through the same in-process ASGI client, with an instant fixed
   provider so only Hearth's work is timed. Every kind sends in turn into the same conversation
   (pinned by header) on the same channel, so each sees the same history. ``library_v1`` is the X1
   layer without HTTP (``scope.clients.send_stream``); ``x1_pin_only`` its own work before the send
   path (model, pin, custom instructions), no send; ``http_floor`` is ``GET /v1/models``, the
   cost of any request through the in-process client. Overhead = median(kind) - median(direct).
2. The MCP ``search_conversations`` tool round trip over stdio (the SDK's own client spawning
   ``hearth mcp``) on LoCoMo conversations (embedded, so the search is the full hybrid one), with
   the LoCoMo questions as queries, beside the same search called in-process (the floor) and a
   trivial MCP tool (``household_status``: the protocol's own cost).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from common import StopwatchProvider, machine, summary  # noqa: E402
from locomo import DEFAULT_DATA, load  # noqa: E402

from hearth import Hearth, Settings  # noqa: E402


def log(message: str) -> None:
    print(message, file=sys.stderr)


def v1_overhead(sends: int) -> dict[str, Any]:
    from fastapi.testclient import TestClient

    from hearth.interop.client_chats import ClientMessage
    from hearth.server import create_app

    with tempfile.TemporaryDirectory() as home:
        settings = Settings.resolve({"home": home, "input_token_limit": 200_000}, environ={})
        with Hearth(settings, provider=StopwatchProvider()) as hearth:
            me = hearth.scope()
            me.personas.create("elion", "Elion")
            token = hearth.users.create_token(me.user_id, "bench")
            auth = {"Authorization": f"Bearer {token}", "X-Hearth-Conversation": "bench"}
            system = {"role": "system", "content": "Be brief."}
            kinds = ("direct", "library_v1", "x1_pin_only", "http_native_sse", "http_v1", "http_v1_stream",
                     "http_floor")
            times: dict[str, list[float]] = {k: [] for k in kinds}
            history: list[dict[str, str]] = []  # what a client resends: every turn so far
            with TestClient(create_app(hearth=hearth), base_url="http://127.0.0.1") as client:
                first = client.post("/v1/chat/completions", headers=auth, json={
                    "model": "elion", "messages": [system, {"role": "user", "content": "hello"}]})
                conversation_id = int(first.headers["x-hearth-conversation-id"])

                def http_v1(text: str, stream: bool) -> None:
                    turn = {"role": "user", "content": text}
                    response = client.post("/v1/chat/completions", headers=auth, json={
                        "model": "elion", "stream": stream, "messages": [system, *history, turn]})
                    assert response.status_code == 200, response.text
                    history.extend([turn, {"role": "assistant", "content": "ok"}])

                def library_v1(text: str) -> None:
                    _pinned, events = me.clients.send_stream(
                        "elion", [ClientMessage("system", "Be brief."), ClientMessage("user", text)], chat_id="bench")
                    for _event in events:
                        pass

                def pin_only(text: str) -> None:
                    # The X1 layer's own work before the send path: model, pin, custom instructions.
                    messages = [ClientMessage("system", "Be brief."), ClientMessage("user", text)]
                    with hearth.store.write():
                        persona = me.clients.persona_for("elion")
                        pinned = me.clients.pin(persona, messages, "bench")
                        me.set_custom_instructions(pinned.conversation.id, "Be brief.")

                def native(text: str) -> None:
                    response = client.post(f"/api/conversations/{conversation_id}/messages", json={"text": text, "channel": "api"},
                                           headers=auth)
                    assert "event: done" in response.text

                steps = {
                    # Same channel as the client routes: a change of channel has its own cost on the send path.
                    "direct": lambda text: me.send(conversation_id, text, channel="api"),
                    "library_v1": library_v1,
                    "x1_pin_only": pin_only,
                    "http_native_sse": native,
                    "http_v1": lambda text: http_v1(text, False),
                    "http_v1_stream": lambda text: http_v1(text, True),
                    "http_floor": lambda text: client.get("/v1/models", headers=auth),
                }
                # Every kind sends into the same conversation in turn, so each sees the same history.
                for i in range(sends + 5):
                    for k, kind in enumerate(kinds):
                        text = f"Message {i}.{k}: how was the walk by the harbour today?"  # the same shape for all
                        t0 = time.perf_counter()
                        steps[kind](text)
                        if i >= 5:  # the first rounds warm caches
                            times[kind].append((time.perf_counter() - t0) * 1000)
    out: dict[str, Any] = {k: summary(v) for k, v in times.items()}
    base = out["direct"]["median_ms"]
    out["overhead_ms"] = {k: round(out[k]["median_ms"] - base, 3) for k in kinds if k != "direct"}
    return out


def mcp_round_trip(data: Path, samples: int, queries: int) -> dict[str, Any]:
    import os

    from mcp import Client, StdioServerParameters

    from hearth.retrieval.deliberate import owner_search
    from hearth.retrieval.semantic import embed_pending, shared_embedder

    with tempfile.TemporaryDirectory() as home:
        settings = Settings.resolve({"home": home}, environ={})
        chosen = json.loads(data.read_text(encoding="utf-8"))[:samples]
        started = time.monotonic()
        with Hearth(settings) as hearth:
            for sample in chosen:
                load(hearth, sample)
            embed_pending(hearth.store, shared_embedder(hearth))
        log(f"loaded and embedded {samples} LoCoMo conversations in {time.monotonic() - started:.1f}s")
        sample = chosen[0]
        questions = [str(q["question"]) for q in sample["qa"]][:queries]
        env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")} | {"HEARTH_HOME": home}
        params = StdioServerParameters(command=sys.executable, args=["-m", "hearth", "--user", sample["sample_id"], "mcp"],
                                       env=env)

        async def over_stdio() -> tuple[list[float], list[float]]:
            search_ms, trivial_ms = [], []
            async with Client(params) as client:
                for q in questions[:5]:  # warm: the embedding model and the indexes load in the server
                    await client.call_tool("search_conversations", {"query": q})
                for q in questions:
                    t0 = time.perf_counter()
                    result = await client.call_tool("search_conversations", {"query": q})
                    t1 = time.perf_counter()
                    assert not result.is_error
                    await client.call_tool("household_status", {})
                    t2 = time.perf_counter()
                    search_ms.append((t1 - t0) * 1000)
                    trivial_ms.append((t2 - t1) * 1000)
            return search_ms, trivial_ms

        search_ms, trivial_ms = asyncio.run(over_stdio())
        floor_ms = []
        with Hearth(settings) as hearth:
            context = hearth.context(hearth.users.by_name(sample["sample_id"]).id)
            for q in questions[:5]:
                owner_search(context, q, archive=False, limit=8, origin="mcp:search_conversations")
            for q in questions:
                t0 = time.perf_counter()
                owner_search(context, q, archive=False, limit=8, origin="mcp:search_conversations")
                floor_ms.append((time.perf_counter() - t0) * 1000)
    return {"mcp_search_stdio": summary(search_ms), "library_search": summary(floor_ms),
            "mcp_trivial_tool_stdio": summary(trivial_ms), "queries": len(questions),
            "turns_searched": sum(len(v) for k, v in sample["conversation"].items() if k.startswith("session_")
                                  and isinstance(v, list))}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sends", type=int, default=200)
    parser.add_argument("--samples", type=int, default=2, help="LoCoMo conversations loaded (the first is searched)")
    parser.add_argument("--queries", type=int, default=150)
    parser.add_argument("--data", default=str(DEFAULT_DATA))
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--skip-mcp", action="store_true")
    args = parser.parse_args(argv)
    log(f"machine: {machine()}")
    result: dict[str, Any] = {"v1": v1_overhead(args.sends)}
    if not args.skip_mcp:
        result["mcp"] = mcp_round_trip(Path(args.data), args.samples, args.queries)
    v1, mcp = result["v1"], result.get("mcp")
    print(f"{'kind':<28}{'median ms':>10}{'p99 ms':>10}")
    for name in ("direct", "library_v1", "x1_pin_only", "http_native_sse", "http_v1", "http_v1_stream",
                 "http_floor"):
        print(f"{name:<28}{v1[name]['median_ms']:>10.3f}{v1[name]['p99_ms']:>10.3f}")
    print(f"overhead over a direct send (median ms): {v1['overhead_ms']}")
    for name in ("library_search", "mcp_search_stdio", "mcp_trivial_tool_stdio") if mcp else ():
        print(f"{name:<28}{mcp[name]['median_ms']:>10.3f}{mcp[name]['p99_ms']:>10.3f}")
    if args.json:
        print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
