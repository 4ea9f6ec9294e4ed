"""The Tools panel's import report (X3, X4) in headless Chromium: several files, streamed
progress, one row per file (imported, skipped as duplicate, refused and why)."""

from __future__ import annotations

import json

import httpx
import pytest

from tests import samples
from tests.test_ui import browser, expect, goto, page, site  # noqa: F401  (shared fixtures)

pytestmark = pytest.mark.ui


def test_x3_x4_tools_panel_imports_files_and_reports_each(site, page, tmp_path):  # noqa: F811
    base, hearth, _ = site
    card = tmp_path / "mira.png"
    card.write_bytes(samples.card_png(samples.card_v3()))
    lore = tmp_path / "gull.json"
    lore.write_text(json.dumps(samples.lorebook()))
    broken = tmp_path / "broken.png"
    broken.write_bytes(b"\x89PNG\r\n\x1a\nnot really")
    again = tmp_path / "mira-again.png"
    again.write_bytes(card.read_bytes())
    goto(page, base + "/#tools")
    expect(page.locator("#import-persona option")).to_have_count(3)
    page.set_input_files("#import-files", [str(card), str(lore), str(broken), str(again)])
    page.check("#import-mine")
    page.click("#import-run")
    expect(page.locator("#import-status")).to_have_text("Done; 1 file refused.")
    rows = page.locator("#import-report tbody tr")
    expect(rows).to_have_count(4)
    expect(rows.nth(0)).to_contain_text("mira.png")
    expect(rows.nth(0)).to_contain_text("imported")
    expect(rows.nth(0)).to_contain_text("1 persona, 3 lore entries")  # plurals agree (W9)
    expect(rows.nth(1)).to_contain_text("12 imported")
    expect(rows.nth(2)).to_contain_text("refused")
    expect(rows.nth(2)).to_contain_text("broken.png is not a readable PNG")
    expect(rows.nth(3)).to_contain_text("skipped (duplicate)")
    me = hearth.scope()
    mira = next(p for p in me.personas.list() if p.display_name == "Mira Vale")
    # Export: the persona list refreshes when the panel opens again; the card link follows the choice.
    goto(page, base + "/#chat")
    goto(page, base + "/#tools")
    expect(page.locator("#export-persona option")).to_have_count(3)
    page.select_option("#export-persona", str(mira.id))
    href = page.get_attribute("#export-card", "href")
    assert href == f"/api/exports/personas/{mira.id}/card"
    card = httpx.get(base + href)
    assert card.status_code == 200 and samples.png_chunks(card.content)["ccv3"]["data"]["name"] == "Mira Vale"
    lorebook = httpx.get(base + page.get_attribute("#export-lorebook", "href")).json()
    assert len(lorebook["entries"]) == 15
