"""Proposals pass the review rule when they are proposed (U8), from every source: a memory the
person already has is not queued ("already remembered"), so nothing waits that approving could not
apply; a contradiction from an assistant is answered, not queued."""

from __future__ import annotations

import json

import pytest

from hearth.errors import InvalidInput
from tests import samples
from tests.test_checkpoints import IDLE, later, worker_at


def _remembered_events(hearth) -> list[dict]:
    with hearth.store.read() as conn:
        return [json.loads(r[0]) for r in conn.execute(
            "SELECT payload FROM events WHERE kind = 'review.already_remembered' ORDER BY id")]


def test_u8_a_proposal_with_a_memorys_exact_text_is_already_remembered(me, hearth):
    kept = me.memories.add("Robin's sister lives in Saltcombe", "family")
    review = me.layers.review
    assert review.propose("memory_add", {"text": "Robin's sister lives in Saltcombe"}, "Said so") is None
    assert review.propose("memory_add", {"text": "robin's SISTER lives in saltcombe!"}, "Said so",
                          source="model") is None
    assert review.list() == []  # nothing waits that approving could not apply
    events = _remembered_events(hearth)
    assert [e["memory_id"] for e in events] == [kept.id, kept.id]
    assert "Saltcombe" not in json.dumps(events)  # numbers, never the text
    # A contradiction from a background source still waits with both texts (B3), and approves with
    # a resolution; a plain approval asks for one.
    moved = review.propose("memory_add", {"text": "Robin's sister lives in Bristol"}, "Said so")
    assert moved is not None and moved.payload["conflict"]["relation"] == "contradiction"
    with pytest.raises(InvalidInput, match="choose a resolution"):
        review.approve(moved.id)
    assert review.approve(moved.id, {"resolution": "supersede"}).status == "approved"
    assert me.memories.get(kept.id).text == "Robin's sister lives in Bristol"


def test_u8_an_idle_checkpoint_does_not_queue_what_is_already_remembered(me, hearth, persona):
    kept = me.memories.add("The person is allergic to peanuts.")
    chat = me.conversations.create(persona.id)
    me.send(chat.id, "My sister is called Mia. I'm allergic to peanuts.")
    later(hearth, IDLE + 5)
    worker_at(hearth, IDLE + 5).run_once()
    assert [p.payload["text"] for p in me.layers.review.list()] == ["The person's sister is called Mia."]
    assert [e["memory_id"] for e in _remembered_events(hearth)] == [kept.id]


def test_u8_archive_mining_does_not_queue_what_is_already_remembered(me, hearth, persona):
    kept = me.memories.add("The person's daughter is called Iris.")
    report = me.imports.file(json.dumps(samples.claude_conversations()).encode(), "claude.json", persona=persona,
                             mine=True)
    assert report.counts["proposals"] == 1
    assert [p.payload["text"] for p in me.layers.review.list()] == ["The person loves growing tomatoes."]
    assert [e["memory_id"] for e in _remembered_events(hearth)] == [kept.id]
