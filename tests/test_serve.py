"""`hearth serve` as a real process: it opens its port, then reconciles legacy prompts (P7)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

import httpx

from hearth import Hearth, Settings
from hearth.prompt import reconcile
from hearth.prompt.static import POLICY_VERSION


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_p7_serve_reconciles_legacy_prompts_after_opening_its_port(tmp_path):
    home = tmp_path / "home"
    with Hearth(Settings.resolve({"home": str(home)}, environ={})) as hearth:
        me = hearth.scope()
        persona = me.personas.create("p")
        conversation = me.conversations.create(persona.id)
        me.send(conversation.id, "hello")
        with hearth.store.write() as conn:
            row = conn.execute("SELECT id, metadata FROM messages WHERE kind = 'static_prompt'").fetchone()
            meta = json.loads(row[1]) | {"policy_version": POLICY_VERSION - 1}
            conn.execute("UPDATE messages SET content = 'OLD', metadata = ? WHERE id = ?", (json.dumps(meta), row[0]))
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")} | {"HEARTH_HOME": str(home)}
    process = subprocess.Popen([sys.executable, "-m", "hearth", "serve", "--port", str(port)], env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120  # a cold start on a loaded machine takes tens of seconds
        completed = False
        while time.monotonic() < deadline and not completed:
            time.sleep(0.2)
            try:
                httpx.get(f"http://127.0.0.1:{port}/openapi.json", timeout=2)
            except httpx.TransportError:
                continue
            with Hearth(Settings.resolve({"home": str(home)}, environ={})) as check:
                completed = reconcile.state(check.store.connection()).get("completed_policy_version") == POLICY_VERSION
        assert completed, process.stderr.read1().decode() if process.poll() is not None else "not reconciled"
        with Hearth(Settings.resolve({"home": str(home)}, environ={})) as check:
            assert check.scope().stored_prompt(conversation.id) != "OLD"
    finally:
        process.terminate()
        process.wait(timeout=10)


def _serve(home, port: int, extra_env: dict[str, str]) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and k != "FORWARDED_ALLOW_IPS"}
    env |= {"HEARTH_HOME": str(home)} | extra_env
    process = subprocess.Popen([sys.executable, "-m", "hearth", "serve", "--port", str(port)], env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            httpx.get(f"http://127.0.0.1:{port}/login", timeout=2)
            return process
        except httpx.TransportError:
            if process.poll() is not None:
                raise AssertionError(process.stderr.read().decode()) from None
            time.sleep(0.2)
    process.terminate()
    raise AssertionError("hearth serve did not open its port")


def _rotating_logins(port: int, attempts: int) -> list[int]:
    # A new user name and a new X-Forwarded-For each time: only the per-address limit can trip.
    return [httpx.post(f"http://127.0.0.1:{port}/api/auth/login", timeout=30,
                       json={"name": f"nobody{i}", "password": "wrong"},
                       headers={"X-Forwarded-For": f"203.0.113.{i}"}).status_code for i in range(attempts)]


def test_u3_rotating_x_forwarded_for_resets_the_login_limit_only_behind_a_trusted_proxy(tmp_path):
    home = tmp_path / "home"
    with Hearth(Settings.resolve({"home": str(home)}, environ={})) as hearth:
        hearth.users.set_password(hearth.users.owner().id, "correct horse battery staple")
    for extra, expected in (({}, [401] * 5 + [429]),  # default: the header is not believed
                            ({"HEARTH_TRUSTED_PROXIES": "127.0.0.1"}, [401] * 6)):  # each address its own limit
        port = free_port()
        process = _serve(home, port, extra)
        try:
            assert _rotating_logins(port, 6) == expected, extra
        finally:
            process.terminate()
            process.wait(timeout=10)
