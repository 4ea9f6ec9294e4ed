"""Provider choice from settings (PR2) and default input-token limits per model name (R1).

Rules, first match wins:
  1. ``provider`` set explicitly (HEARTH_PROVIDER) -> that provider; it must have what it needs.
  2. an Anthropic key -> Anthropic Messages (with a base URL too, the choice is ambiguous: error).
  3. a base URL (HEARTH_BASE_URL), with or without an OpenAI key -> OpenAI-compatible chat.
  4. an OpenAI key -> OpenAI Responses API.
  5. nothing -> offline.
The SDK modules are imported only when their provider is built, so importing Hearth stays cheap.

A connection stored from the app (W10, ``records.connections``) fills the provider settings only
while the environment and the config file leave all of them empty (``environment_chooses``): the
operator's configuration always wins, and the Settings page says so.
"""

from __future__ import annotations

from typing import Any

from ..errors import ConfigError
from ..extras import require
from .base import Provider

DEFAULT_MODELS = {
    "openai": "gpt-4.1",
    "openai-chat": "llama3.1",
    "anthropic": "claude-sonnet-4-6",
    "offline": "offline",
}


# The settings that pick a provider; when any is set outside the app, the app's connection waits.
PROVIDER_FIELDS = {"provider": "HEARTH_PROVIDER", "base_url": "HEARTH_BASE_URL",
                   "openai_api_key": "OPENAI_API_KEY", "anthropic_api_key": "ANTHROPIC_API_KEY"}


def environment_chooses(settings: Any) -> list[str]:
    """The environment names (or config-file keys) that choose the provider here; empty: none do."""
    return [env for name, env in PROVIDER_FIELDS.items() if getattr(settings, name)]


def with_connection(settings: Any, values: dict[str, Any] | None) -> Any:
    """``settings`` with a stored connection's provider fields, unless the environment chooses."""
    if not values or environment_chooses(settings):
        return settings
    return settings.with_(**values)


def provider_key(settings: Any) -> tuple[Any, ...]:
    """What a built provider depends on: equal keys may share one provider object."""
    return (choose_provider_name(settings), settings.model, settings.base_url, settings.openai_api_key,
            settings.anthropic_api_key, float(settings.provider_timeout))


def choose_provider_name(settings: Any) -> str:
    if settings.provider:
        return str(settings.provider)
    if settings.anthropic_api_key:
        if settings.base_url:
            # Both could be meant; guessing would send the conversation to the wrong place.
            raise ConfigError(
                "both ANTHROPIC_API_KEY and HEARTH_BASE_URL are set; set HEARTH_PROVIDER to anthropic or openai-chat"
            )
        return "anthropic"
    if settings.base_url:
        return "openai-chat"
    if settings.openai_api_key:
        return "openai"
    return "offline"


def provider_from_settings(settings: Any) -> Provider:
    """Build the configured provider; raise ConfigError with one clear line if it cannot work."""
    name = choose_provider_name(settings)
    model = settings.model or DEFAULT_MODELS.get(name, "")
    timeout = float(settings.provider_timeout)
    if timeout <= 0:
        raise ConfigError("HEARTH_PROVIDER_TIMEOUT must be a positive number of seconds")
    if name == "offline":
        from .offline import OfflineProvider

        return OfflineProvider()
    if name == "anthropic":
        if not settings.anthropic_api_key:
            raise ConfigError("provider anthropic needs ANTHROPIC_API_KEY")
        require("anthropic", "anthropic", "provider anthropic")
        from .anthropic_messages import AnthropicProvider

        return AnthropicProvider(model=model, api_key=settings.anthropic_api_key,
                                 base_url=settings.base_url, timeout=timeout)
    if name == "openai":
        if not settings.openai_api_key:
            raise ConfigError("provider openai needs OPENAI_API_KEY")
        require("openai", "openai", "provider openai")
        from .openai_responses import OpenAIResponsesProvider

        return OpenAIResponsesProvider(model=model, api_key=settings.openai_api_key,
                                       base_url=settings.base_url, timeout=timeout)
    if name == "openai-chat":
        if not settings.base_url and not settings.openai_api_key:
            raise ConfigError("provider openai-chat needs HEARTH_BASE_URL (or OPENAI_API_KEY for api.openai.com)")
        if not settings.model and settings.base_url:
            # A local server's model names are the user's own; guessing one would just fail later.
            raise ConfigError("provider openai-chat needs HEARTH_MODEL (the model name your server serves)")
        require("openai", "openai", "provider openai-chat")
        from .openai_chat import OpenAIChatProvider

        return OpenAIChatProvider(model=model, api_key=settings.openai_api_key,
                                  base_url=settings.base_url, timeout=timeout)
    raise ConfigError(f"unknown provider {name!r}; use offline, openai, openai-chat or anthropic")


# (prefix, input tokens), checked in order, so longer prefixes come first.
_WINDOWS: tuple[tuple[str, int], ...] = (
    ("offline", 32_000),
    ("gpt-5", 272_000),
    ("gpt-4.1", 1_000_000),
    ("gpt-4o", 128_000),
    ("gpt-4-turbo", 128_000),
    ("gpt-4", 8_192),
    ("gpt-3.5", 16_385),
    ("o1", 200_000),
    ("o3", 200_000),
    ("o4", 200_000),
    ("claude", 200_000),
)
UNKNOWN_MODEL_WINDOW = 8_192


def context_window_for(model: str) -> int:
    """A sensible default input-token limit for a model name (HEARTH_INPUT_TOKEN_LIMIT overrides)."""
    name = (model or "offline").strip().lower()
    name = name.rsplit("/", 1)[-1]  # "openai/gpt-4o" as routers spell it
    for prefix, window in _WINDOWS:
        if name.startswith(prefix):
            return window
    return UNKNOWN_MODEL_WINDOW
