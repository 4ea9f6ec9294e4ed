"""Trying a connection before it is saved (W10): the provider's own model list and one real request.

Both build a throw-away provider from the deployment's settings with the candidate's provider
fields (``records.connections.check_connection`` has checked them) and go through the same SDK
code the send path uses, so "it works here" means the chat will work. What comes back is plain
words: the ``ProviderError`` messages are content-free and never carry the provider's own text,
which may echo the key (``providers.base``).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError, ProviderError
from .base import ChatMessage, ProviderRequest
from .catalog import _NOT_CHAT
from .select import provider_from_settings

log = logging.getLogger(__name__)

TEST_PROMPT = "This is a connection test. Reply with one short friendly sentence."
TEST_OUTPUT_TOKENS = 32  # enough for a sentence; the Responses API refuses fewer than 16
LISTING_MODEL = "listing"  # a placeholder: listing asks for no model, but a provider needs a name
TEST_TIMEOUT = 20.0  # seconds: a person is waiting on the button, not on a long reply


@dataclass(frozen=True)
class Tried:
    """The outcome of a test: ``ok`` with the reply's first words, or the reason in plain words."""

    ok: bool
    provider: str
    model: str
    seconds: float
    reply: str = ""
    detail: str = ""


def candidate(settings: Any, provider: str, model: str, base_url: str, api_key: str) -> Any:
    """The deployment's settings with a candidate connection's provider fields."""
    return settings.with_(provider=provider, model=model, base_url=base_url,
                          provider_timeout=min(float(settings.provider_timeout), TEST_TIMEOUT),
                          openai_api_key=api_key if provider in ("openai", "openai-chat") else "",
                          anthropic_api_key=api_key if provider == "anthropic" else "")


def list_models(settings: Any) -> list[str]:
    """The provider's chat models, through its SDK's ``models.list()``; ``ProviderError`` or
    ``ConfigError`` in plain words when they cannot be read."""
    if settings.provider == "offline":
        return ["offline"]
    provider = provider_from_settings(settings.with_(model=settings.model or LISTING_MODEL))
    lister = getattr(provider, "list_models", None)  # every SDK-backed provider has it (providers.base)
    names = lister() if lister else [provider.model]
    return sorted((n for n in names if not _NOT_CHAT.search(n)), key=str.lower)


def try_connection(settings: Any) -> Tried:
    """Send one small real request and report what happened (the reply is not stored anywhere)."""
    started = time.monotonic()
    name = settings.provider
    try:
        provider = provider_from_settings(settings)
        request = ProviderRequest(messages=[ChatMessage("user", TEST_PROMPT)], max_output_tokens=TEST_OUTPUT_TOKENS)
        parts: list[str] = []
        for event in provider.stream(request):
            if event.type == "text":
                parts.append(event.text)
    except (ProviderError, ConfigError) as exc:
        # The type only: the message is shown to the person, never written to the log.
        log.info("connection test failed (%s, %s)", name, type(exc).__name__)
        return Tried(False, name, settings.model, round(time.monotonic() - started, 3), detail=str(exc))
    reply = " ".join("".join(parts).split())[:200]
    log.info("connection test succeeded (%s, %d characters)", name, len(reply))
    return Tried(True, name, provider.model, round(time.monotonic() - started, 3), reply=reply)
