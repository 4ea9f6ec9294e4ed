"""Fragment books in headless Chromium (X3, F1): the Layers panel's scope control per book and the
Tools panel's choice of which book to download as a lorebook."""

from __future__ import annotations

import json

import httpx
import pytest

from tests import samples
from tests.test_lorebook_scope import HARBOUR, KETTLE, harbour_book, wren_card
from tests.test_ui import browser, eventually, expect, goto, page, site  # noqa: F401  (shared fixtures)

pytestmark = pytest.mark.ui


def test_x3_layers_panel_scopes_a_book_and_tools_downloads_one_book(site, page):  # noqa: F811
    base, hearth, _ = site
    me = hearth.scope()
    wren = me.imports.file(samples.card_png(v2=wren_card()), "wren.png").ids["personas"][0]
    me.imports.file(json.dumps(harbour_book()).encode(), "harbour.json")
    sage = next(p for p in me.personas.list() if p.name == "sage")
    goto(page, base + "/#layers")
    page.click("#fragment-books-box summary")
    kitchen = page.locator('#fragment-books li[data-book="Wren\'s kitchen"]')
    harbour = page.locator('#fragment-books li[data-book="Harbour"]')
    expect(kitchen.locator("select")).to_have_value("character")
    expect(kitchen.locator("select option:checked")).to_have_text("Only Wren (its character)")
    expect(harbour.locator("select")).to_have_value("all")
    expect(harbour.locator("fieldset")).to_be_hidden()
    # Give the Harbour to Sage only.
    harbour.get_by_label("Who “Harbour” is for", exact=True).select_option("personas")
    expect(harbour.locator("fieldset")).to_be_visible()
    harbour.get_by_label("Sage").check()
    harbour.get_by_role("button", name="Save who “Harbour” is for").click()
    expect(page.locator("#layers-status")).to_contain_text("“Harbour” now fires for the chosen personas.")
    eventually(lambda: me.layers.fragments.books.get("Harbour").persona_ids == (sage.id,))
    expect(page.locator('#fragment-books li[data-book="Harbour"] select')).to_have_value("personas")
    assert {f.definition for f, _ in me.layers.fragments.match("kettle harbour", persona_id=wren)} == {KETTLE}
    assert {f.definition for f, _ in me.layers.fragments.match("kettle harbour", persona_id=sage.id)} == {HARBOUR}
    # Tools: the lorebook download is one book, chosen by name, with its scope recorded.
    goto(page, base + "/#tools")
    expect(page.locator("#export-book option")).to_have_count(3)
    assert page.get_attribute("#export-lorebook", "href") == "/api/exports/lorebook"
    page.select_option("#export-book", "Harbour")
    href = page.get_attribute("#export-lorebook", "href")
    assert href == "/api/exports/lorebook?book=Harbour"
    lorebook = httpx.get(base + href).json()
    assert [e["content"] for e in lorebook["entries"].values()] == [HARBOUR]
    assert lorebook["extensions"]["hearth"] == {"scope": "personas", "personas": ["sage"]}
