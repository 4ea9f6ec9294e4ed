"""Startup resume (E4): the most recently active open conversation, its recent turns rebuilt from
the ledger, the latest capsule and the open span, across a real process restart (kill -9)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time

import httpx

from hearth import Hearth, Settings


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_e4_resume_picks_the_latest_open_conversation_with_its_capsule_and_span(me, hearth, persona):
    assert hearth.resume().conversation is None
    older = me.conversations.create(persona.id, title="Older")
    me.send(older.id, "An older thread")
    latest = me.conversations.create(persona.id, title="Latest")
    texts = ("My cat is called Luna.", "She likes boxes.", "Good night!", "Morning again.", "Tea?")
    for text in texts:  # ten turns: more than the eight a capsule leaves verbatim
        me.send(latest.id, text)
    capsule = me.timeline.refresh_capsule(latest.id)
    resumed = hearth.resume()
    assert resumed.conversation.id == latest.id
    assert [t.content for t in resumed.turns if t.role == "user"] == list(texts)
    assert resumed.capsule.id == capsule.id
    assert resumed.span.id == me.timeline.open_spans()[0].id and resumed.span.open
    me.conversations.end(latest.id)  # an ended conversation is not resumed
    assert hearth.resume().conversation.id == older.id
    guest = hearth.users.create("guest")
    assert hearth.resume(guest.id).conversation is None  # one user's state never reaches another


def start_server(home, port, env):
    process = subprocess.Popen([sys.executable, "-m", "hearth", "serve", "--port", str(port)], env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    lines = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = process.stderr.readline().decode()
        lines.append(line)
        if "listening" in line or not line:
            break
    while time.monotonic() < deadline:
        try:
            httpx.get(f"http://127.0.0.1:{port}/api/timeline/resume", timeout=2)
            return process, lines
        except httpx.TransportError:
            time.sleep(0.1)
    process.kill()
    raise AssertionError("server did not start: " + "".join(lines))


def send(base, conversation_id, text):
    with httpx.stream("POST", f"{base}/api/conversations/{conversation_id}/messages", json={"text": text},
                      timeout=30) as response:
        assert response.status_code == 200
        body = "".join(response.iter_text())
    assert "event: done" in body


TITLE = "Marisol's lighthouse letters"  # the person's words: no log line may carry them


def test_e4_serve_resumes_the_conversation_capsule_and_span_across_a_kill_9_restart_and_logs_no_title(tmp_path):
    """The resume line and everything else both servers write hold numbers only, never the title."""
    home = tmp_path / "home"
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")} | {
        "HEARTH_HOME": str(home), "HEARTH_CAPSULE_RECENT_TURNS": "2"}
    for key in ("HEARTH_PROVIDER", "HEARTH_BASE_URL", "HEARTH_MODEL"):
        env.pop(key, None)
    with Hearth(Settings.resolve({"home": str(home), "capsule_recent_turns": 2}, environ={})) as hearth:
        me = hearth.scope()
        persona = me.personas.create("elion", "Elion")
        me.send(me.conversations.create(persona.id, title="Other").id, "Elsewhere")
        chat = me.conversations.create(persona.id, title=TITLE)
        for text in ("My cat is called Luna.", "She likes boxes.", "Good night!"):
            me.send(chat.id, text)
        capsule = me.timeline.refresh_capsule(chat.id)

    port = free_port()
    base = f"http://127.0.0.1:{port}"
    first, lines = start_server(home, port, env)
    try:
        assert any(f"Resuming conversation {chat.id}:" in line and f"capsule {capsule.id}" in line
                   for line in lines), lines
        send(base, chat.id, "Sent to the first server")
        before = httpx.get(f"{base}/api/timeline/resume").json()
    finally:
        os.kill(first.pid, signal.SIGKILL)
        first.wait(timeout=10)
    output = "".join(lines) + rest(first)
    span_id = before["span"]["id"]
    assert before["conversation"]["id"] == chat.id and before["capsule"]["id"] == capsule.id

    second, lines = start_server(home, port, env)
    try:
        assert any(f"Resuming conversation {chat.id}: 8 recent turns, capsule {capsule.id}, "
                   f"open span {span_id}." in line for line in lines), lines
        after = httpx.get(f"{base}/api/timeline/resume").json()
        assert after == before  # rebuilt from the ledger: same turns, capsule and span
        assert after["turns"][-2]["content"] == "Sent to the first server"
        send(base, chat.id, "And to the second")
        newest = httpx.get(f"{base}/api/timeline", params={"limit": 5}).json()["events"]
        turns = [e for e in newest if e["message"] and "content" in e["message"]]
        assert turns and {e["span_id"] for e in turns} == {span_id}  # the span goes on
    finally:
        second.terminate()
        second.wait(timeout=10)
    output += "".join(lines) + rest(second)
    assert "Resuming conversation" in output
    for words in (TITLE, "lighthouse", "Luna", "Sent to the first server", "And to the second"):
        assert words.lower() not in output.lower(), output


def rest(process) -> str:
    """What a finished server wrote after its start lines, on both streams."""
    return process.stderr.read().decode() + process.stdout.read().decode()
