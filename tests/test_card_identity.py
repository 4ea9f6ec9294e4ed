"""Card round trips (X3) and avatar URLs (W3): a card exported from a persona and imported again by
the same user is that persona (a duplicate, or an update the person chooses), never a second one;
a card from elsewhere is a new persona; another user's persona is never touched. Cards are built
as PNGs with Pillow and go through the real import path (core, HTTP and CLI)."""

from __future__ import annotations

import copy
import io
import json
import sqlite3

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient
from PIL import Image

from hearth.cli import cli
from hearth.interop.importers import card_identity, cards
from hearth.server import create_app
from hearth.store import Store, migrations
from tests import samples
from tests.test_server import BASE

TABLES = ("personas", "persona_avatars", "fragments", "import_sources")


def counts(store) -> dict[str, int]:
    conn = store.connection()
    return {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in TABLES}


def state(scope) -> tuple:
    """Everything a card import could change, for "nothing changed" checks."""
    personas = [p.to_dict() for p in scope.personas.list(include_archived=True)]
    frags = sorted((f.id, f.import_key, f.triggers, f.definition, f.enabled, json.dumps(f.controls, sort_keys=True))
                   for f in scope.layers.fragments.list())
    avatars = {p["id"]: scope.personas.avatar(p["id"]) for p in personas}
    return personas, frags, avatars


def card_png(card: dict, colour=(20, 60, 90)) -> bytes:
    return samples.png({"ccv3": samples.b64(card)}, colour=colour)


def imported(scope, data=None):
    report = scope.imports.file(data or samples.card_png(samples.card_v3()), "mira.png")
    assert report.status == "imported", report
    return report.ids["personas"][0]


def changed(card: dict) -> dict:
    """The exported card as edited elsewhere: new personality, one entry changed, one removed, one new."""
    card = copy.deepcopy(card)
    data = card["data"]
    data["personality"] = "warmer since the storm"
    entries = data["character_book"]["entries"]
    entries[0]["content"] = "The lamp was rebuilt in 1950."
    entries.pop(2)
    entries.append({"id": 9, "keys": ["gulls"], "content": "The gulls nest on the north ledge.", "enabled": True,
                    "insertion_order": 20, "extensions": {}})
    return card


# -- export then import: the same character ---------------------------------------------------------
def test_x3_export_then_import_in_the_same_deployment_is_a_duplicate_and_adds_nothing(me):
    pid = imported(me)
    png = me.imports.card_png(pid)
    mark = samples.png_chunks(png)["ccv3"]["data"]["extensions"]["hearth"]
    assert mark["uuid"] == me.personas.get(pid).uuid and len(mark["hash"]) == 64
    assert samples.png_chunks(png)["chara"]["data"]["extensions"]["hearth"] == mark  # V2 loaders keep it too
    before = state(me)
    for data, name in ((png, "mira-export.png"), (json.dumps(me.imports.card_json(pid)).encode(), "mira.json")):
        report = me.imports.file(data, name)
        assert (report.status, report.ids) == ("duplicate", {"personas": [pid]}), report
        assert state(me) == before
    # An export of the re-imported persona is the same card again: the round trip is stable.
    assert me.imports.card_json(pid) == json.loads(json.dumps(me.imports.card_json(pid)))
    assert samples.png_chunks(me.imports.card_png(pid))["ccv3"] == samples.png_chunks(png)["ccv3"]


def test_x3_a_persona_made_in_hearth_without_an_avatar_round_trips_as_a_duplicate(me):
    robin = me.personas.create("robin", "Robin", identity="I am Robin.", custom_instructions="Be brief.")
    before = state(me)
    report = me.imports.file(me.imports.card_png(robin.id), "robin.png")
    assert (report.status, report.ids) == ("duplicate", {"personas": [robin.id]})
    assert state(me) == before  # the plain image an export draws is not taken as an avatar


def test_x3_default_extension_fields_do_not_change_the_content_hash(me):
    original = samples.card_v3()
    pid = imported(me, card_png(original))
    # The same card as SillyTavern saves it: its extension defaults filled in, every entry control
    # written out, a new modification date, entries in another order.
    resaved = copy.deepcopy(original)
    data = resaved["data"]
    data["extensions"].update({"depth_prompt": {"prompt": "", "depth": 4, "role": "system"}})
    data["modification_date"] = 1_900_000_000
    for n, entry in enumerate(data["character_book"]["entries"]):
        entry.setdefault("secondary_keys", [])
        # SillyTavern's convertCharacterBook read an entry without a position as after the
        # character (1), so that is what it saves back.
        entry["extensions"] = {"position": 1, "exclude_recursion": False, "display_index": n, "probability": 100,
                               "useProbability": True, "depth": 4, "selectiveLogic": 0, "group_override": False,
                               "group_weight": 100, "prevent_recursion": False, "delay_until_recursion": 0,
                               "scan_depth": None, "match_whole_words": None, "use_group_scoring": False,
                               "case_sensitive": None, "automation_id": "", "role": 0, "vectorized": False,
                               "sticky": 0, "cooldown": 0, "delay": 0, **entry["extensions"]}
    data["character_book"]["entries"].reverse()
    parsed = [cards.from_json(c) for c in (original, resaved)]
    assert card_identity.content_hash(parsed[0]) == card_identity.content_hash(parsed[1])
    before = state(me)
    report = me.imports.file(card_png(resaved), "mira-resaved.png")
    assert (report.status, report.ids) == ("duplicate", {"personas": [pid]})
    assert state(me) == before
    # A real change still counts.
    data["character_book"]["entries"][0]["extensions"]["group_weight"] = 50
    assert card_identity.content_hash(cards.from_json(resaved)) != card_identity.content_hash(parsed[0])


# -- a changed card of one's own persona -----------------------------------------------------------
def test_x3_a_changed_own_card_asks_first_and_changes_nothing(me):
    pid = imported(me)
    edited = json.dumps(changed(me.imports.card_json(pid))).encode()
    before = state(me)
    report = me.imports.file(edited, "mira.json")
    assert report.status == "refused" and report.ids == {"existing": [pid]}
    assert "already here" in report.reason and "\n" not in report.reason and "Mira" not in report.reason
    assert state(me) == before
    # An older export, imported after the persona changed, is told apart from a card edited elsewhere.
    older = me.imports.card_png(pid)
    me.update_persona(pid, display_name="Mira of Gull Rock")
    assert "earlier export" in me.imports.file(older, "older.png").reason


def test_x3_a_changed_own_card_with_update_updates_the_persona_and_its_fragments_in_place(me):
    pid = imported(me)
    uuid = me.personas.get(pid).uuid
    kept = {f.import_key: f.id for f in me.layers.fragments.list()}
    edited = changed(me.imports.card_json(pid))
    new_picture = card_png(edited, colour=(200, 40, 40))
    report = me.imports.file(new_picture, "mira-edited.png", on_match="update")
    assert report.status == "updated", report
    assert report.counts == {"personas_updated": 1, "avatars_updated": 1, "fragments_updated": 1,
                             "fragments_added": 1, "fragments_removed": 1}
    persona = me.personas.get(pid)
    assert [p.id for p in me.personas.list()] == [pid] and persona.uuid == uuid
    assert persona.card["personality"] == "warmer since the storm" and "warmer since the storm" in persona.identity
    frags = {f.import_key: f for f in me.layers.fragments.list()}
    assert sorted(frags) == [f"card:{pid}:1", f"card:{pid}:2", f"card:{pid}:9"]
    assert frags[f"card:{pid}:1"].id == kept[f"card:{pid}:1"]  # updated in place, not replaced
    assert frags[f"card:{pid}:1"].definition == "The lamp was rebuilt in 1950."
    assert frags[f"card:{pid}:2"].id == kept[f"card:{pid}:2"]
    with Image.open(io.BytesIO(me.personas.avatar(pid)[0])) as image:
        assert image.convert("RGB").getpixel((0, 0)) == (200, 40, 40)
    # The same file again, and the persona's new export, are duplicates now.
    before = state(me)
    assert me.imports.file(new_picture, "again.png", on_match="update").status == "duplicate"
    assert me.imports.file(me.imports.card_png(pid), "export.png").status == "duplicate"
    assert state(me) == before
    assert len(me.personas.history(pid)) == 2  # created, then updated from the card


def test_x3_a_changed_own_card_as_new_makes_a_second_persona_with_its_own_fragments(me):
    pid = imported(me)
    report = me.imports.file(json.dumps(changed(me.imports.card_json(pid))).encode(), "copy.json", on_match="new")
    assert report.status == "imported" and report.counts == {"personas": 1, "fragments": 3}
    copy_id = report.ids["personas"][0]
    first, second = me.personas.get(pid), me.personas.get(copy_id)
    assert second.name == "Mira-Vale-2" and second.uuid != first.uuid
    assert first.card["personality"] != second.card["personality"]
    assert len([f for f in me.layers.fragments.list() if f.import_key.startswith(f"card:{pid}:")]) == 3


def test_x3_a_card_from_elsewhere_is_a_new_persona_and_a_broken_mark_is_ignored(me):
    foreign = samples.card_v3("Ada Quill", book=False)
    foreign["data"]["extensions"]["hearth"] = {"uuid": "ab" * 16, "hash": "cd" * 32}
    report = me.imports.file(card_png(foreign), "ada.png", on_match="update")
    assert report.status == "imported"
    ada = me.personas.get(report.ids["personas"][0])
    assert ada.uuid != "ab" * 16 and "hearth" not in ada.card["extensions"]
    assert me.imports.file(card_png(foreign), "ada-again.png").status == "duplicate"
    broken = samples.card_v3("Wren", book=False)
    broken["data"]["extensions"]["hearth"] = {"uuid": ["not", "text"], "hash": 7}
    report = me.imports.file(card_png(broken), "wren.png")
    assert report.status == "imported" and "hearth" not in me.personas.get(report.ids["personas"][0]).card["extensions"]


def test_x3_another_users_export_never_touches_their_persona(hearth, me):
    pid = imported(me)
    owner_before = state(me)
    other = hearth.scope(hearth.users.create("second").id)
    exported = me.imports.card_png(pid)
    edited = card_png(changed(me.imports.card_json(pid)))
    first = other.imports.file(exported, "mira.png", on_match="update")
    assert first.status == "imported" and first.ids["personas"][0] != pid
    theirs = other.personas.get(first.ids["personas"][0])
    assert theirs.uuid != me.personas.get(pid).uuid
    # The owner's changed card in the other user's hands: their own copy is not it either.
    second = other.imports.file(edited, "mira-edited.png", on_match="update")
    assert second.status == "imported" and second.ids["personas"][0] not in (pid, theirs.id)
    assert state(me) == owner_before


# -- HTTP and CLI ------------------------------------------------------------------------------------
@pytest.fixture
def client(hearth):
    with TestClient(create_app(hearth.settings, hearth), base_url=BASE) as c:
        yield c


def test_x3_http_round_trip_is_a_duplicate_a_change_is_409_and_on_match_update_updates(client, me):
    pid = client.post("/api/imports?name=mira.png", content=samples.card_png(samples.card_v3())).json()["ids"][
        "personas"][0]
    exported = client.get(f"/api/exports/personas/{pid}/card").content
    again = client.post("/api/imports?name=mira-export.png", content=exported)
    assert again.status_code == 200 and again.json()["status"] == "duplicate"
    edited = json.dumps(changed(client.get(f"/api/exports/personas/{pid}/card?format=json").json()))
    before = state(me)
    asked = client.post("/api/imports?name=mira.json", content=edited)
    assert asked.status_code == 409, asked.text
    body = asked.json()
    assert body["error"] == "card_exists" and body["report"]["ids"] == {"existing": [pid]}
    assert state(me) == before
    streamed = client.post("/api/imports?name=mira.json", content=edited, headers={"Accept": "application/x-ndjson"})
    report = json.loads(streamed.text.strip().splitlines()[-1])
    assert report["status"] == "refused" and report["ids"] == {"existing": [pid]}
    assert client.post("/api/imports?name=mira.json&on_match=maybe", content=edited).status_code == 422
    updated = client.post("/api/imports?name=mira.json&on_match=update", content=edited)
    assert updated.status_code == 201 and updated.json()["status"] == "updated"
    assert [p["id"] for p in client.get("/api/personas").json()] == [pid]
    assert me.personas.get(pid).card["personality"] == "warmer since the storm"


def test_x3_cli_reimport_is_a_duplicate_and_update_is_opted_into_with_a_flag(tmp_path, hearth, me):
    home = str(hearth.settings.home)
    runner = CliRunner()
    card = tmp_path / "mira.png"
    card.write_bytes(samples.card_png(samples.card_v3()))
    assert runner.invoke(cli, ["--home", home, "import", str(card)]).exit_code == 0
    out = tmp_path / "export.png"
    assert runner.invoke(cli, ["--home", home, "persona", "export-card", "Mira-Vale", "-o", str(out)]).exit_code == 0
    again = runner.invoke(cli, ["--home", home, "import", str(out)])
    assert again.exit_code == 0 and "export.png (card): duplicate" in again.output
    pid = me.personas.by_name("Mira-Vale").id
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(changed(me.imports.card_json(pid))))
    before = state(me)
    asked = runner.invoke(cli, ["--home", home, "import", str(edited)])
    assert asked.exit_code == 2 and "already here" in asked.output and "--update" in asked.output
    assert state(me) == before
    both = runner.invoke(cli, ["--home", home, "import", "--update", "--as-new", str(edited)])
    assert both.exit_code == 2 and state(me) == before
    updated = runner.invoke(cli, ["--home", home, "import", "--update", str(edited)])
    assert updated.exit_code == 0 and "edited.json (card): updated" in updated.output, updated.output
    assert [p.id for p in me.personas.list()] == [pid]
    assert me.personas.get(pid).card["personality"] == "warmer since the storm"


# -- avatar URLs (W3) --------------------------------------------------------------------------------
def test_w3_avatar_urls_carry_a_version_that_changes_with_the_image_and_are_cached(client, me, persona):
    assert client.get(f"/api/personas/{persona.id}").json()["avatar_version"] is None
    picture = io.BytesIO()
    Image.new("RGB", (8, 8), (10, 200, 10)).save(picture, "PNG")
    assert client.put(f"/api/personas/{persona.id}/avatar", content=picture.getvalue(),
                      headers={"Content-Type": "image/png"}).status_code == 204
    listed = {p["id"]: p["avatar_version"] for p in client.get("/api/personas").json()}
    tag = listed[persona.id]
    assert tag and client.get(f"/api/personas/{persona.id}").json()["avatar_version"] == tag
    pinned = client.get(f"/api/personas/{persona.id}/avatar?v={tag}")
    assert pinned.status_code == 200 and pinned.content == picture.getvalue()
    assert "immutable" in pinned.headers["cache-control"] and pinned.headers["etag"] == f'"{tag}"'
    bare = client.get(f"/api/personas/{persona.id}/avatar")
    assert bare.headers["cache-control"] == "private, no-cache"
    revalidated = client.get(f"/api/personas/{persona.id}/avatar", headers={"If-None-Match": f'"{tag}"'})
    assert revalidated.status_code == 304 and not revalidated.content
    Image.new("RGB", (8, 8), (200, 10, 10)).save(picture := io.BytesIO(), "PNG")
    client.put(f"/api/personas/{persona.id}/avatar", content=picture.getvalue(), headers={"Content-Type": "image/png"})
    newer = client.get(f"/api/personas/{persona.id}").json()["avatar_version"]
    assert newer != tag
    stale = client.get(f"/api/personas/{persona.id}/avatar?v={tag}")
    assert stale.content == picture.getvalue() and stale.headers["cache-control"] == "private, no-cache"
    assert client.get(f"/api/personas/{persona.id}/avatar", headers={"If-None-Match": f'"{tag}"'}).status_code == 200


@pytest.mark.sqlite_only
def test_x3_migration_23_gives_existing_personas_a_uuid_sqlite(tmp_path, monkeypatch):
    path = tmp_path / "old.db"
    older = [m for m in migrations.MIGRATIONS if migrations.number(m) < 23]
    with monkeypatch.context() as patch:
        patch.setattr(migrations, "MIGRATIONS", older)
        patch.setattr(migrations, "LATEST_VERSION", max(migrations.number(m) for m in older))
        Store(path).close()
    conn = sqlite3.connect(path)
    conn.execute("INSERT INTO users (name, is_owner, created_at) VALUES ('owner', 1, '2026-01-01T00:00:00.000000Z')")
    for name in ("one", "two"):
        conn.execute("INSERT INTO personas (user_id, name, display_name, user_label, assistant_label, created_at,"
                     " updated_at) VALUES (1, ?, ?, 'User said:', 'A said:', '2026-01-01', '2026-01-01')", (name, name))
    conn.commit()
    conn.close()
    store = Store(path)
    uuids = [r[0] for r in store.connection().execute("SELECT uuid FROM personas ORDER BY id")]
    assert len(set(uuids)) == 2 and all(len(u) == 32 and int(u, 16) >= 0 for u in uuids)
