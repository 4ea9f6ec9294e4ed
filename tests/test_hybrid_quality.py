"""Retrieval quality rules of the hybrid search (A2): word forms, speaker names, conversation lift."""

from __future__ import annotations

from hearth.retrieval.fusion import feedback_list, question_share, session_lift
from hearth.retrieval.hybrid import (
    Filters,
    Result,
    Tuning,
    fts_match,
    fuse,
    match_terms,
    search,
    select_terms,
    stem,
    without_names,
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


def test_a2_keyword_search_finds_a_different_form_of_the_query_word(hearth, me, persona):
    _thread(me, persona, "Weekend", [("user", "I painted the old fence blue on Saturday."),
                                     ("assistant", "That sounds like a lovely afternoon."),
                                     ("user", "The garden looks tidy now.")])
    outcome = search(hearth.store.connection(), me.user_id, "Tell me about the painting", filters=Filters(sources=("messages",)),
                     log=False)
    assert outcome.results and outcome.results[0].text.startswith("I painted the old fence")
    assert outcome.results[0].scores["keyword_rank"] == 1


def test_a2_a_named_speaker_is_lifted_not_searched_as_a_word(hearth, me, persona):
    _thread(me, persona, "Chat", [("assistant", "Hey Caroline! How was the trip, Caroline?"),
                                  ("user", "We adopted a puppy from the shelter on the way back."),
                                  ("assistant", "A puppy! What breed is the puppy?")])
    outcome = search(hearth.store.connection(), me.user_id, "Which puppy did Caroline adopt?", filters=Filters(sources=("messages",)),
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
    session_lift(results)
    by_id = {r.id: r.scores for r in results}
    assert by_id[1]["session"] == 1.0 and by_id[4]["session"] < 0.5
    assert by_id[1]["fused"] > by_id[4]["fused"]  # the lone stronger hit now sorts below the cluster


def test_a2_fusion_weights_apply_per_list():
    lists = {"keyword:query:messages": [(("m", 1), 5.0)], "keyword:entities:messages": [(("m", 2), 5.0)]}
    fused = fuse(lists, weights={"keyword:query:messages": 1.0, "keyword:entities:messages": 0.5})
    assert fused[("m", 1)]["rrf"] == 2 * fused[("m", 2)]["rrf"]


def test_a2_rrf_constant_comes_from_the_tuning_passed_in():
    lists = {"keyword:query:messages": [(("m", 1), 5.0)]}
    assert fuse(lists)[("m", 1)]["rrf"] == 1 / (Tuning().rrf_k + 1)
    assert fuse(lists, tuning=Tuning(rrf_k=60))[("m", 1)]["rrf"] == 1 / 61  # a changed constant is not ignored


def test_a2_feedback_words_of_the_best_hit_find_a_turn_without_the_query_words(hearth, me, persona):
    # The question's word ("saxophone") reaches the first turn; that turn's distinctive words
    # ("conservatory", "audition") reach the later turn that never says saxophone.
    _thread(me, persona, "Music", [("user", "I practised the saxophone for my conservatory audition."),
                                   ("assistant", "How long have you been playing?"),
                                   ("user", "Since school. Dinner was pasta again tonight.")])
    _thread(me, persona, "Later", [("user", "The conservatory audition went well, they liked my scales."),
                                   ("user", "My conservatory friends came too."),
                                   ("assistant", "Congratulations!")])
    outcome = search(hearth.store.connection(), me.user_id, "How is the saxophone going?",
                     filters=Filters(sources=("messages",)), log=False)
    texts = [r.text for r in outcome.results]
    assert texts[0] == "I practised the saxophone for my conservatory audition."
    later = outcome.results[texts.index("The conservatory audition went well, they liked my scales.")]
    assert later.scores["signals"] == ["keyword"] and later.scores["rrf"] > 0
    assert "Congratulations!" not in texts and not any("pasta" in t for t in texts)  # no feedback word there


def test_a2_without_feedback_the_related_turn_is_not_found(hearth, me, persona):
    _thread(me, persona, "Music", [("user", "I practised the saxophone for my conservatory audition.")])
    _thread(me, persona, "Later", [("user", "The conservatory audition went well, they liked my scales."),
                                   ("user", "My conservatory friends came too.")])
    outcome = search(hearth.store.connection(), me.user_id, "How is the saxophone going?",
                     filters=Filters(sources=("messages",)), log=False, tuning=Tuning(feedback_docs=0))
    assert [r.text for r in outcome.results] == ["I practised the saxophone for my conservatory audition."]


def test_a2_when_question_lifts_turns_that_state_a_time(hearth, me, persona):
    _thread(me, persona, "Trips", [("user", "The lake trip was wonderful, so calm."),
                                   ("assistant", "It sounds peaceful."),
                                   ("user", "We went to the lake trip last summer with my cousins.")])
    conn = hearth.store.connection()
    when = search(conn, me.user_id, "When was the lake trip?", filters=Filters(sources=("messages",)), log=False)
    assert when.results[0].text.startswith("We went to the lake trip last summer")
    assert when.results[0].scores["boost"] == Tuning().time_boost > 1
    plain = search(conn, me.user_id, "How was the lake trip?", filters=Filters(sources=("messages",)), log=False)
    assert all(r.scores["boost"] == 1.0 for r in plain.results)  # only a "when" question is lifted


def test_a2_a_moment_remembered_is_not_a_question_about_its_time(hearth, me, persona):
    _thread(me, persona, "Trips", [("user", "We went to the lake trip last summer with my cousins.")])
    conn = hearth.store.connection()
    for cue in ("Do you remember when we did the lake trip?", "Back when we did the lake trip, who came?",
                "I recall when we did the lake trip."):
        outcome = search(conn, me.user_id, cue, filters=Filters(sources=("messages",)), log=False)
        # "remember when" asks for the moment, not its date: nothing is lifted for stating a time.
        assert outcome.results and all(r.scores["boost"] == 1.0 for r in outcome.results)
    asked = search(conn, me.user_id, "Do you remember when the lake trip was?", filters=Filters(sources=("messages",)),
                   log=False)
    assert asked.results[0].scores["boost"] == Tuning().time_boost  # "when ... was?" still asks for the time


def test_a2_v2_feedback_never_takes_words_from_a_shielded_turn(hearth, me, persona):
    # Vector hits reach fusion before visibility is applied; the feedback step must skip them.
    one = Tuning(feedback_docs=1)
    pets = _thread(me, persona, "Pets", [("user", "We adopted a kitten from the shelter.")])
    secret = _thread(me, persona, "Secret", [("user", "The kitten came from the quokka sanctuary, tell no one.")])
    me.conversations.set_shielded(secret.id, True)
    maps = _thread(me, persona, "Maps", [("user", "The quokka sanctuary is on the island map.")])
    conn = hearth.store.connection()
    ids = {c.id: conn.execute("SELECT id FROM messages WHERE conversation_id = ?", (c.id,)).fetchone()[0]
           for c in (pets, secret, maps)}
    fused = {("message", ids[secret.id]): {"rrf": 1.0}, ("message", ids[pets.id]): {"rrf": 0.5}}
    found = feedback_list(conn, me.user_id, Filters(sources=("messages",)), fused, ["kitten*"], set(), one)
    assert ("message", ids[maps.id]) not in {key for key, _ in found}
    assert ("message", ids[secret.id]) not in {key for key, _ in found}
    # With the shielded conversation allowed, the same call does use its words (the test can fail).
    allowed = Filters(sources=("messages",), include_shielded=True)
    found = feedback_list(conn, me.user_id, allowed, fused, ["kitten*"], set(), one)
    assert ("message", ids[maps.id]) in {key for key, _ in found}


def test_k1_query_terms_stay_within_a_postings_budget(hearth, me, persona):
    conversation = me.conversations.create(persona.id)
    with hearth.store.write():
        for i in range(30):
            me.conversations.add_message(conversation.id, "user", f"weather talk number {i} with zephyr" if i == 0
                                         else f"weather talk number {i}")
    conn = hearth.store.connection()
    tight = Tuning(postings_budget=10, common_min_rows=10_000)  # keep the common-word cut out of this test
    assert select_terms(conn, ["weather", "zephyr"], tuning=tight) == ["zephyr"]
    assert select_terms(conn, ["weather", "zephyr"], tuning=tight.with_changes(postings_budget=1_000)) == ["zephyr", "weather"]
    # The rarest word stays even over the budget, except where the budget is strict (the send
    # path): a word in every turn names no topic, and ranking all of its rows is the cost.
    assert select_terms(conn, ["weather"], tuning=tight) == ["weather"]
    assert select_terms(conn, ["weather"], tuning=tight.with_changes(rarest_over_budget=False)) == []
    assert select_terms(conn, ["weather", "zephyr"], tuning=tight.with_changes(rarest_over_budget=False)) == ["zephyr"]


def test_k1_send_path_asks_no_keyword_query_for_a_message_whose_rarest_word_is_over_the_budget(hearth, me, persona,
                                                                                               monkeypatch):
    from hearth.prompt.layers import keyword_recall
    from hearth.retrieval import tuning

    assert tuning.SEND_PATH.rarest_over_budget is False and tuning.DEFAULT.rarest_over_budget is True
    strict = tuning.SEND_PATH.with_changes(postings_budget=10, common_min_rows=10_000)  # 30 rows is over it
    monkeypatch.setattr(keyword_recall, "SEND_PATH", strict)
    old = me.conversations.create(persona.id, "Old")
    with hearth.store.write():
        for i in range(30):
            me.conversations.add_message(old.id, "user", f"weather talk number {i}")
        me.conversations.add_message(old.id, "assistant", "The zephyr came through the garden.")
    current = me.conversations.create(persona.id, "Now")
    me.send(current.id, "hello there")
    asked: list[list[str]] = []
    real = keyword_recall.shared_keyword_hits
    monkeypatch.setattr(keyword_recall, "shared_keyword_hits",
                        lambda conn, user_id, words, *a, **k: asked.append(words) or real(conn, user_id, words, *a, **k))
    me.send(current.id, "Weather talk, number of weather talks")  # each word in 30 rows
    assert asked == []
    me.send(current.id, "Tell me about the weather and the zephyr again")
    assert len(asked) == 1 and "zephyr*" in asked[0] and "weather" not in asked[0]


def test_a2_a_question_naming_a_month_finds_that_months_turn_that_shares_no_word(hearth, me, persona):
    from hearth.retrieval.semantic import embed_pending, shared_embedder

    embedder = shared_embedder()
    april = me.conversations.create(persona.id, "Spring", created_at="2022-04-15T10:00:00.000000Z")
    me.conversations.add_message(april.id, "user", "Dyed my hair purple last week, come see!",
                                 created_at="2022-04-15T10:00:01.000000Z")
    other = me.conversations.create(persona.id, "Later", created_at="2022-09-01T10:00:00.000000Z")
    for i, text in enumerate(["My physical therapy is a slow transformation.", "The physical exam went fine.",
                              "A transformation of the garden is under way.", "Physical books beat screens."]):
        me.conversations.add_message(other.id, "user", text, created_at=f"2022-09-01T10:00:0{i + 1}.000000Z")
    embed_pending(hearth.store, embedder, user_id=me.user_id)
    conn = hearth.store.connection()
    narrow = Tuning(candidates=1, feedback_docs=0)  # each other list holds only the distractors' best

    def found(tuning):
        outcome = search(conn, me.user_id, "What physical transformation did I undergo in April 2022?",
                         filters=Filters(sources=("messages",)), embedder=embedder, db_key="dated", log=False,
                         tuning=tuning)
        return [r.text for r in outcome.results]

    assert any(t.startswith("Dyed my hair") for t in found(narrow))
    assert not any(t.startswith("Dyed my hair") for t in found(narrow.with_changes(dated_weight=0.0)))
    # A range holding more turns than are compared one by one is searched through the vector
    # index, filtered to the range (S17), and the turn is still found.
    assert any(t.startswith("Dyed my hair") for t in found(narrow.with_changes(dated_rows=0)))


def test_a2_a_turn_that_only_asks_ranks_below_the_turn_that_tells(hearth, me, persona):
    # The question shares more of the words asked now; the statement holds the answer.
    _thread(me, persona, "Asked", [("assistant", "Did you bake the lemon cake for the bake sale? Was the bake sale fun?")])
    _thread(me, persona, "Told", [("user", "I baked a lemon drizzle cake for the school sale on Friday.")])
    conn = hearth.store.connection()
    query = "What cake did I bake for the bake sale?"
    plain = search(conn, me.user_id, query, filters=Filters(sources=("messages",)), log=False,
                   tuning=Tuning(question_penalty=0.0))
    assert plain.results[0].text.startswith("Did you bake")
    penalised = search(conn, me.user_id, query, filters=Filters(sources=("messages",)), log=False)
    assert penalised.results[0].text.startswith("I baked a lemon drizzle cake")
    asked = next(r for r in penalised.results if r.text.startswith("Did you bake"))
    assert asked.scores["boost"] == 1 - Tuning().question_penalty  # every sentence of it asks
    assert question_share("Is it? Yes, it is. Fine?") == 2 / 3 and question_share("No question here.") == 0.0


def test_a2_the_dated_list_ranks_the_ranges_turns_by_exact_cosine(hearth, me, persona):
    """The dated list compares every turn of the range with the query (in the database on
    PostgreSQL, in numpy on SQLite): the same order and scores as comparing the stored vectors by
    hand, and only turns of the range."""
    import numpy as np

    from hearth.retrieval.candidates import dated_vector_hits
    from hearth.retrieval.semantic import embed_pending, embed_queries, model_id, shared_embedder
    from hearth.retrieval.tuning import DEFAULT
    from hearth.retrieval.vectors import from_blob

    embedder = shared_embedder()
    spring = me.conversations.create(persona.id, "Spring", created_at="2022-04-02T10:00:00.000000Z")
    texts = ["We planted the quince by the fence.", "The quince finally flowered!", "Rain all week again.",
             "My sister moved to Lisbon.", "I repainted the kitchen blue.", "The quince tree needs pruning."]
    inside = [me.conversations.add_message(spring.id, "user", text, created_at=f"2022-04-{3 + i:02d}T10:00:00.000000Z").id
              for i, text in enumerate(texts)]
    summer = me.conversations.create(persona.id, "Summer", created_at="2022-08-01T10:00:00.000000Z")
    outside = me.conversations.add_message(summer.id, "user", "The quince made jam at last.",
                                           created_at="2022-08-02T10:00:00.000000Z").id
    embed_pending(hearth.store, embedder, user_id=me.user_id)
    conn = hearth.store.connection()
    vector = embed_queries(embedder, ["How was the quince tree doing in April?"])[0]
    hits = dated_vector_hits(conn, hearth.store.key, me.user_id, Filters(), ("2022-04-01", "2022-04-30"), embedder, vector,
                             DEFAULT.with_changes(candidates=4))
    stored = {row[0]: from_blob(row[1]) for row in conn.execute(
        "SELECT message_id, embedding FROM message_embeddings WHERE model = ?", (model_id(embedder),))}
    expected = sorted(((i, float(stored[i] @ vector)) for i in inside), key=lambda h: (-h[1], h[0]))[:4]
    assert [h[0] for h in hits] == [h[0] for h in expected] and outside not in {h[0] for h in hits}
    np.testing.assert_allclose([h[1] for h in hits], [h[1] for h in expected], atol=1e-5)
