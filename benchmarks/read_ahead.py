"""Reads sent ahead on PostgreSQL (store/ahead.py): a send with them against a send without, in
one process, on a PostgreSQL copy of a deployment made by ``generate.py``.

    python benchmarks/read_ahead.py --deployment DIR --database-url URL [--sends 200] [--kinds short everyday]
                                    [--latency-ms 0.25] [--json]

Each send is drawn at random to run with the reads sent ahead or without (the plan of what to
send is still learnt on every send, so each arm finds it ready), so both arms share the machine's
state and its noise. Prints, per kind and arm, the median and p99 of the whole send (from
``Scope.send`` until the provider receives the request) and of its assembly (the read snapshot
the reads are sent ahead for), with the statements answered from ahead per send. The background
worker runs as in ``hearth serve`` and each send waits until it is idle (``send_path.py --pace
worker``). Numbers of runs on separate processes (``send_path.py``) move by as much as this
difference from one run to the next; this comparison does not.

``--latency-ms`` puts a proxy on 127.0.0.1 between Hearth and the server that holds each message
for half that time in each direction: the round trip of a server on another host (S10), which
loopback hides.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import StopwatchProvider, TextMaker, load_embedder, machine, summary  # noqa: E402
from send_path import varied_messages  # noqa: E402

from hearth import Hearth, Settings  # noqa: E402
from hearth.ops.jobs import JobQueue, Worker  # noqa: E402
from hearth.store import ahead  # noqa: E402
from hearth.thread import send as send_module  # noqa: E402


class Arms:
    """Benchmark-side switches: whether this send's snapshot gets its plan, and what each arm took."""

    def __init__(self) -> None:
        self.on = True
        self.assembly: dict[tuple[str, bool], list[float]] = {}
        self.answered = 0
        self.last_assembly = 0.0
        planned, take, assemble = ahead.ReadAhead.planned, ahead.Snapshot.take, send_module.SendPath.assemble
        arms = self

        def planned_if_on(store_ahead: Any, key: Any) -> list[Any]:
            plan = planned(store_ahead, key)
            return plan if arms.on else []

        def counted_take(snapshot: Any, *args: Any) -> Any:
            answer = take(snapshot, *args)
            arms.answered += answer is not None
            return answer

        def timed_assemble(path: Any, *args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return assemble(path, *args, **kwargs)
            finally:
                arms.last_assembly = (time.perf_counter() - started) * 1000

        ahead.ReadAhead.planned = planned_if_on  # type: ignore[method-assign]
        ahead.Snapshot.take = counted_take  # type: ignore[method-assign]
        send_module.SendPath.assemble = timed_assemble  # type: ignore[method-assign]


class DelayingProxy:
    """A TCP proxy on 127.0.0.1 that holds each chunk for ``one_way_ms`` before passing it on."""

    def __init__(self, upstream: tuple[str, int], one_way_ms: float):
        self.upstream = upstream
        self.delay = one_way_ms / 1000
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            client, _ = self.listener.accept()
            server = socket.create_connection(self.upstream)
            for sock in (client, server):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(target=self._pump, args=(client, server), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client), daemon=True).start()

    def _pump(self, source: socket.socket, target: socket.socket) -> None:
        with source, target:
            while chunk := source.recv(65536):
                time.sleep(self.delay)
                target.sendall(chunk)


def through_proxy(url: str, latency_ms: float) -> str:
    parts = urlsplit(url)
    proxy = DelayingProxy((parts.hostname or "127.0.0.1", parts.port or 5432), latency_ms / 2)
    netloc = parts.netloc.rsplit("@", 1)
    netloc[-1] = f"127.0.0.1:{proxy.port}"
    return parts._replace(netloc="@".join(netloc)).geturl()


def round_trip_ms(url: str) -> float:
    """The median time of ``SELECT 1`` on ``url``: one round trip, as this run's connections see it."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        samples = []
        for _ in range(200):
            started = time.perf_counter()
            conn.execute("SELECT 1").fetchone()
            samples.append((time.perf_counter() - started) * 1000)
    return summary(samples)["median_ms"]


def run(args: argparse.Namespace) -> dict[str, Any]:
    home = Path(args.deployment).expanduser().resolve()
    manifest = json.loads((home / "bench.json").read_text())
    replies = TextMaker(manifest["seed"] + 102)
    provider = StopwatchProvider(replies=lambda: replies.messages(["assistant"])[0])
    url = through_proxy(args.database_url, args.latency_ms) if args.latency_ms else args.database_url
    round_trip = round_trip_ms(url)
    hearth = Hearth(Settings.resolve({"home": str(home), "database_url": url}, environ={}),
                    provider=provider)
    scope = hearth.scope(manifest["user_id"])
    conversation_id = manifest["active_conversation_id"]
    embedder, _reason = load_embedder(hearth)
    if embedder is not None:
        from hearth.retrieval.semantic import warm

        warm(hearth)
    arms = Arms()
    worker = Worker(hearth, poll_seconds=0.05)
    worker.start()
    queue = JobQueue(hearth.store)
    messages = varied_messages(TextMaker(manifest["seed"] + 100), args.sends * 5, manifest["seed"] + 101, balanced=True)
    messages = [(kind, text) for kind, text in messages if kind in args.kinds][: args.sends]
    rng = random.Random(args.seed)
    sends: dict[tuple[str, bool], list[float]] = {}
    answered: dict[tuple[str, bool], list[int]] = {}
    for number, (kind, text) in enumerate(messages):
        started = time.perf_counter()
        while not queue.idle() and time.perf_counter() - started < 10:
            time.sleep(0.005)
        arms.on = rng.random() < 0.5
        arms.answered = 0
        started = time.perf_counter()
        scope.send(conversation_id, text)
        elapsed = (provider.arrival() - started) * 1000
        if number < args.warm:
            continue  # the first sends learn the plan and warm the caches
        arm = (kind, arms.on)
        sends.setdefault(arm, []).append(elapsed)
        arms.assembly.setdefault(arm, []).append(arms.last_assembly)
        answered.setdefault(arm, []).append(arms.answered)
    worker.stop(timeout=300)
    hearth.close()
    by_kind: dict[str, Any] = {}
    for (kind, on), samples in sorted(sends.items()):
        by_kind.setdefault(kind, {})["ahead" if on else "without"] = {
            "send": summary(samples), "assembly": summary(arms.assembly[(kind, on)]),
            "answered_from_ahead": round(sum(answered[(kind, on)]) / len(samples), 1)}
    for both in by_kind.values():
        if "ahead" in both and "without" in both:
            both["send_ratio"] = round(both["ahead"]["send"]["median_ms"] / both["without"]["send"]["median_ms"], 2)
    return {"machine": machine(), "load_average": [round(x, 1) for x in os.getloadavg()],
            "added_round_trip_ms": args.latency_ms, "round_trip_ms": round_trip, "by_kind": by_kind}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--deployment", required=True, help="a home made by generate.py")
    parser.add_argument("--database-url", required=True, help="its PostgreSQL copy (hearth migrate-store --to URL)")
    parser.add_argument("--sends", type=int, default=200)
    parser.add_argument("--warm", type=int, default=5, help="first sends left out")
    parser.add_argument("--kinds", nargs="+", default=["short", "everyday"],
                        choices=["everyday", "recall", "date", "fragment", "short"])
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--latency-ms", type=float, default=0.0,
                        help="add this round-trip time between Hearth and the server (a proxy on 127.0.0.1)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = run(args)
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"{result['machine']}, load average {result['load_average']},"
          f" {result['added_round_trip_ms']} ms added to each round trip (SELECT 1: {result['round_trip_ms']:.3f} ms)")
    for kind, both in result["by_kind"].items():
        for arm in ("without", "ahead"):
            if arm in both:
                r = both[arm]
                print(f"{kind:>9} {arm:>7}: send {r['send']['median_ms']:.2f} / p99 {r['send']['p99_ms']:.2f} ms,"
                      f" assembly {r['assembly']['median_ms']:.2f} / p99 {r['assembly']['p99_ms']:.2f} ms"
                      f" (n={r['send']['n']}, {r['answered_from_ahead']} statements answered from ahead)")
        if "send_ratio" in both:
            print(f"{kind:>9} ahead / without: {both['send_ratio']}x")


if __name__ == "__main__":
    main()
