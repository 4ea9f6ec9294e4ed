"""The first run, Settings and Accounts in the web page (W10), at 1366 x 860 and 390 x 844 in
headless Chromium, each screen checked by axe-core.

A new person goes from the welcome to a real reply without a terminal: their name, a companion, a
model connected through the page (the fake OpenAI-compatible provider on 127.0.0.1, listed and
tested through the official SDK) and the first message answered by it. Settings changes the
connection of a running server and the next message uses it; the owner's Accounts page adds a
person, turns them off, and issues and revokes a token.
"""

from __future__ import annotations

import json

import pytest

from hearth import Hearth, Settings
from tests.test_ui import browser, check_axe, expect, no_sideways_scroll, ready, serve  # noqa: F401
from tests.test_ui_threads import sized  # noqa: F401  (the page at 1366 x 860 and 390 x 844)

pytestmark = pytest.mark.ui

KEY = "sk-local-w10FirstRunKey4321"
CARD = {"spec": "chara_card_v2", "spec_version": "2.0",
        "data": {"name": "Mira", "description": "A lighthouse keeper who keeps a log of every ship.",
                 "first_mes": "The lamp is lit, {{user}}. Come in out of the wind."}}
SHOTS = "/tmp"


def fresh(tmp_path) -> Hearth:
    return Hearth(Settings.resolve({"home": str(tmp_path / "home"), "input_token_limit": 32_000}, environ={}))


def go(page, size, name):
    """Open a panel from the main menu (folded behind its button on a phone)."""
    if size == "phone":
        page.locator("#nav-toggle").click()
    page.locator("#main-nav-list").get_by_role("link", name=name).click()


def shot(page, name, size):
    page.screenshot(path=f"{SHOTS}/w10-{name}-{size}.png", full_page=False)


def connect_fake(form, fake, model):
    """Fill a connection form for the fake OpenAI-compatible server and pick ``model`` from its list."""
    form.get_by_text("Another server").click()
    form.get_by_label("Server address").fill(fake.openai_base_url)
    form.get_by_label("API key (if the server needs one)").fill(KEY)
    form.get_by_role("button", name="Show models").click()
    expect(form.locator(".connect-status")).to_contain_text("models found")
    form.get_by_label("Model", exact=True).select_option(model)


# -- the first run, ending in a real reply ---------------------------------------------------------------------
def test_w10_a_new_person_reaches_a_reply_from_the_connected_model_in_the_first_run(sized, tmp_path,  # noqa: F811
                                                                                   fake_provider_server):
    page, size = sized
    fake = fake_provider_server
    fake.models = ["llama3.1:8b", "qwen2.5:7b", "nomic-embed-text"]
    card = tmp_path / "mira.json"
    card.write_text(json.dumps(CARD))
    with fresh(tmp_path) as hearth, serve(hearth) as base:
        me = hearth.scope()
        found: dict = {}
        ready(page, base + "/")
        welcome = page.locator("#welcome")
        expect(welcome).to_be_visible()
        expect(welcome.locator(".welcome-progress")).to_have_text("Step 1 of 3")
        check_axe(page, f"name {size}", found)
        welcome.get_by_role("button", name="Continue").click()
        expect(page.locator("#welcome-status")).to_have_attribute("data-kind", "error")  # a name is asked for
        welcome.get_by_label("Your name").fill("Ada")
        welcome.get_by_role("button", name="Continue").click()
        expect(welcome.locator(".welcome-progress")).to_have_text("Step 2 of 3")
        assert hearth.users.owner().display_name == "Ada"
        welcome.get_by_label("Card file").set_input_files(str(card))
        welcome.get_by_role("button", name="Import and continue").click()
        expect(welcome.locator(".welcome-progress")).to_have_text("Step 3 of 3")
        connect = page.locator("#welcome-connect")
        expect(connect.get_by_role("heading", name="Connect a model")).to_be_focused()
        expect(connect.get_by_text("Offline for now")).to_be_visible()  # offline is an explicit choice
        connect_fake(connect, fake, "qwen2.5:7b")
        assert "nomic-embed-text" not in connect.get_by_label("Model", exact=True).inner_text()
        fake.script(text=["Hello", " Ada, the connection works."])
        connect.get_by_role("button", name="Test connection").click()
        expect(connect.locator(".connect-status")).to_contain_text("It works")
        expect(connect.locator(".connect-status")).to_contain_text("Hello Ada, the connection works.")
        assert no_sideways_scroll(page)
        check_axe(page, f"connect {size}", found)
        shot(page, "first-run-connect", size)
        page.evaluate("document.documentElement.dataset.theme = 'dark'")
        check_axe(page, f"connect dark {size}", found)
        shot(page, "first-run-connect-dark", size)
        connect.get_by_role("button", name="Save and start chatting").click()
        expect(welcome).to_be_hidden()
        # The card greets the person by the name they gave, and their messages carry it.
        expect(page.locator(".message.role-assistant .body").first).to_have_text(
            "The lamp is lit, Ada. Come in out of the wind.")
        fake.script(text=["Evening, Ada.", " The kettle is on."])
        page.locator("#composer-text").fill("Hello Mira, is anyone there?")
        page.locator("#composer-text").press("Enter")
        expect(page.locator(".message.role-assistant .body").last).to_have_text("Evening, Ada. The kettle is on.")
        expect(page.locator(".message.role-user .who").last).to_have_text("Ada")
        sent = [r for r in fake.requests if r.path == "/v1/chat/completions"]
        assert sent[-1].body["model"] == "qwen2.5:7b" and sent[-1].headers["authorization"] == f"Bearer {KEY}"
        assert KEY not in page.content()
        shot(page, "first-reply", size)
        check_axe(page, f"first reply {size}", found)
        assert [p.display_name for p in me.personas.list()] == ["Mira"]
        assert found == {}, json.dumps(found, indent=1)


def test_w10_offline_is_an_explicit_first_run_choice(sized, tmp_path):  # noqa: F811
    page, size = sized
    with fresh(tmp_path) as hearth, serve(hearth) as base:
        ready(page, base + "/")
        welcome = page.locator("#welcome")
        welcome.get_by_label("Your name").fill("Sam")
        welcome.get_by_role("button", name="Continue").click()
        welcome.get_by_label("Name", exact=True).fill("Juniper")
        welcome.get_by_role("button", name="Create and continue").click()
        connect = page.locator("#welcome-connect")
        connect.get_by_text("Offline for now").click()
        expect(connect.get_by_label("API key", exact=True)).to_be_hidden()
        connect.get_by_role("button", name="Save and start chatting").click()
        expect(welcome).to_be_hidden()
        expect(page.locator("#composer-text")).to_be_enabled()
        page.locator("#composer-text").fill("Hello?")
        page.locator("#composer-text").press("Enter")
        expect(page.locator(".message.role-assistant .body").last).not_to_be_empty()
        row = hearth.store.connection().execute("SELECT provider FROM model_connections").fetchone()
        assert row[0] == "offline"


# -- Settings: a change takes effect without a restart ---------------------------------------------------------
def test_w10_settings_changes_the_connection_and_the_next_message_uses_it(sized, tmp_path,  # noqa: F811
                                                                        fake_provider_server):
    page, size = sized
    fake = fake_provider_server
    fake.models = ["small-model", "large-model"]
    with fresh(tmp_path) as hearth, serve(hearth) as base:
        me = hearth.scope()
        persona = me.personas.default()
        chat = me.new_chat(persona.id, continue_=False).conversation
        ready(page, base + f"/#conversation-{chat.id}")
        page.locator("#composer-text").fill("Before")
        page.locator("#composer-text").press("Enter")
        expect(page.locator(".message.role-assistant")).to_have_count(1)
        assert not [r for r in fake.requests if r.path == "/v1/chat/completions"]  # offline answered
        go(page, size, "Settings")
        settings = page.locator("#view-settings")
        expect(settings.get_by_role("heading", name="Settings", exact=True)).to_be_visible()
        expect(settings.locator(".connect-summary")).to_contain_text("No model is connected yet")
        settings.get_by_label("What your companions call you").fill("Robin")
        settings.get_by_role("button", name="Save name").click()
        expect(settings.get_by_text("Saved: your companions call you Robin.")).to_be_visible()
        connect_fake(settings, fake, "large-model")
        settings.get_by_role("button", name="Save connection").click()
        expect(settings.locator(".connect-status")).to_have_text("Saved. Your next message uses it.")
        expect(settings.locator(".connect-summary")).to_contain_text("Another server (large-model)")
        expect(settings.get_by_text("A key is saved (sk-…4321)")).to_be_visible()
        assert KEY not in page.content()
        assert no_sideways_scroll(page)
        found: dict = {}
        check_axe(page, f"settings {size}", found)
        shot(page, "settings", size)
        page.evaluate("document.documentElement.dataset.theme = 'dark'")
        check_axe(page, f"settings dark {size}", found)
        shot(page, "settings-dark", size)
        page.evaluate("document.documentElement.dataset.theme = 'light'")
        go(page, size, "Chat")
        fake.script(text=["Now from", " the large model."])
        page.locator("#composer-text").fill("After")
        page.locator("#composer-text").press("Enter")
        expect(page.locator(".message.role-assistant .body").last).to_have_text("Now from the large model.")
        expect(page.locator(".message.role-user .who").last).to_have_text("Robin")
        sent = [r for r in fake.requests if r.path == "/v1/chat/completions"]
        assert len(sent) == 1 and sent[0].body["model"] == "large-model"
        assert found == {}, json.dumps(found, indent=1)


def test_w10_settings_says_when_the_environment_chooses(sized, tmp_path):  # noqa: F811
    page, size = sized
    settings = Settings.resolve({"home": str(tmp_path / "home")}, environ={"HEARTH_PROVIDER": "offline"})
    with Hearth(settings) as hearth, serve(hearth) as base:
        ready(page, base + "/#settings")
        expect(page.locator("#view-settings .connect-summary")).to_contain_text(
            "chosen by this server's settings (HEARTH_PROVIDER)")


# -- the owner's Accounts page --------------------------------------------------------------------------------------
def test_w10_the_owner_adds_turns_off_and_issues_tokens_on_the_accounts_page(sized, tmp_path):  # noqa: F811
    page, size = sized
    with fresh(tmp_path) as hearth, serve(hearth) as base:
        ready(page, base + "/")
        go(page, size, "Accounts")
        accounts = page.locator("#view-accounts")
        expect(accounts.get_by_role("heading", name="Accounts", exact=True)).to_be_visible()
        expect(accounts.get_by_role("heading", name="Your password")).to_be_visible()  # open until one is set
        accounts.get_by_label("Log-in name").fill("sam")
        accounts.get_by_label("Password (8 characters or more)", exact=True).fill("correct horse battery")
        accounts.get_by_role("button", name="Add", exact=True).click()
        expect(accounts.get_by_text("sam can now log in with that password.")).to_be_visible()
        sam = accounts.locator('[data-account="sam"]')
        expect(sam).to_be_visible()
        sam.get_by_role("button", name="Turn off sam").click()
        expect(sam).to_contain_text("turned off")
        assert hearth.users.by_name("sam").disabled
        sam = accounts.locator('[data-account="sam"]')
        sam.get_by_text("API tokens (0)").click()
        sam.get_by_label("Name of the new token").fill("phone app")
        sam.get_by_role("button", name="Create token").click()
        secret = sam.locator(".accounts-secret")
        expect(secret).to_be_visible()
        token = secret.input_value()
        assert token.startswith("hth_") and hearth.users.token_user(token) is None  # sam is off
        sam.get_by_role("button", name="Turn on sam").click()
        sam = accounts.locator('[data-account="sam"]')
        expect(sam).not_to_contain_text("turned off")
        assert hearth.users.token_user(token) == hearth.users.by_name("sam").id
        sam.get_by_text("API tokens (1)").click()
        expect(sam.get_by_text("phone app")).to_be_visible()
        assert token not in sam.inner_text()  # listed by name only, never the secret again
        found: dict = {}
        check_axe(page, f"accounts {size}", found)
        assert no_sideways_scroll(page)
        shot(page, "accounts", size)
        page.evaluate("document.documentElement.dataset.theme = 'dark'")
        check_axe(page, f"accounts dark {size}", found)
        shot(page, "accounts-dark", size)
        sam.get_by_role("button", name="Revoke phone app").click()
        sam.get_by_role("button", name="Revoke now").click()
        expect(sam.get_by_text("Token “phone app” revoked")).to_be_visible()
        assert hearth.users.token_user(token) is None
        assert found == {}, json.dumps(found, indent=1)


def test_w10_accounts_is_the_owners_only(sized, tmp_path):  # noqa: F811
    page, size = sized
    with fresh(tmp_path) as hearth:
        hearth.users.set_password(hearth.users.owner().id, "owner password here")
        hearth.users.create("sam", "correct horse battery")
        with serve(hearth) as base:
            page.goto(base + "/login")
            page.get_by_label("User name").fill("sam")
            page.get_by_label("Password").fill("correct horse battery")
            page.get_by_role("button", name="Log in").click()
            page.wait_for_selector("body[data-ready=true]")
            if size == "phone":
                page.locator("#nav-toggle").click()
            expect(page.locator("#main-nav-list").get_by_role("link", name="Settings")).to_be_visible()
            expect(page.locator("#nav-accounts")).to_be_hidden()
            status = page.evaluate("fetch('/api/admin/users').then(r => r.status)")
            assert status == 403
