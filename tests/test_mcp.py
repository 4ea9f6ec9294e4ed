"""The MCP server (X2) through the official mcp SDK's own client: over stdio (spawning
`hearth mcp`) and over streamable HTTP against a real `hearth serve` process."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any, Iterator

import httpx
import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from hearth import Hearth, Settings
from tests.test_openai_compat import start_server, stop_server

TOOLS = {"search_conversations", "search_archive", "list_conversations", "list_memories", "read_memory",
         "propose_memory", "propose_correction", "household_status", "list_fragments"}


def _settings(home: Path) -> Settings:
    return Settings.resolve({"home": str(home)}, environ={})


class Deployment:
    def __init__(self, home: Path):
        self.home = home
        self.ids: dict[str, Any] = {}

    def hearth(self) -> Hearth:
        return Hearth(_settings(self.home))

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and not k.startswith("HEARTH_")}
        return env | {"HEARTH_HOME": str(self.home)}

    def stdio(self, *args: str) -> Client:
        return Client(StdioServerParameters(command=sys.executable, args=["-m", "hearth", *args, "mcp"],
                                            env=self.env()))


@pytest.fixture(scope="module")
def deployment(tmp_path_factory) -> Deployment:
    d = Deployment(tmp_path_factory.mktemp("x2") / "home")
    with d.hearth() as hearth:
        me = hearth.scope()
        elion = me.personas.create("elion", "Elion")
        lighthouse = me.conversations.create(elion.id, title="The lighthouse walk")
        me.send(lighthouse.id, "We walked to the lighthouse at Saltcombe and counted the gulls")
        secret = me.conversations.create(elion.id, title="Private evening")
        me.send(secret.id, "The lighthouse keeper Marwick told me about his debts")
        me.conversations.set_shielded(secret.id, True)  # V2: kept out of every automatic and tool search
        me.memories.add("Robin takes her tea without sugar", "habits", 3)
        me.memories.add("Robin's sister lives in Saltcombe", "family")
        me.layers.household.add_field("Children", ["with me", "at school"])
        me.layers.household.set("Children", "at school")
        me.layers.fragments.add(["garden"], "Robin grows tomatoes and sweet peas.", "hobbies")
        d.ids.update(lighthouse=lighthouse.id, secret=secret.id, token=hearth.users.create_token(me.user_id, "mcp"))
        guest = hearth.users.create("guest")
        g = hearth.scope(guest.id)
        gp = g.personas.create("guestbot", "Guest bot")
        gc = g.conversations.create(gp.id, title="Guest garden chat")
        g.send(gc.id, "My lighthouse is made of marmalade")
        g.memories.add("Guest likes marmalade")
        d.ids.update(guest_token=hearth.users.create_token(guest.id, "guest"), guest_conversation=gc.id)
    return d


def text_of(result: Any) -> str:
    return "\n".join(c.text for c in result.content if getattr(c, "type", "") == "text")


def run(coro: Any) -> Any:
    return asyncio.run(coro)


# -- stdio ------------------------------------------------------------------------------------------
def test_x2_stdio_tools_search_with_citations_and_shield_rules(deployment):
    async def go() -> tuple[set[str], str, str, str]:
        async with deployment.stdio() as client:
            tools = {t.name for t in (await client.list_tools()).tools}
            found = text_of(await client.call_tool("search_conversations", {"query": "lighthouse"}))
            listed = text_of(await client.call_tool("list_conversations", {}))
            nothing = text_of(await client.call_tool("search_archive", {"query": "lighthouse"}))
            return tools, found, listed, nothing

    tools, found, listed, nothing = run(go())
    assert TOOLS <= tools
    assert "[The lighthouse walk, 20" in found and "Saltcombe" in found
    assert f"(conversation {deployment.ids['lighthouse']})" in found
    assert "Marwick" not in found and "Private evening" not in found  # shielded: never searched
    assert "marmalade" not in found  # another user's conversation (G2)
    assert "The lighthouse walk" in listed and "Private evening" not in listed
    assert nothing == "Nothing in the archive matched."
    with deployment.hearth() as hearth:
        origins = [r[0] for r in hearth.store.connection().execute("SELECT origin FROM search_log")]
    assert "mcp:search_conversations" in origins and "mcp:search_archive" in origins


def test_x2_stdio_memories_status_fragments_and_resources(deployment):
    async def go() -> dict[str, str]:
        async with deployment.stdio() as client:
            out = {
                "memories": text_of(await client.call_tool("list_memories", {})),
                "memory": text_of(await client.call_tool("read_memory", {"memory_id": 1})),
                "status": text_of(await client.call_tool("household_status", {})),
                "fragments": text_of(await client.call_tool("list_fragments", {})),
            }
            templates = {t.uri_template for t in (await client.list_resource_templates()).resource_templates}
            out["templates"] = json.dumps(sorted(templates))
            cid = deployment.ids["lighthouse"]
            prompt = await client.read_resource(f"hearth://conversations/{cid}/prompt")
            size = await client.read_resource(f"hearth://conversations/{cid}/request-size")
            out["prompt"], out["size"] = prompt.contents[0].text, size.contents[0].text
            return out

    out = run(go())
    assert "#1 [habits] Robin takes her tea without sugar (importance 3)" in out["memories"]
    assert "Guest likes marmalade" not in out["memories"]
    assert out["memory"].startswith("Memory #1: Robin takes her tea without sugar")
    assert "- Children: at school (since 20" in out["status"]
    assert "[hobbies] garden: Robin grows tomatoes and sweet peas." in out["fragments"]
    assert json.loads(out["templates"]) == ["hearth://conversations/{conversation_id}/prompt",
                                            "hearth://conversations/{conversation_id}/request-size"]
    with deployment.hearth() as hearth:
        me = hearth.scope()
        assert out["prompt"] == me.stored_prompt(deployment.ids["lighthouse"])
        assert json.loads(out["size"]) == {"size": me.request_size(deployment.ids["lighthouse"])}


def test_x2_proposals_wait_for_the_owner_unless_auto_approve_is_on(deployment):
    async def go(calls: list[tuple[str, dict]]) -> list[str]:
        async with deployment.stdio() as client:
            return [text_of(await client.call_tool(name, args)) for name, args in calls]

    queued, again, correction = run(go([
        ("propose_memory", {"text": "Robin is learning the cello", "category": "hobbies", "reason": "she said so"}),
        ("propose_memory", {"text": "Robin is learning the cello", "category": "hobbies"}),
        ("propose_correction", {"memory_id": 1, "text": "Robin takes her tea with honey"}),
    ]))
    assert queued.startswith("Queued for the owner's review as proposal #")
    assert again.startswith("The same suggestion is already waiting")
    with deployment.hearth() as hearth:
        me = hearth.scope()
        assert "Robin is learning the cello" not in [m.text for m in me.memories.list()]  # G4: nothing applied
        pending = {p.label: p for p in me.layers.review.list()}
        assert "memory: Robin is learning the cello" in pending
        assert "memory correction #1: Robin takes her tea with honey" in pending
        assert me.memories.get(1).text == "Robin takes her tea without sugar"
        me.layers.review.approve(pending["memory correction #1: Robin takes her tea with honey"].id)
        assert me.memories.get(1).text == "Robin takes her tea with honey"
        assert sorted(v.change for v in me.memories.history(1)) == ["corrected", "created"]
        me.layers.settings.set("auto_approve.memory", True)
    try:
        (applied,) = run(go([("propose_memory", {"text": "Robin swims on Sundays"})]))
        assert applied.startswith("Applied at once")
        with deployment.hearth() as hearth:
            assert "Robin swims on Sundays" in [m.text for m in hearth.scope().memories.list()]
    finally:
        with deployment.hearth() as hearth:
            hearth.scope().layers.settings.set("auto_approve.memory", False)


def test_u8_propose_memory_answers_already_remembered_or_would_contradict_and_queues_neither(deployment):
    async def go(calls: list[tuple[str, dict]]) -> list[str]:
        async with deployment.stdio() as client:
            return [text_of(await client.call_tool(name, args)) for name, args in calls]

    with deployment.hearth() as hearth:
        me = hearth.scope()
        sister = next(m for m in me.memories.list() if m.text == "Robin's sister lives in Saltcombe")
        before = len(me.layers.review.list())
    same, reworded, moved = run(go([
        ("propose_memory", {"text": "Robin's sister lives in Saltcombe"}),
        ("propose_memory", {"text": "Robin's sister lives in Saltcombe!", "category": "family"}),
        ("propose_memory", {"text": "Robin's sister lives in Bristol"}),
    ]))
    assert same == reworded == f"Already remembered as memory #{sister.id}; nothing was queued."
    assert moved.startswith(f"Not queued: this would contradict memory #{sister.id} ")
    assert f"propose a correction of memory {sister.id}" in moved
    with deployment.hearth() as hearth:
        assert len(hearth.scope().layers.review.list()) == before  # nothing waits that cannot be approved


def test_x2_unknown_tool_and_invalid_arguments_are_protocol_correct_errors(deployment):
    async def go() -> tuple[Any, Any, Any, Any, Any]:
        async with deployment.stdio() as client:
            with pytest.raises(MCPError) as unknown:
                await client.call_tool("delete_everything", {})
            bad_type = await client.call_tool("read_memory", {"memory_id": "first"})
            missing = await client.call_tool("search_conversations", {})
            foreign = await client.call_tool("read_memory", {"memory_id": 9999})
            with pytest.raises(MCPError) as no_conversation:
                await client.read_resource("hearth://conversations/9999/prompt")
            return unknown.value, bad_type, missing, foreign, no_conversation.value

    unknown, bad_type, missing, foreign, no_conversation = run(go())
    assert unknown.code == -32602 and "Unknown tool" in unknown.message
    assert bad_type.is_error and "memory_id" in text_of(bad_type)
    assert missing.is_error and "query" in text_of(missing)
    assert foreign.is_error and "9999" in text_of(foreign)
    assert no_conversation.code == -32602


@pytest.mark.slow
def test_x2_stdio_token_chooses_the_user(deployment, tmp_path):
    async def go(*args: str) -> str:
        async with deployment.stdio(*args) as client:
            return text_of(await client.call_tool("search_conversations", {"query": "lighthouse"}))

    # The token is passed through the environment, as an MCP client config would.
    env_client = Client(StdioServerParameters(command=sys.executable, args=["-m", "hearth", "mcp"],
                                              env=deployment.env() | {"HEARTH_TOKEN": deployment.ids["guest_token"]}))

    async def via_env() -> str:
        async with env_client as client:
            return text_of(await client.call_tool("search_conversations", {"query": "lighthouse"}))

    guest = run(via_env())
    assert "marmalade" in guest and "Saltcombe" not in guest
    assert "marmalade" in run(go("--user", "guest"))
    import subprocess

    bad = subprocess.run([sys.executable, "-m", "hearth", "mcp", "--token", "hth_nope"], env=deployment.env(),
                         capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert bad.returncode == 1 and bad.stderr.strip() == "Error: invalid or revoked API token"


# -- streamable HTTP against a real server -------------------------------------------------------------
@pytest.fixture(scope="module")
def served(deployment) -> Iterator[str]:
    process, port = start_server(deployment.home)
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        # A cold server is busy with its start-up work (index warm-up, the embedding model) for a
        # while; the MCP client's version probe allows 10 s, so one plain request waits it out first.
        httpx.post(url, json={"jsonrpc": "2.0", "id": 0, "method": "tools/list"}, timeout=120,
                   headers={"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
                            "Authorization": f"Bearer {deployment.ids['token']}"})
        yield url
    finally:
        stop_server(process)


def http_client(url: str, token: str) -> Client:
    return Client(streamable_http_client(url, http_client=httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {token}"}, timeout=30)))


def test_x2_streamable_http_with_an_api_token(deployment, served):
    async def go(token: str) -> tuple[set[str], str, str]:
        async with http_client(served, token) as client:
            tools = {t.name for t in (await client.list_tools()).tools}
            found = text_of(await client.call_tool("search_conversations", {"query": "lighthouse"}))
            prompt = await client.read_resource(f"hearth://conversations/{deployment.ids['lighthouse']}/prompt")
            return tools, found, prompt.contents[0].text

    tools, found, prompt = run(go(deployment.ids["token"]))
    assert TOOLS <= tools
    assert "[The lighthouse walk, 20" in found and "Marwick" not in found and "marmalade" not in found
    assert prompt.startswith("## ")

    async def guest() -> tuple[str, Any]:
        async with http_client(served, deployment.ids["guest_token"]) as client:
            found = text_of(await client.call_tool("search_conversations", {"query": "lighthouse"}))
            with pytest.raises(MCPError) as foreign:
                await client.read_resource(f"hearth://conversations/{deployment.ids['lighthouse']}/prompt")
            return found, foreign.value

    found, foreign = run(guest())
    assert "marmalade" in found and "Saltcombe" not in found
    assert foreign.code == -32602  # another user's conversation answers like an unknown one


def test_x2_http_endpoint_refuses_requests_without_a_valid_token(deployment, served):
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    for extra in ({}, {"Authorization": "Bearer hth_unknown"}):
        response = httpx.post(served, json=body, headers=headers | extra, timeout=10)
        assert response.status_code == 401, response.text
        assert response.json()["error"] == "unauthorized"

    async def unknown_tool() -> MCPError:
        async with http_client(served, deployment.ids["token"]) as client:
            with pytest.raises(MCPError) as error:
                await client.call_tool("no_such_tool", {})
            return error.value

    assert run(unknown_tool()).code == -32602


# -- hostile input (U3, G4) ---------------------------------------------------------------------------
def test_x2_u3_proposals_approval_would_refuse_are_tool_errors_and_nothing_is_queued(deployment):
    with deployment.hearth() as hearth:
        me = hearth.scope()
        kept = me.memories.add("Robin lived in Leeds", "places")
        me.memories.end(kept.id)  # ended: a correction of it could never be approved
        tea = me.memories.get(1)
        before = (me.layers.review.counts(), [(m.id, m.text, m.version) for m in me.memories.list()])

    calls = [
        ("propose_memory", {"text": "Robin collects kites", "importance": 10**20}, "importance"),
        ("propose_memory", {"text": "k" * 900_000}, "longer than 10000"),
        ("propose_memory", {"text": "Robin\x00collects kites"}, "memory text contains a NUL"),
        ("propose_memory", {"text": "Robin collects kites", "category": "c" * 101}, "category"),
        ("propose_memory", {"text": "Robin collects kites", "reason": "she\x00said"}, "reason contains a NUL"),
        ("propose_memory", {"text": "   "}, "memory text must not be empty"),
        ("propose_correction", {"memory_id": 1, "text": "tea\x00"}, "memory text contains a NUL"),
        ("propose_correction", {"memory_id": 1, "text": "t" * 900_000}, "longer than 10000"),
        ("propose_correction", {"memory_id": 1, "text": f"  {tea.text} "}, "nothing would change"),
        ("propose_correction", {"memory_id": kept.id, "text": "Robin lived in York"}, "has ended"),
        ("propose_correction", {"memory_id": 1, "text": "Robin takes lemon", "fact_changed": "yes"}, "fact_changed"),
    ]

    async def go() -> list[Any]:
        async with deployment.stdio() as client:
            return [await client.call_tool(name, args) for name, args, _ in calls]

    for (name, _args, reason), result in zip(calls, run(go())):
        assert result.is_error, (name, reason, text_of(result))
        assert reason in text_of(result), (reason, text_of(result))
    with deployment.hearth() as hearth:
        me = hearth.scope()
        assert (me.layers.review.counts(), [(m.id, m.text, m.version) for m in me.memories.list()]) == before


# Values no tool should turn into a write it cannot use, or a crash.
HOSTILE = ["a\x00b", "\ud800", "x" * 900_000, "", "yes", 10**20, 2**63, -1, 0, 1.5, True, None, [], {},
           ["a\x00"], {"$gt": ""}]
VALID_CALLS: dict[str, dict[str, Any]] = {
    "search_conversations": {"query": "kites", "date_from": "2024-01-01", "date_to": "2030-01-01", "limit": 5},
    "search_archive": {"query": "kites", "collections": ["notes"], "date_from": "2024-01-01", "limit": 5},
    "list_conversations": {"limit": 5},
    "list_memories": {"include_ended": True},
    "read_memory": {"memory_id": 1},
    "propose_memory": {"text": "Robin flies kites on the beach", "category": "hobbies", "importance": 4,
                       "reason": "she said so"},
    "propose_correction": {"memory_id": 1, "text": "Robin takes her tea with lemon", "reason": "she said so",
                           "fact_changed": False},
    "household_status": {},
    "list_fragments": {"category": "hobbies"},
}


def test_x2_u3_hostile_values_sweep_no_tracebacks_and_no_unusable_writes(hearth, me, persona, caplog):
    import logging

    from hearth.mcp import tools as mcp_tools

    me.memories.add("Robin takes her tea without sugar", "habits", 3)
    me.send(me.conversations.create(persona.id, title="Kites").id, "We flew kites on the beach")
    server = mcp_tools.build(hearth, mcp_tools.fixed_user(hearth, me.user_id))
    queued_before = me.layers.review.counts()["pending"]

    async def sweep() -> list[tuple[str, str, Any, Any]]:
        out = []
        async with Client(server) as client:
            assert set(VALID_CALLS) == {t.name for t in (await client.list_tools()).tools}
            for name, valid in VALID_CALLS.items():
                for param in valid:
                    for value in HOSTILE:
                        out.append((name, param, value, await client.call_tool(name, {**valid, param: value})))
        return out

    with caplog.at_level(logging.WARNING):
        results = run(sweep())
    crashed = [(n, p, repr(v)[:40]) for n, p, v, r in results
               if r.is_error and text_of(r).strip() == f"Error executing tool {n}"]  # no reason given: a crash
    assert crashed == []
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info] == []
    # Everything queued can be approved as it stands: no proposal waits that the owner could never apply.
    pending = me.layers.review.list()
    assert len(pending) > queued_before  # the sweep did reach the queue with acceptable values
    for proposal in pending:
        assert me.layers.review.approve(proposal.id).status == "approved"
    refused = {(n, p) for n, p, v, r in results if r.is_error and v in ("a\x00b", "\ud800", 10**20)}
    for tool in ("propose_memory", "propose_correction"):
        for param in ("text", "reason") + (("importance", "category") if tool == "propose_memory" else ()):
            assert (tool, param) in refused
