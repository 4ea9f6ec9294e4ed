"""Shared fixtures: real SQLite files in tmp_path, a scripted in-process provider for engine tests."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
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
    for item in items:
        if item.get_closest_marker("sqlite_only") and "sqlite" not in item.name:
            raise pytest.UsageError(f"{item.nodeid} is marked sqlite_only: its name must say sqlite")
    if ENGINE == "postgres":
        keep = [item for item in items if not item.get_closest_marker("sqlite_only")]
        dropped = [item for item in items if item.get_closest_marker("sqlite_only")]
        if dropped:
            config.hook.pytest_deselected(items=dropped)
            items[:] = keep


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

# -- the PostgreSQL lane (S9) ---------------------------------------------------------------------
# HEARTH_TEST_ENGINE=postgres runs the suite against a real PostgreSQL with pgvector that this
# session starts (tests/pgserver.py). Every deployment a test opens gets a database of its own,
# told apart by its home: the test's first deployment gets a migrated database emptied for it, a
# second deployment (an import target, a server with its own home) a fresh copy of the migrated
# template, dropped after the test; a deployment a module-scoped fixture makes keeps its database
# for the session. Subprocesses started with a HEARTH_HOME get their deployment's database too. A
# test or process given a database URL explicitly (an empty one for SQLite) keeps it. Tests marked ``sqlite_only`` (their
# names say sqlite) prove a property of SQLite itself; the lane leaves them out and says how many.

ENGINE = os.environ.get("HEARTH_TEST_ENGINE", "sqlite")
def pytest_report_header(config):
    return f"hearth store engine: {ENGINE}"


@pytest.fixture(scope="session")
def pg_server():
    from tests.pgserver import LocalPostgres

    server = LocalPostgres().start()
    server.make_template()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def _pg_database(pg_server):
    url = pg_server.new_database()
    yield url
    pg_server.drop_database(url)


@pytest.fixture
def pg_url(pg_server, _pg_database):
    """A migrated PostgreSQL database with no rows, for one test."""
    pg_server.empty(_pg_database)
    return _pg_database


class _Deployments:
    """Which database each deployment (home folder) of the PostgreSQL lane uses."""

    def __init__(self, server, basetemp: Path):
        self.server = server
        self.basetemp = str(basetemp)
        self.session: dict[str, str] = {}
        self.test_tmp: str | None = None
        self.test_default = ""
        self.test_homes: dict[str, str] = {}

    def url_for(self, home: str) -> str:
        key = str(Path(home).expanduser()) if home else ""
        in_test = self.test_tmp is not None and (
            not key.startswith(self.basetemp + os.sep) or key.startswith(self.test_tmp + os.sep))
        if in_test:
            if key not in self.test_homes:
                self.test_homes[key] = self.server.new_database() if self.test_homes else self.test_default
            return self.test_homes[key]
        if key not in self.session:
            self.session[key] = self.server.new_database()
        return self.session[key]

    def end_test(self) -> None:
        for url in self.test_homes.values():
            if url != self.test_default:
                self.server.drop_database(url)
        self.test_tmp, self.test_homes = None, {}


if ENGINE == "postgres":
    import subprocess

    @pytest.fixture(scope="session", autouse=True)
    def _postgres_lane(pg_server, tmp_path_factory):
        lane = _Deployments(pg_server, tmp_path_factory.getbasetemp())
        patch = pytest.MonkeyPatch()
        original = Settings.resolve.__func__

        def resolve(cls, overrides=None, environ=None):
            env = os.environ if environ is None else environ
            if "database_url" not in (overrides or {}) and "HEARTH_DATABASE_URL" not in env:
                home = (overrides or {}).get("home") or env.get("HEARTH_HOME") or ""
                environ = {**env, "HEARTH_DATABASE_URL": lane.url_for(str(home))}
            return original(cls, overrides, environ)

        popen_init = subprocess.Popen.__init__

        def popen(self, *args, **kwargs):
            env = kwargs.get("env")
            env = os.environ if env is None else env
            if env.get("HEARTH_HOME") and "HEARTH_DATABASE_URL" not in env:
                kwargs["env"] = {**env, "HEARTH_DATABASE_URL": lane.url_for(env["HEARTH_HOME"])}
            popen_init(self, *args, **kwargs)

        patch.setattr(Settings, "resolve", classmethod(resolve))
        patch.setattr(subprocess.Popen, "__init__", popen)
        yield lane
        patch.undo()
        for url in lane.session.values():
            pg_server.drop_database(url)

    @pytest.fixture(autouse=True)
    def _postgres_engine(_postgres_lane, pg_url, tmp_path):
        """This test's deployments: the first uses ``pg_url``, emptied for it."""
        _postgres_lane.test_tmp, _postgres_lane.test_default = str(tmp_path), pg_url
        yield pg_url
        _postgres_lane.end_test()
