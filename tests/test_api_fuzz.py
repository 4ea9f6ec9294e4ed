"""A property-based fuzz of the HTTP API from its own OpenAPI description (U3, U4).

schemathesis generates requests for every operation, valid ones and invalid ones, and sends them
to the app over a real SQLite home, authenticated like a real client (the owner's API token).
Every answer must be what the description promises: never a 5xx, a documented status code, a
body matching the documented schema (``{error, detail}`` for every error), and a schema-valid
request is never refused as unparseable (400). A refused request (4xx) changes nothing: no commit
reaches the database. Every JSON answer carries ``Cache-Control: no-store`` and ``nosniff``.

The suite runs a few fixed examples per operation and mode (``FUZZ_EXAMPLES``, default 3);
``make fuzz`` runs many more, new ones every run (``FUZZ_RANDOM=1``).
"""

from __future__ import annotations

import os
import sqlite3
import time
from typing import Iterator

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import checks as sc
from schemathesis.config import SchemathesisConfig
from schemathesis.generation import GenerationMode
from schemathesis.specs.openapi import checks as oc

from hearth import Hearth, Settings
from hearth.server import create_app

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "3"))
RANDOM = os.environ.get("FUZZ_RANDOM", "") == "1"  # the suite replays the same cases every run
# Operations that would end the fuzz's own credentials; they are covered by tests/test_auth.py
# (and the owner's token routes by tests/test_connect.py). The connection's model list and test
# reach out to whatever address they are given: tests/test_connect.py drives them against a fake.
# /mcp is served by the MCP SDK and driven through the SDK's own client in tests/test_mcp.py; its
# description is checked in tests/test_server.py.
SKIPPED = ("/api/auth/tokens/{token_id}", "/api/auth/logout", "/api/admin/users/{user_id}/tokens/{token_id}",
           "/api/connection/models", "/api/connection/test", "/mcp")
ENDLESS = ("/api/timeline/live",)
CHECKS = [sc.not_a_server_error, oc.status_code_conformance, oc.content_type_conformance,
          oc.response_schema_conformance, oc.negative_data_rejection, oc.positive_data_acceptance]


def _config() -> SchemathesisConfig:
    return SchemathesisConfig.from_dict({
        "generation": {"max-examples": EXAMPLES, "with-security-parameters": False, "database": "none"},
        "checks": {
            # A schema-valid request may still name an unknown id (404), clash with state (409) or
            # fail a rule no schema can state (422), but is never unparseable (400).
            "positive_data_acceptance": {"expected-statuses": ["2XX", "404", "409", "422"]},
            "negative_data_rejection": {"expected-statuses": ["400", "404", "405", "413", "422"]},
        },
        "operations": [
            # A well-formed login with a wrong password is refused, and then rate limited.
            {"include-path": "/api/auth/login", "checks": {
                "positive_data_acceptance": {"expected-statuses": ["2XX", "401", "409", "422", "429"]}}},
            # Webhooks answer only requests signed by their provider.
            {"include-path-regex": "^/channels/", "checks": {
                "positive_data_acceptance": {"expected-statuses": ["2XX", "403", "404"]}}},
            # A model name the provider's list does not have is refused with 400 (unknown_model).
            {"include-path": "/api/conversations/{conversation_id}/model", "checks": {
                "positive_data_acceptance": {"expected-statuses": ["2XX", "400", "404", "409", "422"]}}},
            # OpenAI's clients expect 400 for every invalid request (a tool message last, ...).
            {"include-path-regex": "^/v1/", "checks": {
                "positive_data_acceptance": {"expected-statuses": ["2XX", "400", "404", "409"]}}},
        ],
    })


@pytest.fixture(scope="module")
def fuzz_home(tmp_path_factory) -> Iterator[tuple[Hearth, str]]:
    home = tmp_path_factory.mktemp("fuzz-home")
    # The provider chosen by settings, so a connection the fuzz saves (PUT /api/connection, W10)
    # never sends its later requests to an address it made up.
    hearth = Hearth(Settings.resolve({"home": str(home), "input_token_limit": 32_000, "provider": "offline"},
                                     environ={}))
    owner = hearth.users.owner()
    hearth.users.set_password(owner.id, "correct horse battery staple")
    token = hearth.users.create_token(owner.id, "fuzz")
    me = hearth.scope()
    persona = me.personas.create("elion", "Elion", identity="A steady companion.")
    conversation = me.conversations.create(persona.id, title="Morning")
    me.send(conversation.id, "Good morning")
    me.memories.add("The person likes tea.")
    yield hearth, token
    hearth.close()


@pytest.fixture(scope="module")
def api_schema(fuzz_home):
    hearth, token = fuzz_home
    schema = schemathesis.openapi.from_asgi("/openapi.json", create_app(hearth.settings, hearth), config=_config(),
                                            headers={"Authorization": f"Bearer {token}"})
    return schema.exclude(path=list(SKIPPED))


def _operations(schema) -> list:
    return [result.ok() for result in schema.get_all_operations()]


def _check(case, hearth: Hearth, token: str, observer: sqlite3.Connection) -> None:
    # PRAGMA data_version changes exactly when another connection commits: a refusal must not.
    before = observer.execute("PRAGMA data_version").fetchone()[0]
    headers = {"Authorization": f"Bearer {token}"}
    # The live notices stream never ends: it is read for one second.
    response = case.call(headers=headers, timeout=1 if case.path in ENDLESS else 120)
    case.validate_response(response, checks=CHECKS, headers=headers)
    headers_sent = {name.lower(): values for name, values in response.headers.items()}  # name -> [values]
    assert headers_sent.get("x-content-type-options") == ["nosniff"], case.formatted_path
    if headers_sent.get("content-type", [""])[0].startswith("application/json"):
        assert headers_sent.get("cache-control") == ["no-store"], (case.method, case.formatted_path)
    if 400 <= response.status_code < 500:
        assert observer.execute("PRAGMA data_version").fetchone()[0] == before, (
            f"{case.method} {case.formatted_path} answered {response.status_code} but wrote to the database")


def _describe(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, BaseExceptionGroup):
        text += "".join("\n  - " + _describe(inner).replace("\n", "\n    ") for inner in exc.exceptions)
    return text


def test_u3_u4_every_operation_answers_as_its_description_says(api_schema, fuzz_home):
    hearth, token = fuzz_home
    observer = sqlite3.connect(hearth.settings.database_path)
    failures: list[str] = []
    timings: dict[str, float] = {}
    operations = _operations(api_schema)
    assert len(operations) > 100
    for operation in operations:
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):

            @given(case=operation.as_strategy(mode))
            @settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=not RANDOM,
                      suppress_health_check=list(HealthCheck), phases=[Phase.generate])
            def run(case) -> None:
                _check(case, hearth, token, observer)

            started = time.perf_counter()
            try:
                run()
            except Unsatisfiable:
                continue  # nothing to make invalid: an operation without parameters or body
            except (Exception, BaseExceptionGroup) as exc:  # noqa: BLE001  (collected, then all reported)
                failures.append(f"{operation.label} ({mode.value}): {_describe(exc)}")
            finally:
                timings[f"{operation.label} {mode.value}"] = time.perf_counter() - started
    observer.close()
    if os.environ.get("FUZZ_TIMINGS"):
        for label, seconds in sorted(timings.items(), key=lambda t: -t[1])[:15]:
            print(f"{seconds:6.2f} s  {label}")
    assert not failures, f"{len(failures)} failing:\n\n" + "\n\n".join(failures)
