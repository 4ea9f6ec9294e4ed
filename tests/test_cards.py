"""Character cards (X3): V1/V2/V3 from PNG chunks and JSON into personas, avatar, character book
into fragments, export to a V3 PNG with both chunks, round trip, dedupe, and hostile files."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hearth.cli import cli
from hearth.interop.importers import cards
from tests import samples


def table_counts(hearth) -> dict[str, int]:
    conn = hearth.store.connection()
    return {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
            for t in ("personas", "persona_avatars", "fragments", "import_sources")}


def pixels(data: bytes) -> tuple:
    import io

    from PIL import Image

    with Image.open(io.BytesIO(data)) as image:
        return image.mode, image.size, image.tobytes()


def test_x3_v3_png_card_imports_every_field_into_a_persona(me):
    report = me.imports.file(samples.card_png(samples.card_v3()), "mira.png")
    assert report.status == "imported" and report.format == "card"
    assert report.counts == {"personas": 1, "fragments": 3}
    persona = me.personas.get(report.ids["personas"][0])
    assert persona.name == "Mira-Vale" and persona.display_name == "Mira Vale"
    card = persona.card
    assert card["description"].startswith("{{char}} keeps the lighthouse")
    assert card["personality"].startswith("dry wit") and card["scenario"].startswith("A winter storm")
    assert card["first_mes"].startswith("*sets the kettle on*") and card["mes_example"].startswith("<START>")
    assert card["system_prompt"] == "Write as {{char}}, in the first person."
    assert card["post_history_instructions"] == "Keep replies under three paragraphs."
    assert card["creator_notes"] == "Works best with slow, quiet scenes."
    assert card["tags"] == ["lighthouse", "slice of life"] and card["nickname"] == "Mira"
    assert card["extensions"]["world"] == "Gull Rock" and card["book"]["token_budget"] == 400
    # The persona speaks from the card: identity and instructions keep its macros, filled when the
    # prompt is built (tests/test_characters.py).
    assert persona.identity.startswith("{{char}} keeps the lighthouse on Gull Rock and writes letters to {{user}}")
    assert "{{char}}'s personality: dry wit" in persona.identity and "Scenario: A winter storm" in persona.identity
    assert persona.custom_instructions == "Write as {{char}}, in the first person."
    data, mime = me.personas.avatar(persona.id)
    assert mime == "image/png" and cards.is_png(data) and "ccv3" not in samples.png_chunks(data)
    # The character book became fragments with their controls.
    frags = {f.import_key: f for f in me.layers.fragments.list()}
    lamp = frags[f"card:{persona.id}:1"]
    assert lamp.triggers == ("lighthouse", "the lamp") and lamp.category == "Gull Rock"
    assert lamp.controls["secondary"] == ["storm", "fog"] and lamp.controls["sticky"] == 2
    assert lamp.controls["order"] == 50 and lamp.controls["position"] == 1
    assert lamp.controls["extra"]["extensions"] == {"group": "lamp"}
    assert frags[f"card:{persona.id}:2"].controls["constant"] is True
    assert frags[f"card:{persona.id}:3"].enabled is False


def test_x3_v2_chara_chunk_v1_and_json_cards_import(me):
    v2 = me.imports.file(samples.card_png(v2=samples.card_v2()), "tom.png")
    assert v2.status == "imported"
    tom = me.personas.get(v2.ids["personas"][0])
    assert tom.display_name == "Old Tom" and tom.card["personality"] == "gruff" and tom.card["tags"] == ["sea"]
    v1 = me.imports.file(json.dumps({"name": "Wren", "description": "A sailmaker.", "personality": "quick",
                                     "scenario": "", "first_mes": "Hi.", "mes_example": ""}).encode(), "wren.json")
    assert v1.status == "imported" and me.personas.get(v1.ids["personas"][0]).card["first_mes"] == "Hi."
    js = me.imports.file(json.dumps(samples.card_v3("Ada Quill", book=False)).encode(), "ada.json", fmt="card")
    ada = me.personas.get(js.ids["personas"][0])
    assert ada.name == "Ada-Quill" and me.personas.avatar(ada.id) is None


def test_x3_ccv3_chunk_wins_over_chara(me):
    report = me.imports.file(samples.card_png(samples.card_v3("Newer", book=False), v2=samples.card_v2("Older")),
                             "both.png")
    assert me.personas.get(report.ids["personas"][0]).display_name == "Newer"


def test_x3_card_round_trip_import_export_import_gives_the_same_persona(me, hearth, tmp_path):
    from hearth import Hearth, Settings

    first = me.imports.file(samples.card_png(samples.card_v3()), "mira.png")
    pid = first.ids["personas"][0]
    exported = me.imports.card_png(pid)
    chunks = samples.png_chunks(exported)
    assert set(chunks) == {"chara", "ccv3"}
    assert chunks["ccv3"]["spec"] == "chara_card_v3" and chunks["ccv3"]["spec_version"] == "3.0"
    assert chunks["chara"]["spec"] == "chara_card_v2" and chunks["chara"]["name"] == "Mira Vale"
    assert chunks["chara"]["data"]["character_book"]["entries"][0]["keys"] == ["lighthouse", "the lamp"]
    other = Hearth(Settings.resolve({"home": str(tmp_path / "other")}, environ={}))
    try:
        them = other.scope()
        second = them.imports.file(exported, "exported.png")
        assert second.status == "imported"

        def persona_view(scope, persona_id):
            d = scope.personas.get(persona_id).to_dict()
            return {k: v for k, v in d.items() if k not in ("id", "user_id", "created_at", "updated_at", "uuid")}

        def fragment_view(scope):
            return sorted((f.triggers, f.definition, f.category, f.enabled, json.dumps(f.controls, sort_keys=True),
                           f.import_key.rsplit(":", 1)[1]) for f in scope.layers.fragments.list())

        assert persona_view(them, second.ids["personas"][0]) == persona_view(me, pid)
        # Another deployment's persona is a new one: its own uuid, and no trace of the source's mark.
        theirs = them.personas.get(second.ids["personas"][0])
        assert theirs.uuid != me.personas.get(pid).uuid and "hearth" not in theirs.card.get("extensions", {})
        assert fragment_view(them) == fragment_view(me)
        assert pixels(them.personas.avatar(second.ids["personas"][0])[0]) == pixels(me.personas.avatar(pid)[0])
    finally:
        other.close()


def test_x3_reimporting_a_card_is_a_duplicate(hearth, me):
    data = samples.card_png(samples.card_v3())
    assert me.imports.file(data, "a.png").status == "imported"
    before = table_counts(hearth)
    again = me.imports.file(data, "a-copy.png")
    assert again.status == "duplicate" and table_counts(hearth) == before


BROKEN = {
    "truncated png": lambda: samples.card_png(samples.card_v3())[:120],
    "png without chunk": lambda: samples.png({"Comment": "hello"}),
    "invalid base64": lambda: samples.png({"chara": "!!!not base64!!!"}),
    "invalid json in chunk": lambda: samples.png({"ccv3": "e25vdCBqc29u"}),
    "unknown spec": lambda: samples.card_png({"spec": "chara_card_v9", "spec_version": "9.0", "data": {"name": "X"}}),
    "unknown v3 version": lambda: samples.card_png({"spec": "chara_card_v3", "spec_version": "4.0",
                                                   "data": {"name": "X"}}),
    "5 MB field": lambda: json.dumps({**samples.card_v3(book=False), "data": {
        **samples.card_v3(book=False)["data"], "description": "x" * 5_000_000}}).encode(),
    "duplicate book ids": lambda: json.dumps({"spec": "chara_card_v2", "spec_version": "2.0", "data": {
        "name": "Dup", "character_book": {"entries": [
            {"id": 1, "keys": ["a"], "content": "one", "enabled": True, "insertion_order": 1, "extensions": {}},
            {"id": 1, "keys": ["b"], "content": "two", "enabled": True, "insertion_order": 2,
             "extensions": {}}]}}}).encode(),
    # SillyTavern's convertCharacterBook sets ``entry.id`` on each entry: a number there fails.
    "book entry not an object": lambda: json.dumps({"spec": "chara_card_v2", "spec_version": "2.0", "data": {
        "name": "Rx", "character_book": {"entries": [5]}}}).encode(),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_x3_broken_cards_are_refused_in_one_line_and_change_nothing(hearth, me, case):
    before = table_counts(hearth)
    report = me.imports.file(BROKEN[case](), f"{case}.png", fmt="card")
    assert report.status == "refused", report
    assert report.reason and "\n" not in report.reason and len(report.reason) < 300
    assert table_counts(hearth) == before


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cut=st.integers(0, 4000), flip=st.integers(0, 4000), byte=st.integers(0, 255),
       payload=st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=20),
                            lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=8), c, max_size=4),
                            max_leaves=12))
def test_x3_fuzzed_card_files_never_crash_nor_import_partially(hearth, me, cut, flip, byte, payload):
    good = samples.card_png(samples.card_v3())
    mutated = bytearray(good[:max(cut, 8)] if cut < len(good) else good)
    if flip < len(mutated):
        mutated[flip] = byte
    candidates = [bytes(mutated), samples.card_png({"spec": "chara_card_v3", "spec_version": "3.0", "data": payload}),
                  json.dumps({"spec": "chara_card_v2", "spec_version": "2.0", "data": {
                      "name": "F", "character_book": {"entries": [payload]}}}).encode()]
    for data in candidates:
        before = table_counts(hearth)
        report = me.imports.file(data, "fuzz.png", fmt="card")
        assert report.status in ("imported", "duplicate", "refused")
        if report.status == "refused":
            assert report.reason and "\n" not in report.reason
            assert table_counts(hearth) == before


def test_x3_cli_imports_a_card_and_exports_it_back(tmp_path, hearth):
    home = str(hearth.settings.home)
    card = tmp_path / "mira.png"
    card.write_bytes(samples.card_png(samples.card_v3()))
    runner = CliRunner()
    result = runner.invoke(cli, ["--home", home, "import", "card", str(card)])
    assert result.exit_code == 0, result.output
    assert "mira.png (card): imported; 1 personas, 3 fragments" in result.output
    out = tmp_path / "out.png"
    exported = runner.invoke(cli, ["--home", home, "persona", "export-card", "Mira-Vale", "-o", str(out)])
    assert exported.exit_code == 0, exported.output
    assert samples.png_chunks(out.read_bytes())["ccv3"]["data"]["name"] == "Mira Vale"
    bad = tmp_path / "bad.png"
    bad.write_bytes(b"\x89PNG\r\n\x1a\nbroken")
    failed = runner.invoke(cli, ["--home", home, "import", str(bad)])
    assert failed.exit_code == 2 and failed.output.strip() == failed.output.strip().splitlines()[0] \
        and failed.output.startswith("Error: bad.png is not a readable PNG")
