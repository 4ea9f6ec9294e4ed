"""Several Hearth processes on one PostgreSQL database (S10): real `hearth serve` and
`hearth worker` processes, each with its own home folder, sharing only the database."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from hearth import Hearth, Settings

pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _env(home: Path, url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")
           and k not in ("HEARTH_PROVIDER", "HEARTH_BASE_URL", "HEARTH_MODEL")}
    return env | {"HEARTH_HOME": str(home), "HEARTH_DATABASE_URL": url}


def _wait_up(port: int, process: subprocess.Popen) -> None:
    deadline = time.monotonic() + 180  # a cold start on a loaded machine takes tens of seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(process.stderr.read().decode() if process.stderr else "server exited")
        try:
            httpx.get(f"http://127.0.0.1:{port}/openapi.json", timeout=2)
            return
        except httpx.TransportError:
            time.sleep(0.3)
    raise AssertionError("server did not start")


def _send(port: int, token: str, conversation_id: int, text: str) -> None:
    with httpx.stream("POST", f"http://127.0.0.1:{port}/api/conversations/{conversation_id}/messages",
                      json={"text": text}, headers={"Authorization": f"Bearer {token}"}, timeout=120) as response:
        assert response.status_code == 200, response.read()
        for _ in response.iter_lines():
            pass


def test_s10_two_servers_and_two_workers_share_one_postgres_database(tmp_path, pg_url):
    setup = Hearth(Settings.resolve({"home": str(tmp_path / "setup"), "database_url": pg_url}, environ={}))
    me = setup.scope()
    persona = me.personas.create("elion", "Elion", user_label="U said:", assistant_label="E said:")
    conversations = [me.conversations.create(persona.id, f"Thread {i}").id for i in range(4)]
    token = setup.users.create_token(me.user_id, "scale-out test")
    setup.close()

    ports = [_free_port(), _free_port()]
    processes: list[subprocess.Popen] = []
    try:
        for n, port in enumerate(ports):
            processes.append(subprocess.Popen(
                [sys.executable, "-m", "hearth", "serve", "--port", str(port)],
                env=_env(tmp_path / f"server{n}", pg_url), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE))
        for n in range(2):
            processes.append(subprocess.Popen(
                [sys.executable, "-m", "hearth", "worker", "--poll", "0.2"],
                env=_env(tmp_path / f"worker{n}", pg_url), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        for port, process in zip(ports, processes):
            _wait_up(port, process)

        # Sends through both servers at once, to every conversation.
        sent: list[str] = []
        errors: list[BaseException] = []

        def sender(server: int) -> None:
            try:
                for i in range(6):
                    text = f"note {server}-{i} about the harbour"
                    _send(ports[server], token, conversations[(i + server) % len(conversations)], text)
                    sent.append(text)
            except BaseException as exc:  # noqa: BLE001  (reported by the assertion below)
                errors.append(exc)

        threads = [threading.Thread(target=sender, args=(s,)) for s in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(300)
        assert not errors, errors

        # Each server sees the other's writes on its next request.
        headers = {"Authorization": f"Bearer {token}"}
        seen = []
        for port in ports:
            texts = []
            for cid in conversations:
                body = httpx.get(f"http://127.0.0.1:{port}/api/conversations/{cid}/messages", headers=headers,
                                 timeout=30).json()
                texts += [m["content"] for m in body["messages"] if m["role"] == "user"]
            seen.append(sorted(texts))
        assert seen[0] == seen[1] == sorted(sent) and len(sent) == 12

        # The workers drain the queue between them; no job runs twice.
        deadline = time.monotonic() + 120
        check = Hearth(Settings.resolve({"home": str(tmp_path / "check"), "database_url": pg_url}, environ={}))
        try:
            conn = check.store.connection()
            while time.monotonic() < deadline:
                open_jobs = conn.execute("SELECT count(*) FROM jobs WHERE status IN ('pending', 'running')"
                                         " AND run_after <= ?", (_now(),)).fetchone()[0]
                if open_jobs == 0:
                    break
                time.sleep(0.5)
            # Work scheduled for later (an idle checkpoint) is not due yet; everything due ran once.
            jobs = conn.execute("SELECT id, kind, status, attempts FROM jobs WHERE run_after <= ?", (_now(),)).fetchall()
            assert jobs, "the sends enqueued background work"
            assert all(j["status"] == "done" and j["attempts"] == 1 for j in jobs), [dict(j) for j in jobs]
            # Every message is stored once, each user turn has exactly one reply, the ledger agrees.
            rows = conn.execute("SELECT content, count(*) AS n FROM messages WHERE role = 'user' AND kind = 'chat'"
                                " GROUP BY content").fetchall()
            assert sorted(r["content"] for r in rows) == sorted(sent) and all(r["n"] == 1 for r in rows)
            replies = conn.execute("SELECT count(*) FROM messages WHERE role = 'assistant' AND kind = 'chat'"
                                   ).fetchone()[0]
            assert replies == len(sent)
            doubled = conn.execute("SELECT span_id FROM events WHERE kind = 'checkpoint.created'"
                                   " GROUP BY span_id HAVING count(*) > 1").fetchall()
            assert doubled == []
            from hearth.records import ledger

            assert ledger.verify(conn).problems == []
            events = conn.execute("SELECT payload FROM events WHERE kind = 'message'").fetchall()
            assert all(isinstance(json.loads(e[0]), dict) for e in events)
        finally:
            check.close()
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _now() -> str:
    from hearth.store import utcnow

    return utcnow()
