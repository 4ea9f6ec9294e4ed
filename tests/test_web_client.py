"""The daily client's server and library side (W1-W7): front-end files, alternatives, personas, titles."""

from __future__ import annotations

import httpx

from hearth import Hearth, Settings
from hearth.server import create_app
from tests.test_server import serve_in_thread


def test_w1_missing_front_end_packages_answer_a_clear_503(tmp_path):
    settings = Settings.resolve({"home": str(tmp_path / "home"), "web_vendor_dir": str(tmp_path / "nothing")},
                                environ={})
    with Hearth(settings) as hearth, serve_in_thread(create_app(settings, hearth)) as base:
        page = httpx.get(base + "/")
        assert page.status_code == 503
        assert "front-end packages are missing" in page.text and "npm ci" in page.text
        assert httpx.get(base + "/api/personas").status_code == 200  # the API still answers
