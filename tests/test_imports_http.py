"""HTTP imports and exports (X3, X4, S8): per-file reports, binary uploads with their own limit,
streamed progress, refusals as {error, detail, report}, card and lorebook downloads, scoping."""

from __future__ import annotations

import json

import httpx
import pytest
from fastapi.testclient import TestClient

from hearth import Hearth, Settings
from hearth.server import create_app
from tests import samples
from tests.test_server import BASE, serve_in_thread


@pytest.fixture
def client(hearth):
    with TestClient(create_app(hearth.settings, hearth), base_url=BASE) as c:
        yield c


def test_x3_card_and_lorebook_upload_report_and_download(client, me):
    png = samples.card_png(samples.card_v3())
    first = client.post("/api/imports?name=mira.png", content=png, headers={"Content-Type": "image/png"})
    assert first.status_code == 201, first.text
    report = first.json()
    assert report["status"] == "imported" and report["format"] == "card" and report["counts"]["personas"] == 1
    again = client.post("/api/imports?name=mira.png", content=png)
    assert again.status_code == 200 and again.json()["status"] == "duplicate"
    pid = report["ids"]["personas"][0]
    card = client.get(f"/api/exports/personas/{pid}/card")
    assert card.status_code == 200 and card.headers["content-type"] == "image/png"
    assert samples.png_chunks(card.content)["ccv3"]["data"]["name"] == "Mira Vale"
    assert client.get(f"/api/exports/personas/{pid}/card?format=json").json()["spec"] == "chara_card_v3"
    book = client.post("/api/imports?name=gull.json&format=lorebook", content=json.dumps(samples.lorebook()))
    assert book.status_code == 201 and book.json()["counts"] == {"imported": 12}
    exported = client.get("/api/exports/lorebook", params={"book": "Gull Rock Lore"}).json()
    assert len(exported["entries"]) == 12
    assert client.get("/api/exports/lorebook", params={"book": "No Such Book"}).status_code == 404


def test_x3_refused_uploads_answer_4xx_with_the_report_and_write_nothing(client, me, hearth):
    before = hearth.store.connection().execute("SELECT count(*) FROM personas").fetchone()[0]
    broken = client.post("/api/imports?name=bad.png", content=b"\x89PNG\r\n\x1a\n\x00\x01garbage")
    assert broken.status_code == 422
    body = broken.json()
    assert body["error"] == "import_refused" and "not a readable PNG" in body["detail"]
    assert body["report"]["status"] == "refused"
    assert hearth.store.connection().execute("SELECT count(*) FROM personas").fetchone()[0] == before
    assert client.post("/api/imports?name=x", content=b"").status_code == 422
    assert client.post("/api/imports?name=x&format=nope", content=b"x").status_code == 422
    assert client.post("/api/imports?name=x&persona_id=999", content=b"x").status_code == 404
    # Other API routes still refuse binary bodies.
    assert client.post("/api/personas", content=b"\xff\xfe").status_code == 400


def test_x4_import_limit_and_streamed_progress_over_a_real_server(tmp_path, persona):
    settings = Settings.resolve({"home": str(tmp_path / "h"), "max_import_bytes": 200_000}, environ={})
    hearth = Hearth(settings)
    try:
        with serve_in_thread(create_app(settings, hearth)) as base:
            with httpx.Client(base_url=base, timeout=30) as http:
                big = http.post("/api/imports?name=big.zip", content=b"PK\x03\x04" + b"\x00" * 300_000)
                assert big.status_code == 413 and big.json()["error"] == "too_large"
                hearth.scope().personas.create("elion", "Elion", user_label="AUMA said:")
                lines = []
                with http.stream("POST", "/api/imports?name=export.zip&mine=true", content=samples.chatgpt_zip(),
                                 headers={"Accept": "application/x-ndjson"}) as response:
                    assert response.status_code == 200
                    lines = [json.loads(line) for line in response.iter_lines() if line]
                assert [e["type"] for e in lines] == ["progress", "progress", "report"]
                assert lines[0] == {"type": "progress", "done": 0, "total": 1}
                assert lines[-1]["status"] == "imported" and lines[-1]["counts"]["proposals"] == 2
    finally:
        hearth.close()


def test_x3_another_users_persona_is_unknown(client, hearth, me):
    pid = me.imports.file(samples.card_png(samples.card_v3(book=False)), "m.png").ids["personas"][0]
    other = hearth.users.create("robin")
    token = hearth.users.create_token(other.id, "t")
    response = client.get(f"/api/exports/personas/{pid}/card", headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 404
