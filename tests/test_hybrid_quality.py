"""Retrieval quality rules of the hybrid search (A2): word forms, speaker names, conversation lift."""

from __future__ import annotations

from hearth.retrieval.hybrid import (
    Filters, Result, _session_lift, fts_match, fuse, match_terms, search, stem, without_names,
)


def _thread(me, persona, title, turns):
    c = me.conversations.create(persona.id, title)
    for role, text in turns:
        me.conversations.add_message(c.id, role, text)
    return c


def test_a2_stems_reach_other_word_forms():
    assert stem("painting") == stem("painted") == stem("paints") == "paint"
    assert stem("promotions") == "promot" and stem("promote") == "promot"
    assert stem("art") == "art" and stem("kids") == "kids"  # too short to strip safely
    assert match_terms(["painting", "art", "painted"]) == ["paint*", "art"]
    assert fts_match(["paint*", "art"]) == '"paint"* OR "art"'


def test_a2_keyword_search_finds_a_different_form_of_the_query_word(me, persona):
    _thread(me, persona, "Weekend", [("user", "I painted the old fence blue on Saturday."),
                                     ("assistant", "That sounds like a lovely afternoon."),
                                     ("user", "The garden looks tidy now.")])
    outcome = search(me.store.connection(), me.user_id, "Tell me about the painting", filters=Filters(sources=("messages",)),
                     log=False)
    assert outcome.results and outcome.results[0].text.startswith("I painted the old fence")
    assert outcome.results[0].scores["keyword_rank"] == 1


def test_a2_a_named_speaker_is_lifted_not_searched_as_a_word(me, persona):
    _thread(me, persona, "Chat", [("assistant", "Hey Caroline! How was the trip, Caroline?"),
                                  ("user", "We adopted a puppy from the shelter on the way back."),
                                  ("assistant", "A puppy! What breed is the puppy?")])
    outcome = search(me.store.connection(), me.user_id, "Which puppy did Caroline adopt?", filters=Filters(sources=("messages",)),
                     speaker_names={"Caroline": "user", "Elion": "assistant"}, log=False)
    texts = [r.text for r in outcome.results]
    assert texts[0].startswith("We adopted a puppy")
    assert outcome.results[0].scores["boost"] == 1.5
    # The greeting only holds the name: it is no keyword match and sorts after both puppy turns.
    assert not any(t.startswith("Hey Caroline") for t in texts[:2])
    assert without_names("What did Caroline's sister say to caroline?", ["Caroline"]) == "What did sister say to ?"


def test_a2_turns_of_a_conversation_with_several_matches_are_lifted():
    def result(i, source, fused):
        return Result("message", i, source, "t", None, "x", "user", scores={"fused": fused})

    results = [result(1, 10, 0.10), result(2, 10, 0.09), result(3, 10, 0.08), result(4, 20, 0.11)]
    _session_lift(results)
    by_id = {r.id: r.scores for r in results}
    assert by_id[1]["session"] == 1.0 and by_id[4]["session"] < 0.5
    assert by_id[1]["fused"] > by_id[4]["fused"]  # the lone stronger hit now sorts below the cluster


def test_a2_fusion_weights_apply_per_list():
    lists = {"keyword:query:messages": [(("m", 1), 5.0)], "keyword:entities:messages": [(("m", 2), 5.0)]}
    fused = fuse(lists, weights={"keyword:query:messages": 1.0, "keyword:entities:messages": 0.5})
    assert fused[("m", 1)]["rrf"] == 2 * fused[("m", 2)]["rrf"]
