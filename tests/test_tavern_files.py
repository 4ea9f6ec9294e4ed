"""SillyTavern's own files, as its editor and exporter write them (X5-X9): they import without
loss, keys match as SillyTavern matches them, macros are filled in lore, SillyTavern's defaults
hold for imported books, and entries reach the model where their position puts them, labelled as
imported lore. What reaches the model is read from the recording provider."""

from __future__ import annotations

import json
import re
from pathlib import Path

from click.testing import CliRunner
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from hearth.cli import cli
from hearth.lorebook.controls import Activator
from hearth.prompt.layers.fragments import Fragment
from tests import tavern_samples as tavern
from tests.test_layers import context_message, reply_with


def table_counts(hearth):
    conn = hearth.store.connection()
    return [conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in ("fragments", "personas")]


def imported_card(me, card, name="lily.png"):
    report = me.imports.file(tavern.card_png(card), name, fmt="card")
    assert report.status == "imported", report
    return report


def by_content(me):
    return {f.definition: f for f in me.layers.fragments.list()}


def fired(me, text):
    return {f.definition for f, _ in me.layers.fragments.match(text)}


# -- X5: every value SillyTavern writes imports ----------------------------------------------------

def test_x5_world_info_as_the_editor_saves_it_imports_without_loss(me):
    report = me.imports.file(tavern.world_info_bytes(), "ferry.json")
    assert report.status == "imported" and report.counts == {"imported": 12}, report
    lore = by_content(me)
    c = {text: f.controls for text, f in lore.items()}
    assert c["Marigold is the ferry cat."]["delay_until_recursion"] == 0          # saved as false
    assert c["The lantern is lit at dusk."]["delay_until_recursion"] == 1         # saved as true: level 1
    assert c["The causeway floods at spring tide."]["delay_until_recursion"] == 2
    gull = c["Gulls nest on the lamp gallery."]
    assert gull["use_probability"] is False and gull["probability"] == 100 and gull["role"] == 0
    assert gull["position"] == 1 and gull["whole_words"] is True
    pip = c["{{char}} owes {{user}} a favour."]
    assert (pip["position"], pip["depth"], pip["role"], pip["scan_depth"]) == (4, 2, 1, 3)
    assert c["The dice are loaded."]["use_probability"] is True and c["The dice are loaded."]["probability"] == 50
    assert lore["Sea glass in a jar."].triggers == ("/sea ?glass/i",)
    # Exported again, the file says what it said.
    exported = me.imports.lorebook_json("ferry")["entries"]
    original = tavern.editor_world_info()["entries"]
    for uid, entry in original.items():
        for field in ("key", "content", "position", "depth", "caseSensitive", "matchWholeWords", "order",
                      "comment", "displayIndex", "vectorized", "group", "groupWeight"):
            assert exported[uid][field] == entry[field], (uid, field)
        assert exported[uid]["delayUntilRecursion"] == {False: 0, True: 1}.get(entry["delayUntilRecursion"],
                                                                              entry["delayUntilRecursion"])


def test_x5_a_card_as_sillytavern_exports_it_imports_without_loss(me):
    report = imported_card(me, tavern.exported_card())
    assert report.counts == {"personas": 1, "fragments": 9}
    lore = by_content(me)
    assert lore["A vote was cast."].triggers == ("+1",)                 # not made a regex by use_regex
    assert lore["Someone is weary."].triggers == ("(sigh",)
    assert lore["The harbour wall is old."].controls["delay_until_recursion"] == 2
    assert lore["Marigold is the ferry cat."].controls["delay_until_recursion"] == 0  # written as false
    assert all(f.controls["position"] == 0 for f in lore.values())     # before_char, as exported
    # The card goes back out with the values it came with.
    persona_id = report.ids["personas"][0]
    book = me.imports.card_json(persona_id)["data"]["character_book"]["entries"]
    assert [e["keys"] for e in book] == [e["keys"] for e in tavern.tavern_book_entries()]
    assert [e["extensions"]["delay_until_recursion"] for e in book] == [0] * 8 + [2]  # false reads as 0


def test_x5_refusals_name_the_card_field_and_the_file(hearth, me):
    before = table_counts(hearth)
    card = tavern.exported_card()
    card["data"]["description"] = "tea\x00"
    report = me.imports.file(tavern.card_png(card), "lily.png", fmt="card")
    assert report.status == "refused" and report.reason.startswith("data.description in lily.png contains a NUL")

    card = tavern.exported_card()
    card["data"]["character_book"]["entries"][1]["content"] = {"text": "not text"}
    report = me.imports.file(tavern.card_png(card), "lily.png", fmt="card")
    assert report.status == "refused"
    assert report.reason == "character_book.entries[1].content in lily.png: must be text"

    card = tavern.exported_card()
    card["data"]["character_book"]["entries"][2]["keys"] = ["x" * 1001]
    report = me.imports.file(tavern.card_png(card), "lily.png", fmt="card")
    assert report.reason.startswith("character_book.entries[2].keys[0] in lily.png: a key may be at most")

    book = tavern.editor_world_info()
    book["entries"]["3"]["key"] = [["nested"]]
    report = me.imports.file(json.dumps(book).encode(), "ferry.json")
    assert report.status == "refused" and report.reason == 'entries["3"].key[0] in ferry.json: must be text'
    assert table_counts(hearth) == before


def test_x5_every_value_sillytavern_may_hold_in_a_field_imports(me):
    """Each flag and number field with each kind of value SillyTavern's code writes or tolerates."""
    values = [None, True, False, 0, 1, 2.5, "3", "", "n/a"]
    fields = ["delayUntilRecursion", "excludeRecursion", "preventRecursion", "useProbability", "probability",
              "sticky", "cooldown", "delay", "scanDepth", "caseSensitive", "matchWholeWords", "role", "depth",
              "position", "order", "selectiveLogic", "constant", "disable"]
    entries = {}
    for n, (field, value) in enumerate((f, v) for f in fields for v in values):
        entries[str(n)] = tavern.template_entry(n, key=[f"k{n}"], content=f"c{n}", **{field: value})
    report = me.imports.file(json.dumps({"entries": entries}).encode(), "all.json")
    assert report.status == "imported" and report.counts == {"imported": len(entries)}, report
    card_entries = []
    for n, (field, value) in enumerate((f, v) for f in ("delay_until_recursion", "exclude_recursion",
                                                        "probability", "useProbability", "scan_depth",
                                                        "match_whole_words", "case_sensitive", "role",
                                                        "sticky", "group_weight") for v in values):
        card_entries.append(tavern.exported_book_entry(n, [f"k{n}"], f"c{n}", extensions={field: value}))
    imported_card(me, tavern.exported_card("Every", card_entries), "every.png")


# -- X6: a key is a regex only when written /.../flags ---------------------------------------------

def test_x6_keys_match_as_text_unless_written_between_slashes(me):
    imported_card(me, tavern.exported_card(entries=tavern.tavern_book_entries(unticked=False)))
    assert "Marigold is the ferry cat." in fired(me, "is marigold asleep?")       # any case, as in SillyTavern
    assert "Pip is the ferry's dog." not in fired(me, "a pipkin of tea")          # whole words
    assert "Pip is the ferry's dog." in fired(me, "where is Pip?")
    assert "Smiles are answered in kind." in fired(me, "thanks :)")
    assert "A vote was cast." in fired(me, "that's +1 from me")
    assert "Someone is weary." in fired(me, "(sigh) fine")
    assert "The file is sealed." in fired(me, "see the [REDACTED] part")
    assert fired(me, "a red dog and a cat") == set()                              # [REDACTED] is not a class
    assert "A key that does not compile is text." in fired(me, "it said /(unclosed/ there")
    assert "Ferries run hourly." in fired(me, "the FERRIES are late")             # a real regex key


# -- X7: macros in lore -----------------------------------------------------------------------------

def test_x7_macros_are_filled_in_lore_content(me, provider):
    me.set_display_name("Sam")
    entries = [tavern.exported_book_entry(0, ["favour"], "{{char}} owes {{user}} a favour."),
               tavern.exported_book_entry(1, ["favour"], "<USER> asked on {{weekday}}.",
                                          extensions={"position": 4, "depth": 1})]
    report = imported_card(me, tavern.exported_card("Lily", entries))
    chat = me.conversations.create(report.ids["personas"][0])
    me.send(chat.id, "Do you remember the favour?")
    sent = [m.content for m in provider.requests[-1].messages if m.role == "system"]
    assert "Lily owes Sam a favour." in context_message(provider.requests[-1])
    assert any("Sam asked on " in s and "{{" not in s for s in sent)
    assert not any("{{char}}" in s or "{{user}}" in s or "<USER>" in s for s in sent)


# -- X8: SillyTavern's defaults for imported books -------------------------------------------------

def test_x8_scan_depth_two_reads_the_reply_before_the_newest_message(me, provider):
    entries = [tavern.exported_book_entry(0, ["lighthouse"], "The lighthouse lamp is a Fresnel lens.")]
    report = imported_card(me, tavern.exported_card("Lily", entries))
    chat = me.conversations.create(report.ids["personas"][0])
    provider.replies.append(reply_with("The lighthouse is dark tonight."))
    me.send(chat.id, "hello")
    me.send(chat.id, "oh?")                       # the reply before it names the key: scan depth 2
    assert "Fresnel lens" in context_message(provider.requests[-1])
    me.send(chat.id, "fine")                      # three messages back now
    assert "Fresnel lens" not in context_message(provider.requests[-1])


def test_x8_whole_words_do_not_match_plurals(me):
    me.imports.file(tavern.world_info_bytes(touched=False), "ferry.json")
    assert "Gulls nest on the lamp gallery." in fired(me, "a gull landed")
    assert "Gulls nest on the lamp gallery." not in fired(me, "gulls everywhere")
    index = Activator.build([Fragment(1, "", ("gull",), "x", controls={"whole_words": None})])
    assert [m.fragment_id for m in index.activate(["the gulls"]).matches] == []   # unset is whole words too


def test_x8_the_lore_budget_is_a_share_of_the_input_limit(me, provider):
    entries = [tavern.exported_book_entry(n, [], f"Entry {n}: " + "x" * 392, constant=True) for n in range(10)]
    report = imported_card(me, tavern.exported_card("Lily", entries))
    for n in range(8):
        me.layers.fragments.add(["tea"], f"Plain fragment {n}.", "own")
    chat = me.conversations.create(report.ids["personas"][0])
    me.send(chat.id, "tea?")
    block = context_message(provider.requests[-1])
    # 10 entries of about 100 tokens fit in 25% of 32,000; Hearth's own fragments keep their six.
    assert all(f"Entry {n}:" in block for n in range(10))
    assert sum(f"Plain fragment {n}." in block for n in range(8)) == 6
    me.layers.settings.set("fragments.lore_budget_percent", 1)   # 320 tokens: three entries
    me.send(chat.id, "tea again")
    assert sum(f"Entry {n}:" in context_message(provider.requests[-1]) for n in range(10)) == 3


# -- X9: positions, depth and role; labels ---------------------------------------------------------

def test_x9_entries_reach_the_model_where_their_position_puts_them(me, persona, provider):
    me.imports.file(tavern.world_info_bytes(touched=False), "ferry.json")
    chat = me.conversations.create(persona.id)
    for text in ("one", "two", "three"):
        me.send(chat.id, text)
    me.send(chat.id, "Marigold and pip in the fog")
    messages = provider.requests[-1].messages
    roles = [m.role for m in messages]
    assert messages[-1].content == "Marigold and pip in the fog" and roles[-1] == "user"
    block = context_message(provider.requests[-1])
    before = block.index("=== IMPORTED LORE (before the character definition) ===")
    after = block.index("=== IMPORTED LORE (after the character definition) ===")
    assert before < block.index("Marigold is the ferry cat.") < after
    assert after < block.index("Fog example top.") < block.index("Fog example bottom.")
    assert "written or approved by the person" not in block[before:]
    assert "not by the person" in block[before:]
    history = [n for n, m in enumerate(messages) if m.role in ("user", "assistant")]
    # At depth 2 with the user role: a system message before the last history turn.
    pip = next(n for n, m in enumerate(messages) if "owes the person a favour" in m.content)
    assert messages[pip].role == "system" and pip + 1 == history[-2]
    assert "SillyTavern sends it as the user" in messages[pip].content
    # The author's-note positions (no author's note in Hearth): at depth 4, top before bottom.
    note = next(n for n, m in enumerate(messages) if "Fog note top." in m.content)
    assert messages[note].role == "system" and note + 1 == history[-4]
    assert messages[note].content.index("Fog note top.") < messages[note].content.index("Fog note bottom.")
    assert "Fog note" not in block and "owes the person" not in block


def test_x9_hand_made_lore_is_not_labelled_imported(me, persona, provider):
    me.layers.fragments.add(["kettle"], "The kettle whistles.", "mine", controls={"position": 1})
    chat = me.conversations.create(persona.id)
    me.send(chat.id, "kettle on")
    block = context_message(provider.requests[-1])
    assert "=== LOREBOOK ENTRIES (after the character definition) ===" in block and "IMPORTED" not in block


def test_x9_a_refused_import_exits_2_as_the_docs_say(tmp_path, hearth):
    home = str(hearth.settings.home)
    bad = tmp_path / "bad.json"
    bad.write_text('{"entries": 5}')
    worse = tmp_path / "worse.json"
    worse.write_text("{")
    runner = CliRunner()
    assert runner.invoke(cli, ["--home", home, "import", str(bad)]).exit_code == 2
    assert runner.invoke(cli, ["--home", home, "import", str(bad), str(worse)]).exit_code == 2
    docs = (Path(__file__).parent.parent / "docs" / "import.md").read_text()
    assert "exits 2" in docs and "exits 1)" not in docs


@settings(max_examples=300, deadline=None)
@given(keys=st.lists(st.text(alphabet="abAB :)+1([]_é", min_size=1, max_size=4), min_size=1, max_size=5),
       text=st.text(alphabet="abAB :)+1([]_é.\n", max_size=40), whole=st.booleans(), case=st.booleans())
def test_x6_x8_literal_keys_match_as_the_reference_pattern_says(keys, text, whole, case):
    """Every literal key fires exactly where the plain pattern of SillyTavern's rule says (no
    word character touching a whole-word key; exact case when case-sensitive), on ASCII text (the
    fast path) and on text with accents alike."""
    keys = [k.strip() for k in keys if k.strip() and not k.strip().startswith("/")]  # keys are stored trimmed
    assume(keys)
    entries = [Fragment(n, "", (k,), "x", controls={"whole_words": whole, "case_sensitive": case})
               for n, k in enumerate(keys)]
    fired_ids = {m.fragment_id for m in Activator.build(entries).activate([text]).matches}
    expected = set()
    for n, key in enumerate(keys):
        body = re.escape(key)
        if whole:
            body = rf"(?<![\w\u0300-\u036f]){body}(?![\w\u0300-\u036f])"
        if re.search(body, text, 0 if case else re.IGNORECASE):
            expected.add(n)
    assert fired_ids == expected


def test_x9_depth_counts_from_the_newest_message_and_the_person_stays_last():
    from types import SimpleNamespace

    from hearth.prompt.assembly import assemble
    from hearth.prompt.dynamic import RenderedContext

    history = [SimpleNamespace(role="user" if n % 2 == 0 else "assistant", kind="chat", content=f"turn {n}")
               for n in range(4)]
    context = RenderedContext((), "", "", ((99, "deep"), (3, "three"), (0, "zero")))
    request = assemble(static_prompt="static", handoff_chars=0, history=history, context=context,
                       user_text="now", tools=[], input_limit_tokens=32_000, output_reserve_tokens=1_000,
                       birth_period=False).request
    assert [m.content for m in request.messages] == ["static", "deep", "turn 0", "turn 1", "three", "turn 2",
                                                    "turn 3", "zero", "now"]
    assert all(m.role == "system" for m in request.messages if m.content in ("deep", "three", "zero"))
