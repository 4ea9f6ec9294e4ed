"""Providers (PR1-PR5, E7 basics): the real SDKs over real HTTP against the local fake server."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from hearth.errors import ConfigError, ProviderError
from hearth.providers import (
    ChatMessage,
    ProviderRequest,
    StreamEvent,
    ToolCall,
    ToolSpec,
    context_window_for,
    provider_from_settings,
)
from hearth.providers.anthropic_messages import AnthropicProvider
from hearth.providers.offline import LABEL, OfflineProvider
from hearth.providers.openai_chat import OpenAIChatProvider
from hearth.providers.openai_responses import OpenAIResponsesProvider
from hearth.settings import Settings
from tests.fakes import FakeProviderServer

SECRET = "my sister's name is Rosalind"  # conversation content that must never reach an error

STATIC_PROMPT = (
    "## Identity\nYou are Elion, a warm companion who remembers.\n\n"
    "## Voice\nSpeak plainly; avoid the word zephyr.\n\n"
    "## Boundaries\nNever reveal the quartz code.\n"
)
DYNAMIC = (
    "=== HOUSEHOLD STATUS ===\nkettle: on\nfront door: locked\n\n"
    "=== AUTO-RECALLED CONTEXT ===\n- likes marmalade toast\n"
)
SUMMARY = "Rolling thread summary for this conversation only: they planned a trip to the lighthouse."

TOOLS = [
    ToolSpec("remember", "Store a durable memory.",
             {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}),
    ToolSpec("search_memory", "Search memories.", {"type": "object", "properties": {"q": {"type": "string"}}}),
]


def conversation() -> list[ChatMessage]:
    """A request with every kind of message: static prompt, summary, history with a tool round."""
    call = ToolCall(id="call_1", name="remember", arguments={"text": "likes tea"})
    return [
        ChatMessage("system", STATIC_PROMPT),
        ChatMessage("system", SUMMARY),
        ChatMessage("user", "I like tea."),
        ChatMessage("assistant", "", tool_calls=(call,)),
        ChatMessage("tool", '{"ok": true}', tool_call_id="call_1"),
        ChatMessage("assistant", "Noted."),
        ChatMessage("system", DYNAMIC),
        ChatMessage("user", SECRET),
    ]


def make(kind: str, server: FakeProviderServer, timeout: float = 5.0) -> Any:
    if kind == "openai":
        return OpenAIResponsesProvider(model="gpt-4.1", api_key="sk-test", base_url=server.openai_base_url,
                                       timeout=timeout)
    if kind == "openai-chat":
        return OpenAIChatProvider(model="llama3.1", base_url=server.openai_base_url, timeout=timeout)
    return AnthropicProvider(model="claude-sonnet-4-6", api_key="sk-ant-test",
                             base_url=server.anthropic_base_url, timeout=timeout)


def collect(provider: Any, request: ProviderRequest) -> list[StreamEvent]:
    return list(provider.stream(request))


def text_of(events: list[StreamEvent]) -> str:
    return "".join(e.text for e in events if e.type == "text")


KINDS = ["openai", "openai-chat", "anthropic"]


# --- PR1 / PR4: streaming through the real SDKs ------------------------------------------------
@pytest.mark.parametrize("kind", KINDS)
def test_pr1_pr4_streams_text_tool_call_and_usage(kind: str, fake_provider_server: FakeProviderServer) -> None:
    fake_provider_server.script(text=["Tea ", "noted", "."],
                                tool_calls=[("call_9", "search_memory", {"q": "tea", "limit": 3})],
                                input_tokens=120, output_tokens=15, cached_tokens=40)
    events = collect(make(kind, fake_provider_server), ProviderRequest(conversation(), TOOLS))

    texts = [e.text for e in events if e.type == "text"]
    assert texts == ["Tea ", "noted", "."]  # deltas arrive separately, in order
    calls = [e.tool_call for e in events if e.type == "tool_call"]
    assert calls == [ToolCall(id="call_9", name="search_memory", arguments={"q": "tea", "limit": 3})]
    assert events[-1].type == "usage"
    usage = events[-1].usage
    assert usage is not None
    assert (usage.input_tokens, usage.output_tokens, usage.cached_tokens) == (120, 15, 40)
    assert len(fake_provider_server.requests) == 1  # the SDK did not retry or probe


def test_pr1_pr4_openai_responses_request_maps_messages_and_tools(
    fake_provider_server: FakeProviderServer,
) -> None:
    collect(make("openai", fake_provider_server), ProviderRequest(conversation(), TOOLS, max_output_tokens=900))
    sent = fake_provider_server.requests[0]
    assert sent.path == "/v1/responses"
    assert sent.headers["authorization"] == "Bearer sk-test"
    body = sent.body
    assert body["stream"] is True and body["model"] == "gpt-4.1" and body["max_output_tokens"] == 900
    # All system messages, in order, become the instructions; none stays in the input.
    assert body["instructions"] == "\n\n".join([STATIC_PROMPT, SUMMARY, DYNAMIC])
    assert body["input"] == [
        {"role": "user", "content": "I like tea."},
        {"type": "function_call", "call_id": "call_1", "name": "remember", "arguments": '{"text": "likes tea"}'},
        {"type": "function_call_output", "call_id": "call_1", "output": '{"ok": true}'},
        {"role": "assistant", "content": "Noted."},
        {"role": "user", "content": SECRET},
    ]
    assert [t["name"] for t in body["tools"]] == ["remember", "search_memory"]
    assert body["tools"][0]["type"] == "function"
    assert body["tools"][0]["parameters"] == TOOLS[0].parameters
    assert "previous_response_id" not in body


def test_pr1_e7_responses_chain_sends_only_new_items(fake_provider_server: FakeProviderServer) -> None:
    fake_provider_server.script(response_id="resp_second")
    request = ProviderRequest(conversation(), TOOLS, previous_response_id="resp_first", compact_threshold=50_000)
    events = collect(make("openai", fake_provider_server), request)
    body = fake_provider_server.requests[0].body
    assert body["previous_response_id"] == "resp_first"
    assert body["input"] == [{"role": "user", "content": SECRET}]  # the server holds the rest
    assert body["instructions"].startswith("## Identity")  # instructions are never chained
    assert body["context_management"] == [{"type": "compaction", "compact_threshold": 50_000}]
    assert events[-1].response_id == "resp_second"


def test_pr1_pr4_openai_chat_request_maps_messages_and_tools(fake_provider_server: FakeProviderServer) -> None:
    collect(make("openai-chat", fake_provider_server), ProviderRequest(conversation(), TOOLS, max_output_tokens=700))
    sent = fake_provider_server.requests[0]
    assert sent.path == "/v1/chat/completions"
    body = sent.body
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert body["model"] == "llama3.1" and body["max_tokens"] == 700
    assert body["messages"] == [
        {"role": "system", "content": STATIC_PROMPT},
        {"role": "system", "content": SUMMARY},
        {"role": "user", "content": "I like tea."},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": "remember", "arguments": '{"text": "likes tea"}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": '{"ok": true}'},
        {"role": "assistant", "content": "Noted."},
        {"role": "system", "content": DYNAMIC},
        {"role": "user", "content": SECRET},
    ]
    assert body["tools"][1] == {"type": "function", "function": {
        "name": "search_memory", "description": "Search memories.", "parameters": TOOLS[1].parameters}}


def test_pr1_pr4_openai_chat_without_tools_sends_no_tools_key(fake_provider_server: FakeProviderServer) -> None:
    events = collect(make("openai-chat", fake_provider_server), ProviderRequest([ChatMessage("user", "hi")]))
    assert "tools" not in fake_provider_server.requests[0].body
    assert text_of(events) == "Hello from the fake."


def test_pr1_pr4_anthropic_request_maps_messages_and_tools(fake_provider_server: FakeProviderServer) -> None:
    collect(make("anthropic", fake_provider_server), ProviderRequest(conversation(), TOOLS, max_output_tokens=800))
    sent = fake_provider_server.requests[0]
    assert sent.path == "/v1/messages"
    # The SDK's auth header (x-api-key or a bearer token, by SDK version) carries the key.
    assert "sk-ant-test" in (sent.headers.get("x-api-key", "") + sent.headers.get("authorization", ""))
    body = sent.body
    assert body["stream"] is True and body["max_tokens"] == 800 and body["model"] == "claude-sonnet-4-6"
    assert [b["text"] for b in body["system"]] == [STATIC_PROMPT, SUMMARY, DYNAMIC]
    assert body["system"][0]["cache_control"] == {"type": "ephemeral"}
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "I like tea."}]},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "call_1", "name": "remember", "input": {"text": "likes tea"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "call_1", "content": '{"ok": true}'}]},
        {"role": "assistant", "content": [{"type": "text", "text": "Noted."}]},
        {"role": "user", "content": [{"type": "text", "text": SECRET}]},
    ]
    assert body["tools"][0] == {"name": "remember", "description": "Store a durable memory.",
                                "input_schema": TOOLS[0].parameters}


def test_pr1_anthropic_merges_parallel_tool_results_into_one_user_message(
    fake_provider_server: FakeProviderServer,
) -> None:
    calls = (ToolCall("a", "remember", {"text": "x"}), ToolCall("b", "remember", {"text": "y"}))
    messages = [
        ChatMessage("user", "two things"),
        ChatMessage("assistant", "On it.", tool_calls=calls),
        ChatMessage("tool", "ok a", tool_call_id="a"),
        ChatMessage("tool", "ok b", tool_call_id="b"),
    ]
    collect(make("anthropic", fake_provider_server), ProviderRequest(messages, TOOLS))
    sent = fake_provider_server.requests[0].body["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "user"]
    assert [b["type"] for b in sent[1]["content"]] == ["text", "tool_use", "tool_use"]
    assert [b["tool_use_id"] for b in sent[2]["content"]] == ["a", "b"]


# --- PR5: errors ------------------------------------------------------------------------------
ERROR_CASES = [
    (dict(status=401), "auth", False),
    (dict(status=403), "auth", False),
    (dict(status=429), "rate_limit", True),
    (dict(status=500), "server", True),
    (dict(status=503), "server", True),
    (dict(status=400), "bad_request", False),
    (dict(status=404), "bad_request", False),
    (dict(abort_after=3), "stream", True),
    (dict(end_after=3), "stream", True),
]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(("script", "error_kind", "retryable"), ERROR_CASES)
def test_pr5_provider_errors_map_to_clear_kinds(
    kind: str, script: dict[str, Any], error_kind: str, retryable: bool, fake_provider_server: FakeProviderServer
) -> None:
    fake_provider_server.script(**script)
    with pytest.raises(ProviderError) as caught:
        collect(make(kind, fake_provider_server), ProviderRequest(conversation(), TOOLS))
    error = caught.value
    assert error.kind == error_kind
    assert error.retryable is retryable
    message = str(error)
    assert "\n" not in message and message.endswith(".")
    assert "Rosalind" not in message and "fake error" not in message  # no content, no server text
    if "status" in script:
        assert f"({script['status']})" in message
    assert len(fake_provider_server.requests) == 1  # max_retries=0: Hearth reports, the user retries


def test_pr5_error_messages_read_clearly(fake_provider_server: FakeProviderServer) -> None:
    provider = make("openai", fake_provider_server)
    expected = {
        401: "The model provider rejected the API key (401).",
        429: "The model provider is rate-limiting requests (429); try again shortly.",
    }
    for status, message in expected.items():
        fake_provider_server.script(status=status)
        with pytest.raises(ProviderError, match="^" + re.escape(message) + "$"):
            collect(provider, ProviderRequest([ChatMessage("user", "hi")]))


@pytest.mark.parametrize("kind", KINDS)
def test_pr5_slow_provider_times_out_from_settings_timeout(
    kind: str, fake_provider_server: FakeProviderServer
) -> None:
    fake_provider_server.script(delay=1.0)
    with pytest.raises(ProviderError) as caught:
        collect(make(kind, fake_provider_server, timeout=0.25), ProviderRequest([ChatMessage("user", SECRET)]))
    assert caught.value.kind == "timeout" and caught.value.retryable
    assert "0.25 seconds" in str(caught.value)


@pytest.mark.parametrize("kind", KINDS)
def test_pr5_error_event_inside_stream_raises(kind: str, fake_provider_server: FakeProviderServer) -> None:
    fake_provider_server.script(error_event=True)
    with pytest.raises(ProviderError) as caught:
        collect(make(kind, fake_provider_server), ProviderRequest([ChatMessage("user", SECRET)]))
    assert caught.value.kind in ("stream", "server") and caught.value.retryable
    assert "Rosalind" not in str(caught.value)


@pytest.mark.parametrize("kind", KINDS)
def test_pr5_stream_cut_after_text_raises_after_partial_text(
    kind: str, fake_provider_server: FakeProviderServer
) -> None:
    # Partial text may already be out; the error tells the caller not to keep it as a reply.
    fake_provider_server.script(text=["one ", "two ", "three"], abort_after=6)
    received: list[StreamEvent] = []
    with pytest.raises(ProviderError) as caught:
        for event in make(kind, fake_provider_server).stream(ProviderRequest([ChatMessage("user", "hi")])):
            received.append(event)
    assert caught.value.kind == "stream"
    assert all(e.type == "text" for e in received)  # no usage event: the reply never completed


@pytest.mark.parametrize("kind", KINDS)
def test_pr5_unreachable_provider_is_a_server_error(kind: str) -> None:
    server = FakeProviderServer()
    server.port = 9  # discard port: nothing listens on 127.0.0.1:9
    with pytest.raises(ProviderError) as caught:
        collect(make(kind, server, timeout=2.0), ProviderRequest([ChatMessage("user", "hi")]))
    assert caught.value.kind == "server"
    assert str(caught.value).startswith("Could not reach the model provider at http://127.0.0.1:9")


def test_pr5_invalid_tool_arguments_are_a_stream_error(fake_provider_server: FakeProviderServer) -> None:
    fake_provider_server.script(text=[], tool_calls=[("c", "remember", {"text": "x"})])
    provider = make("openai-chat", fake_provider_server)
    events = collect(provider, ProviderRequest([ChatMessage("user", "hi")], TOOLS))
    assert [e.tool_call.arguments for e in events if e.tool_call] == [{"text": "x"}]
    from hearth.providers.base import parse_tool_arguments

    with pytest.raises(ProviderError) as caught:
        parse_tool_arguments('{"text": ')
    assert caught.value.kind == "stream"
    assert parse_tool_arguments("") == {}


# --- PR2: selection ---------------------------------------------------------------------------
def settings_from(tmp_path: Path, **env: str) -> Settings:
    return Settings.resolve(environ={"HEARTH_HOME": str(tmp_path), **env})


@pytest.mark.parametrize(("env", "name", "model"), [
    ({}, "offline", "offline"),
    ({"OPENAI_API_KEY": "sk"}, "openai", "gpt-4.1"),
    ({"OPENAI_API_KEY": "sk", "HEARTH_MODEL": "gpt-5-mini"}, "openai", "gpt-5-mini"),
    ({"ANTHROPIC_API_KEY": "ak"}, "anthropic", "claude-sonnet-4-6"),
    ({"ANTHROPIC_API_KEY": "ak", "OPENAI_API_KEY": "sk"}, "anthropic", "claude-sonnet-4-6"),
    ({"ANTHROPIC_API_KEY": "ak", "HEARTH_MODEL": "claude-opus-4-1"}, "anthropic", "claude-opus-4-1"),
    ({"HEARTH_BASE_URL": "http://127.0.0.1:11434/v1", "HEARTH_MODEL": "qwen2.5"}, "openai-chat", "qwen2.5"),
    ({"HEARTH_BASE_URL": "http://h/v1", "HEARTH_MODEL": "m", "OPENAI_API_KEY": "sk"}, "openai-chat", "m"),
    ({"HEARTH_PROVIDER": "offline", "OPENAI_API_KEY": "sk"}, "offline", "offline"),
    ({"HEARTH_PROVIDER": "openai-chat", "OPENAI_API_KEY": "sk"}, "openai-chat", "llama3.1"),
    ({"HEARTH_PROVIDER": "openai", "OPENAI_API_KEY": "sk", "ANTHROPIC_API_KEY": "ak"}, "openai", "gpt-4.1"),
])
def test_pr2_provider_chosen_from_environment(tmp_path: Path, env: dict[str, str], name: str, model: str) -> None:
    provider = provider_from_settings(settings_from(tmp_path, **env))
    assert (provider.name, provider.model) == (name, model)


@pytest.mark.parametrize(("env", "fragment"), [
    ({"HEARTH_PROVIDER": "anthropic"}, "ANTHROPIC_API_KEY"),
    ({"HEARTH_PROVIDER": "openai"}, "OPENAI_API_KEY"),
    ({"HEARTH_PROVIDER": "openai-chat"}, "HEARTH_BASE_URL"),
    ({"HEARTH_BASE_URL": "http://127.0.0.1:11434/v1"}, "HEARTH_MODEL"),
    ({"ANTHROPIC_API_KEY": "ak", "HEARTH_BASE_URL": "http://h/v1"}, "HEARTH_PROVIDER"),
    ({"HEARTH_PROVIDER_TIMEOUT": "0"}, "HEARTH_PROVIDER_TIMEOUT"),
])
def test_pr2_incomplete_configuration_is_a_clear_config_error(
    tmp_path: Path, env: dict[str, str], fragment: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        provider_from_settings(settings_from(tmp_path, **env))
    assert fragment in str(caught.value) and "\n" not in str(caught.value)


def test_pr2_unknown_provider_name_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(ConfigError):
        settings_from(tmp_path, HEARTH_PROVIDER="gemini")


@pytest.mark.parametrize(("env_provider", "path"), [
    ("openai", "/v1/responses"), ("openai-chat", "/v1/chat/completions"), ("anthropic", "/v1/messages"),
])
def test_pr2_pr4_configured_provider_talks_to_configured_url(
    tmp_path: Path, env_provider: str, path: str, fake_provider_server: FakeProviderServer
) -> None:
    base = fake_provider_server.base_url if env_provider == "anthropic" else fake_provider_server.openai_base_url
    settings = settings_from(tmp_path, HEARTH_PROVIDER=env_provider, HEARTH_BASE_URL=base, HEARTH_MODEL="my-model",
                             OPENAI_API_KEY="sk-env", ANTHROPIC_API_KEY="ak-env", HEARTH_PROVIDER_TIMEOUT="7")
    provider = provider_from_settings(settings)
    events = collect(provider, ProviderRequest([ChatMessage("user", "hello")]))
    assert text_of(events) == "Hello from the fake."
    sent = fake_provider_server.requests[0]
    assert sent.path == path and sent.body["model"] == "my-model"
    assert sent.headers.get("x-stainless-read-timeout") == "7.0"  # the settings timeout reached the SDK
    key = sent.headers.get("x-api-key") or sent.headers.get("authorization")
    assert key in (("ak-env", "Bearer ak-env") if env_provider == "anthropic" else ("Bearer sk-env",))


def test_pr2_context_window_for_model_names() -> None:
    assert context_window_for("gpt-4o-mini") == 128_000
    assert context_window_for("gpt-4.1") >= 128_000
    assert context_window_for("gpt-5") >= 128_000
    assert context_window_for("openai/gpt-4o") == 128_000
    assert context_window_for("claude-sonnet-4-6") == 200_000
    assert context_window_for("Claude-3-5-Haiku") == 200_000
    assert context_window_for("offline") == 32_000
    assert context_window_for("") == 32_000
    assert context_window_for("llama3.1:8b") == 8_192


# --- PR3: offline -----------------------------------------------------------------------------
def test_pr3_offline_reply_reports_shape_and_the_trimmed_text_of_each_section() -> None:
    request = ProviderRequest(conversation(), TOOLS)
    events = collect(OfflineProvider(), request)
    reply = text_of(events)
    lines = reply.splitlines()
    assert lines[0] == LABEL
    assert len([e for e in events if e.type == "text"]) >= 5  # streamed in several deltas
    assert f'"{SECRET}"' in reply  # the latest user message is quoted so a person sees it answered
    assert "Messages in the request: 8." in reply
    assert "Prompt sections: Identity, Voice, Boundaries." in reply
    assert "Context blocks: HOUSEHOLD STATUS (2 lines), AUTO-RECALLED CONTEXT (1 line)." in reply
    assert "Rolling thread summary: present." in reply
    assert "History turns: 3." in reply
    assert "Tools offered: remember, search_memory." in reply
    chars = sum(len(m.content) for m in request.messages) + len(json.dumps({"text": "likes tea"}))
    assert f"Request size: {chars} characters" in reply
    # What the companion was given shows under each heading and label, trimmed, so a new user
    # sees every layer working; history turns are counted, not repeated.
    assert "- Identity: You are Elion, a warm companion who remembers." in reply
    assert "- Boundaries: Never reveal the quartz code." in reply
    assert "- HOUSEHOLD STATUS: kettle: on / front door: locked" in reply
    assert "- AUTO-RECALLED CONTEXT: likes marmalade toast" in reply
    assert "- Summary: they planned a trip to the lighthouse." in reply
    for history_only in ("I like tea", "Noted"):
        assert history_only not in reply
    usage = events[-1].usage
    assert events[-1].type == "usage" and usage is not None
    assert usage.input_tokens == (chars + 3) // 4
    assert usage.output_tokens == (len(reply) + 3) // 4
    assert collect(OfflineProvider(), request) == events  # deterministic


def test_pr3_offline_reply_with_bare_request_and_long_message() -> None:
    long_message = "word " * 100
    reply = text_of(collect(OfflineProvider(), ProviderRequest([ChatMessage("user", long_message)])))
    assert "Prompt sections: none." in reply and "Context blocks: none." in reply
    assert "Rolling thread summary: absent." in reply and "History turns: 0." in reply
    assert "Tools offered: none." in reply
    quoted = reply.splitlines()[1]
    assert quoted.endswith('…"') and len(quoted) < 100


def test_pr3_offline_reply_trims_long_sections_to_their_first_lines() -> None:
    recalled = "\n".join(f"- remembered item {n} " + "x" * 200 for n in range(40))
    request = ProviderRequest([ChatMessage("system", f"=== AUTO-RECALLED CONTEXT ===\n{recalled}\n"),
                               ChatMessage("user", "hello")])
    reply = text_of(collect(OfflineProvider(), request))
    [detail] = [line for line in reply.splitlines() if line.startswith("- AUTO-RECALLED CONTEXT:")]
    assert "remembered item 0" in detail and "remembered item 1 " in detail and "item 2 " not in detail
    assert detail.endswith("/ …") and len(detail) < 2 * 90 + 40


def test_pr3_offline_tool_command_emits_tool_call_then_reports_result() -> None:
    provider = OfflineProvider()
    messages = [ChatMessage("system", STATIC_PROMPT),
                ChatMessage("user", 'please /tool remember {"text": "likes tea"} thanks')]
    events = collect(provider, ProviderRequest(messages, TOOLS))
    calls = [e.tool_call for e in events if e.type == "tool_call"]
    assert len(calls) == 1 and calls[0] is not None
    assert (calls[0].name, calls[0].arguments) == ("remember", {"text": "likes tea"})
    assert text_of(events).startswith(LABEL)
    assert events[-1].type == "usage"

    messages += [ChatMessage("assistant", "", tool_calls=(calls[0],)),
                 ChatMessage("tool", "stored memory 17", tool_call_id=calls[0].id)]
    followup = collect(provider, ProviderRequest(messages, TOOLS))
    assert not [e for e in followup if e.type == "tool_call"]  # no loop: the tool turn ends
    reply = text_of(followup)
    assert reply.startswith(LABEL)
    assert "A tool result of 16 characters arrived from the tool remember." in reply
    assert "stored memory" not in reply


def test_pr3_offline_tool_command_with_bad_arguments_explains() -> None:
    events = collect(OfflineProvider(), ProviderRequest([ChatMessage("user", "/tool remember {not json")]))
    assert not [e for e in events if e.type == "tool_call"]
    assert "needs its arguments as one JSON object" in text_of(events)
    events = collect(OfflineProvider(), ProviderRequest([ChatMessage("user", "/tool list_memories")]))
    assert [e.tool_call.arguments for e in events if e.tool_call] == [{}]
