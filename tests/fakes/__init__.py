"""Test doubles that speak real wire formats, and their pytest fixtures.

Use in a test module with ``from tests.fakes import fake_provider_server, fake_provider_session``
(import both: the first depends on the second), or register them once in ``tests/conftest.py``
the same way. One server runs per test session; each test gets it with an empty script queue and
an empty request log.
"""

from __future__ import annotations

from typing import Iterator

import pytest

from .provider_server import FakeProviderServer, RecordedRequest, Scripted

__all__ = [
    "FakeProviderServer",
    "RecordedRequest",
    "Scripted",
    "fake_provider_server",
    "fake_provider_session",
]


@pytest.fixture(scope="session")
def fake_provider_session() -> Iterator[FakeProviderServer]:
    server = FakeProviderServer().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def fake_provider_server(fake_provider_session: FakeProviderServer) -> Iterator[FakeProviderServer]:
    fake_provider_session.reset()
    yield fake_provider_session
    fake_provider_session.reset()
