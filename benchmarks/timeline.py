"""Timeline pages at scale, and what spans and capsules cost the send path.

    python benchmarks/timeline.py [--events 1000000] [--pages 200] [--sends 200] [--json]

Pages: bulk-generates one user's ledger of ``--events`` events (bursts of activity in spans, idle
gaps between them, messages with text, usage and size events, events outside any span, several
conversations) straight into a fresh database, then times the first page (500 events, the default
``TIMELINE_HISTORY_EVENT_LIMIT``) and older pages: a walk from the newest page through its cursors
and pages before random cursors spread over the whole ledger. In the same run it times the floor:
the bare indexed query for 500 events before the same cursors (no span expansion, no message
text), and prints page / floor.

Send path: on a thread of 1,000 saved messages, times ``send()`` end to end (instant provider) with
the timeline layer's work (the span upsert, the capsule lookup, the threshold check) and without it
(those three replaced by no-ops), interleaved in one run, and prints the medians and their
difference.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import StopwatchProvider, machine, summary  # noqa: E402

from hearth import Hearth, Settings  # noqa: E402
from hearth.continuity.timeline import pages  # noqa: E402
from hearth.continuity.timeline.spans import stamp  # noqa: E402
from hearth.thread import send as send_path  # noqa: E402

WORDS = ("tea garden rain letter harbour morning cat music bread window river lamp story walk "
         "winter friend book kitchen train market sea song quiet light").split()


# -- a bulk ledger ----------------------------------------------------------------------------------
def generate(hearth: Hearth, total: int, seed: int = 3) -> int:
    """One user's ledger of about ``total`` events; returns the user id."""
    rng = random.Random(seed)
    me = hearth.scope()
    persona = me.personas.default()
    conversations = [me.conversations.create(persona.id, title=f"Thread {n}").id for n in range(40)]
    conn = hearth.store.connection()
    t = time.time() - 3 * 365 * 86400
    event_id = conn.execute("SELECT coalesce(max(id), 0) FROM events").fetchone()[0]
    span_id = 0
    events: list[tuple] = []
    messages: list[tuple] = []
    spans: list[tuple] = []
    made = 0
    with hearth.store.write() as wconn:
        while made < total:
            t += rng.uniform(31, 600) * 60  # an idle gap: a new span
            span_id += 1
            start = event_id + 1
            started = stamp(t)
            conversation = rng.choice(conversations)

            def add(kind: str, payload: str, span: int | None, message: tuple | None = None,
                    conversation: int = conversation) -> None:
                nonlocal event_id, t, made
                event_id += 1
                t += rng.uniform(0.5, 40)
                events.append((event_id, me.user_id, conversation, kind, "web", stamp(t), payload, span))
                if message:
                    messages.append((event_id, me.user_id, conversation, *message, "web", stamp(t)))
                made += 1

            add("span.opened", json.dumps({"span_id": span_id, "kind": "text"}), span_id)
            for _ in range(rng.randint(2, 25)):
                text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 40)))
                add("message", json.dumps({"role": "user", "kind": "chat", "chars": len(text)}), span_id,
                    ("user", "chat", text))
                add("context.request_size", '{"total_tokens":900}', span_id)
                reply = " ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 60)))
                add("message", json.dumps({"role": "assistant", "kind": "chat", "chars": len(reply)}), span_id,
                    ("assistant", "chat", reply))
                add("context.usage", '{"input":900,"output":40,"total":940,"cached":0}', span_id)
            t += 1800
            add("span.closed", json.dumps({"span_id": span_id, "reason": "idle"}), span_id)
            spans.append((span_id, me.user_id, persona.id, "text", "web", start, started, stamp(t), stamp(t), "idle"))
            if rng.random() < 0.1:
                add("memory.added", "{}", None)  # outside any span
            if len(events) > 50_000:
                flush(wconn, events, messages, spans)
        flush(wconn, events, messages, spans)
    return me.user_id


def flush(conn, events: list, messages: list, spans: list) -> None:
    conn.executemany("INSERT INTO events (id, user_id, conversation_id, kind, channel, created_at, payload, span_id)"
                     " VALUES (?, ?, ?, ?, ?, ?, ?, ?)", events)
    conn.executemany("INSERT INTO messages (id, user_id, conversation_id, role, kind, content, channel, created_at)"
                     " VALUES (?, ?, ?, ?, ?, ?, ?, ?)", messages)
    conn.executemany("INSERT INTO spans (id, user_id, persona_id, kind, channel, start_event_id, started_at, last_at,"
                     " closed_at, close_reason) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", spans)
    events.clear()
    messages.clear()
    spans.clear()


CPU: dict[str, list[float]] = {}  # process CPU time per label: steadier than wall time on a shared machine


def timed(fn, label: str = "") -> tuple[float, Any]:
    start, cpu = time.perf_counter(), time.process_time()
    value = fn()
    if label:
        CPU.setdefault(label, []).append((time.process_time() - cpu) * 1000)
    return (time.perf_counter() - start) * 1000, value


def run_pages(args: argparse.Namespace, home: str) -> dict[str, Any]:
    hearth = Hearth(Settings.resolve({"home": home}, environ={}))
    began = time.perf_counter()
    user_id = generate(hearth, args.events)
    generated_s = time.perf_counter() - began
    conn = hearth.store.connection()
    count = conn.execute("SELECT count(*) FROM events WHERE user_id = ?", (user_id,)).fetchone()[0]
    floor_sql = ("SELECT * FROM events WHERE user_id = ? AND (created_at, id) < (?, ?)"
                 " ORDER BY created_at DESC, id DESC LIMIT 500")

    first, first_floor = [], []
    newest = conn.execute("SELECT created_at, id FROM events WHERE user_id = ? ORDER BY created_at DESC, id DESC"
                          " LIMIT 1", (user_id,)).fetchone()
    for _ in range(args.repeat):
        ms, page = timed(lambda: pages.page(conn, user_id, limit=500), "first")
        first.append(ms)
        first_floor.append(timed(lambda: conn.execute(floor_sql, (user_id, newest[0], newest[1] + 1)).fetchall(),
                                 "first_floor")[0])

    walk, walk_floor, sizes = [], [], []
    cursor = pages.Cursor.parse(page.before)
    for _ in range(args.pages):
        ms, older = timed(lambda c=cursor: pages.page(conn, user_id, before=c, limit=500), "walk")
        walk.append(ms)
        sizes.append(len(older.events))
        walk_floor.append(timed(lambda c=cursor: conn.execute(floor_sql, (user_id, c.created_at, c.event_id)
                                                      ).fetchall(), "walk_floor")[0])
        if older.before is None:
            break
        cursor = pages.Cursor.parse(older.before)

    rng = random.Random(11)
    ids = [r[0] for r in conn.execute("SELECT id FROM events WHERE user_id = ? AND id % 97 = 0", (user_id,))]
    deep, deep_floor = [], []
    for event_id in rng.sample(ids, min(args.pages, len(ids))):
        at = conn.execute("SELECT created_at FROM events WHERE id = ?", (event_id,)).fetchone()[0]
        c = pages.Cursor(at, event_id)
        deep.append(timed(lambda c=c: pages.page(conn, user_id, before=c, limit=500), "random")[0])
        deep_floor.append(timed(lambda c=c: conn.execute(floor_sql, (user_id, c.created_at, c.event_id)).fetchall(),
                                "random_floor")[0])
    hearth.close()

    def ratio(a, b):
        return round(summary(a)["median_ms"] / max(summary(b)["median_ms"], 1e-6), 2)

    return {
        "events": count, "generated_s": round(generated_s, 1),
        "first_page": summary(first), "first_page_floor": summary(first_floor), "first_ratio": ratio(first, first_floor),
        "older_walk": summary(walk), "older_walk_floor": summary(walk_floor), "walk_ratio": ratio(walk, walk_floor),
        "older_random": summary(deep), "older_random_floor": summary(deep_floor), "random_ratio": ratio(deep, deep_floor),
        "mean_page_events": round(sum(sizes) / max(1, len(sizes)), 1),
        "cpu": {label: summary(values) for label, values in CPU.items()},
    }


# -- the send path with and without the timeline layer ----------------------------------------------
def run_send(args: argparse.Namespace, home: str) -> dict[str, Any]:
    rng = random.Random(5)
    provider = StopwatchProvider()
    hearth = Hearth(Settings.resolve({"home": home, "input_token_limit": 128_000}, environ={}), provider=provider)
    me = hearth.scope()
    persona = me.personas.default()
    chat = me.conversations.create(persona.id, "Thread of 1000")
    with hearth.store.write():
        for i in range(1000):
            me.conversations.add_message(chat.id, "user" if i % 2 == 0 else "assistant",
                                         " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 60))))
    me.send(chat.id, "warm up")
    # Without the span work the send still needs a span to file its turns under: the warm-up's.
    span_id = hearth.store.connection().execute("SELECT max(id) FROM spans").fetchone()[0]
    real = (send_path.spans.touch, send_path.spans.keep_open, send_path.capsules.latest,
            send_path.capsules.crossed)

    def without() -> None:
        send_path.spans.touch = lambda *a, **k: span_id  # type: ignore[assignment]
        send_path.spans.keep_open = lambda *a, **k: span_id  # type: ignore[assignment]
        send_path.capsules.latest = lambda *a, **k: None  # type: ignore[assignment]
        send_path.capsules.crossed = lambda *a, **k: False  # type: ignore[assignment]

    def restore() -> None:
        (send_path.spans.touch, send_path.spans.keep_open, send_path.capsules.latest,
         send_path.capsules.crossed) = real

    with_ms, without_ms = [], []
    try:
        for n in range(args.sends):
            text = " ".join(rng.choice(WORDS) for _ in range(12))
            for mode in ((True, False) if n % 2 == 0 else (False, True)):
                if not mode:
                    without()
                ms, _ = timed(lambda text=text: me.send(chat.id, text), "send_with" if mode else "send_without")
                restore()
                (with_ms if mode else without_ms).append(ms)
    finally:
        restore()
        hearth.close()
    cpu_with, cpu_without = summary(CPU["send_with"]), summary(CPU["send_without"])
    return {"with": summary(with_ms), "without": summary(without_ms),
            "added_median_ms": round(summary(with_ms)["median_ms"] - summary(without_ms)["median_ms"], 3),
            "cpu_with": cpu_with, "cpu_without": cpu_without,
            "cpu_added_median_ms": round(cpu_with["median_ms"] - cpu_without["median_ms"], 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--pages", type=int, default=200, help="older pages walked, and random older pages")
    parser.add_argument("--repeat", type=int, default=50, help="first-page timings")
    parser.add_argument("--sends", type=int, default=200, help="sends with and without the timeline layer")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
        result = {"machine": machine(), "pages": run_pages(args, a), "send_path": run_send(args, b)}
    if args.json:
        print(json.dumps(result, indent=2))
        return
    p, s = result["pages"], result["send_path"]
    print(f"machine: {result['machine']}")
    print(f"ledger: {p['events']:,} events (generated in {p['generated_s']} s); "
          f"mean older page {p['mean_page_events']} events (500 + span expansion)")
    for label, key, floor, r in (("first page", "first_page", "first_page_floor", "first_ratio"),
                                 ("older, walking back", "older_walk", "older_walk_floor", "walk_ratio"),
                                 ("older, random cursors", "older_random", "older_random_floor", "random_ratio")):
        print(f"{label:24} median {p[key]['median_ms']:8.2f} ms  p99 {p[key]['p99_ms']:8.2f} ms   floor median "
              f"{p[floor]['median_ms']:6.2f} ms  p99 {p[floor]['p99_ms']:6.2f} ms   ratio {p[r]}")
    print(f"send, with timeline     median {s['with']['median_ms']:8.2f} ms  p99 {s['with']['p99_ms']:8.2f} ms")
    print(f"send, without           median {s['without']['median_ms']:8.2f} ms  p99 {s['without']['p99_ms']:8.2f} ms")
    print(f"added by spans + capsule lookup: {s['added_median_ms']} ms median wall, "
          f"{s['cpu_added_median_ms']} ms median CPU ({s['cpu_with']['median_ms']} vs {s['cpu_without']['median_ms']})")
    cpu = p["cpu"]
    print("CPU time medians (ms): " + ", ".join(f"{k} {v['median_ms']}" for k, v in cpu.items()))


if __name__ == "__main__":
    main()
