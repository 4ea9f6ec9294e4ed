"""Shared fixtures: real SQLite files in tmp_path, a scripted in-process provider for engine tests."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterator

import pytest

from hearth import Hearth, Settings
from hearth.providers.base import ProviderRequest, StreamEvent, Usage


@dataclass
class RecordingProvider:
    """A provider for engine tests that records each request and answers from a script.

    Provider SDK paths are tested against fake HTTP servers in test_providers.py; engine tests
    use this to see exactly what the engine assembled.
    """

    name: str = "recording"
    model: str = "recording-model"
    replies: list[Callable[[ProviderRequest], Iterator[StreamEvent]]] = field(default_factory=list)
    requests: list[ProviderRequest] = field(default_factory=list)

    def stream(self, request: ProviderRequest) -> Iterator[StreamEvent]:
        self.requests.append(request)
        if self.replies:
            yield from self.replies.pop(0)(request)
            return
        yield StreamEvent("text", text="Reply ")
        yield StreamEvent("text", text=f"{len(self.requests)}")
        yield StreamEvent("usage", usage=Usage(input_tokens=100, output_tokens=5))


def pytest_collection_modifyitems(config, items):
    # Every web UI test drives Chromium for seconds: it counts as slow (see the Makefile's `test`).
    for item in items:
        if item.get_closest_marker("ui"):
            item.add_marker(pytest.mark.slow)


@pytest.fixture
def settings(tmp_path) -> Settings:
    return Settings.resolve({"home": str(tmp_path / "home"), "input_token_limit": 32_000}, environ={})


@pytest.fixture
def provider() -> RecordingProvider:
    return RecordingProvider()


@pytest.fixture
def hearth(settings, provider) -> Iterator[Hearth]:
    h = Hearth(settings, provider=provider)
    yield h
    h.close()


@pytest.fixture
def me(hearth):
    """The owner's scope."""
    return hearth.scope()


@pytest.fixture
def persona(me):
    return me.personas.create(
        "elion", "Elion", identity="I am Elion, a steady companion.",
        user_label="AUMA said:", assistant_label="Elion Voicefire said:",
    )


from tests.fakes import fake_provider_server, fake_provider_session  # noqa: E402,F401  (shared fixtures)
