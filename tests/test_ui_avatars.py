"""Persona avatars in headless Chromium (W3, W6): each reply's bubble, the thread list and the persona
pickers show the persona's image (or its initial), a long thread list fetches each image once, the
import panel asks before a changed card updates its persona (X3), and axe-core finds nothing."""

from __future__ import annotations

import io
import json

import pytest
from PIL import Image

from tests import samples
from tests.test_ui import AXE, UI_TIMEOUT_MS, axe_violations, browser, expect, goto, page, site  # noqa: F401  (shared fixtures)

pytestmark = pytest.mark.ui


def picture(colour) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (16, 16), colour).save(out, "PNG")
    return out.getvalue()


@pytest.fixture(scope="module")
def scene(site):  # noqa: F811
    """Elion with an avatar and a reply, Sage without one, and enough threads to page the list."""
    base, hearth, _ = site
    me = hearth.scope()
    elion, sage = me.personas.by_name("elion"), me.personas.by_name("sage")
    me.personas.set_avatar(elion.id, picture((90, 140, 200)), "image/png")
    for n in range(70):
        me.conversations.create(elion.id, title=f"Older thread {n:02d}")
    quiet = me.conversations.create(sage.id, title="Sage's thread")
    chat = me.conversations.create(elion.id, title="Avatar check")
    me.send(chat.id, "Hello there")
    return {"base": base, "me": me, "elion": elion, "sage": sage, "chat": chat, "quiet": quiet}


def test_w3_avatars_show_in_reply_bubbles_the_thread_list_and_the_persona_pickers(page, scene):  # noqa: F811
    base, elion, chat, quiet = scene["base"], scene["elion"], scene["chat"], scene["quiet"]
    tag = scene["me"].personas.avatar_versions()[elion.id]
    fetched: list[str] = []
    page.on("request", lambda r: fetched.append(r.url) if "/api/personas/" in r.url and "/avatar" in r.url else None)
    goto(page, base + f"/#conversation-{chat.id}")
    # The reply's bubble: the image beside the name, as decoration (the name is written there).
    bubble = page.locator(".message.role-assistant .who").last
    expect(bubble).to_have_text("Elion")
    image = bubble.locator("img.persona-avatar")
    expect(image).to_have_attribute("alt", "")
    expect(image).to_have_attribute("src", f"/api/personas/{elion.id}/avatar?v={tag}")
    expect(image).to_have_js_property("naturalWidth", 16)
    assert page.locator(".message.role-user .persona-avatar").count() == 0
    # The thread list: the row names its persona through the avatar, image or initial.
    row = page.locator(f'#conversation-list .conversation[data-id="{chat.id}"]')
    expect(row.locator("img.persona-avatar")).to_have_attribute("alt", "Elion")
    expect(row.locator("img.persona-avatar")).to_have_js_property("naturalWidth", 16)
    initial = page.locator(f'#conversation-list .conversation[data-id="{quiet.id}"] .persona-avatar.initial')
    expect(initial).to_have_attribute("role", "img")
    expect(initial).to_have_attribute("aria-label", "Sage")
    assert initial.evaluate("n => getComputedStyle(n, '::before').content") == '"S"'
    expect(page.locator(f'#conversation-list .conversation[data-id="{quiet.id}"] .conversation-title')).to_have_text(
        "Sage's thread")
    # Every row of Elion's shows the same cacheable URL: fetched once, not once per row.
    page.get_by_role("button", name="Show more", exact=False).first.click()
    expect(page.locator("#conversation-list .conversation")).to_have_count(72)
    page.locator("#conversation-list .conversation").last.scroll_into_view_if_needed()
    page.wait_for_timeout(300)
    assert page.locator("#conversation-list img.persona-avatar").count() == 71
    assert set(fetched) == {f"{base}/api/personas/{elion.id}/avatar?v={tag}"} and len(fetched) == 1, fetched
    # The New Chat picker shows the chosen persona's avatar.
    picker = page.locator("#persona-field .persona-avatar")
    page.select_option("#persona-select", str(scene["sage"].id))
    expect(picker).to_have_class("persona-avatar initial small")
    page.select_option("#persona-select", str(elion.id))
    expect(page.locator("#persona-field img.persona-avatar")).to_have_js_property("naturalWidth", 16)
    # The persona list of the Personas panel.
    goto(page, base + "/#personas")
    expect(page.locator(".persona-pick", has_text="Elion").locator("img.persona-avatar")).to_have_js_property(
        "naturalWidth", 16)
    expect(page.locator(".persona-pick", has_text="Sage").locator(".persona-avatar.initial")).to_be_attached()
    page.locator(".persona-pick", has_text="Sage").click()
    expect(page.locator("#persona-avatar-slot .persona-avatar.initial.large")).to_be_attached()


def test_x3_the_import_panel_asks_before_a_changed_card_updates_its_persona(page, scene, tmp_path):  # noqa: F811
    base, me = scene["base"], scene["me"]
    report = me.imports.file(samples.card_png(samples.card_v3("Ada Quill", book=False)), "ada.png")
    ada = report.ids["personas"][0]
    card = me.imports.card_json(ada)
    card["data"]["personality"] = "bolder now"
    edited = tmp_path / "ada.json"
    edited.write_text(json.dumps(card))
    goto(page, base + "/#tools")
    page.set_input_files("#import-files", [str(edited)])
    page.click("#import-run")
    expect(page.locator("#import-status")).to_have_text("Done. 1 character is already here: choose below.")
    row = page.locator("#import-report tbody tr").last
    expect(row).to_contain_text("already here")
    expect(row).to_contain_text("This character is already here as Ada Quill")
    assert me.personas.get(ada).card["personality"] != "bolder now"
    row.get_by_role("button", name="Update it").click()
    expect(row.locator("td").nth(2)).to_have_text("updated")
    expect(row.locator("td").nth(2)).to_be_focused()
    assert me.personas.get(ada).card["personality"] == "bolder now"
    assert [p.id for p in me.personas.list() if p.display_name == "Ada Quill"] == [ada]


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_w6_axe_finds_no_violation_with_avatars_and_the_import_question(browser, scene, scheme, tmp_path):  # noqa: F811
    if not AXE.exists():
        pytest.skip("axe-core is not installed (make dev runs npm ci)")
    base, me = scene["base"], scene["me"]
    report = me.imports.file(samples.card_png(samples.card_v3(f"Wren {scheme}", book=False)), "wren.png")
    card = me.imports.card_json(report.ids["personas"][0])
    card["data"]["scenario"] = "Changed."
    edited = tmp_path / "wren.json"
    edited.write_text(json.dumps(card))
    found = {}
    for width, height in ((1280, 800), (390, 844)):
        context = browser.new_context(viewport={"width": width, "height": height}, color_scheme=scheme, bypass_csp=True)
        page = context.new_page()  # noqa: F811
        page.set_default_timeout(UI_TIMEOUT_MS)
        try:
            goto(page, base + f"/#conversation-{scene['chat'].id}")
            expect(page.locator(".message.role-assistant img.persona-avatar").last).to_have_js_property("naturalWidth", 16)
            if width == 390:
                page.get_by_role("button", name="Threads").click()
            found[f"chat {width}"] = axe_violations(page)
            goto(page, base + "/#personas")
            expect(page.locator(".persona-pick img.persona-avatar").first).to_be_visible()
            found[f"personas {width}"] = axe_violations(page)
            goto(page, base + "/#tools")
            page.set_input_files("#import-files", [str(edited)])
            page.click("#import-run")
            expect(page.locator("#import-report tbody tr").last).to_contain_text("already here")
            found[f"import question {width}"] = axe_violations(page)
        finally:
            context.close()
    found = {k: v for k, v in found.items() if v}
    assert found == {}, json.dumps(found, indent=1)
