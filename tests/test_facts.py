"""Facts written at ingestion (E2, A2, B4): short dated statements citing their source turns,
written by the idle checkpoint (rules offline, the model through its SDK with a provider), searched
beside the turns, a hit returning its source turns; forgetting a turn removes the facts citing it.
"""

from __future__ import annotations

import json
import time

import pytest

from hearth import Hearth, InvalidInput, Settings
from hearth.continuity.timeline.checkpoints import checkpoint_job
from hearth.continuity.timeline.spans import CHECKPOINT_JOB
from hearth.memory.helpers import OfflineHelper
from hearth.ops.jobs import JobQueue, Worker
from hearth.records.forget import CONFIRMATION_PHRASE, verify
from hearth.retrieval import facts
from hearth.retrieval.candidates import vector_lists
from hearth.retrieval.hybrid import DEFAULT, Filters, build_variants, search
from hearth.retrieval.semantic import embed_pending, shared_embedder

IDLE = 30 * 60
CANARY = "wombatquasar"


def idle_checkpoint(hearth: Hearth, helper=None) -> None:
    """Run the span's checkpoint as the worker does once the idle period has passed."""
    base = hearth.clock()
    hearth.clock = lambda: base + IDLE + 5
    now = time.time() + IDLE + 5
    Worker(hearth, helper=helper, queue=JobQueue(hearth.store, clock=lambda: now),
           handlers={CHECKPOINT_JOB: checkpoint_job}).run_once()


def checkpoint_payloads(hearth: Hearth) -> list[dict]:
    with hearth.store.read() as conn:
        return [json.loads(r[0]) for r in conn.execute(
            "SELECT payload FROM events WHERE kind = 'checkpoint.created' ORDER BY id")]


def user_turns(me, conversation_id: int) -> list:
    return [m for m in me.conversations.messages(conversation_id) if m.role == "user"]


@pytest.fixture(scope="module")
def embedder():
    return shared_embedder()


def test_e2_a_checkpoint_writes_dated_facts_citing_their_turns_offline(hearth, me, persona):
    chat = me.conversations.create(persona.id)
    me.send(chat.id, "My sister is called Mia. I'm allergic to peanuts.")
    me.send(chat.id, "Just chatting about the weather.")
    idle_checkpoint(hearth, OfflineHelper())
    [payload] = checkpoint_payloads(hearth)
    assert payload["facts"] == 2
    first = user_turns(me, chat.id)[0]
    with hearth.store.read() as conn:
        written = facts.listed(conn, me.user_id)
    assert sorted(f.text for f in written) == ["The person is allergic to peanuts.",
                                               "The person's sister is called Mia."]
    assert all(f.source == "offline" and f.message_ids == (first.id,) for f in written)
    assert all(f.fact_date == first.created_at[:10] for f in written)
    # The background embedding job is queued so the facts get their vectors.
    with hearth.store.read() as conn:
        assert conn.execute("SELECT count(*) FROM jobs WHERE kind = 'recall.embed' AND status = 'pending'"
                            ).fetchone()[0] == 1


def test_e2_with_a_provider_the_model_writes_facts_through_its_sdk_citing_only_turns_it_was_shown(
        tmp_path, fake_provider_server):
    hearth = Hearth(Settings.resolve({"home": str(tmp_path / "h"), "provider": "openai-chat", "model": "fake",
                                      "base_url": fake_provider_server.openai_base_url, "openai_api_key": "k"},
                                     environ={}))
    try:
        me = hearth.scope()
        persona = me.personas.create("elion", "Elion", user_label="AUMA said:", assistant_label="Elion said:")
        chat = me.conversations.create(persona.id)
        me.send(chat.id, "I finally finished my first full screenplay last night!")
        [turn] = user_turns(me, chat.id)
        fake_provider_server.reset()
        fake_provider_server.script(text=[json.dumps({"memories": []})])
        fake_provider_server.script(text=[json.dumps({"facts": [
            {"text": "AUMA finished a first full screenplay.", "turns": [turn.id]},
            {"text": "A fact citing a turn it was never shown.", "turns": [turn.id + 1000]},
            {"text": "", "turns": [turn.id]},
            {"text": "No turns at all."}]})])
        idle_checkpoint(hearth)
        asked = fake_provider_server.requests[-1].body["messages"]
        assert "cite the numbers" in asked[0]["content"]
        assert f"[{turn.id}] Person: I finally finished my first full screenplay" in asked[-1]["content"]
        with hearth.store.read() as conn:
            [fact] = facts.listed(conn, me.user_id)
        assert (fact.text, fact.source, fact.message_ids) == ("AUMA finished a first full screenplay.", "model",
                                                             (turn.id,))
        assert checkpoint_payloads(hearth)[-1]["facts"] == 1
    finally:
        hearth.close()


def test_a2_a_fact_hit_returns_its_source_turns_inside_the_visibility_filters(hearth, me, persona):
    chat = me.conversations.create(persona.id, "Writing")
    me.send(chat.id, "It's a mix of drama and romance, and it took me two years!")
    [turn] = user_turns(me, chat.id)
    hidden = me.conversations.create(persona.id, "Private")
    me.send(hidden.id, "Mine is a thriller.")
    [secret] = user_turns(me, hidden.id)
    with hearth.store.write() as conn:
        facts.add(conn, me.user_id, "The person finished a screenplay, a drama and romance.", [turn.id], source="model")
        facts.add(conn, me.user_id, "The person wrote a thriller screenplay.", [secret.id], source="model")
    me.conversations.set_shielded(hidden.id, True)
    conn = hearth.store.connection()
    found = search(conn, me.user_id, "screenplay", filters=Filters(), log=False)
    assert [r.id for r in found.results] == [turn.id]  # no turn says "screenplay": the fact found it
    assert found.results[0].scores["signals"] == ["keyword"]
    assert "screenplay" not in found.results[0].text  # the turn itself is returned, not the fact
    without = search(conn, me.user_id, "screenplay", filters=Filters(), log=False,
                     tuning=DEFAULT.with_changes(fact_keyword_weight=0.0))
    assert without.results == []
    only_import = search(conn, me.user_id, "screenplay", filters=Filters(), log=False,
                         tuning=DEFAULT.with_changes(fact_origins=("import",)))
    assert only_import.results == []


def test_a2_facts_are_embedded_and_their_vector_list_names_their_source_turns(hearth, me, persona, embedder):
    chat = me.conversations.create(persona.id, "Garden")
    me.send(chat.id, "We finally did it, the whole north side is done.")
    [turn] = user_turns(me, chat.id)
    with hearth.store.write() as conn:
        facts.add(conn, me.user_id, "The person planted an apple orchard along the north fence.", [turn.id],
                  source="model")
    report = embed_pending(hearth.store, embedder, user_id=me.user_id)
    assert report.facts == 1 and report.remaining == 0
    conn = hearth.store.connection()
    lists, weights = vector_lists(conn, me.user_id, build_variants("When did we plant the orchard?"), Filters(),
                                  embedder, str(hearth.store.key), None)
    assert lists["vector:facts:messages"][0][0] == ("message", turn.id)
    assert weights["vector:facts:messages"] == DEFAULT.fact_vector_weight


def test_a2_a_fact_farther_from_the_query_than_the_tenth_turn_does_not_count(hearth, me, persona, embedder):
    chat = me.conversations.create(persona.id, "Garden")
    for i in range(12):
        me.conversations.add_message(chat.id, "user", f"We planted apple tree number {i} in the orchard today.")
    me.conversations.add_message(chat.id, "user", "Nothing much happened.")
    turns = user_turns(me, chat.id)
    with hearth.store.write() as conn:
        facts.add(conn, me.user_id, "The person repaired a red bicycle's brakes.", [turns[-1].id], source="model")
        facts.add(conn, me.user_id, "The person planted an apple orchard.", [turns[0].id], source="model")
    embed_pending(hearth.store, embedder, user_id=me.user_id)
    conn = hearth.store.connection()
    variants = build_variants("When did we plant the apple orchard?")
    lists, _ = vector_lists(conn, me.user_id, variants, Filters(), embedder, str(hearth.store.key), None)
    assert [key for key, _ in lists["vector:facts:messages"]] == [("message", turns[0].id)]
    every, _ = vector_lists(conn, me.user_id, variants, Filters(), embedder, str(hearth.store.key), None,
                            DEFAULT.with_changes(fact_floor_rank=0))
    assert [key for key, _ in every["vector:facts:messages"]] == [("message", turns[0].id), ("message", turns[-1].id)]


def test_e2_a_fact_must_cite_this_users_turns_and_bad_input_writes_nothing(hearth, me, persona):
    chat = me.conversations.create(persona.id)
    me.send(chat.id, "Hello there.")
    [turn] = user_turns(me, chat.id)
    other = hearth.users.create("someone-else")
    with hearth.store.write() as conn:
        for text, cited, source in (("", [turn.id], "model"), ("x" * 301, [turn.id], "model"),
                                    ("Fine text.", [], "model"), ("Fine text.", [turn.id], "guess")):
            with pytest.raises(InvalidInput):
                facts.add(conn, me.user_id, text, cited, source=source)
        assert facts.add(conn, other.id, "Not theirs.", [turn.id], source="model") is None
    with hearth.store.read() as conn:
        assert conn.execute("SELECT count(*) FROM facts").fetchone()[0] == 0


def test_b4_forgetting_a_turn_removes_the_facts_citing_it_and_leaves_no_trace(hearth, me, persona, embedder):
    chat = me.conversations.create(persona.id, "Charms")
    me.send(chat.id, "Another thing entirely.")
    me.send(chat.id, f"My lucky charm is a {CANARY} pebble.")
    other, secret = user_turns(me, chat.id)
    with hearth.store.write() as conn:
        facts.add(conn, me.user_id, f"The person's lucky charm is a {CANARY} pebble.", [other.id, secret.id],
                  source="model")
        kept = facts.add(conn, me.user_id, "The person talked about another thing.", [other.id], source="model")
    embed_pending(hearth.store, embedder, user_id=me.user_id)
    preview = me.forget.preview("message", secret.id)
    receipt = me.forget.apply("message", secret.id, token=preview.token, phrase=CONFIRMATION_PHRASE)
    assert receipt.counts["facts"] == 1
    with hearth.store.read() as conn:
        assert [f.id for f in facts.listed(conn, me.user_id)] == [kept]
    worker = Worker(hearth, helper=OfflineHelper())
    while worker.run_once():
        pass
    assert verify(hearth.store, CANARY).clean, verify(hearth.store, CANARY).to_dict()
