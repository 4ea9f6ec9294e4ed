"""``hearth doctor`` / ``ledger.verify`` on a large ledger: linear in the number of events.

    python benchmarks/doctor.py [--events 1000000] [--runs 3] [--old]

Builds a deployment with ``--events`` ledger events by bulk inserts (half of them message events
with their message rows, a tenth deleted messages with their ``message.deleted`` events, the rest
request-size events), then times ``ledger.verify`` (median and worst of ``--runs``). Peers timed
in the same run: a plain count and one full pass over the events table (floors a linear check
cannot beat), SQLite's own ``PRAGMA quick_check``, and the two parts of verify that are SQLite's
own checks (foreign keys, the keyword index's integrity-check). ``--old`` also times the check this replaced (a correlated
subquery over all events per message event); keep ``--events`` small with it (it is quadratic).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from hearth import Hearth, Settings  # noqa: E402
from hearth.records.ledger import verify  # noqa: E402
from hearth.store import utcnow  # noqa: E402

OLD_CHECK = """
    SELECT e.id FROM events e LEFT JOIN messages m ON m.id = e.id
    WHERE e.kind = 'message' AND m.id IS NULL
      AND NOT EXISTS (SELECT 1 FROM events d WHERE d.kind = 'message.deleted'
                      AND json_extract(d.payload, '$.message_id') = e.id) LIMIT 20"""


def build(hearth: Hearth, events: int, conversations: int = 200) -> float:
    me = hearth.scope()
    persona = me.personas.create("bench")
    ids = [me.conversations.create(persona.id).id for _ in range(conversations)]
    start = time.perf_counter()
    now = utcnow()
    with hearth.store.write() as conn:
        next_id = conn.execute("SELECT coalesce(max(id), 0) + 1 FROM events").fetchone()[0]
        event_rows, message_rows = [], []
        for i in range(events // 10):
            conversation = ids[i % conversations]
            for j in range(5):  # five kept messages
                event_rows.append((next_id, me.user_id, conversation, "message", now,
                                   '{"role":"user","kind":"chat","chars":12}'))
                message_rows.append((next_id, me.user_id, conversation, "user" if j % 2 == 0 else "assistant",
                                     f"turn {next_id} of the talk", now))
                next_id += 1
            deleted = next_id  # a message event whose row was deleted, and its deletion event
            event_rows.append((deleted, me.user_id, conversation, "message", now, '{"role":"user","chars":3}'))
            event_rows.append((deleted + 1, me.user_id, conversation, "message.deleted", now,
                               json.dumps({"message_id": deleted})))
            next_id += 2
            for _ in range(3):
                event_rows.append((next_id, me.user_id, conversation, "context.request_size", now,
                                   '{"total_tokens":1234}'))
                next_id += 1
        conn.executemany("INSERT INTO events (id, user_id, conversation_id, kind, created_at, payload)"
                         " VALUES (?, ?, ?, ?, ?, ?)", event_rows)
        conn.executemany("INSERT INTO messages (id, user_id, conversation_id, role, kind, content, created_at)"
                         " VALUES (?, ?, ?, ?, 'chat', ?, ?)", message_rows)
    return time.perf_counter() - start


def timed(fn, runs: int) -> tuple[float, float]:
    samples = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t)
    return statistics.median(samples), max(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--old", action="store_true", help="also time the replaced quadratic check")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as home:
        hearth = Hearth(Settings.resolve({"home": home}, environ={}))
        seconds = build(hearth, args.events)
        conn = hearth.store.connection()
        total = conn.execute("SELECT count(*) FROM events").fetchone()[0]
        print(f"built {total} events ({conn.execute('SELECT count(*) FROM messages').fetchone()[0]} messages)"
              f" in {seconds:.1f} s")
        report = verify(conn)
        assert report.ok, report.problems
        median, worst = timed(lambda: verify(conn), args.runs)
        print(f"ledger.verify: median {median:.2f} s, worst {worst:.2f} s ({args.runs} runs)")
        median, worst = timed(lambda: conn.execute("SELECT count(*), max(length(payload)) FROM events").fetchone(),
                              args.runs)
        print(f"floor: one pass over events: median {median:.2f} s, worst {worst:.2f} s")
        median, worst = timed(lambda: conn.execute("SELECT count(*) FROM events").fetchone(), args.runs)
        print(f"floor: a plain count over events: median {median:.2f} s, worst {worst:.2f} s")
        median, worst = timed(lambda: conn.execute("PRAGMA quick_check").fetchall(), 1)
        print(f"peer: PRAGMA quick_check: {median:.2f} s")
        # The two parts of verify that are SQLite's own checks, to show where its time goes.
        median, worst = timed(lambda: conn.execute("PRAGMA foreign_key_check").fetchall(), 1)
        print(f"part of verify: PRAGMA foreign_key_check: {median:.2f} s")
        median, worst = timed(lambda: conn.execute(
            "INSERT INTO messages_fts (messages_fts) VALUES ('integrity-check')"), 1)
        print(f"part of verify: the keyword index's integrity-check: {median:.2f} s")
        if args.old:
            median, worst = timed(lambda: conn.execute(OLD_CHECK).fetchall(), 1)
            print(f"before: the correlated check alone: {median:.2f} s")
        hearth.close()


if __name__ == "__main__":
    main()
