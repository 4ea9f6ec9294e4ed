"""Resident memory of a server with a large deployment open and warmed.

    python benchmarks/footprint.py --deployment DIR [--sends 3]

Starts ``hearth serve`` as a subprocess with ``HEARTH_HOME`` pointing at a deployment made by
``generate.py``, on a free loopback port; warms it the way a person would (conversation list, the
active thread's messages, memories, a few sends with recall cues so the recall layers and the
vector index load); reads the process's resident memory (VmRSS, and its peak VmHWM) from
/proc/<pid>/status after each step; stops it. Target: <= 2 GB resident.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import machine, rss_mib  # noqa: E402

WARM_TEXTS = (
    "Do you remember what we said about the garden last spring?",
    "Earlier you said something about the harbour, what was it?",
    "What were we talking about in May 2023?",
    "I had tea with my sister today and we talked about the move.",
    "Good night, love you",
)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(client: httpx.Client, proc: subprocess.Popen, timeout: float) -> float:
    started = time.perf_counter()
    while time.perf_counter() - started < timeout:
        if proc.poll() is not None:
            raise SystemExit(f"hearth serve exited with code {proc.returncode}")
        try:
            if client.get("/api/auth/me").status_code == 200:
                return time.perf_counter() - started
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise SystemExit(f"hearth serve was not ready within {timeout:.0f} s")


def send(client: httpx.Client, conversation_id: int, text: str) -> tuple[float, bool]:
    """Seconds for one send over SSE, and whether it ended with a ``done`` event."""
    started = time.perf_counter()
    events = []
    try:
        with client.stream("POST", f"/api/conversations/{conversation_id}/messages", json={"text": text}) as response:
            response.raise_for_status()
            for line in response.iter_lines():
                if line.startswith("event:"):
                    events.append(line.split(":", 1)[1].strip())
    except httpx.TimeoutException:
        raise
    except httpx.HTTPError:
        return time.perf_counter() - started, False
    return time.perf_counter() - started, "done" in events


def run(args: argparse.Namespace) -> dict[str, Any]:
    home = Path(args.deployment).expanduser().resolve()
    manifest = json.loads((home / "bench.json").read_text())
    port = free_port()
    env = {**os.environ, "HEARTH_HOME": str(home)}
    proc = subprocess.Popen([sys.executable, "-m", "hearth", "serve", "--host", "127.0.0.1", "--port", str(port)],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    steps: list[dict[str, Any]] = []
    result: dict[str, Any] = {"machine": machine(), "pid": proc.pid, "completed": True}

    def reading(step: str, **extra: Any) -> None:
        steps.append({"step": step, **extra, **rss_mib(proc.pid)})

    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=args.timeout) as client:
            result["ready_s"] = round(wait_ready(client, proc, args.timeout), 2)
            reading("ready")
            active = manifest["active_conversation_id"]
            client.get("/api/conversations", params={"limit": 50}).raise_for_status()
            client.get(f"/api/conversations/{active}/messages", params={"limit": 200}).raise_for_status()
            client.get("/api/memories").raise_for_status()
            reading("lists read")
            for i in range(args.sends):
                try:
                    seconds, ok = send(client, active, WARM_TEXTS[i % len(WARM_TEXTS)])
                except httpx.TimeoutException:
                    # A send that outlives the timeout is itself a finding: record memory as it stands.
                    reading(f"send {i + 1}", seconds=args.timeout, ok=False, timed_out=True)
                    result["completed"] = False
                    break
                reading(f"send {i + 1}", seconds=round(seconds, 2), ok=ok)
            if result["completed"]:
                time.sleep(args.settle)  # background work queued by the sends gets its chance to run
                reading("settled")
    finally:
        stop(proc)
    result["steps"] = steps
    result["rss_mib"] = steps[-1].get("VmRSS")
    result["peak_mib"] = max(s.get("VmHWM", 0) for s in steps)
    result["deployment"] = {k: manifest.get(k) for k in ("messages", "conversations", "active_messages", "vectors")}
    return result


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--deployment", required=True, help="a home made by generate.py")
    parser.add_argument("--sends", type=int, default=3)
    parser.add_argument("--settle", type=float, default=2.0, help="seconds to wait after the sends")
    parser.add_argument("--timeout", type=float, default=300.0,
                        help="seconds to wait for the server, and at most between two events of a send")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    r = run(args)
    if args.json:
        print(json.dumps(r))
        return
    d = r["deployment"]
    print(f"machine: {r['machine']}")
    print(f"deployment: {d['messages']:,} archived messages, {d['conversations']:,} conversations, "
          f"active thread {d['active_messages']:,}, vectors: {d['vectors']}")
    print(f"server ready in {r['ready_s']:.2f} s")
    for s in r["steps"]:
        state = ", timed out" if s.get("timed_out") else ("" if s.get("ok", True) else ", failed")
        extra = f" ({s['seconds']:.2f} s{state})" if "seconds" in s else ""
        print(f"  {s['step']:<11}{extra:<18} RSS {s['VmRSS']:8.1f} MiB   peak {s['VmHWM']:8.1f} MiB")
    print(f"resident {'after warming' if r['completed'] else 'when the warming stopped'}: {r['rss_mib']:.1f} MiB, "
          f"peak {r['peak_mib']:.1f} MiB (target <= 2048 MiB)")


if __name__ == "__main__":
    main()
