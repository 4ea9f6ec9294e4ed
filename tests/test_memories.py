"""Conversation-scoped long-term memory (M1-M7) and prompt freshness (P5, P7)."""

from __future__ import annotations

import json
import random
import sqlite3
import threading

import pytest

from hearth import Hearth, InvalidInput, NotFound, Settings
from hearth.prompt import reconcile
from hearth.prompt.static import POLICY_VERSION


def memory_lines(prompt: str | None) -> list[str]:
    if not prompt or "## Long-term memories" not in prompt:
        return []
    block = prompt.split("## Long-term memories\n", 1)[1].split("\n\n", 1)[0]
    return block.splitlines()


def test_m1_memories_have_stable_ids_order_category_importance_and_eligibility(me):
    a = me.memories.add("Loves the sea", "places", 5)
    b = me.memories.add("Allergic to cats", "health", 9)
    c = me.memories.add("Hidden note", eligible=False)
    assert [m.id for m in me.memories.list()] == [a.id, b.id, c.id]
    me.memories.move(c.id, 1)
    assert [m.id for m in me.memories.list()] == [c.id, a.id, b.id]
    me.memories.move(c.id, 3)
    assert [m.id for m in me.memories.list()] == [a.id, b.id, c.id]
    assert me.memories.get(b.id).category == "health" and me.memories.get(b.id).importance == 9
    with pytest.raises(InvalidInput):
        me.memories.move(a.id, 99)
    with pytest.raises(InvalidInput):
        me.memories.add("   ")
    with pytest.raises(InvalidInput):
        me.memories.add("x", importance=11)


def _stored_numbers(hearth) -> dict[int, int]:
    return {r[0]: r[1] for r in hearth.store.connection().execute("SELECT id, position FROM memories")}


def test_m1_a_move_writes_one_row_and_places_stay_one_based(hearth, me, persona):
    ids = [m.id for m in me.memories.import_many([{"text": f"m{i}"} for i in range(30)])]
    before = _stored_numbers(hearth)
    order = me.memories.move(ids[29], 5)
    after = _stored_numbers(hearth)
    assert [mid for mid in after if after[mid] != before[mid]] == [ids[29]]  # one row written
    assert [m.id for m in order] == ids[:4] + [ids[29]] + ids[4:29]
    assert [m.position for m in order] == list(range(1, 31)) and me.memories.get(ids[29]).position == 5
    me.memories.delete(ids[0])  # a deletion leaves a gap; places stay 1..n
    assert [m.position for m in me.memories.list()] == list(range(1, 30))
    assert me.memories.get(ids[29]).position == 4
    # Numbers stored without room between them (as before gaps) are renumbered once, then moves are one row.
    with hearth.store.write() as conn:
        for place, m in enumerate(me.memories.list(), start=1):
            conn.execute("UPDATE memories SET position = ? WHERE id = ?", (place, m.id))
    me.memories.move(ids[10], 2)
    before = _stored_numbers(hearth)
    me.memories.move(ids[20], 3)
    after = _stored_numbers(hearth)
    assert [mid for mid in after if after[mid] != before[mid]] == [ids[20]]


def test_m1_m2_moves_keep_the_order_a_list_would_and_prompts_follow(me, persona):
    rng = random.Random(11)
    ids = [me.memories.add(f"m{i}").id for i in range(12)]
    conversation = me.conversations.create(persona.id)
    me.send(conversation.id, "hi")
    model = list(ids)
    # The last one to second place, again and again, halves one gap until it runs out; then random moves.
    moves = [(None, 2)] * 15 + [(rng.choice(ids), rng.randint(1, len(ids))) for _ in range(60)]
    for memory_id, place in moves:
        memory_id = memory_id or model[-1]
        model.remove(memory_id)
        model.insert(place - 1, memory_id)
        listed = me.memories.move(memory_id, place)
        assert [m.id for m in listed] == model
        assert [m.position for m in listed] == list(range(1, len(ids) + 1))
    texts = {m.id: m.text for m in me.memories.list()}
    assert memory_lines(me.stored_prompt(conversation.id)) == [f"- {texts[mid]}" for mid in model]


def test_m1_bulk_import_persists_a_batch_together_or_not_at_all(me):
    created = me.memories.import_many([{"text": "one"}, {"text": "two", "category": "c", "importance": 2}])
    assert [m.text for m in created] == ["one", "two"]
    with pytest.raises(InvalidInput, match="item 1"):
        me.memories.import_many([{"text": "three"}, {"text": ""}])
    assert [m.text for m in me.memories.list()] == ["one", "two"]


def test_m2_the_worked_example_from_the_seed(hearth, me, persona):
    m1 = me.memories.add("Memory one")
    m2 = me.memories.add("Memory two")
    thread_a = me.conversations.create(persona.id, "A")
    me.send(thread_a.id, "hello A")
    m3 = me.memories.add("Memory three")
    thread_b = me.conversations.create(persona.id, "B")
    me.send(thread_b.id, "hello B")
    assert memory_lines(me.stored_prompt(thread_a.id)) == ["- Memory one", "- Memory two"]
    assert memory_lines(me.stored_prompt(thread_b.id)) == ["- Memory one", "- Memory two", "- Memory three"]

    me.memories.edit(m2.id, text="Memory two, corrected")
    assert memory_lines(me.stored_prompt(thread_a.id)) == ["- Memory one", "- Memory two, corrected"]
    assert "Memory three" not in me.stored_prompt(thread_a.id)

    me.memories.delete(m1.id)
    assert memory_lines(me.stored_prompt(thread_a.id)) == ["- Memory two, corrected"]
    assert memory_lines(me.stored_prompt(thread_b.id)) == ["- Memory two, corrected", "- Memory three"]
    thread_c = me.conversations.create(persona.id, "C")
    assert [m.id for m in me.memories.snapshot(thread_c.id)] == [m2.id, m3.id]
    conn = hearth.store.connection()
    assert conn.execute("SELECT count(*) FROM conversation_memories WHERE memory_id = ?", (m1.id,)).fetchone()[0] == 0


def test_m2_branch_like_creation_does_not_resurrect_deleted_memories(me, persona):
    m1 = me.memories.add("gone soon")
    me.memories.delete(m1.id)
    again = me.memories.add("new one")
    assert again.id != m1.id  # ids are never reused
    conversation = me.conversations.create(persona.id)
    assert [m.id for m in me.memories.snapshot(conversation.id)] == [again.id]


def test_m3_an_empty_snapshot_stays_empty(me, persona, provider):
    conversation = me.conversations.create(persona.id)
    me.memories.add("added later")
    me.send(conversation.id, "hello")
    assert memory_lines(me.stored_prompt(conversation.id)) == []
    assert "## Long-term memories" not in provider.requests[-1].messages[0].content


def test_m4_refresh_replaces_one_threads_snapshot_and_records_it(hearth, me, persona):
    me.memories.add("first")
    a = me.conversations.create(persona.id)
    b = me.conversations.create(persona.id)
    me.send(a.id, "hi")
    me.send(b.id, "hi")
    me.memories.add("second")
    info = me.memories.refresh(a.id)
    assert info.provenance == "refreshed" and info.refreshed_at
    assert memory_lines(me.stored_prompt(a.id)) == ["- first", "- second"]
    assert memory_lines(me.stored_prompt(b.id)) == ["- first"]
    kinds = [r[0] for r in hearth.store.connection().execute(
        "SELECT kind FROM events WHERE conversation_id = ? ORDER BY id", (a.id,))]
    assert "memory.snapshot_refreshed" in kinds
    with pytest.raises(NotFound):
        me.memories.refresh(9999)


def test_m5_snapshot_metadata_holds_times_and_provenance_only(me, persona):
    memory = me.memories.add("a private fact")
    conversation = me.conversations.create(persona.id)
    info = me.memories.snapshot_info(conversation.id).to_dict()
    assert set(info) == {"provenance", "captured_at", "refreshed_at"}
    assert info["provenance"] == "captured" and info["captured_at"] and info["refreshed_at"] is None
    assert "a private fact" not in json.dumps(info) and str(memory.id) not in json.dumps(info).replace(
        info["captured_at"], "")


def _legacy_conversation(hearth, me, persona) -> int:
    conversation = me.conversations.create(persona.id)
    with hearth.store.write() as conn:  # as an import of a thread from before snapshots leaves it
        conn.execute("DELETE FROM conversation_memories WHERE conversation_id = ?", (conversation.id,))
        conn.execute("UPDATE conversations SET snapshot_provenance = 'legacy', snapshot_captured_at = NULL"
                     " WHERE id = ?", (conversation.id,))
    return conversation.id


def test_m5_m6_legacy_threads_get_a_one_time_backfill_without_an_invented_time(hearth, me, persona):
    me.memories.add("known before")
    legacy = _legacy_conversation(hearth, me, persona)
    assert me.memories.backfill_legacy() == 1
    assert [m.text for m in me.memories.snapshot(legacy)] == ["known before"]
    info = me.memories.snapshot_info(legacy)
    assert info.provenance == "legacy" and info.captured_at is None
    me.memories.add("known after")
    assert me.memories.backfill_legacy() == 0  # one-time
    assert [m.text for m in me.memories.snapshot(legacy)] == ["known before"]


def test_m6_a_legacy_thread_is_backfilled_before_its_first_prompt(hearth, me, persona):
    me.memories.add("carry me")
    legacy = _legacy_conversation(hearth, me, persona)
    me.send(legacy, "hello")
    assert memory_lines(me.stored_prompt(legacy)) == ["- carry me"]


def test_p5_additions_and_imports_rebuild_nothing(hearth, me, persona):
    conversation = me.conversations.create(persona.id)
    me.send(conversation.id, "hi")
    before = me.stored_prompt(conversation.id)
    me.memories.add("new")
    me.memories.import_many([{"text": "bulk one"}, {"text": "bulk two"}])
    assert me.stored_prompt(conversation.id) == before
    assert hearth.store.connection().execute("SELECT count(*) FROM events WHERE kind = 'prompt.rebuilt'").fetchone()[0] == 0


def test_p5_edits_rebuild_only_prompts_that_hold_the_memory(hearth, me, persona):
    held = me.memories.add("held")
    a = me.conversations.create(persona.id)
    me.send(a.id, "hi")
    other = me.memories.add("other")
    b = me.conversations.create(persona.id)
    with hearth.store.write() as conn:  # b holds only "other"
        conn.execute("DELETE FROM conversation_memories WHERE conversation_id = ? AND memory_id = ?", (b.id, held.id))
    me.send(b.id, "hi")
    b_before = me.stored_prompt(b.id)
    _, rebuilt = me.memories.edit(held.id, text="held, edited")
    assert rebuilt == 1
    assert "held, edited" in me.stored_prompt(a.id)
    assert me.stored_prompt(b.id) == b_before
    _, rebuilt = me.memories.edit(other.id, importance=3)
    assert rebuilt == 1 and "other (importance 3)" in me.stored_prompt(b.id)


def test_p5_settings_save_rebuilds_existing_prompts_keeping_membership(me, persona):
    me.memories.add("kept")
    conversation = me.conversations.create(persona.id)
    me.send(conversation.id, "hi")
    me.memories.add("not pulled in")
    _, rebuilt = me.update_persona(persona.id, identity="A new identity text.")
    assert rebuilt == 1
    prompt = me.stored_prompt(conversation.id)
    assert "A new identity text." in prompt
    assert memory_lines(prompt) == ["- kept"]


def test_m7_racing_edits_deletes_refreshes_and_first_sends_always_agree(tmp_path):
    """Real threads on one database file, randomized interleavings."""
    hearth = Hearth(Settings.resolve({"home": str(tmp_path)}, environ={}))
    me = hearth.scope()
    persona = me.personas.create("p")
    memories = [me.memories.add(f"memory {i} v0") for i in range(6)]
    conversations = [me.conversations.create(persona.id) for _ in range(12)]
    latest = {m.id: (m.version, m.text) for m in memories}
    deleted: set[int] = set()
    lock = threading.Lock()
    errors: list[BaseException] = []

    def editor(seed):
        rng = random.Random(seed)
        for step in range(60):
            memory_id = rng.choice(memories).id
            try:
                if rng.random() < 0.08:
                    me.memories.delete(memory_id)
                    with lock:
                        deleted.add(memory_id)
                else:
                    text = f"memory {memory_id} v{seed}-{step}"
                    edited, _ = me.memories.edit(memory_id, text=text)
                    # The version number is assigned inside the edit's transaction, so the highest
                    # one is the last edit committed, whichever editor thread records it first.
                    with lock:
                        if edited.version > latest[memory_id][0]:
                            latest[memory_id] = (edited.version, text)
            except NotFound:
                pass  # deleted by another thread

    def sender(seed):
        rng = random.Random(seed)
        for conversation in rng.sample(conversations, len(conversations)):
            me.send(conversation.id, "hello")
            if rng.random() < 0.3:
                me.memories.refresh(conversation.id)

    def guard(fn, seed):
        try:
            fn(seed)
        except BaseException as exc:  # surfaced by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=guard, args=(editor, s)) for s in range(3)]
    threads += [threading.Thread(target=guard, args=(sender, 100 + s)) for s in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    current = {m.id: m.text for m in me.memories.list()}
    assert set(current).isdisjoint(deleted)
    for memory_id, text in current.items():
        assert latest[memory_id][1] == text  # no older value was restored
    for conversation in conversations:
        snapshot = me.memories.snapshot(conversation.id)
        assert not {m.id for m in snapshot} & deleted
        # The stored prompt and the snapshot agree, with the current text.
        assert memory_lines(me.stored_prompt(conversation.id)) == [f"- {m.text}" for m in snapshot]


# -- changes that rebuild prompts compose them before taking the write lock (M2, M7, S3) ----------
def _prompt_as_rebuilt(hearth, me, conversation_id: int) -> str:
    """The stored prompt a rebuild would write now, composed from the current state."""
    from hearth.prompt import stored

    with hearth.store.read() as conn:
        return stored._compose(conn, conversation_id, me._handoff_text)[0]


def _changes(me, held, hidden, conversations):
    """One of each change that rebuilds the prompts holding a memory, as (name, call)."""
    return [
        ("move", lambda: me.memories.move(held[2].id, 1)),
        ("edit text", lambda: me.memories.edit(held[1].id, text="held 1, edited")),
        ("edit importance", lambda: me.memories.edit(held[0].id, importance=7, category="c")),
        ("hide", lambda: me.memories.edit(held[3].id, eligible=False)),
        ("show", lambda: me.memories.edit(hidden.id, eligible=True)),
        ("end", lambda: me.memories.end(held[0].id)),
        ("restore", lambda: me.memories.restore(held[0].id, 1)),
        ("delete", lambda: me.memories.delete(held[1].id)),
        ("refresh", lambda: me.memories.refresh(conversations[1].id)),
    ]


def _held_and_hidden(hearth, me, persona):
    held = [me.memories.add(f"held {i}") for i in range(5)]
    hidden = me.memories.add("hidden until shown")
    conversations = [me.conversations.create(persona.id) for _ in range(3)]
    with hearth.store.write() as conn:  # the second thread holds only some of them
        conn.execute("DELETE FROM conversation_memories WHERE conversation_id = ? AND memory_id IN (?, ?, ?)",
                     (conversations[1].id, held[2].id, held[4].id, hidden.id))
    for conversation in conversations[:2]:
        me.send(conversation.id, "hi")
    me.memories.edit(hidden.id, eligible=False)  # the first thread holds it, hidden
    return held, hidden, conversations


def test_m2_m7_every_change_composes_prompts_outside_the_write_lock_exactly_as_a_rebuild(hearth, me, persona, monkeypatch):
    from hearth.prompt import stored

    held, hidden, conversations = _held_and_hidden(hearth, me, persona)
    composed_in_lock: list[bool] = []
    compose = stored._compose

    def watched(conn, *args, **kwargs):
        composed_in_lock.append(hearth.store.in_write)
        return compose(conn, *args, **kwargs)

    monkeypatch.setattr(stored, "_compose", watched)
    for name, change in _changes(me, held, hidden, conversations):
        composed_in_lock.clear()
        change()
        assert composed_in_lock and not any(composed_in_lock), name  # composed, never under the lock
        for conversation in conversations[:2]:
            assert me.stored_prompt(conversation.id) == _prompt_as_rebuilt(hearth, me, conversation.id), name
    lines = memory_lines(me.stored_prompt(conversations[0].id))
    assert lines == ["- held 2", "- held 0", "- held 4", "- hidden until shown"]  # v1 of held 0 restored
    assert memory_lines(me.stored_prompt(conversations[1].id)) == lines  # refreshed to the current set


@pytest.mark.parametrize("races", [1, 2])
@pytest.mark.parametrize("change", ["move", "edit text", "hide", "show", "end", "restore", "delete", "refresh"])
def test_m7_s3_a_write_committed_while_a_change_composes_is_not_lost_from_the_prompts(hearth, me, persona, change, races):
    """Another writer commits between the read snapshot a change composes from and its write
    transaction: the change notices and composes again (from a new snapshot after one race, under
    the lock after a race on every attempt), so the prompts show both."""
    held, hidden, conversations = _held_and_hidden(hearth, me, persona)
    if change == "restore":
        me.memories.end(held[0].id)
    run = dict(_changes(me, held, hidden, conversations))[change]
    target = held[4] if change == "hide" else held[3]  # shown in the first thread after the change
    compose = me.memories._compose
    raced: list[BaseException | None] = []
    racing = threading.Event()  # set while the other writer runs: its own change composes quietly

    def racing_compose(conn, conversation_ids, adjust):
        result = compose(conn, conversation_ids, adjust)
        if not racing.is_set() and len(raced) < races:  # another connection edits a memory both show
            racing.set()

            def other_writer():
                try:
                    me.memories.edit(target.id, text=f"changed by another writer {len(raced) + 1}")
                    raced.append(None)
                except BaseException as exc:  # surfaced below
                    raced.append(exc)
            thread = threading.Thread(target=other_writer)
            thread.start()
            thread.join()
            racing.clear()
        return result

    me.memories._compose = racing_compose
    run()
    assert raced == [None] * races
    for conversation in conversations[:2]:
        prompt = me.stored_prompt(conversation.id)
        assert prompt == _prompt_as_rebuilt(hearth, me, conversation.id)
        shown = [f"- {m.text}" for m in me.memories.snapshot(conversation.id) if m.eligible and m.current]
        assert memory_lines(prompt) == shown
    assert f"- changed by another writer {races}" in memory_lines(me.stored_prompt(conversations[0].id))


def _age_prompts(hearth, conversation_ids):
    with hearth.store.write() as conn:
        for cid in conversation_ids:
            row = conn.execute("SELECT id, metadata FROM messages WHERE conversation_id = ? AND kind = 'static_prompt'",
                               (cid,)).fetchone()
            meta = json.loads(row[1])
            meta["policy_version"] = POLICY_VERSION - 1
            conn.execute("UPDATE messages SET content = 'OLD PROMPT', metadata = ? WHERE id = ?",
                         (json.dumps(meta), row[0]))


def test_p7_legacy_prompts_are_rebuilt_in_batches_and_completion_is_recorded(hearth, me, persona):
    me.memories.add("remember me")
    conversations = [me.conversations.create(persona.id) for _ in range(7)]
    for c in conversations:
        me.send(c.id, "hi")
    _age_prompts(hearth, [c.id for c in conversations])
    result = reconcile.reconcile(hearth, batch_size=3)
    assert (result.candidates, result.rebuilt, result.failed, result.completed) == (7, 7, 0, True)
    for c in conversations:
        assert "remember me" in me.stored_prompt(c.id) and "OLD PROMPT" not in me.stored_prompt(c.id)
    assert reconcile.state(hearth.store.connection())["completed_policy_version"] == POLICY_VERSION
    assert reconcile.reconcile(hearth).candidates == 0  # a later start skips the scan


def test_p7_failures_are_retried_and_completion_is_not_recorded_falsely(hearth, me, persona):
    conversations = [me.conversations.create(persona.id) for _ in range(4)]
    for c in conversations:
        me.send(c.id, "hi")
    _age_prompts(hearth, [c.id for c in conversations])
    flaky_id, broken_id = conversations[0].id, conversations[1].id
    attempts: dict[int, int] = {}
    real = hearth.scope()

    def rebuild_one(conn, user_id, conversation_id):
        attempts[conversation_id] = attempts.get(conversation_id, 0) + 1
        if conversation_id == broken_id or (conversation_id == flaky_id and attempts[conversation_id] == 1):
            raise sqlite3.OperationalError("simulated failure")
        from hearth.prompt import stored
        stored.rebuild(conn, user_id, [conversation_id], real._handoff_text)

    result = reconcile.reconcile(hearth, rebuild_one=rebuild_one, max_attempts=3)
    assert attempts[flaky_id] == 2 and attempts[broken_id] == 3
    assert (result.rebuilt, result.failed, result.completed) == (3, 1, False)
    state = reconcile.state(hearth.store.connection())
    assert state["remaining_failures"] == 1 and "completed_policy_version" not in state
    assert me.stored_prompt(broken_id) == "OLD PROMPT"


def test_p7_a_legacy_prompt_met_on_a_send_is_rebuilt_before_the_model_sees_it(hearth, me, persona, provider):
    conversation = me.conversations.create(persona.id)
    me.send(conversation.id, "hi")
    _age_prompts(hearth, [conversation.id])
    me.send(conversation.id, "again")
    assert provider.requests[-1].messages[0].content != "OLD PROMPT"
    assert me.stored_prompt(conversation.id) != "OLD PROMPT"


def test_p7_remaining_failures_are_visible_in_the_diagnostics_endpoint(hearth, me, persona):
    from fastapi.testclient import TestClient

    from hearth.server import create_app

    conversation = me.conversations.create(persona.id)
    me.send(conversation.id, "hi")
    _age_prompts(hearth, [conversation.id])

    def always_fails(conn, user_id, conversation_id):
        raise sqlite3.OperationalError("simulated failure")

    reconcile.reconcile(hearth, rebuild_one=always_fails, max_attempts=2)
    with TestClient(create_app(hearth.settings, hearth), base_url="http://127.0.0.1:8765") as client:
        body = client.get("/api/diagnostics").json()
    assert body["prompt_reconciliation"] == {"completed": False, "remaining_failures": 1,
                                             "policy_version": POLICY_VERSION}
    assert set(body["jobs"]) == {"pending", "running", "done", "dead"}
