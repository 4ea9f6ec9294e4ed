"""Lorebooks (X3) and the fragment engine's lorebook controls (F1, F2): World Info import and
export, selective logic, regex keys under a time limit, case and whole-word options, constant
entries, insertion order, probability, sticky / cooldown / delay per conversation, recursion, and
the token budget."""

from __future__ import annotations

import copy
import json
import time

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hearth.cli import cli
from hearth.lorebook.controls import Activator
from hearth.prompt.layers.fragments import Fragment
from tests import samples
from tests.test_layers import context_message


def lore(fid, keys, text="x", **controls):
    return Fragment(fid, "", tuple(keys), text, controls={"whole_words": None, **controls})


def ids(activation):
    return [m.fragment_id for m in activation.matches]


@pytest.fixture
def book(me):
    report = me.imports.file(json.dumps(samples.lorebook()).encode(), "gull-rock.json")
    assert report.status == "imported" and report.counts == {"imported": 12}
    return {f.controls["comment"] or f.triggers[0]: f for f in me.layers.fragments.list()}


@pytest.fixture
def chat(me, persona):
    return me.conversations.create(persona.id)


def test_x3_lorebook_import_keeps_every_control(book):
    festival = book["Festival AND ALL"]
    assert festival.triggers == ("festival",) and festival.category == "Gull Rock Lore"
    assert festival.controls["secondary"] == ["lantern", "boats"] and festival.controls["logic"] == "and_all"
    assert book["Tide NOT ANY"].controls["logic"] == "not_any"
    assert book["Gull Rock"].controls["constant"] is True and book["Gull Rock"].controls["order"] == 5
    assert book["Jonah"].controls["order"] == 120
    assert book["sticky"].controls["sticky"] == 2 and book["sticky"].controls["cooldown"] == 2
    assert book["delay"].controls["delay"] == 3
    assert book["case"].controls["case_sensitive"] is True and book["partial"].controls["whole_words"] is False
    assert book["p0"].controls["probability"] == 0
    assert book["regex"].triggers == ("/\\bsea ?glass\\b/i",)
    assert book["Jonah"].controls["extra"]["characterFilter"] == {"isExclude": False, "names": [], "tags": []}


def test_x3_lorebook_export_gives_the_file_back(me, book):
    original = samples.lorebook()
    exported = me.imports.lorebook_json("Gull Rock Lore")
    assert exported["name"] == "Gull Rock Lore" and exported["scan_depth"] == 2 and exported["token_budget"] == 500
    assert set(exported["entries"]) == set(original["entries"])
    for uid, entry in original["entries"].items():
        out = exported["entries"][uid]
        for field in ("key", "keysecondary", "selectiveLogic", "constant", "order", "probability", "useProbability",
                      "excludeRecursion", "preventRecursion", "caseSensitive", "matchWholeWords", "scanDepth",
                      "content", "comment", "disable", "characterFilter", "group", "displayIndex", "outletName"):
            assert out[field] == entry[field], (uid, field)
        for field in ("sticky", "cooldown", "delay"):
            assert (out[field] or 0) == (entry[field] or 0), (uid, field)


def test_x3_s8_reimport_is_idempotent_and_updates_changed_entries(me, book):
    data = samples.lorebook()
    again = me.imports.file(json.dumps(data).encode(), "gull-rock.json")
    assert again.status == "duplicate" and again.counts == {"duplicates": 12}
    data["entries"]["0"]["content"] = "Jonah Pike retired last spring."
    changed = me.imports.file(json.dumps(data).encode(), "gull-rock.json")
    assert changed.status == "updated" and changed.counts == {"duplicates": 11, "updated": 1}
    assert len(me.layers.fragments.list()) == 12
    assert me.layers.fragments.get(book["Jonah"].id).definition == "Jonah Pike retired last spring."


def test_x3_f1_selective_logic_and_any_and_all_not_any_not_all():
    index = Activator.build([
        lore(1, ["boat"], secondary=["red", "blue"], logic="and_any"),
        lore(2, ["boat"], secondary=["red", "blue"], logic="and_all"),
        lore(3, ["boat"], secondary=["red", "blue"], logic="not_any"),
        lore(4, ["boat"], secondary=["red", "blue"], logic="not_all"),
    ])
    assert ids(index.activate(["a red boat"])) == [1, 4]
    assert ids(index.activate(["a red and blue boat"])) == [1, 2]
    assert ids(index.activate(["a green boat"])) == [3, 4]
    assert ids(index.activate(["red and blue, no vessel"])) == []


def test_x3_regex_keys_match_and_a_hostile_pattern_is_cut_off():
    index = Activator.build([lore(1, ["/sea ?glass/i"]), lore(2, ["/(a|aa)+$/"]), lore(3, ["plain"])])
    assert ids(index.activate(["She found SEAGLASS today"])) == [1]
    hostile = "a" * 40 + "!"
    started = time.perf_counter()
    found = index.activate([hostile + " plain"], regex_seconds=0.05)
    assert time.perf_counter() - started < 2
    assert ids(found) == [3] and found.regex_timeouts >= 1


def test_x3_case_sensitive_whole_word_and_punctuated_keys():
    index = Activator.build([
        lore(1, ["Pike"], case_sensitive=True), lore(2, ["gull"], whole_words=False), lore(3, ["gull"]),
        lore(4, ["C++ club"]), lore(5, ["ox"], whole_words=False, case_sensitive=True),
    ])
    assert ids(index.activate(["caught a pike"])) == []
    assert ids(index.activate(["Mr Pike waved"])) == [1]
    assert ids(index.activate(["seagulls everywhere"])) == [2]
    assert ids(index.activate(["a gull!"])) == [2, 3]
    assert ids(index.activate(["the c++ club meets"])) == [4]
    assert ids(index.activate(["a box of OX tails"])) == [5]
    assert ids(index.activate(["an OX"])) == []


def test_x3_constant_entries_insertion_order_and_token_budget():
    index = Activator.build([
        lore(1, [], "always " * 10, constant=True, order=5),
        lore(2, ["harbour"], "h" * 400, order=120),
        lore(3, ["harbour"], "short note", order=200),
        lore(4, ["harbour"], "ignored budget", order=1, ignore_budget=True),
    ])
    found = index.activate(["the harbour at dusk"])
    assert ids(found) == [4, 1, 2, 3]  # lowest insertion order first, like SillyTavern
    assert [m.reason for m in found.matches] == ["key", "constant", "key", "key"]
    # 30 tokens: the higher-order short entry and the constant fit; the long one does not.
    trimmed = index.activate(["the harbour at dusk"], budget_tokens=30)
    assert ids(trimmed) == [4, 1, 3]


def test_x3_probability_is_a_repeatable_roll():
    index = Activator.build([lore(1, ["dice"], probability=0), lore(2, ["dice"], probability=100),
                             lore(3, ["dice"], probability=50)])
    rolls = {seed: ids(index.activate(["dice"], seed=seed)) for seed in range(200)}
    assert all(r[0] == 2 for r in rolls.values()) and all(1 not in r for r in rolls.values())
    hits = sum(3 in r for r in rolls.values())
    assert 60 < hits < 140
    assert rolls == {seed: ids(index.activate(["dice"], seed=seed)) for seed in range(200)}


def test_x3_recursion_with_a_depth_limit_and_exclusions():
    index = Activator.build([
        lore(1, ["letters"], "kept in the tin box"), lore(2, ["tin box"], "from the mainland bakery"),
        lore(3, ["bakery"], "the bakery closed"), lore(4, ["bakery"], "never via recursion", exclude_recursion=True),
        lore(5, ["quiet"], "mentions the tin box", prevent_recursion=True),
    ])
    assert ids(index.activate(["my letters"], recursion_depth=0)) == [1]
    assert ids(index.activate(["my letters"], recursion_depth=1)) == [1, 2]
    assert ids(index.activate(["my letters"], recursion_depth=2)) == [1, 2, 3]
    assert ids(index.activate(["keep quiet"], recursion_depth=5)) == [5]


def test_x3_scan_depth_reads_earlier_messages():
    index = Activator.build([lore(1, ["kettle"], scan_depth=3), lore(2, ["kettle"])])
    assert index.scan_depth == 3
    assert ids(index.activate(["the kettle", "hello", "again"])) == [1]
    assert ids(index.activate(["the kettle", "a", "b", "c"])) == []


def test_x3_sticky_cooldown_and_delay_count_turns_per_conversation(hearth, me, book, chat, provider, persona):
    def sent(text, conversation=chat):
        me.send(conversation.id, text)
        return context_message(provider.requests[-1])

    assert "ghost" in sent("Is there a ghost?")                        # turn 1: keyed, sticky 2
    assert "keeper's ghost" in sent("Fine weather.")                   # turn 2: sticky
    assert "keeper's ghost" in sent("Still fine.")                     # turn 3: sticky
    assert "keeper's ghost" not in sent("A ghost again?")              # turn 4: cooldown (until 5)
    assert "keeper's ghost" not in sent("ghost ghost")                 # turn 5: cooldown
    assert "keeper's ghost" in sent("the ghost returns")               # turn 6: keyed again
    timers = hearth.store.connection().execute(
        "SELECT sticky_until, cooldown_until FROM fragment_timers WHERE fragment_id = ?", (book["sticky"].id,)
    ).fetchall()
    assert [tuple(r) for r in timers] == [(8, 10)]
    other = me.conversations.create(persona.id)
    assert "keeper's ghost" not in sent("calm", other)                 # timers are per conversation
    # Delay 3: "letters" only from the third user turn of a conversation on.
    assert "tin box" not in sent("letters?", other)
    assert "Mira's letters" in sent("letters!", other)


def test_x3_f1_imported_lorebook_drives_the_prompt(me, book, chat, provider):
    me.layers.settings.set("fragments.max", 20)
    me.send(chat.id, "Mr Pike and the harbourmaster found sea glass at the festival with a lantern and boats")
    block = context_message(provider.requests[-1])
    for text in ("Gull Rock has a lighthouse", "Jonah Pike runs the harbour", "sea glass in a jar",
                 "surname on the island", "paper boats at midwinter"):
        assert text in block
    assert "Never shows" not in block
    me.send(chat.id, "the tide is high and there is a storm")
    assert "flood the causeway" not in context_message(provider.requests[-1])


def test_x3_cli_imports_and_exports_a_lorebook(tmp_path, hearth):
    home = str(hearth.settings.home)
    path = tmp_path / "gull.json"
    path.write_text(json.dumps(samples.lorebook()))
    runner = CliRunner()
    result = runner.invoke(cli, ["--home", home, "import", str(path)])
    assert result.exit_code == 0 and "gull.json (lorebook): imported; 12 imported" in result.output
    again = runner.invoke(cli, ["--home", home, "import", "lorebook", str(path)])
    assert "duplicate; 12 duplicates" in again.output
    out = tmp_path / "out.json"
    exported = runner.invoke(cli, ["--home", home, "fragments", "export-lorebook", "--book", "Gull Rock Lore",
                                   "-o", str(out)])
    assert exported.exit_code == 0, exported.output
    assert len(json.loads(out.read_text())["entries"]) == 12


def table_counts(hearth):
    conn = hearth.store.connection()
    return [conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in ("fragments", "events")]


entry_values = st.one_of(st.none(), st.booleans(), st.integers(-10**12, 10**12), st.floats(allow_nan=True),
                         st.text(max_size=30), st.lists(st.text(max_size=10), max_size=3))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(field=st.sampled_from(["key", "keysecondary", "selectiveLogic", "order", "probability", "sticky", "cooldown",
                              "delay", "caseSensitive", "matchWholeWords", "scanDepth", "content", "constant",
                              "uid", "disable", "useProbability", "excludeRecursion"]),
       value=entry_values, duplicate=st.booleans(), cut=st.integers(0, 3000))
def test_x3_fuzzed_lorebooks_never_crash_nor_import_partially(hearth, me, field, value, duplicate, cut):
    data = samples.lorebook()
    data["name"] = "fuzz"
    data["entries"]["5"] = copy.deepcopy(data["entries"]["5"])
    data["entries"]["5"][field] = value
    if duplicate:
        data["entries"]["99"] = dict(data["entries"]["4"])
    raw = json.dumps(data).encode()
    for blob in (raw, raw[:cut]):
        before = table_counts(hearth)
        report = me.imports.file(blob, "fuzz.json", fmt="lorebook")
        assert report.status in ("imported", "duplicate", "updated", "refused")
        if report.status == "refused":
            assert report.reason and "\n" not in report.reason
            assert table_counts(hearth) == before


def test_x3_f2_lorebook_edits_are_live_and_compiled_once_per_library_version(me, book, chat, provider):
    from hearth.prompt.layers import fragments as fragments_mod

    me.send(chat.id, "Tell me about the dice")
    assert "Never shows" not in context_message(provider.requests[-1])
    builds = fragments_mod.builds["count"]
    me.send(chat.id, "dice again")
    assert fragments_mod.builds["count"] == builds  # unchanged library: no recompiling
    controls = dict(book["p0"].controls, probability=100)
    me.layers.fragments.edit(book["p0"].id, controls=controls)
    me.send(chat.id, "and the dice?")
    assert "Never shows" in context_message(provider.requests[-1])
    assert fragments_mod.builds["count"] == builds + 1
    me.layers.fragments.edit(book["p0"].id, triggers=["/d[i1]ce/i"])
    me.send(chat.id, "D1CE")
    assert "Never shows" in context_message(provider.requests[-1])


def test_x3_entries_without_keys_import_and_fire_only_when_constant(me):
    data = {"entries": {"0": {"uid": 0, "key": [], "content": "A draft with no keys."},
                        "1": {"uid": 1, "key": [], "content": "Always on.", "constant": True}}}
    report = me.imports.file(json.dumps(data).encode(), "drafts.json")
    assert report.status == "imported" and report.counts == {"imported": 2}
    assert [f.definition for f, _ in me.layers.fragments.match("anything at all")] == ["Always on."]


def test_x3_s8_imports_report_progress(me, persona):
    seen: list[tuple[int, int]] = []
    me.imports.file(json.dumps(samples.lorebook()).encode(), "gull.json", progress=lambda d, t: seen.append((d, t)))
    assert seen[0] == (0, 12) and seen[-1] == (12, 12)
    seen.clear()
    me.imports.file(samples.st_chat("Elion"), "chat.jsonl", progress=lambda d, t: seen.append((d, t)))
    assert seen[0] == (0, 4) and seen[-1] == (4, 4)
