"""Hostile input (U5): every text transform on user-supplied text is linear in its input.

Each transform is timed on a 1x and a 16x input of each pathological shape in the same run; a
linear transform takes about 16 times as long, a quadratic one about 256 times. The assertion is
a ratio under 40, never an absolute time. Time is this thread's CPU time, best of a few repeats, so
a busy machine that pauses the process cannot fail it.
"""

from __future__ import annotations

import json
import re
import sys
import threading
import time
from typing import Callable

import pytest

from hearth import Hearth, Settings
from hearth.continuity.handoff import escape_markdown
from hearth.interop.importers import labelled
from hearth.lorebook.controls import Activator
from hearth.lorebook.triggers import TriggerFragment, TriggerIndex
from hearth.memory import duplicates
from hearth.memory.helpers.base import TurnText
from hearth.memory.helpers.model import parse_json_object
from hearth.memory.helpers.offline import OfflineHelper
from hearth.outreach.channels.mail import strip_quoted
from hearth.prompt.layers import archive_recall, thread_recall
from hearth.prompt.macros import Macros
from hearth.retrieval import archive, query
from hearth.thread import search, titles

BASE = 6_000  # characters of the 1x input
GROWTH = 16
LIMIT = 40  # a linear transform is about 16; a quadratic one about 256

# Shapes that made a backtracking pattern or a rescanning loop go quadratic somewhere: runs of line
# breaks and spaces, unterminated macros and comments, open brackets and links, long words, runs of
# capitalised words and of sentence ends.
SHAPES = ["\n", "\r\n", " ", "\t", "{{//", "{{", "{{trim}}", "{{ user", "[", "![", "[a](", "(", "/", "=",
          "*", "_", "`", "a", "A ", "a'", "<", "'", "-", "#", "> ", "On ", ". ", "a.", "I live in A", "}}"]


def _best(fn: Callable[[str], object], text: str, repeats: int) -> float:
    best = float("inf")
    for i in range(repeats):
        fresh = f"{text} {i}"  # a new text each time, so that no cache answers for the transform
        start = time.thread_time()
        fn(fresh)
        best = min(best, time.thread_time() - start)
    return best


def _run(shape: str, size: int) -> str:
    """``shape`` repeated to ``size`` characters between two letters (a run inside a word)."""
    return "a" + (shape * (size // len(shape) + 1))[:size] + "a x"


def _ratio(fn: Callable[[str], object], shape: str) -> float:
    fn(_run(shape, BASE) + " warm")  # lazy compiles and imports
    # A floor of 20 microseconds keeps a transform that is nearly free at 1x from dividing by noise.
    return _best(fn, _run(shape, BASE * GROWTH), 2) / max(_best(fn, _run(shape, BASE), 5), 20e-6)


def _triggers() -> TriggerIndex:
    return TriggerIndex.build([TriggerFragment(1, ["ice cream", "cat"], "d1"),
                               TriggerFragment(2, ["a a a b"], "d2"), TriggerFragment(3, ["user"], "d3")])


class _Lore:
    def __init__(self, id: int, triggers: list[str], controls: dict) -> None:
        self.id, self.triggers, self.definition, self.controls = id, triggers, "lore text", controls
        self.category, self.all_of, self.any_of, self.none_of, self.priority = "", (), (), (), 0


def _lore() -> Activator:
    return Activator.build([
        _Lore(1, ["C++", "{{"], {"case_sensitive": True, "whole_words": False}),
        _Lore(2, ["a.b", "[a]"], {"whole_words": True}),
        _Lore(3, ["/(a+)+$/", "/\\n+x/"], {"secondary": ["/a*b/"], "logic": "and_any"}),
    ])


_TRIGGERS = _triggers()
_LORE = _lore()
_OFFLINE = OfflineHelper()
_MACROS = Macros(char="Ash", user="Sam", seed=3)


def _json_answer(text: str) -> object:
    try:
        return parse_json_object("```json" + text + '{"a": 1}' + text + "```")
    except Exception as exc:  # a malformed answer is an error, which is fine; only its time counts
        return exc


def _labelled(text: str) -> object:
    try:
        return labelled.parse("=== " + text + " (2024-01-02)\nUser: " + text, archive.Labels(), title="t")
    except Exception as exc:
        return exc


TRANSFORMS: dict[str, Callable[[str], object]] = {
    "macros": _MACROS.fill,
    "lorebook_words": _TRIGGERS.match,
    "lorebook_keys_and_regexes": lambda t: _LORE.activate([t]),
    "snippet": lambda t: search.snippet(t, ("x", "cat")),
    "search_box": search.parse,
    "title": titles.offline_title,
    "stemming": lambda t: query.match_terms([t, t.strip()]),
    "query_entities": query.entities,
    "recall_cues": lambda t: (query.has_recall_cue(t), thread_recall.tier(t), archive_recall.needs_old_memory(t)),
    "query_variants": query.build_variants,
    "duplicate_words": lambda t: duplicates.read_fact.__wrapped__(t) or duplicates.words(t),
    "contradiction": lambda t: duplicates.contradicts("Sam lives in " + t, "Sam lives in Paris"),
    "import_normalise": archive.normalise,
    "import_labelled": _labelled,
    "import_chunks": lambda t: archive.chunk_turns([archive.Turn("User:", "user", t)]),
    "handoff_escape": escape_markdown,
    "mail_quotes": strip_quoted,
    "helper_answer": _json_answer,
    "offline_memories": lambda t: _OFFLINE.extract_memories([TurnText("user", t)]),
    "offline_summary": lambda t: _OFFLINE.summarise("", [TurnText("user", t)]),
}


@pytest.mark.parametrize("name", sorted(TRANSFORMS))
def test_u5_text_transforms_are_linear_on_hostile_shapes(name: str) -> None:
    fn = TRANSFORMS[name]
    slow = {}
    for shape in SHAPES:
        ratio = _ratio(fn, shape)
        if ratio >= LIMIT:
            ratio = min(ratio, _ratio(fn, shape))  # one more try: a noisy machine, not the transform
        if ratio >= LIMIT:
            slow[shape] = round(ratio)
    assert not slow, f"{name}: 16x input took this many times as long: {slow}"


def test_u5_macro_filling_is_linear_on_runs_of_newlines() -> None:
    assert _ratio(_MACROS.fill, "\n") < LIMIT
    assert _ratio(_MACROS.fill, "\r\n") < LIMIT


def test_u5_macro_filling_is_linear_on_unterminated_comments() -> None:
    assert _ratio(_MACROS.fill, "{{//") < LIMIT


def _hostile_card(text: str) -> bytes:
    return json.dumps({"spec": "chara_card_v2", "spec_version": "2.0", "data": {
        "name": "Hostile", "description": text, "first_mes": text, "mes_example": text,
        "personality": "", "scenario": ""}}).encode()


def test_u5_one_users_hostile_card_does_not_block_another_users_writes(tmp_path):
    """The issue's table: a card whose first message, description and example dialogue are 12,000
    unclosed ``{{//`` or 16,000 line breaks, then New Chat, a first send and the same text as a
    thread's instructions, held every other user's writes for 13-25 s. Another user's longest write
    while that runs (two threads, one SQLite file) is compared with its longest write while the same
    steps run on cards of the same length in plain words, in the same run."""
    settings = Settings.resolve({"home": str(tmp_path / "home"), "input_token_limit": 32_000,
                                 "duplicate_embeddings": False}, environ={})
    with Hearth(settings) as hearth:
        first = hearth.scope()
        other = hearth.scope(hearth.users.create("second").id)
        count = 0

        def write() -> float:
            nonlocal count
            count += 1
            start = time.perf_counter()
            other.memories.add(f"The second person's fact number {count}")
            return time.perf_counter() - start

        def longest_write_while(texts: list[str]) -> float:
            cards = [first.imports.file(_hostile_card(text), f"card-{count}-{i}.json").ids["personas"][0]
                     for i, text in enumerate(texts)]

            def steps() -> None:
                for persona_id, text in zip(cards, texts):
                    chat = first.new_chat(persona_id).conversation
                    first.send(chat.id, "hello")
                    first.set_custom_instructions(chat.id, text)

            thread = threading.Thread(target=steps)
            thread.start()
            during = [write()]
            while thread.is_alive():
                during.append(write())
            thread.join()
            return max(during)

        hostile = ["{{//" * 12_000, "x" + "\n" * 16_000 + "x"]
        plain = [("the knight rode along the shore " * 1_600)[:len(text)] for text in hostile]
        benign = longest_write_while(plain)
        attacked = longest_write_while(hostile)
        # Before, the hostile cards held the lock for the whole quadratic fill (seconds, against a
        # tenth of a second for plain text); the margin allows for a busy machine.
        assert attacked / benign < 10, (attacked, benign)


# -- no text work while the write lock is held ------------------------------------------------------
# The four writes that filled macros inside their transaction: New Chat's greeting, the first
# send's stored prompt, a thread's instructions (PUT /instructions), and the OpenAI-compatible
# path's system message. Each now fills with no write transaction open and writes what it filled.

MARK = "U5-FILL-MARK"
PICKS = "".join(f"{{{{pick::red{i}::green{i}::blue{i}::amber{i}::violet{i}}}}} " for i in range(6))


@pytest.fixture
def fills_under_lock(hearth, monkeypatch) -> list[bool]:
    """For each macro fill of a text holding ``MARK``: whether the filling thread held the write
    lock (``Store.in_write``, the same on both engines) at that moment."""
    seen: list[bool] = []
    real = Macros.fill

    def fill(self: Macros, text: str) -> str:
        if MARK in text:
            seen.append(hearth.store.in_write)
        return real(self, text)

    monkeypatch.setattr(Macros, "fill", fill)
    return seen


def _card_persona(me, name: str = "hostile", text: str = ""):
    return me.personas.create(name, "Hostile", identity=f"{MARK} I am {{{{char}}}}. {PICKS}{text}",
                              card={"first_mes": f"{MARK} Hello {{{{user}}}}. {PICKS}{text}",
                                    "alternate_greetings": [f"{MARK} Hi again. {PICKS}"]})


def _stored_prompt(hearth, conversation_id: int) -> str:
    return hearth.store.connection().execute(
        "SELECT content FROM messages WHERE conversation_id = ? AND kind = 'static_prompt'",
        (conversation_id,)).fetchone()[0]


def test_u5_new_chat_fills_the_cards_greeting_outside_the_write_lock(hearth, me, fills_under_lock):
    persona = _card_persona(me)
    chat = me.new_chat(persona.id).conversation
    assert fills_under_lock and not any(fills_under_lock), fills_under_lock
    greeting = me.conversations.messages(chat.id)[0]
    assert greeting.metadata["greeting"] == "card" and greeting.metadata["alternatives"] == 2
    # Picks are seeded by the conversation the greeting was written to, as the thread's prompt's are.
    expected = Macros(char="Hostile", user="the person", seed=chat.id).fill(persona.card["first_mes"])
    assert greeting.content == expected and "{{" not in greeting.content
    me.send(chat.id, "hello")
    picked = re.findall(r"\b[a-z]+\d\b", greeting.content)
    assert len(picked) == 6 and re.findall(r"\b[a-z]+\d\b", _stored_prompt(hearth, chat.id))[:6] == picked


def test_u5_first_send_builds_the_stored_prompt_outside_the_write_lock(hearth, me, fills_under_lock):
    persona = _card_persona(me)
    chat = me.conversations.create(persona.id)  # no greeting: only the prompt is filled
    reply = me.send(chat.id, "hello")
    assert fills_under_lock and not any(fills_under_lock), fills_under_lock
    prompt = _stored_prompt(hearth, chat.id)
    assert f"{MARK} I am Hostile." in prompt and "{{pick" not in prompt
    # The user's message was saved before the model was asked, with the prompt, once.
    messages = me.conversations.messages(chat.id)
    assert [m.role for m in messages] == ["user", "assistant"] and reply.user_message.id == messages[0].id
    assert hearth.store.connection().execute(
        "SELECT count(*) FROM messages WHERE conversation_id = ? AND kind = 'static_prompt'",
        (chat.id,)).fetchone()[0] == 1


def test_u5_put_instructions_rebuilds_the_prompt_outside_the_write_lock(hearth, me, fills_under_lock):
    from fastapi.testclient import TestClient

    from hearth.server import create_app

    persona = _card_persona(me)
    chat = me.conversations.create(persona.id)
    me.send(chat.id, "hello")
    fills_under_lock.clear()
    with TestClient(create_app(hearth.settings, hearth), base_url="http://127.0.0.1") as client:
        answer = client.put(f"/api/conversations/{chat.id}/instructions",
                            json={"text": f"{MARK} Speak to {{{{user}}}} briefly."})
    assert answer.status_code == 200, answer.text
    assert fills_under_lock and not any(fills_under_lock), fills_under_lock
    assert f"{MARK} Speak to the person briefly." in _stored_prompt(hearth, chat.id)


def test_u5_v1_system_message_is_filled_outside_the_write_lock(hearth, me, fills_under_lock):
    from fastapi.testclient import TestClient

    from hearth.server import create_app

    _card_persona(me)
    token = hearth.users.create_token(me.user_id, "u5")
    with TestClient(create_app(hearth=hearth)) as client:
        answer = client.post("/v1/chat/completions", headers={"Authorization": f"Bearer {token}"}, json={
            "model": "hostile", "messages": [{"role": "system", "content": f"{MARK} Call me {{{{user}}}}. {PICKS}"},
                                             {"role": "user", "content": "hello"}]})
        assert answer.status_code == 200, answer.text
        assert fills_under_lock and not any(fills_under_lock), fills_under_lock
        chat_id = hearth.store.connection().execute("SELECT max(id) FROM conversations").fetchone()[0]
        prompt = _stored_prompt(hearth, chat_id)
        assert f"{MARK} Call me the person." in prompt and "{{pick" not in prompt
        # The same system message again changes nothing; a new one rebuilds, also outside the lock.
        fills_under_lock.clear()
        again = client.post("/v1/chat/completions", headers={"Authorization": f"Bearer {token}"}, json={
            "model": "hostile", "messages": [{"role": "system", "content": f"{MARK} Now call me friend."},
                                             {"role": "user", "content": "hello"},
                                             {"role": "assistant", "content": answer.json()["choices"][0]["message"]
                                              ["content"]},
                                             {"role": "user", "content": "and again"}]})
        assert again.status_code == 200, again.text
        assert fills_under_lock and not any(fills_under_lock), fills_under_lock
        assert f"{MARK} Now call me friend." in _stored_prompt(hearth, chat_id)


def test_u5_display_name_and_persona_saves_rebuild_every_prompt_outside_the_write_lock(hearth, me,
                                                                                     fills_under_lock):
    """A change of display name or of a persona rebuilds the prompts of all its threads: every one
    is filled outside the lock, and all in one attempt more, not one attempt per thread."""
    from hearth.prompt import prepared

    persona = _card_persona(me)
    chats = [me.conversations.create(persona.id) for _ in range(prepared.ATTEMPTS + 2)]
    for chat in chats:
        me.send(chat.id, "hello")
    fills_under_lock.clear()
    assert me.set_display_name("Robin") == len(chats)
    assert len(fills_under_lock) == len(chats) and not any(fills_under_lock), fills_under_lock
    fills_under_lock.clear()
    _, rebuilt = me.update_persona(persona.id, identity=f"{MARK} I am {{{{char}}}} and I talk with {{{{user}}}}.")
    assert rebuilt == len(chats)
    assert len(fills_under_lock) == len(chats) and not any(fills_under_lock), fills_under_lock
    for chat in chats:
        assert f"{MARK} I am Hostile and I talk with Robin." in _stored_prompt(hearth, chat.id)


def test_u5_forgetting_a_quoted_message_rebuilds_the_prompts_that_held_it_outside_the_write_lock(
        hearth, me, fills_under_lock):
    """Delete forever rewrites the handoffs that quoted a forgotten turn and rebuilds the prompts
    holding them: those prompts are filled outside the lock too, and still show the change."""
    from hearth.records.forget import CONFIRMATION_PHRASE

    persona = _card_persona(me)
    source = me.conversations.create(persona.id)
    me.send(source.id, "The harbour key hangs behind the blue door")
    branch = me.branch(source.id, "u5-forget-0001").conversation
    me.send(branch.id, "hello again")
    assert "harbour key" in _stored_prompt(hearth, branch.id)
    said = hearth.store.connection().execute(
        "SELECT id FROM messages WHERE conversation_id = ? AND role = 'user' AND content LIKE ?",
        (source.id, "%harbour key%")).fetchone()[0]
    fills_under_lock.clear()
    preview = me.forget.preview("message", said)
    receipt = me.forget.apply("message", said, token=preview.token, phrase=CONFIRMATION_PHRASE)
    assert receipt.counts["prompts_rebuilt"] == 1
    assert fills_under_lock and not any(fills_under_lock), fills_under_lock
    rebuilt = _stored_prompt(hearth, branch.id)
    assert MARK in rebuilt and "harbour key" not in rebuilt


def test_u5_shielding_or_trashing_a_source_rebuilds_the_prompts_it_reached_outside_the_write_lock(
        hearth, me, fills_under_lock):
    """A visibility change (shield, trash, a folder hidden) refreshes the prompts whose handoff came
    from the thread first (V1, V3): filled outside the lock, and the handoff is gone from them."""
    persona = _card_persona(me)
    source = me.conversations.create(persona.id)
    me.send(source.id, "The harbour key hangs behind the blue door")
    branch = me.branch(source.id, "u5-shield-0001").conversation
    me.send(branch.id, "hello again")
    assert "harbour key" in _stored_prompt(hearth, branch.id)
    fills_under_lock.clear()
    me.conversations.set_shielded(source.id, True)
    assert fills_under_lock and not any(fills_under_lock), fills_under_lock
    assert "harbour key" not in _stored_prompt(hearth, branch.id)
    me.conversations.set_shielded(source.id, False)
    folder = me.folders.create("Private")
    me.conversations.move(source.id, folder.id)
    fills_under_lock.clear()
    me.folders.set_hidden(folder.id, True)
    assert fills_under_lock and not any(fills_under_lock), fills_under_lock
    assert MARK in _stored_prompt(hearth, branch.id)


def test_u5_a_card_imported_again_as_an_update_rebuilds_its_personas_prompts_outside_the_write_lock(
        hearth, me, fills_under_lock):
    """Importing a changed card of one's own persona with ``update`` saves the persona and rebuilds
    the prompts of its threads in the import's transaction: their text is filled outside it."""
    import json

    persona = _card_persona(me)
    chats = [me.conversations.create(persona.id) for _ in range(3)]
    for chat in chats:
        me.send(chat.id, "hello")
    card = me.imports.card_json(persona.id)
    card["data"]["description"] = f"{MARK} I am {{{{char}}}}, changed. {PICKS}"
    fills_under_lock.clear()
    report = me.imports.file(json.dumps(card).encode(), "hostile.json", on_match="update")
    assert report.status == "updated" and report.counts.get("personas_updated") == 1, report
    assert len(fills_under_lock) == len(chats) and not any(fills_under_lock), fills_under_lock
    for chat in chats:
        assert f"{MARK} I am Hostile, changed." in _stored_prompt(hearth, chat.id)


def test_u5_inputs_changed_while_filling_are_filled_again_never_written_stale(hearth, me, monkeypatch):
    """A display name committed between the fill (outside the lock) and the write: the write reads
    the new name, the text is filled again, and the prompt names the person as they are now."""
    from hearth.prompt import prepared

    persona = me.personas.create("plain", "Plain", identity="I talk with {{user}}.")
    chat = me.conversations.create(persona.id)
    real = prepared.Ready.prepare
    renamed: list[int] = []

    def prepare(self, need):
        real(self, need)
        if not renamed:  # another writer commits while nothing of this send's write is held
            renamed.append(me.set_display_name("Robin"))

    monkeypatch.setattr(prepared.Ready, "prepare", prepare)
    me.send(chat.id, "hello")
    assert renamed == [0]
    prompt = _stored_prompt(hearth, chat.id)
    assert "I talk with Robin." in prompt and "I talk with the person." not in prompt


def test_u5_inputs_that_keep_changing_refuse_the_write_as_busy_and_change_nothing(hearth, me, monkeypatch):
    from hearth.errors import StoreBusy
    from hearth.prompt import prepared

    persona = me.personas.create("plain", "Plain", identity="I talk with {{user}}.")
    chat = me.conversations.create(persona.id)
    real = prepared.Ready.prepare
    names = iter(f"Name {i}" for i in range(100))

    def prepare(self, need):
        real(self, need)
        me.set_display_name(next(names))

    monkeypatch.setattr(prepared.Ready, "prepare", prepare)
    with pytest.raises(StoreBusy):
        me.send(chat.id, "hello")
    assert next(names) == f"Name {prepared.ATTEMPTS - 1}"  # bounded: one fill per attempt but the last
    assert me.conversations.messages(chat.id) == []
    assert hearth.store.connection().execute(
        "SELECT count(*) FROM messages WHERE conversation_id = ?", (chat.id,)).fetchone()[0] == 0


class _LockProbe(threading.Thread):
    """A second connection to the same SQLite file that asks for the write lock (``BEGIN
    IMMEDIATE`` with no busy wait) again and again, noting when it got it and when not."""

    def __init__(self, path) -> None:
        super().__init__(daemon=True)
        import sqlite3

        self.conn = sqlite3.connect(path, timeout=0, isolation_level=None, check_same_thread=False)
        self.busy_error = sqlite3.OperationalError
        self.seen: list[tuple[float, bool]] = []
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            try:
                self.conn.execute("BEGIN IMMEDIATE")
                self.conn.execute("ROLLBACK")
                self.seen.append((time.perf_counter(), True))
            except self.busy_error:
                self.seen.append((time.perf_counter(), False))
            time.sleep(0.0005)  # room for the writers being watched

    def longest_hold(self) -> float:
        """The longest stretch between two times the lock was free with only refusals between."""
        longest, last_free, refused = 0.0, None, False
        for moment, free in self.seen:
            if free:
                if refused and last_free is not None:
                    longest = max(longest, moment - last_free)
                last_free, refused = moment, False
            else:
                refused = True
        return longest


@pytest.mark.sqlite_only
@pytest.mark.parametrize("path", ["new_chat", "first_send", "instructions", "v1"])
def test_u5_sqlite_write_lock_is_free_while_a_hostile_text_is_filled(tmp_path, path):
    """A card and instructions of 3,000 ``{{pick}}`` macros (each seeds its own generator: about
    50 ms to fill here, near the card's size limit). Before, the write lock was held for the whole
    fill, most of the operation; now only for the short writes around it. Measured as a ratio to the operation's
    own duration in the same run, with a wide margin."""
    # A probe thread starved by a busy machine sees a long stretch that no write held, or asks too
    # seldom to see a hold at all: each try starts afresh and counts only if the probe never paused
    # for a quarter of the step; one clean try out of five must show the lock free (before, every
    # try held it for the whole fill).
    tries = []
    for n in range(5):
        held, took, pause = _lock_held_while(tmp_path / f"home{n}", path)
        tries.append((round(held, 3), round(took, 3), round(pause, 3)))
        if pause < took / 4 and held < took / 4:
            break
    print(f"U5 {path}: lock held at most / operation took / probe's longest pause (s): {tries}")
    assert pause < took / 4 and held < took / 4, (path, tries)


def _lock_held_while(home, path: str) -> tuple[float, float, float]:
    """The longest the write lock was held during one hostile step on a fresh home, the step's
    duration, and the longest the probe went without asking during the step (a hold shorter than
    that could have been missed)."""
    from fastapi.testclient import TestClient

    from hearth.server import create_app

    hostile = "{{pick::a::b}}" * 3_000
    settings = Settings.resolve({"home": str(home), "input_token_limit": 32_000,
                                 "duplicate_embeddings": False}, environ={})
    with Hearth(settings) as hearth:
        me = hearth.scope()
        persona = me.personas.create("hostile", "Hostile", identity=hostile, card={"first_mes": hostile})
        chat = me.conversations.create(persona.id)
        if path == "instructions":
            me.send(chat.id, "hello")
        token = hearth.users.create_token(me.user_id, "u5")
        client = TestClient(create_app(hearth=hearth))
        client.get("/v1/models", headers={"Authorization": f"Bearer {token}"}).raise_for_status()  # warm
        steps = {
            "new_chat": lambda: me.new_chat(persona.id),
            "first_send": lambda: me.send(chat.id, "hello"),
            "instructions": lambda: me.set_custom_instructions(chat.id, hostile),
            "v1": lambda: client.post("/v1/chat/completions", headers={"Authorization": f"Bearer {token}"}, json={
                "model": "hostile", "messages": [{"role": "system", "content": hostile},
                                                 {"role": "user", "content": "hello"}]}).raise_for_status(),
        }
        probe = _LockProbe(hearth.store.path)
        switch = sys.getswitchinterval()
        sys.setswitchinterval(0.001)  # the probe asks every millisecond or so, even while text is filled
        try:
            probe.start()
            while not probe.seen:
                time.sleep(0.001)
            start = time.perf_counter()
            steps[path]()
            took = time.perf_counter() - start
            end = len(probe.seen)
            while not any(free for _, free in probe.seen[end:]):
                time.sleep(0.001)  # a free moment after the operation closes the last stretch
        finally:
            probe.done.set()
            probe.join()
            sys.setswitchinterval(switch)
        asks = [start] + [moment for moment, _ in probe.seen if start <= moment <= start + took] + [start + took]
        pause = max(later - earlier for earlier, later in zip(asks, asks[1:]))
        return probe.longest_hold(), took, pause
