"""Per-chat model choice, prompt presets and the first-run welcome (W3, PR1, PR2, PR4, P5, U1, U3).

Model lists come through the official SDKs from the fake provider server speaking each provider's
real wire format; requests are read back from it. Everything else runs on real database files.
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from hearth import Hearth, InvalidInput, Settings
from hearth.cli import cli
from hearth.errors import ProviderError, UnknownModel
from hearth.providers.anthropic_messages import AnthropicProvider
from hearth.providers.offline import OfflineProvider
from hearth.providers.openai_chat import OpenAIChatProvider
from hearth.providers.openai_responses import OpenAIResponsesProvider
from hearth.records.personas import DEFAULT_IDENTITY
from hearth.server import create_app
from tests.test_server import BASE, assert_error, row_counts

KINDS = ["openai", "openai-chat", "anthropic"]
DEFAULTS = {"openai": "gpt-4.1", "openai-chat": "llama3.1", "anthropic": "claude-sonnet-4-6"}


def provider_settings(tmp_path, fake, kind: str = "openai", **extra) -> Settings:
    values = {"home": str(tmp_path / "home"), "provider": kind, "model": DEFAULTS[kind],
              "base_url": fake.anthropic_base_url if kind == "anthropic" else fake.openai_base_url,
              "openai_api_key": "sk-test", "anthropic_api_key": "sk-ant-test", **extra}
    return Settings.resolve(values, environ={})


@pytest.fixture
def served(tmp_path, fake_provider_server):
    """(client, hearth, fake) over the OpenAI Responses provider, the model limit derived from names."""
    hearth = Hearth(provider_settings(tmp_path, fake_provider_server, "openai", input_token_limit=0,
                                      compaction_threshold=0.5))
    with TestClient(create_app(hearth.settings, hearth), base_url=BASE) as client:
        yield client, hearth, fake_provider_server
    hearth.close()


def bodies(fake, path="/v1/responses"):
    return [r.body for r in fake.requests if r.path == path]


def model_requests(fake):
    return [r for r in fake.requests if r.path == "/v1/models"]


def send(client, conversation_id, text):
    response = client.post(f"/api/conversations/{conversation_id}/messages", json={"text": text})
    assert response.status_code == 200, response.text
    frames = [json.loads(line[5:]) for line in response.text.splitlines() if line.startswith("data:")]
    return frames


# -- PR1 / PR4: listing through the official SDKs ------------------------------------------------------
@pytest.mark.parametrize("kind", KINDS)
def test_pr1_pr4_each_provider_lists_its_models_through_its_sdk(kind, fake_provider_server):
    fake = fake_provider_server
    fake.models = [f"model-{n:02d}" for n in range(25)]
    fake.models_page = 10  # Anthropic pages: the SDK must follow has_more / after_id
    if kind == "openai":
        provider = OpenAIResponsesProvider(model="gpt-4.1", api_key="sk-test", base_url=fake.openai_base_url)
    elif kind == "openai-chat":
        provider = OpenAIChatProvider(model="llama3.1", base_url=fake.openai_base_url)
    else:
        provider = AnthropicProvider(model="claude-sonnet-4-6", api_key="sk-ant-test", base_url=fake.anthropic_base_url)
    assert provider.list_models() == fake.models
    asked = model_requests(fake)
    if kind == "anthropic":
        assert [r.query.get("after_id") for r in asked] == [None, "model-09", "model-19"]
        for r in asked:  # the SDK's auth header (x-api-key or a bearer token, by SDK version) carries the key
            assert "sk-ant-test" in r.headers.get("x-api-key", "") + r.headers.get("authorization", "")
            assert "anthropic-version" in r.headers
    else:
        assert len(asked) == 1 and "anthropic-version" not in asked[0].headers
    # A refusal is a clear, content-free provider error, as for a reply.
    fake.models_status = 401
    with pytest.raises(ProviderError) as refused:
        provider.list_models()
    assert refused.value.kind == "auth" and "401" in str(refused.value)


def test_pr1_offline_lists_only_offline():
    assert OfflineProvider().list_models() == ["offline"]


def test_w3_models_endpoint_offers_the_default_first_and_no_embedding_models(served):
    client, _, fake = served
    fake.models = ["zeta-chat", "text-embedding-3-small", "gpt-4.1-mini", "whisper-1", "gpt-4o", "dall-e-3"]
    offered = client.get("/api/models").json()
    assert offered == {"provider": "openai", "default": "gpt-4.1", "listed": True, "detail": None,
                       "models": ["gpt-4.1", "gpt-4.1-mini", "gpt-4o", "zeta-chat"]}
    # Fetched on demand, then kept briefly: a second look does not ask the provider again.
    client.get("/api/models")
    assert len(model_requests(fake)) == 1
    fake.models = ["gpt-4.1", "gpt-5"]
    assert client.get("/api/models?refresh=true").json()["models"] == ["gpt-4.1", "gpt-5"]
    assert len(model_requests(fake)) == 2


# -- W3 / PR1: the chosen model in the request, the chain restarting ------------------------------------
def test_w3_pr1_e7_a_chats_model_reaches_the_request_its_limit_follows_and_the_chain_restarts(served):
    client, hearth, fake = served
    fake.models = ["gpt-4.1", "gpt-4o"]
    me = hearth.scope()
    chat = me.conversations.create(me.personas.create("elion", "Elion").id)
    fake.script(response_id="resp_1")
    first = send(client, chat.id, "First, with the default")
    assert bodies(fake)[-1]["model"] == "gpt-4.1"
    assert first[1]["input_limit_tokens"] == 1_000_000  # the diagnostics frame: gpt-4.1's window
    assert bodies(fake)[-1]["context_management"][0]["compact_threshold"] == 500_000
    fake.script(response_id="resp_2")
    send(client, chat.id, "Second, chained")
    assert bodies(fake)[-1]["previous_response_id"] == "resp_1"

    chosen = client.put(f"/api/conversations/{chat.id}/model", json={"model": "gpt-4o"})
    assert chosen.status_code == 200, chosen.text
    assert chosen.json()["conversation"]["model"] == "gpt-4o" and chosen.json()["checked"] is True
    assert client.get(f"/api/conversations/{chat.id}").json()["model"] == "gpt-4o"
    fake.script(response_id="resp_3")
    third = send(client, chat.id, "Third, another model")
    body = bodies(fake)[-1]
    assert body["model"] == "gpt-4o"
    assert "previous_response_id" not in body  # resp_2 came from gpt-4.1: never continued
    assert [item.get("content") for item in body["input"]] == [  # the whole thread is sent again
        "First, with the default", "Hello from the fake.", "Second, chained", "Hello from the fake.",
        "Third, another model"]
    assert third[1]["input_limit_tokens"] == 128_000  # the budget follows gpt-4o's window
    assert body["context_management"][0]["compact_threshold"] == 64_000
    reply = me.conversations.message(third[-1]["message_id"])
    assert reply.metadata["model"] == "gpt-4o"
    fake.script(response_id="resp_4")
    send(client, chat.id, "Fourth, chained again")
    assert bodies(fake)[-1]["previous_response_id"] == "resp_3"
    assert hearth.scope().timeline.context(chat.id).threshold_tokens == 64_000  # the header's meter too

    # Back to the default: neither resp_2 (the default's old chain) nor resp_4 is continued.
    back = client.put(f"/api/conversations/{chat.id}/model", json={"model": None})
    assert back.json()["conversation"]["model"] is None
    fake.script(response_id="resp_5")
    send(client, chat.id, "Fifth, the default again")
    assert bodies(fake)[-1]["model"] == "gpt-4.1" and "previous_response_id" not in bodies(fake)[-1]
    # The send path itself never asked for the model list: only the two choices did (cached).
    assert len(model_requests(fake)) == 1
    kinds = [e["kind"] for e in client.get(f"/api/conversations/{chat.id}/events").json()]
    assert kinds.count("conversation.model_set") == 2


@pytest.mark.parametrize("kind", ["openai-chat", "anthropic"])
def test_w3_pr1_chat_completions_and_anthropic_requests_carry_the_chosen_model(kind, tmp_path, fake_provider_server):
    fake = fake_provider_server
    fake.models = [DEFAULTS[kind], "other-model"]
    with Hearth(provider_settings(tmp_path, fake, kind)) as hearth:
        me = hearth.scope()
        chat = me.conversations.create(me.personas.create("elion", "Elion").id)
        me.send(chat.id, "With the default")
        conversation, choice = me.set_model(chat.id, "other-model")
        assert conversation.model == "other-model" and choice is not None and choice.checked
        me.send(chat.id, "With the other one")
    path = "/v1/messages" if kind == "anthropic" else "/v1/chat/completions"
    assert [b["model"] for b in bodies(fake, path)] == [DEFAULTS[kind], "other-model"]


def test_w3_e7_a_chain_kept_before_models_were_recorded_continues_only_with_the_default(served):
    client, hearth, fake = served
    fake.models = ["gpt-4.1", "gpt-4o"]
    me = hearth.scope()
    persona = me.personas.create("elion", "Elion")
    kept, chosen = me.conversations.create(persona.id), me.conversations.create(persona.id)
    with hearth.store.write() as conn:  # chain rows as migration 25 leaves them: no model
        for chat in (kept, chosen):
            conn.execute("INSERT INTO response_chains (conversation_id, user_id, response_id, updated_at)"
                         " VALUES (?, ?, 'resp_old', '2026-01-01T00:00:00.000000Z')", (chat.id, me.user_id))
        conn.execute("UPDATE conversations SET model = 'gpt-4o' WHERE id = ?", (chosen.id,))
    send(client, kept.id, "Hello")
    assert bodies(fake)[-1]["previous_response_id"] == "resp_old"
    send(client, chosen.id, "Hello")
    assert "previous_response_id" not in bodies(fake)[-1]


def test_w3_e7_a_new_deployment_default_model_restarts_the_chain(tmp_path, fake_provider_server):
    fake = fake_provider_server
    with Hearth(provider_settings(tmp_path, fake, "openai")) as hearth:
        me = hearth.scope()
        chat = me.conversations.create(me.personas.create("elion", "Elion").id)
        fake.script(response_id="resp_1")
        me.send(chat.id, "With gpt-4.1")
    # HEARTH_MODEL changed between two runs: the conversation follows the default, the chain restarts.
    with Hearth(provider_settings(tmp_path, fake, "openai", model="gpt-4o")) as hearth:
        hearth.scope().send(chat.id, "With gpt-4o")
    body = bodies(fake)[-1]
    assert body["model"] == "gpt-4o" and "previous_response_id" not in body


# -- PR2 / U3: what is refused, and a list that cannot be read ---------------------------------------------
def test_w3_pr2_u3_an_unknown_or_bad_model_name_is_refused_and_nothing_changes(served):
    client, hearth, fake = served
    fake.models = ["gpt-4.1", "gpt-4o"]
    me = hearth.scope()
    chat = me.conversations.create(me.personas.create("elion", "Elion").id)
    before = row_counts(hearth)
    unknown = assert_error(client.put(f"/api/conversations/{chat.id}/model", json={"model": "gpt-9"}),
                           400, "unknown_model")
    assert "gpt-9" in unknown["detail"] and "gpt-4o" in unknown["detail"]
    for bad in ("", "   ", "two\nlines", "nul\x00name", "x" * 201, 5, ["gpt-4o"]):
        assert_error(client.put(f"/api/conversations/{chat.id}/model", json={"model": bad}), 422)
    assert_error(client.put(f"/api/conversations/{chat.id}/model", json={}), 422)
    assert_error(client.put("/api/conversations/999999/model", json={"model": "gpt-4o"}), 404)
    assert row_counts(hearth) == before
    assert me.conversations.get(chat.id).model is None
    with pytest.raises(UnknownModel):
        me.set_model(chat.id, "embedding-or-typo")
    with pytest.raises(InvalidInput):
        me.set_model(chat.id, "")


def test_w3_pr2_when_the_list_cannot_be_read_a_sane_name_is_accepted_and_the_answer_says_so(served):
    client, hearth, fake = served
    fake.models_status = 503
    me = hearth.scope()
    chat = me.conversations.create(me.personas.create("elion", "Elion").id)
    offered = client.get("/api/models").json()
    assert offered["listed"] is False and "503" in offered["detail"] and offered["models"] == ["gpt-4.1"]
    taken = client.put(f"/api/conversations/{chat.id}/model", json={"model": "my-finetune:v2"})
    assert taken.status_code == 200, taken.text
    assert taken.json()["checked"] is False and "without checking" in taken.json()["note"]
    assert me.conversations.get(chat.id).model == "my-finetune:v2"
    assert_error(client.put(f"/api/conversations/{chat.id}/model", json={"model": "x" * 201}), 422)
    assert me.conversations.get(chat.id).model == "my-finetune:v2"


def test_w3_cli_threads_model_shows_sets_and_goes_back_to_the_default(tmp_path, monkeypatch, fake_provider_server):
    fake = fake_provider_server
    fake.models = ["llama3.1", "qwen2.5"]
    monkeypatch.setenv("HEARTH_HOME", str(tmp_path / "cli"))
    monkeypatch.setenv("HEARTH_PROVIDER", "openai-chat")
    monkeypatch.setenv("HEARTH_MODEL", "llama3.1")
    monkeypatch.setenv("HEARTH_BASE_URL", fake.openai_base_url)
    for key in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(key, raising=False)
    runner = CliRunner()
    assert runner.invoke(cli, ["chat", "-m", "Hello"]).exit_code == 0
    shown = runner.invoke(cli, ["threads", "model", "1"])
    assert shown.exit_code == 0, shown.output
    assert "uses llama3.1 (the default)" in shown.output and "qwen2.5" in shown.output
    chosen = runner.invoke(cli, ["threads", "model", "1", "qwen2.5"])
    assert chosen.exit_code == 0 and "now uses qwen2.5" in chosen.output
    assert runner.invoke(cli, ["chat", "--conversation", "1", "-m", "Again"]).exit_code == 0
    assert bodies(fake, "/v1/chat/completions")[-1]["model"] == "qwen2.5"
    refused = runner.invoke(cli, ["threads", "model", "1", "gpt-9"])
    assert refused.exit_code == 2 and "does not offer a model named 'gpt-9'" in refused.output
    back = runner.invoke(cli, ["threads", "model", "1", "--default"])
    assert back.exit_code == 0 and "the default model (llama3.1)" in back.output


# -- W3 / P5: prompt presets ----------------------------------------------------------------------------
@pytest.fixture
def client(app):
    with TestClient(app, base_url=BASE) as c:
        yield c


@pytest.fixture
def app(hearth):
    return create_app(hearth.settings, hearth)


def test_w3_p5_presets_crud_and_applying_one_rebuilds_the_stored_prompt(client, hearth, persona):
    me = hearth.scope()
    chat = me.conversations.create(persona.id)
    me.send(chat.id, "Hello")  # the stored prompt exists from here
    made = client.post("/api/presets", json={"name": "  Be brief ", "text": "Answer in two sentences at most."})
    assert made.status_code == 201, made.text
    brief = made.json()
    assert brief["name"] == "Be brief"
    narrator = client.post("/api/presets", json={"name": "Roleplay narrator",
                                                 "text": "Narrate in the third person, present tense."}).json()
    assert [p["name"] for p in client.get("/api/presets").json()] == ["Be brief", "Roleplay narrator"]
    assert client.get(f"/api/presets/{brief['id']}").json() == brief

    applied = client.post(f"/api/presets/{brief['id']}/apply", json={"conversation_id": chat.id})
    assert applied.status_code == 200, applied.text
    assert applied.json() == {"text": "Answer in two sentences at most.", "preset_id": brief["id"], "changed": True}
    assert "Answer in two sentences at most." in me.stored_prompt(chat.id)  # rebuilt before the answer (P5)
    me.send(chat.id, "And now?")
    assert "Answer in two sentences at most." in hearth.provider.requests[-1].messages[0].content
    again = client.post(f"/api/presets/{brief['id']}/apply", json={"conversation_id": chat.id}).json()
    assert again["changed"] is False

    # Editing a preset changes no conversation it was applied to: they hold a copy.
    edited = client.patch(f"/api/presets/{brief['id']}", json={"text": "One sentence only."})
    assert edited.status_code == 200 and edited.json()["text"] == "One sentence only."
    shown = client.get(f"/api/conversations/{chat.id}/instructions").json()
    assert shown == {"text": "Answer in two sentences at most.", "preset_id": None, "changed": None}
    assert "Answer in two sentences at most." in me.stored_prompt(chat.id)

    client.post(f"/api/presets/{narrator['id']}/apply", json={"conversation_id": chat.id})
    assert "Narrate in the third person" in me.stored_prompt(chat.id)
    assert "Answer in two sentences" not in me.stored_prompt(chat.id)
    cleared = client.put(f"/api/conversations/{chat.id}/instructions", json={"text": None}).json()
    assert cleared == {"text": None, "preset_id": None, "changed": True}
    assert "Narrate in the third person" not in me.stored_prompt(chat.id)

    assert client.delete(f"/api/presets/{narrator['id']}").status_code == 204
    assert_error(client.get(f"/api/presets/{narrator['id']}"), 404)
    assert [p["name"] for p in client.get("/api/presets").json()] == ["Be brief"]


def test_w3_u3_g2_bad_preset_input_is_refused_and_nothing_changes(client, hearth, persona):
    me = hearth.scope()
    chat = me.conversations.create(persona.id)
    brief = me.presets.create("Be brief", "Answer briefly.")
    other_user = hearth.users.create("bob")
    theirs = hearth.scope(other_user.id)
    their_chat = theirs.conversations.create(theirs.personas.create("sam", "Sam").id)
    their_preset = theirs.presets.create("Theirs", "Their own text.")
    before = row_counts(hearth)
    too_long = "x" * 50_001
    for body in ({"name": "", "text": "x"}, {"name": "   ", "text": "x"}, {"name": "Two\nlines", "text": "x"},
                 {"name": "Ok", "text": ""}, {"name": "Ok", "text": "nul\x00"}, {"name": "Ok", "text": too_long},
                 {"name": "Ok"}, {"name": "Ok", "text": "x", "extra": 1}, {"name": 5, "text": "x"}):
        assert_error(client.post("/api/presets", json=body), 422)
    assert_error(client.post("/api/presets", json={"name": "Be brief", "text": "again"}), 409)
    assert_error(client.patch(f"/api/presets/{brief.id}", json={}), 422)
    assert_error(client.patch(f"/api/presets/{brief.id}", json={"text": "nul\x00"}), 422)
    assert_error(client.put(f"/api/conversations/{chat.id}/instructions", json={"text": too_long}), 422)
    assert_error(client.put(f"/api/conversations/{chat.id}/instructions", json={"text": "a\x00b"}), 422)
    # Another person's preset or conversation is not found, exactly like an unknown one (G2).
    assert_error(client.get(f"/api/presets/{their_preset.id}"), 404)
    assert_error(client.post(f"/api/presets/{their_preset.id}/apply", json={"conversation_id": chat.id}), 404)
    assert_error(client.post(f"/api/presets/{brief.id}/apply", json={"conversation_id": their_chat.id}), 404)
    assert_error(client.delete(f"/api/presets/{their_preset.id}"), 404)
    assert row_counts(hearth) == before
    assert me.presets.get(brief.id).text == "Answer briefly."
    assert theirs.presets.get(their_preset.id).text == "Their own text."
    with pytest.raises(InvalidInput):
        me.set_custom_instructions(chat.id, "nul\x00")


def test_w3_cli_presets_add_list_apply_edit_delete(tmp_path, monkeypatch):
    monkeypatch.setenv("HEARTH_HOME", str(tmp_path / "cli"))
    for key in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "HEARTH_BASE_URL", "HEARTH_PROVIDER", "HEARTH_MODEL"):
        monkeypatch.delenv(key, raising=False)
    runner = CliRunner()

    def run(*args):
        return runner.invoke(cli, list(args))

    assert run("chat", "-m", "Hello").exit_code == 0
    added = run("presets", "add", "Be brief", "Answer in two sentences.")
    assert added.exit_code == 0 and "Preset Be brief (1) saved." in added.output
    assert "Be brief" in run("presets", "list").output
    assert run("presets", "add", "Be brief", "again").exit_code == 1  # taken
    assert run("presets", "show", "Be brief").output.strip() == "Answer in two sentences."
    applied = run("presets", "apply", "Be brief", "1")
    assert applied.exit_code == 0 and "now uses preset Be brief" in applied.output
    assert run("threads", "instructions", "1").output.strip() == "Answer in two sentences."
    assert run("presets", "edit", "1", "--name", "Short").exit_code == 0
    assert run("presets", "delete", "Short").exit_code == 0
    assert run("threads", "instructions", "1").output.strip() == "Answer in two sentences."  # a copy
    cleared = run("threads", "instructions", "1", "--clear")
    assert "changed; its prompt was rebuilt" in cleared.output
    assert run("threads", "instructions", "1").output.strip() == "(the persona's instructions)"
    assert run("presets", "add", "Bad", "nul\x00").exit_code == 2


# -- U1: the first run -------------------------------------------------------------------------------------
def test_u1_welcome_shows_on_a_fresh_deployment_and_while_only_the_untouched_default_exists(client, hearth):
    me = hearth.scope()
    assert client.get("/api/onboarding").json() == {"show": True, "default_persona_id": None}
    default = me.personas.default()  # what hearth init, New Chat or an import create when none is named
    assert default.identity == DEFAULT_IDENTITY
    assert client.get("/api/onboarding").json() == {"show": True, "default_persona_id": default.id}
    me.update_persona(default.id, identity="You are Companion, who loves bread.")
    assert client.get("/api/onboarding").json()["show"] is False  # edited: the person made it theirs
    me.update_persona(default.id, identity=DEFAULT_IDENTITY)
    assert client.get("/api/onboarding").json()["show"] is False  # touched once is touched


def test_u1_welcome_ends_with_the_first_conversation(client, hearth):
    me = hearth.scope()
    chat = me.new_chat().conversation  # New Chat with nobody named: the default persona
    assert client.get("/api/onboarding").json()["show"] is False
    me.conversations.trash(chat.id)
    assert client.get("/api/onboarding").json()["show"] is False  # a trashed conversation still counts


def test_u1_create_a_companion_archives_the_untouched_default_and_is_refused_twice(client, hearth):
    me = hearth.scope()
    default = me.personas.default()
    before = row_counts(hearth)
    for body in ({}, {"name": ""}, {"name": "   "}, {"name": "A\nB"}, {"name": "Juniper", "persona_id": default.id},
                 {"persona_id": default.id, "identity": "x"}, {"name": "Juniper", "identity": "nul\x00"},
                 {"name": "Juniper", "colour": "green"}):
        assert_error(client.post("/api/onboarding", json=body), 422)
    assert row_counts(hearth) == before
    made = client.post("/api/onboarding", json={"name": "Zoë Moss", "identity": "A gardener who notices things."})
    assert made.status_code == 201, made.text
    persona = made.json()["persona"]
    assert (persona["name"], persona["display_name"]) == ("zoe-moss", "Zoë Moss")
    assert persona["identity"] == "A gardener who notices things."
    assert made.json()["archived"] == [default.id]
    assert [p.display_name for p in me.personas.list()] == ["Zoë Moss"]
    assert client.get("/api/onboarding").json()["show"] is False
    again = client.post("/api/onboarding", json={"name": "Zoë Moss"})
    assert_error(again, 409)
    assert len(me.personas.list(include_archived=True)) == 2
    # New Chat then opens with the new companion.
    chat = client.post("/api/conversations/new-chat", json={"persona_id": persona["id"], "continue": False})
    assert chat.status_code == 201 and chat.json()["conversation"]["persona_id"] == persona["id"]


def test_u1_an_imported_card_becomes_the_companion_and_the_default_is_archived(client, hearth):
    me = hearth.scope()
    default = me.personas.default()
    card = json.dumps({"spec": "chara_card_v2", "spec_version": "2.0",
                       "data": {"name": "Mira", "description": "A lighthouse keeper.", "first_mes": "Hello, {{user}}."}})
    imported = client.post("/api/imports?name=mira.json", content=card.encode(),
                           headers={"Content-Type": "application/json"})
    assert imported.status_code == 201, imported.text
    mira = imported.json()["ids"]["personas"][0]
    done = client.post("/api/onboarding", json={"persona_id": mira})
    assert done.status_code == 201, done.text
    assert done.json()["persona"]["display_name"] == "Mira" and done.json()["archived"] == [default.id]
    assert [p.id for p in me.personas.list()] == [mira]
    me.new_chat(mira)
    assert_error(client.post("/api/onboarding", json={"persona_id": mira}), 409)  # set up now


def test_u1_a_companion_named_like_the_default_gets_its_own_short_name(hearth):
    from hearth.records.onboarding import create_companion

    me = hearth.scope()
    me.personas.default()
    persona, archived = create_companion(hearth.context(me.user_id), "Companion", "")
    assert persona.name == "companion-2" and persona.identity.startswith("You are Companion")
    assert archived
