"""Thread-local and durable memory layers: household status (HS1, HS2), live context and nudges
(LC1, LC2), rolling summary (RS1), memory fragments (F1, F2), review queue (F3, G4), helpers (G3)
and the dynamic-context order (D2). Real SQLite files; model helpers through the official SDK
against the fake provider server.
"""

from __future__ import annotations

import json
import logging
import time

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from hearth import Hearth, Settings
from hearth.errors import InvalidInput
from hearth.memory.helpers import HelperOutputError, ModelHelper, OfflineHelper, helper_for
from hearth.memory.helpers.base import ReviewInput, StatusField, TurnText, word_count
from hearth.ops.jobs import Worker
from hearth.prompt.dynamic import ORDER, SUMMARY_HEADER, Turn
from hearth.prompt.layers import fragments as fragments_mod
from hearth.providers.base import StreamEvent, Usage
from hearth.providers.openai_chat import OpenAIChatProvider
from tests.conftest import RecordingProvider


def systems(request) -> list[str]:
    return [m.content for m in request.messages if m.role == "system"]


def context_message(request) -> str:
    found = [s for s in systems(request) if s.startswith("Dynamic context")]
    return found[0] if found else ""


def reply_with(text: str):
    def script(request):
        yield StreamEvent("text", text=text)
        yield StreamEvent("usage", usage=Usage(10, 5))

    return script


@pytest.fixture
def worker(hearth):
    return Worker(hearth, helper=OfflineHelper())


@pytest.fixture
def chat(me, persona):
    return me.conversations.create(persona.id)


# -- household status -------------------------------------------------------------------------------
def test_hs1_status_block_says_current_overrides_memory_and_assumes_nothing_else(me, chat, provider):
    household = me.layers.household
    household.add_field("Children", options=["with me", "with their dad"], value="with me")
    household.add_field("Fleur", options=["at home", "at the Farm"], aliases=["the dog"], value="at the farm")
    household.add_field("Partner")  # no value: not rendered
    me.send(chat.id, "What should we do this afternoon?")
    block = context_message(provider.requests[-1])
    assert "=== HOUSEHOLD STATUS (CURRENT) ===" in block
    assert "Children: with me\nFleur: at the Farm" in block  # option spelling is canonical
    assert "Partner" not in block
    assert "overrides older memory for practical suggestions" in block
    assert "Assume nothing" in block


def test_hs1_a_new_value_retires_the_old_one_instead_of_overwriting(me):
    household = me.layers.household
    household.set("Children", "with me", create=True)
    before = household.history("Children")[0].valid_from
    time.sleep(0.002)
    household.set("Children", "with their dad")
    household.set("Children", "with their dad")  # same value: no new row
    history = household.history("Children")
    assert [(v.value, v.valid_to is None) for v in history] == [("with their dad", True), ("with me", False)]
    assert history[1].valid_to == history[0].valid_from
    assert household.as_of(before) == {"Children": "with me"}
    assert household.field("children").value == "with their dad"
    household.set("Children", None)
    assert household.field("Children").value is None and len(household.history("Children")) == 2
    household.remove_field("Children")
    assert household.fields() == [] and len(household.history()) == 2


def test_hs1_toggle_fields_accept_only_their_options(me):
    household = me.layers.household
    household.add_field("Fleur", options=["at home", "at the Farm"])
    with pytest.raises(InvalidInput):
        household.set("Fleur", "on the moon")
    assert household.set("Fleur", "AT HOME").value == "at home"


def test_hs2_detected_change_waits_for_approval_with_reason_and_quoted_evidence(me, chat, provider, worker):
    household = me.layers.household
    household.add_field("Fleur", options=["at home", "at the Farm"], value="at home")
    me.send(chat.id, "Busy week. Fleur is staying at the farm with my dad until Sunday.")
    worker.run_once()
    [proposal] = me.layers.review.list("pending", "status_change")
    assert proposal.payload == {"field_id": household.field("Fleur").id, "field": "Fleur", "from": "at home",
                                "to": "at the Farm"}
    assert "Fleur" in proposal.reason and proposal.source == "offline"
    assert proposal.evidence == "Fleur is staying at the farm with my dad until Sunday."
    assert household.field("Fleur").value == "at home"  # nothing changes before approval
    me.send(chat.id, "ok")
    assert "Fleur: at home" in context_message(provider.requests[-1])
    approved = me.layers.review.approve(proposal.id)
    assert approved.status == "approved" and approved.decided_by == "owner"
    current = household.field("Fleur")
    assert current.value == "at the Farm" and current.source == "approved"
    me.send(chat.id, "and now?")
    assert "Fleur: at the Farm" in context_message(provider.requests[-1])


def test_hs2_dismissed_change_is_not_proposed_again_and_evidence_is_never_logged(me, persona, worker, caplog, hearth):
    caplog.set_level(logging.DEBUG)
    me.layers.household.add_field("Children", options=["with me", "with their dad"], aliases=["kids"],
                                  value="with me")
    words = "The kids are with their dad for the weekend."
    first = me.conversations.create(persona.id)
    me.send(first.id, words)
    worker.run_once()
    [proposal] = me.layers.review.list()
    me.layers.review.dismiss(proposal.id)
    second = me.conversations.create(persona.id)
    me.send(second.id, words)
    worker.run_once()
    assert me.layers.review.list() == []
    assert all("their dad for the weekend" not in r.getMessage() for r in caplog.records)
    payloads = [r[0] for r in hearth.store.connection().execute("SELECT payload FROM events")]
    assert not any("weekend" in p for p in payloads)


def test_hs2_negated_mentions_do_not_propose(me, chat, worker):
    me.layers.household.add_field("Fleur", options=["at home", "at the Farm"], value="at home")
    me.send(chat.id, "Fleur is not at the farm, she stayed home.")
    worker.run_once()
    assert me.layers.review.list() == []


def test_g4_auto_approve_is_off_by_default_and_per_kind(me, chat, worker):
    assert me.layers.settings.get("auto_approve.status_change") is False
    assert me.layers.settings.get("auto_approve.fragment") is False
    me.layers.household.add_field("Fleur", options=["at home", "at the Farm"], value="at home")
    me.layers.settings.set("auto_approve.status_change", True)
    me.send(chat.id, "Fleur is at the farm now.")
    worker.run_once()
    [proposal] = me.layers.review.list("approved")
    assert proposal.decided_by == "auto"
    field = me.layers.household.field("Fleur")
    assert field.value == "at the Farm" and field.source == "auto"
    with pytest.raises(InvalidInput):
        me.layers.settings.set("auto_approve.everything", True)


# -- live context and nudges --------------------------------------------------------------------------
def test_lc1_refreshes_after_enough_messages_and_renders_a_labelled_block(me, chat, provider, worker):
    me.layers.settings.set("live_context.every", 4)
    me.send(chat.id, "I am exhausted and anxious about my job interview on Friday.")
    worker.run_once()
    assert me.layers.live_context.get(chat.id) is None  # 2 messages: not due yet
    me.send(chat.id, "Can you help me prepare answers?")
    worker.run_once()
    state = me.layers.live_context.get(chat.id)
    assert state.source == "offline" and "exhausted" in state.mood and "anxious" in state.mood
    assert "interview on Friday" in state.events and "help me prepare" in state.needs
    assert state.display_summary.startswith("(offline)")
    me.send(chat.id, "thanks")
    block = context_message(provider.requests[-1])
    assert "=== LIVE CONTEXT FOR THIS THREAD ===" in block and "offline" in block
    assert "Mood: exhausted, anxious" in block


def test_lc1_manual_edit_and_stale_refresh_on_open(me, chat, provider, hearth):
    live = me.layers.live_context
    state = live.set(chat.id, mood="hopeful", needs="gentle pacing")
    assert state.source == "manual" and state.events == ""
    me.send(chat.id, "hello")
    block = context_message(provider.requests[-1])
    assert "Mood: hopeful" in block and "Needs: gentle pacing" in block and "written by the person" in block
    _, queued = live.open(chat.id, stale_minutes=60)
    assert not queued  # fresh, even though two messages arrived since
    _, queued = live.open(chat.id, stale_minutes=0)
    assert queued
    assert [j.kind for j in me.jobs.list(status="pending")].count("live_context.refresh") == 1
    Worker(hearth, helper=OfflineHelper()).run_once()
    assert live.get(chat.id).source == "offline"
    with pytest.raises(InvalidInput):
        live.set(chat.id, weather="sunny")


def test_lc2_echoed_marker_marks_the_nudge_used_and_is_stripped_from_the_saved_reply(me, chat, provider):
    live = me.layers.live_context
    nudge = live.add_nudge(chat.id, "Ask how the dentist appointment went")
    me.send(chat.id, "morning")
    block = context_message(provider.requests[-1])
    assert f"- Ask how the dentist appointment went {nudge.token}" in block
    provider.replies.append(reply_with(f"Good morning! How did it go at the dentist? {nudge.token}"))
    reply = me.send(chat.id, "I'm back")
    assert reply.assistant_message.content == "Good morning! How did it go at the dentist?"
    assert reply.assistant_message.metadata["nudges_used"] == [nudge.id]
    [used] = live.nudges(chat.id, "used")
    assert used.id == nudge.id and used.used_message_id == reply.assistant_message.id
    me.send(chat.id, "it went fine")
    assert nudge.token not in context_message(provider.requests[-1])
    with pytest.raises(InvalidInput):
        live.add_nudge(chat.id, "Ask how the dentist appointment went")  # never offered again


def test_lc2_a_reply_that_covers_the_nudge_marks_it_used_without_a_marker(me, chat, provider):
    live = me.layers.live_context
    live.add_nudge(chat.id, "Ask how the piano recital went")
    keep = live.add_nudge(chat.id, "Check whether the landlord fixed the boiler")
    provider.replies.append(reply_with("Before I forget: how was the piano recital?"))
    me.send(chat.id, "hi")
    assert [n.id for n in live.nudges(chat.id, "open")] == [keep.id]


def test_lc1_lc2_offline_refresh_offers_follow_ups_for_upcoming_events(me, chat, worker):
    me.layers.settings.set("live_context.every", 2)
    me.send(chat.id, "I have my driving test tomorrow morning and I'm nervous.")
    worker.run_once()
    nudges = me.layers.live_context.nudges(chat.id, "open")
    assert len(nudges) == 1 and "driving test tomorrow" in nudges[0].text and nudges[0].source == "offline"


# -- rolling summary ----------------------------------------------------------------------------------
def test_rs1_summary_every_n_messages_is_one_short_sentence_sent_as_its_own_message(me, chat, provider, worker):
    me.layers.settings.set("summary.every", 4)
    me.send(chat.id, "We are planning a trip to Lisbon in May with my brother Tom and his twins.")
    me.send(chat.id, "I still need to book the flights and I promised to find a hotel near the river.")
    worker.run_once()
    summary = me.layers.summaries.current(chat.id)
    assert summary.source == "offline" and summary.section_messages == 4
    assert word_count(summary.text) <= 45 and "\n" not in summary.text
    assert summary.display.startswith("(offline summary) ")
    me.send(chat.id, "What next?")
    sent = systems(provider.requests[-1])
    own = [s for s in sent if s.startswith(SUMMARY_HEADER)]
    assert own == [f"{SUMMARY_HEADER}\n{summary.display}"]
    assert summary.text not in context_message(provider.requests[-1])


def test_rs1_editing_or_deleting_history_reverts_to_the_last_valid_summary(me, chat, hearth, worker):
    me.layers.settings.set("summary.every", 2)
    me.send(chat.id, "First topic: the allotment and the tomatoes.")
    worker.run_once()
    first = me.layers.summaries.current(chat.id)
    me.send(chat.id, "Second topic: the choir concert in June.")
    worker.run_once()
    second = me.layers.summaries.current(chat.id)
    assert second.id != first.id and second.through_message_id > first.through_message_id
    conn = hearth.store.connection()
    later = conn.execute("SELECT id FROM messages WHERE conversation_id = ? AND kind = 'chat' AND id > ?"
                         " ORDER BY id LIMIT 1", (chat.id, first.through_message_id)).fetchone()[0]
    with hearth.store.write() as w:
        w.execute("UPDATE messages SET content = 'Second topic: the choir concert in July.' WHERE id = ?", (later,))
    assert me.layers.summaries.current(chat.id).id == first.id
    earliest = conn.execute("SELECT min(id) FROM messages WHERE conversation_id = ? AND kind = 'chat'",
                            (chat.id,)).fetchone()[0]
    with hearth.store.write() as w:
        w.execute("DELETE FROM messages WHERE id = ?", (earliest,))
    assert me.layers.summaries.current(chat.id) is None
    assert all(s.invalidated_at for s in me.layers.summaries.history(chat.id))
    # A message after the summary point leaves it valid.
    me.send(chat.id, "Third topic.")
    worker.run_once()
    third = me.layers.summaries.current(chat.id)
    with hearth.store.write() as w:
        w.execute("UPDATE messages SET content = 'edited' WHERE id = (SELECT max(id) FROM messages"
                  " WHERE conversation_id = ? AND kind = 'chat')", (chat.id,))
    assert third is not None and third.through_message_id == conn.execute(
        "SELECT max(id) FROM messages WHERE conversation_id = ? AND kind = 'chat'", (chat.id,)).fetchone()[0]


def test_rs1_offline_summary_is_truncated_at_a_word_boundary(me):
    long_turn = TurnText("user", " ".join(f"word{i}" for i in range(120)) + ".", 1)
    result = OfflineHelper().summarise("", [long_turn], 45)
    assert word_count(result.text) <= 45 and result.source == "offline"


def test_rs1_g3_model_summary_over_the_limit_is_rejected(fake_provider_server):
    provider = OpenAIChatProvider(model="fake", api_key="k", base_url=fake_provider_server.openai_base_url)
    helper = ModelHelper(provider)
    long = " ".join(["word"] * 60)
    fake_provider_server.script(text=[json.dumps({"summary": long})])
    fake_provider_server.script(text=[json.dumps({"summary": long})])
    with pytest.raises(HelperOutputError) as err:
        helper.summarise("", [TurnText("user", "hello", 1)])
    assert err.value.kind == "too_long"
    retry = fake_provider_server.requests[1].body["messages"]
    assert "60 words; the limit is 45" in retry[-1]["content"]
    fake_provider_server.script(text=["```json\n", json.dumps({"summary": "The person said hello warmly."}), "\n```"])
    ok = helper.summarise("Earlier summary.", [TurnText("user", "hello", 1)])
    assert ok.text == "The person said hello warmly." and ok.source == "model"
    sent = fake_provider_server.requests[-1].body["messages"]
    assert sent[0]["role"] == "system" and "at most 45 words" in sent[0]["content"]
    assert "Previous summary: Earlier summary." in sent[1]["content"] and "Person: hello" in sent[1]["content"]


# -- helpers ------------------------------------------------------------------------------------------
def test_g3_helper_is_chosen_from_settings(tmp_path):
    offline = Hearth(Settings.resolve({"home": str(tmp_path / "a")}, environ={}))
    assert isinstance(helper_for(offline), OfflineHelper)
    model = Hearth(Settings.resolve({"home": str(tmp_path / "b")},
                                    environ={"HEARTH_BASE_URL": "http://127.0.0.1:9/v1", "HEARTH_MODEL": "m"}))
    assert isinstance(helper_for(model), ModelHelper)
    offline.close()
    model.close()


def test_g3_model_helper_validates_every_task_through_the_sdk(fake_provider_server):
    provider = OpenAIChatProvider(model="fake", api_key="k", base_url=fake_provider_server.openai_base_url)
    helper = ModelHelper(provider)
    said = [TurnText("user", "The kids went to their dad's place for the week.", 1),
            TurnText("assistant", "Noted.", 2)]
    fields = [StatusField("Children", "with me", ("with me", "with their dad"))]
    fake_provider_server.script(text=[json.dumps({"changes": [
        {"field": "Children", "value": "With their dad", "reason": "They left.",
         "evidence": "The kids went to their dad's place"},
        {"field": "Children", "value": "with their dad", "reason": "x", "evidence": "words nobody said"},
        {"field": "Pets", "value": "away", "reason": "x", "evidence": "The kids went"},
    ]})])
    [change] = helper.detect_state_change(fields, said)
    assert change.value == "with their dad" and change.source == "model"

    fake_provider_server.script(text=[json.dumps({"mood": "calm", "events": "school run", "needs": "rest",
                                                  "summary": "Quiet week", "nudges": ["How was the week?", 7]})])
    live = helper.live_context(None, said)
    assert (live.mood, live.nudges, live.source) == ("calm", ("How was the week?",), "model")

    fake_provider_server.script(text=[json.dumps({"proposals": [
        {"action": "add", "category": "people", "triggers": ["Mia"], "definition": "Mia is the sister.",
         "reason": "Named."},
        {"action": "add", "category": "x", "triggers": ["C++"], "definition": "bad trigger", "reason": "r"},
        {"action": "update", "fragment_id": 99, "category": "x", "triggers": ["a"], "definition": "d", "reason": "r"},
    ]})])
    review = ReviewInput(said, summary="A short summary.", live_context={"mood": "calm"},
                         fragments=[{"id": 1, "category": "pets", "triggers": ["Fleur"], "definition": "The dog."}])
    [suggestion] = helper.propose_fragments(review)
    assert suggestion.triggers == ("Mia",) and suggestion.source == "model"
    material = fake_provider_server.requests[-1].body["messages"][1]["content"]
    assert "Rolling summary: A short summary." in material and '"mood": "calm"' in material
    assert '"Fleur"' in material and "Person: The kids went" in material

    fake_provider_server.script(text=["I think nothing changed."])
    with pytest.raises(HelperOutputError):
        helper.detect_state_change(fields, said)


def test_g3_worker_runs_model_helper_jobs_against_the_fake_server(me, chat, hearth, fake_provider_server):
    me.layers.settings.set("summary.every", 2)
    me.send(chat.id, "We talked about the new kitten.")
    fake_provider_server.script(text=[json.dumps({"summary": "The person is settling in a new kitten."})])
    provider = OpenAIChatProvider(model="fake", api_key="k", base_url=fake_provider_server.openai_base_url)
    Worker(hearth, helper=ModelHelper(provider),
           handlers={"summary.refresh": __import__("hearth.prompt.layers.summary", fromlist=["x"]).refresh_job}).run_once()
    summary = me.layers.summaries.current(chat.id)
    assert summary.source == "model" and summary.display == "The person is settling in a new kitten."


# -- fragments ----------------------------------------------------------------------------------------
def test_f1_triggered_fragments_are_injected_as_stable_profile_context(me, chat, provider):
    frags = me.layers.fragments
    dog = frags.add(["Fleur", "the dog"], "Fleur is the person's lurcher; she is shy with strangers.", "pets")
    frags.add(["ice cream"], "Favourite flavour: pistachio.", "preferences", none_of=["allergy"])
    frags.add(["Mia"], "Mia is the person's sister.", "people", enabled=False)
    me.send(chat.id, "Took both dogs and Mia out; the DOG loved the ice-cream van!")
    block = context_message(provider.requests[-1])
    assert "=== MEMORY FRAGMENTS ===" in block and "Stable profile context" in block
    assert "use it before episodic recall" in block
    assert "[pets] the dog: Fleur is the person's lurcher" in block
    assert "[preferences] ice cream: Favourite flavour: pistachio." in block
    assert "Mia is the person's sister" not in block
    me.send(chat.id, "No ice cream for me, allergy season.")
    assert "pistachio" not in context_message(provider.requests[-1])
    found = frags.match("fleur?")
    assert [f.id for f, _ in found] == [dog.id]


def test_f1_per_message_budget_keeps_the_prompt_small(me, chat, provider):
    frags = me.layers.fragments
    for name in ("alpha", "bravo", "charlie", "delta"):
        frags.add([name], f"{name} is a project codename. " * 5, "projects")
    me.layers.settings.set("fragments.max", 2)
    me.send(chat.id, "alpha bravo charlie delta")
    block = context_message(provider.requests[-1])
    assert block.count("[projects]") == 2
    me.layers.settings.set("fragments.max", 6)
    me.layers.settings.set("fragments.budget_chars", 200)
    me.send(chat.id, "alpha bravo charlie delta")
    assert context_message(provider.requests[-1]).count("[projects]") == 1


def test_f1_invalid_triggers_are_refused_when_saved(me):
    with pytest.raises(InvalidInput):
        me.layers.fragments.add(["C++"], "a language")
    with pytest.raises(InvalidInput):
        me.layers.fragments.add([], "no trigger")


def test_f2_edits_are_live_and_the_index_is_built_once_per_library_version(me, chat, provider):
    frags = me.layers.fragments
    fragment = frags.add(["allotment"], "Plot 14, shared with Sam.", "places")
    start = fragments_mod.builds["count"]
    me.send(chat.id, "Off to the allotment.")
    me.send(chat.id, "Back from the allotment.")
    assert fragments_mod.builds["count"] == start + 1
    version = frags.version()
    frags.edit(fragment.id, definition="Plot 15 since March.")
    assert frags.version() == version + 1
    me.send(chat.id, "allotment again")
    assert "Plot 15 since March." in context_message(provider.requests[-1])
    assert fragments_mod.builds["count"] == start + 2
    frags.remove(fragment.id)
    me.send(chat.id, "allotment once more")
    assert "MEMORY FRAGMENTS" not in context_message(provider.requests[-1])


def test_f2_thousands_of_fragments_match_quickly(hearth, me):
    frags = me.layers.fragments
    with hearth.store.write() as conn:  # bulk insert the library, as an import would
        now = "2026-01-01T00:00:00.000000Z"
        conn.executemany(
            "INSERT INTO fragments (user_id, category, triggers, definition, created_at, updated_at)"
            " VALUES (?, 'bulk', ?, ?, ?, ?)",
            [(me.user_id, json.dumps([f"codeword{i}", f"topic{i} plan"]), f"Definition {i}.", now, now)
             for i in range(5000)])
        fragments_mod.bump_version(conn, me.user_id)
    message = "Today we talked about codeword4321 and the topic17 plan among many other ordinary words. " * 5
    frags.match(message)  # compile once
    started = time.perf_counter()
    for _ in range(200):
        found = frags.match(message)
    per_message = (time.perf_counter() - started) / 200
    assert sorted(f.definition for f, _ in found) == ["Definition 17.", "Definition 4321."]
    assert per_message < 0.01


# -- review queue -------------------------------------------------------------------------------------
def test_f3_review_suggests_fragments_that_wait_for_approval_with_edits(me, chat, worker):
    me.layers.settings.set("review.every", 2)
    me.send(chat.id, "My sister is called Mia. Also I'm allergic to peanuts.")
    worker.run_once()
    pending = me.layers.review.list("pending")
    kinds = sorted((p.kind, tuple(p.payload["triggers"])) for p in pending)
    assert kinds == [("fragment_add", ("Mia",)), ("fragment_add", ("peanuts", "allergy"))]
    assert me.layers.fragments.list() == []  # nothing saved until approved
    mia = next(p for p in pending if p.payload["triggers"] == ["Mia"])
    assert mia.reason and mia.evidence == "My sister is called Mia." and mia.label.startswith("(offline suggestion)")
    approved = me.layers.review.approve(mia.id, {"definition": "Mia is the person's younger sister."})
    [fragment] = me.layers.fragments.list()
    assert fragment.id == approved.result_id and fragment.definition == "Mia is the person's younger sister."
    peanuts = next(p for p in pending if p.payload["triggers"] != ["Mia"])
    me.layers.review.dismiss(peanuts.id)
    assert me.layers.review.run(chat.id, OfflineHelper(), full=True) == []  # neither comes back
    with pytest.raises(InvalidInput):
        me.layers.review.propose("fragment_add", {}, "a proposal without content is refused")


def test_f3_review_proposes_updates_to_existing_fragments_and_decisions_are_final(me, chat, worker):
    from hearth.errors import Conflict

    existing = me.layers.fragments.add(["Mia"], "Mia lives in Leeds.", "people")
    me.layers.settings.set("review.every", 2)
    me.send(chat.id, "My sister Mia is visiting.")
    worker.run_once()
    [update] = me.layers.review.list()
    assert update.kind == "fragment_update" and update.payload["fragment_id"] == existing.id
    assert update.payload["definition"] == "Mia lives in Leeds. Mia is the person's sister."
    me.layers.review.approve(update.id)
    assert me.layers.fragments.get(existing.id).definition == "Mia lives in Leeds. Mia is the person's sister."
    with pytest.raises(Conflict):
        me.layers.review.dismiss(update.id)
    other = me.layers.review.propose("status_change", {"field_id": 1, "field": "X", "to": "y"}, "r")
    with pytest.raises(InvalidInput):
        me.layers.review.approve(other.id, {"text": "a status change has no text to edit"})


def test_f3_g4_memory_suggestions_need_approval_unless_auto_approved(me):
    review = me.layers.review
    proposal = review.propose("memory_add", {"text": "Prefers morning walks", "category": "habits"},
                              "Said so twice.", source="model")
    assert proposal.status == "pending" and me.memories.list() == []
    assert review.propose("memory_add", {"text": "prefers  MORNING walks", "category": "Habits"}, "again") is None
    review.approve(proposal.id)
    assert [m.text for m in me.memories.list()] == ["Prefers morning walks"]
    me.layers.settings.set("auto_approve.memory", True)
    auto = review.propose("memory_add", {"text": "Reads before bed"}, "Said so.")
    assert auto.status == "approved" and auto.decided_by == "auto"
    assert len(me.memories.list()) == 2


# -- dynamic context order ----------------------------------------------------------------------------
def test_d2_blocks_of_every_registered_layer_follow_the_spec_order(me, hearth, provider, worker):
    persona = me.personas.create("d2", "D2", characters=[{"name": "Ellis", "description": "a grey cat"}])
    chat = me.conversations.create(persona.id)
    me.layers.household.set("Children", "with me", create=True)
    me.layers.fragments.add(["garden"], "The garden has three raised beds.", "places")
    me.layers.live_context.set(chat.id, mood="content")
    me.layers.settings.set("summary.every", 2)
    me.send(chat.id, "Ellis sat in the garden all morning.")
    worker.run_once()
    me.send(chat.id, "Ellis is back in the garden, remember last time?")
    names = [layer.name for layer in me.dynamic.layers]
    assert {"characters", "household", "live_context", "summary", "fragments"} <= set(names)
    assert all(name in ORDER for name in names)

    persona_ = me.personas.get(chat.persona_id)
    conn = hearth.store.connection()
    history = me.conversations.messages(chat.id)
    turn = Turn(conn=conn, user_id=me.user_id, conversation=me.conversations.get(chat.id), persona=persona_,
                text=history[-2].content, history=history[:-2], settings=hearth.settings,
                has_assistant_reply=True)
    blocks = me.dynamic.collect(turn)
    ranks = [ORDER.index(b.layer) for b in blocks]
    assert ranks == sorted(ranks)
    assert {"characters", "household", "live_context", "summary", "fragments"} <= {b.layer for b in blocks}

    request = provider.requests[-1]
    context = context_message(request)
    labels = [line.strip("= ") for line in context.splitlines() if line.startswith("=== ")]
    by_label = {b.label: b.layer for b in blocks}
    layer_order = [by_label[label] for label in labels if label in by_label]
    assert layer_order == [b.layer for b in blocks if b.layer != "summary"]
    sent = systems(request)
    summary_at = next(i for i, s in enumerate(sent) if s.startswith(SUMMARY_HEADER))
    assert summary_at == sent.index(context) - 1  # its own system message, just before the context


# -- the whole stack with the offline provider -------------------------------------------------------
def test_g3_hs2_f1_full_conversation_with_the_offline_provider(tmp_path):
    hearth = Hearth(Settings.resolve({"home": str(tmp_path / "home")}, environ={}))
    me = hearth.scope()
    persona = me.personas.default()
    chat = me.conversations.create(persona.id)
    me.layers.household.add_field("Fleur", options=["at home", "at the Farm"], value="at home")
    me.layers.fragments.add(["Fleur"], "Fleur is the person's dog, a shy lurcher.", "pets")
    reply = me.send(chat.id, "Fleur is going to the farm for a week while I travel.")
    report = reply.assistant_message.content
    assert report.startswith("[offline reply")
    assert "MEMORY FRAGMENTS (2 lines)" in report and "HOUSEHOLD STATUS (CURRENT) (2 lines)" in report
    worker = Worker(hearth)  # default helper from settings: offline
    assert isinstance(worker.helper, OfflineHelper)
    worker.run_once()
    [proposal] = me.layers.review.list("pending", "status_change")
    assert proposal.payload["to"] == "at the Farm" and "farm for a week" in proposal.evidence
    me.layers.review.approve(proposal.id)
    recording = RecordingProvider()
    hearth._provider = recording  # inspect the next request exactly
    me.send(chat.id, "Is Fleur settling in?")
    block = context_message(recording.requests[-1])
    assert "Fleur: at the Farm" in block and "Fleur is the person's dog" in block
    hearth.close()


# -- CLI and HTTP -------------------------------------------------------------------------------------
def test_hs1_f1_f3_lc1_cli_commands(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from hearth.cli import cli

    monkeypatch.setenv("HEARTH_HOME", str(tmp_path / "home"))
    for key in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "HEARTH_BASE_URL", "HEARTH_PROVIDER", "HEARTH_MODEL"):
        monkeypatch.delenv(key, raising=False)
    runner = CliRunner()

    def run(*args):
        result = runner.invoke(cli, list(args), catch_exceptions=False)
        assert result.exit_code == 0, result.output
        return result.output

    run("status", "add", "Fleur", "--option", "at home", "--option", "at the Farm", "--value", "at home")
    assert "Fleur: at the Farm" in run("status", "set", "Fleur", "at the farm")
    run("status", "set", "Children", "with me")
    assert "Children: with me" in run("status", "list")
    history = run("status", "history", "Fleur")
    assert "at the Farm" in history and "at home" in history
    assert "Fragment 1 added." in run("fragments", "add", "--trigger", "allotment", "--definition", "Plot 14.",
                                      "--category", "places")
    run("fragments", "edit", "1", "--definition", "Plot 15.")
    assert "Plot 15." in run("fragments", "list")
    assert "allotment" in run("fragments", "test", "Off to the allotments")
    run("layers", "set", "review.every", "2")
    run("chat", "-m", "My brother is called Olu.")
    run("worker", "--once")
    listing = run("review", "list")
    assert "fragment add" in listing and "Olu" in listing and 'You said: "My brother is called Olu."' in listing
    proposal_id = listing.split()[0]
    assert "Approved" in run("review", "approve", proposal_id, "--definition", "Olu is the older brother.")
    assert "Olu is the older brother." in run("fragments", "list")
    run("context", "set", "1", "--mood", "calm", "--nudge", "Ask about Olu's exam")
    shown = run("context", "show", "1")
    assert "Mood: calm" in shown and "Ask about Olu's exam" in shown and "Rolling summary: (none yet)" in shown
    run("fragments", "rm", "1")
    assert "No fragment triggers." in run("fragments", "test", "allotment")
    bad = runner.invoke(cli, ["review", "dismiss", "999"])
    assert bad.exit_code == 1 and "no proposal 999" in bad.output


def test_hs1_hs2_lc1_f1_f3_http_routes(me, persona, hearth, worker):
    from hearth.server import errors
    from hearth.server.auth import current_scope
    from hearth.server.layers import router

    app = FastAPI()
    errors.install(app)
    app.include_router(router)
    app.dependency_overrides[current_scope] = lambda: me
    client = TestClient(app)
    chat = me.conversations.create(persona.id)

    field = client.post("/api/status", json={"name": "Fleur", "options": ["at home", "at the Farm"], "value": "at home"})
    assert field.status_code == 201 and field.json()["value"] == "at home"
    fid = field.json()["id"]
    assert client.put(f"/api/status/{fid}/value", json={"value": "moon"}).status_code == 422
    assert client.put(f"/api/status/{fid}/value", json={"value": "at the Farm"}).json()["value"] == "at the Farm"
    assert len(client.get("/api/status/history").json()) == 2
    client.put(f"/api/status/{fid}/value", json={"value": "at home"})
    me.send(chat.id, "Fleur is at the farm again.")
    worker.run_once()
    [pending] = client.get("/api/status/pending").json()
    assert pending["evidence"] == "Fleur is at the farm again."
    approved = client.post(f"/api/review/{pending['id']}/approve", json={"edits": {"to": "at the Farm"}})
    assert approved.json()["status"] == "approved"
    assert client.get("/api/status").json()[0]["value"] == "at the Farm"
    assert client.post(f"/api/review/{pending['id']}/dismiss").status_code == 409

    frag = client.post("/api/fragments", json={"triggers": ["Fleur"], "definition": "The dog."})
    assert frag.status_code == 201
    assert client.post("/api/fragments", json={"triggers": ["C++"], "definition": "x"}).status_code == 422
    assert client.patch(f"/api/fragments/{frag.json()['id']}", json={"definition": "The lurcher."}).json()[
        "definition"] == "The lurcher."
    assert [m["trigger"] for m in client.post("/api/fragments/match", json={"text": "fleur!"}).json()] == ["Fleur"]
    assert client.get("/api/fragments/999").status_code == 404

    view = client.get(f"/api/conversations/{chat.id}/live-context", params={"opened": "true"}).json()
    assert view["refresh_queued"] is True and view["live_context"] is None
    edited = client.put(f"/api/conversations/{chat.id}/live-context", json={"mood": "calm"}).json()
    assert edited["mood"] == "calm" and edited["source"] == "manual"
    nudge = client.post(f"/api/conversations/{chat.id}/nudges", json={"text": "Ask about the farm"}).json()
    assert nudge["token"].startswith("[n:")
    assert client.delete(f"/api/conversations/{chat.id}/nudges/{nudge['id']}").status_code == 204
    assert client.get(f"/api/conversations/{chat.id}/summary").json() is None
    assert client.get("/api/conversations/999/summary").status_code == 404

    assert client.patch("/api/layers/settings", json={"summary.every": 10}).json()["summary.every"] == 10
    assert client.patch("/api/layers/settings", json={"nope": 1}).status_code == 422
    counts = client.get("/api/jobs/counts").json()
    assert set(counts) == {"pending", "running", "done", "dead"} and counts["done"] >= 1
    queued = client.post("/api/review/run", json={"conversation_id": chat.id})
    assert queued.status_code == 202 and queued.json()["job_id"] >= 1
