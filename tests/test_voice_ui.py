"""Voice in the web UI (E9): headless Chromium with a fake microphone talks through the server to a
local realtime speech server; the live transcript shows and both sides are kept in the thread."""

from __future__ import annotations

import pytest

from hearth import Hearth, Settings
from hearth.server import create_app
from tests.conftest import RecordingProvider
from tests.fakes.realtime_server import FakeRealtime
from tests.test_server import serve_in_thread
from tests.test_ui import ARGS, CHROMIUM, UI_TIMEOUT_MS

pytestmark = pytest.mark.ui
FAKE_MIC = ["--use-fake-device-for-media-stream", "--use-fake-ui-for-media-stream",
            "--autoplay-policy=no-user-gesture-required"]


def test_e9_the_microphone_button_holds_a_voice_session_in_the_open_thread(tmp_path):
    if CHROMIUM is None:
        pytest.skip("chromium is not installed (apt-get install chromium)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")
    realtime = FakeRealtime(turn_bytes=24_000).start()  # half a second of the fake microphone's tone
    settings = Settings.resolve({"home": str(tmp_path / "home"), "input_token_limit": 32_000,
                                 "openai_api_key": "sk-server-only", "realtime_url": realtime.url}, environ={})
    hearth = Hearth(settings, provider=RecordingProvider())
    try:
        me = hearth.scope()
        elion = me.personas.create("elion", "Elion")
        chat = me.new_chat(elion.id).conversation
        me.send(chat.id, "Talk to you on the way home.")
        with serve_in_thread(create_app(settings, hearth)) as base, sync_api.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS + FAKE_MIC, headless=True)
            context = browser.new_context()
            context.grant_permissions(["microphone"], origin=base)
            page = context.new_page()
            page.set_default_timeout(UI_TIMEOUT_MS)
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(f"{base}/#conversation-{chat.id}")
            sync_api.expect(page.locator("#composer-text")).to_be_enabled(timeout=UI_TIMEOUT_MS)
            page.click("#voice-start")
            transcript = page.locator("#voice-transcript")
            sync_api.expect(transcript).to_contain_text("I'm walking home now", timeout=UI_TIMEOUT_MS)
            sync_api.expect(transcript).to_contain_text("Walk safe, I'm here.", timeout=UI_TIMEOUT_MS)
            page.click("#voice-end")
            sync_api.expect(page.locator("#voice-start")).to_be_visible(timeout=UI_TIMEOUT_MS)
            sync_api.expect(page.locator("#messages")).to_contain_text("Walk safe, I'm here.", timeout=UI_TIMEOUT_MS)
            assert "sk-server-only" not in page.content()
            browser.close()
            assert errors == []
        [update] = realtime.of("session.update")
        assert update["session"]["truncation"] == {"type": "retention_ratio", "retention_ratio": 0.8}
        assert sum(1 for e in realtime.events if e["type"] == "input_audio_buffer.append") >= 1
        kept = [(m.role, m.channel) for m in me.conversations.messages(chat.id) if m.kind == "chat"]
        assert kept[2:] == [("user", "voice"), ("assistant", "voice")]
    finally:
        hearth.close()
        realtime.stop()
