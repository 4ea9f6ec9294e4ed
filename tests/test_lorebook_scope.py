"""Lorebooks scoped as SillyTavern scopes them (X3, F1): a card's own book fires only in its
character's conversations, a World Info book for every persona unless given to chosen ones; the
scope is shown and changed by CLI and HTTP, kept by card and lorebook exports, and given to books
cards brought in before scopes existed."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from hearth import Hearth, NotFound, Settings
from hearth.cli import cli
from hearth.errors import InvalidInput
from hearth.server import create_app
from hearth.store import migrations
from tests import samples
from tests.test_layers import context_message
from tests.test_server import BASE

KETTLE = "WREN-KETTLE: the copper kettle whistles twice before it boils."
HARBOUR = "HARBOUR-LORE: the harbour wall was rebuilt after the great storm."


def wren_card() -> dict:
    """An own-made V2 card with a character book of one entry."""
    card = samples.card_v2("Wren")
    card["data"]["character_book"] = {"name": "Wren's kitchen", "scan_depth": 2, "entries": [
        {"id": 1, "keys": ["kettle"], "content": KETTLE, "enabled": True, "insertion_order": 10,
         "extensions": {}}]}
    return card


def harbour_book() -> dict:
    return {"name": "Harbour", "entries": {"0": {"uid": 0, "key": ["harbour"], "content": HARBOUR}}}


def import_both(scope) -> tuple[int, int]:
    """The card (a PNG built with Pillow) and the World Info file, through the real import path;
    returns (Wren's persona id, another persona's id)."""
    card = scope.imports.file(samples.card_png(v2=wren_card()), "wren.png")
    assert card.status == "imported" and card.counts == {"personas": 1, "fragments": 1}, card
    book = scope.imports.file(json.dumps(harbour_book()).encode(), "harbour.json")
    assert book.status == "imported" and book.counts == {"imported": 1}, book
    sage = scope.personas.create("sage", "Sage")
    return card.ids["personas"][0], sage.id


def prompt_for(scope, provider, persona_id: int, text: str = "Is the kettle on by the harbour?") -> str:
    conversation = scope.conversations.create(persona_id)
    scope.send(conversation.id, text)
    return context_message(provider.requests[-1])


def fired(scope, provider, persona_id: int) -> set[str]:
    block = prompt_for(scope, provider, persona_id)
    return {name for name, text in (("kettle", KETTLE), ("harbour", HARBOUR)) if text in block}


def test_x3_f1_a_cards_book_fires_for_its_persona_only_and_world_info_for_all(me, provider):
    wren, sage = import_both(me)
    assert fired(me, provider, wren) == {"kettle", "harbour"}
    assert fired(me, provider, sage) == {"harbour"}
    books = {b.name: b for b in me.layers.fragments.books.list()}
    assert books["Wren's kitchen"].scope == "character" and books["Wren's kitchen"].persona_ids == (wren,)
    assert books["Wren's kitchen"].character_id == wren and books["Harbour"].scope == "all"
    # The editor's test box sees the whole library, or one persona's books when asked.
    assert {f.definition for f, _ in me.layers.fragments.match("kettle harbour")} == {KETTLE, HARBOUR}
    assert {f.definition for f, _ in me.layers.fragments.match("kettle harbour", persona_id=sage)} == {HARBOUR}


def test_x3_a_second_cards_book_of_the_same_name_is_its_own(me, provider):
    wren, sage = import_both(me)
    twin = wren_card()
    twin["data"]["name"] = "Wren Two"
    twin["data"]["character_book"]["entries"][0]["content"] = "TWIN-KETTLE: a tin kettle."
    report = me.imports.file(samples.card_png(v2=twin), "wren-two.png")
    second = report.ids["personas"][0]
    assert {b.name for b in me.layers.fragments.books.list()} == {"Wren's kitchen", "Wren's kitchen (Wren Two)",
                                                                  "Harbour"}
    assert "TWIN-KETTLE" not in prompt_for(me, provider, wren) and KETTLE not in prompt_for(me, provider, second)
    assert "TWIN-KETTLE" in prompt_for(me, provider, second)
    # A World Info file named as a card's book gets a name of its own rather than joining it.
    clash = {"name": "Wren's kitchen", "entries": {"0": {"uid": 0, "key": ["spoon"], "content": "SPOON-LORE"}}}
    me.imports.file(json.dumps(clash).encode(), "clash.json")
    assert "SPOON-LORE" in prompt_for(me, provider, sage, "a spoon")
    assert me.imports.file(json.dumps(clash).encode(), "clash.json").status == "duplicate"


def test_x3_cli_lists_books_with_their_scope_and_gives_one_to_chosen_personas(me, provider, hearth):
    wren, sage = import_both(me)
    home = str(hearth.settings.home)
    runner = CliRunner()
    listed = runner.invoke(cli, ["--home", home, "fragments", "books"])
    assert listed.exit_code == 0, listed.output
    lines = {line.split("│")[1].strip(): line for line in listed.output.splitlines() if line.count("│") >= 3}
    assert "its character: Wren" in lines["Wren's kitchen"] and "all personas" in lines["Harbour"]
    scoped = runner.invoke(cli, ["--home", home, "fragments", "scope", "Harbour", "--persona", "sage"])
    assert scoped.exit_code == 0 and "Harbour: chosen personas: Sage." in scoped.output, scoped.output
    assert fired(me, provider, wren) == {"kettle"} and fired(me, provider, sage) == {"harbour"}
    test = runner.invoke(cli, ["--home", home, "fragments", "test", "kettle harbour", "--persona", "Wren"])
    assert test.exit_code == 0 and "WREN-KETTLE" in test.output and "HARBOUR-LORE" not in test.output
    # Wren's book to Wren and Sage (display names work too); then the Harbour back to everyone.
    both = runner.invoke(cli, ["--home", home, "fragments", "scope", "Wren's kitchen", "--persona", "Wren",
                               "--persona", "Sage"])
    assert both.exit_code == 0, both.output
    assert fired(me, provider, sage) == {"kettle", "harbour"}
    assert runner.invoke(cli, ["--home", home, "fragments", "scope", "Harbour", "--all"]).exit_code == 0
    assert fired(me, provider, wren) == {"kettle", "harbour"}
    # Bad input says why and changes nothing.
    before = [b.to_dict() for b in me.layers.fragments.books.list()]
    for args, message in ((["Harbour"], "either --all or at least one --persona"),
                          (["Harbour", "--all", "--persona", "sage"], "either --all or at least one --persona"),
                          (["Harbour", "--persona", "nobody"], "no persona named 'nobody'"),
                          (["No such book", "--all"], "no book 'No such book'")):
        failed = runner.invoke(cli, ["--home", home, "fragments", "scope", *args])
        assert failed.exit_code != 0 and message in failed.output, (args, failed.output)
    assert [b.to_dict() for b in me.layers.fragments.books.list()] == before


@pytest.fixture
def client(hearth):
    with TestClient(create_app(hearth.settings, hearth), base_url=BASE) as c:
        yield c


def test_x3_http_shows_books_and_sets_their_scope(client, me, provider, hearth):
    wren, sage = import_both(me)
    books = {b["name"]: b for b in client.get("/api/fragments/books").json()}
    assert books["Wren's kitchen"] == {"name": "Wren's kitchen", "scope": "character", "character_id": wren,
                                       "persona_ids": [wren], "fragments": 1}
    assert books["Harbour"]["scope"] == "all" and books["Harbour"]["persona_ids"] == []
    put = client.put("/api/fragments/books/scope", json={"book": "Harbour", "scope": "personas", "persona_ids": [sage]})
    assert put.status_code == 200 and put.json()["persona_ids"] == [sage], put.text
    assert fired(me, provider, wren) == {"kettle"} and fired(me, provider, sage) == {"harbour"}
    matched = client.post("/api/fragments/match", json={"text": "kettle harbour", "persona_id": wren}).json()
    assert [m["fragment"]["definition"] for m in matched] == [KETTLE]
    # Chosen personas that are just the book's character are its character scope.
    again = client.put("/api/fragments/books/scope", json={"book": "Wren's kitchen", "scope": "personas",
                                                           "persona_ids": [wren]})
    assert again.json()["scope"] == "character"
    before = client.get("/api/fragments/books").json()
    other = hearth.scope(hearth.users.create("second").id)
    foreign = other.personas.create("theirs", "Theirs")
    for body, status in (({"book": "Harbour", "scope": "personas", "persona_ids": [foreign.id]}, 404),
                         ({"book": "Harbour", "scope": "personas", "persona_ids": []}, 422),
                         ({"book": "Harbour", "scope": "character"}, 422),
                         ({"book": "Nowhere", "scope": "all"}, 404),
                         ({"book": "Harbour", "scope": "everyone"}, 422)):
        answer = client.put("/api/fragments/books/scope", json=body)
        assert answer.status_code == status and answer.json()["detail"], (body, answer.text)
    assert client.get("/api/fragments/books").json() == before
    assert client.put("/api/fragments/books/scope", json={"book": "Harbour", "scope": "all"}).json()["scope"] == "all"
    assert fired(me, provider, wren) == {"kettle", "harbour"}


def other_hearth(tmp_path, name: str) -> Hearth:
    return Hearth(Settings.resolve({"home": str(tmp_path / name), "input_token_limit": 32_000}, environ={}))


def test_x3_card_and_lorebook_exports_keep_the_scope(me, tmp_path):
    wren, sage = import_both(me)
    me.layers.fragments.books.set_scope("Harbour", "personas", [sage])
    card = me.imports.card_png(wren)
    lorebook = me.imports.lorebook_json("Harbour")
    assert lorebook["extensions"]["hearth"] == {"scope": "personas", "personas": ["sage"]}
    assert list(samples.png_chunks(card)["ccv3"]["data"]["character_book"]["entries"][0]["keys"]) == ["kettle"]
    there = other_hearth(tmp_path, "there")
    try:
        them = there.scope()
        them_sage = them.personas.create("sage", "Sage")
        bystander = them.personas.create("bystander", "Bystander")
        them_wren = them.imports.file(card, "wren.png").ids["personas"][0]
        report = them.imports.file(json.dumps(lorebook).encode(), "harbour.json")
        assert report.status == "imported" and "scope_personas_missing" not in report.counts
        books = {b.name: b for b in them.layers.fragments.books.list()}
        assert books["Wren's kitchen"].scope == "character" and books["Wren's kitchen"].persona_ids == (them_wren,)
        assert books["Harbour"].scope == "personas" and books["Harbour"].persona_ids == (them_sage.id,)
        for persona_id, expected in ((them_wren, {KETTLE}), (them_sage.id, {HARBOUR}), (bystander.id, set())):
            found = them.layers.fragments.match("kettle harbour", persona_id=persona_id)
            assert {f.definition for f, _ in found} == expected
        # The scope is applied, not kept as a setting to write back twice.
        harbour = next(f for f in them.layers.fragments.list() if f.definition == HARBOUR)
        assert "hearth" not in json.dumps(harbour.controls["extra"])
        assert them.imports.lorebook_json("Harbour")["extensions"] == {"hearth": lorebook["extensions"]["hearth"]}
    finally:
        there.close()
    # Where the chosen persona does not exist, the book is kept from everyone, and the report says so.
    elsewhere = other_hearth(tmp_path, "elsewhere")
    try:
        them = elsewhere.scope()
        lonely = them.personas.create("lonely", "Lonely")
        report = them.imports.file(json.dumps(lorebook).encode(), "harbour.json")
        assert report.counts == {"imported": 1, "scope_personas_missing": 1}
        assert them.layers.fragments.match("harbour", persona_id=lonely.id) == []
    finally:
        elsewhere.close()


def test_x3_the_lorebook_download_picks_one_book(client, me):
    import_both(me)
    one = client.get("/api/exports/lorebook", params={"book": "Harbour"}).json()
    assert one["name"] == "Harbour" and [e["content"] for e in one["entries"].values()] == [HARBOUR]
    assert one["extensions"]["hearth"] == {"scope": "all"}
    everything = client.get("/api/exports/lorebook").json()
    assert sorted(e["content"] for e in everything["entries"].values()) == sorted([HARBOUR, KETTLE])
    assert "hearth" not in everything.get("extensions", {})


def test_x3_books_cards_brought_in_before_scopes_get_their_characters_scope(hearth, me, persona, provider):
    """Migration 21's data step, on data as it was: card fragments carry ``card:PERSONA:ID`` keys
    and no book has a scope. One that shares its category with a World Info entry is split off."""
    fragments = me.layers.fragments
    tom = me.personas.create("old-tom", "Old Tom")
    fragments.add(["kettle"], KETTLE, "Wren's kitchen", controls={}, import_key=f"card:{persona.id}:1")
    fragments.add(["net"], "TOM-NET: nets dry on the rail.", "Shared", controls={"order": 5},
                  import_key=f"card:{tom.id}:1")
    fragments.add(["harbour"], HARBOUR, "Shared", controls={"order": 5}, import_key="lorebook:Shared:0")
    fragments.add(["dog"], "Fleur is a shy lurcher.", "pets")
    with hearth.store.write() as conn:
        conn.execute("DELETE FROM fragment_books")
        migrations.scope_card_books(conn)
    books = {b.name: b for b in fragments.books.list()}
    assert books["Wren's kitchen"].scope == "character" and books["Wren's kitchen"].persona_ids == (persona.id,)
    assert books["Shared (Old Tom)"].scope == "character" and books["Shared (Old Tom)"].persona_ids == (tom.id,)
    assert books["Shared"].scope == "all" and books["Shared"].fragments == 1 and books["pets"].scope == "all"
    assert {f.category for f in fragments.list() if f.import_key == f"card:{tom.id}:1"} == {"Shared (Old Tom)"}
    everyone = "kettle net harbour dog"
    for persona_id, expected in ((persona.id, {"WREN-KETTLE", "HARBOUR-LORE", "Fleur"}),
                                 (tom.id, {"TOM-NET", "HARBOUR-LORE", "Fleur"})):
        found = {f.definition.split(":")[0].split(" ")[0] for f, _ in fragments.match(everyone, persona_id=persona_id)}
        assert found == expected
    # The card export finds its book under its new name.
    entries = me.imports.card_json(tom.id)["data"]["character_book"]["entries"]
    assert [e["content"] for e in entries] == ["TOM-NET: nets dry on the rail."]


def test_g2_book_scopes_refuse_another_users_personas(hearth, me):
    wren, sage = import_both(me)
    other = hearth.scope(hearth.users.create("second").id)
    other.layers.fragments.add(["harbour"], "theirs", "Harbour")
    books = other.layers.fragments.books
    with pytest.raises(NotFound):
        books.set_scope("Harbour", "personas", [sage])
    with pytest.raises(NotFound):
        books.for_character("Theirs", wren, "Wren")
    assert books.restore("Harbour", {"scope": "personas", "personas": ["sage"]}) == 1
    assert books.get("Harbour").persona_ids == ()
    with pytest.raises(InvalidInput):
        books.restore("Harbour", {"scope": "somewhere"})
    assert books.for_world_info("Wren's kitchen", "lorebook:Harbour:") == "Wren's kitchen"  # the owner's is not seen
    assert me.layers.fragments.books.get("Harbour").scope == "all"
    assert [b.name for b in books.list()] == ["Harbour"]


def test_s1_s9_a_migration_numbered_below_the_newest_applied_still_runs_postgres(pg_url):
    """Migration 21 landed after 23: a database already past 21 gets it when next opened."""
    from hearth.store import PgStore

    store = PgStore(pg_url)
    with store.write() as conn:
        conn.execute("DROP TABLE fragment_book_personas")
        conn.execute("DROP TABLE fragment_books")
        conn.execute("DELETE FROM schema_migrations WHERE version = 21")
    store.close()
    again = PgStore(pg_url)
    try:
        conn = again.connection()
        assert conn.execute("SELECT name FROM schema_migrations WHERE version = 21").fetchone()[0] == \
            "m021_scope_fragment_books"
        assert conn.execute("SELECT count(*) FROM fragment_books").fetchone()[0] == 0
    finally:
        again.close()
