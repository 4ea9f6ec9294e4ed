"""What "What I remembered" adds to a send (W11): the one read of the thread's snapshot ids.

    python benchmarks/remembered.py [--memories 20000] [--repeat 300] [--json]

A thread whose snapshot holds ``--memories`` memories; the read the send path runs for each reply
(``thread.remembered.sources``) is timed ``--repeat`` times inside one read transaction, beside a
floor (``SELECT 1`` on the same connection) and beside the same read ordered by the memory list's
position, which would sort the whole snapshot. Prints medians and p99 in ms and their ratios to
the floor.
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

from common import StopwatchProvider  # noqa: E402

from hearth import Hearth, Settings  # noqa: E402
from hearth.thread.remembered import MAX_MEMORIES, sources  # noqa: E402

ORDERED = ("SELECT m.id FROM conversation_memories cm JOIN memories m ON m.id = cm.memory_id"
           " WHERE cm.conversation_id = ? AND m.eligible = 1 AND m.valid_until IS NULL"
           " ORDER BY m.position, m.id LIMIT ?")


def timed(run, repeat: int) -> dict[str, float]:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        samples.append((time.perf_counter() - start) * 1000)
    samples.sort()
    return {"median_ms": statistics.median(samples), "p99_ms": samples[max(0, int(len(samples) * 0.99) - 1)]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--memories", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=300)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as home:
        hearth = Hearth(Settings.resolve({"home": home}, environ={}), provider=StopwatchProvider())
        me = hearth.scope()
        persona = me.personas.create("bench")
        for first in range(0, args.memories, 10_000):
            me.memories.import_many([{"text": f"Memory number {i} about a thing the person said"}
                                     for i in range(first, min(args.memories, first + 10_000))])
        chat = me.conversations.create(persona.id, "bench")
        with hearth.store.read() as conn:
            floor = timed(lambda: conn.execute("SELECT 1").fetchall(), args.repeat)
            read = timed(lambda: sources(conn, chat.id, (), None, False), args.repeat)
            ordered = timed(lambda: conn.execute(ORDERED, (chat.id, MAX_MEMORIES + 1)).fetchall(), args.repeat)
            listed = len(sources(conn, chat.id, (), None, False).get("memories", []))
        hearth.close()
    result = {"memories": args.memories, "listed": listed, "floor": floor, "sources": read, "ordered_by_position": ordered,
              "sources_over_floor": read["median_ms"] / floor["median_ms"],
              "ordered_over_sources": ordered["median_ms"] / read["median_ms"]}
    if args.json:
        print(json.dumps(result))
        return
    print(f"snapshot of {args.memories} memories, {listed} recorded per reply")
    for name in ("floor", "sources", "ordered_by_position"):
        print(f"  {name:20} median {result[name]['median_ms']:.3f} ms   p99 {result[name]['p99_ms']:.3f} ms")
    print(f"  sources / floor (median): {result['sources_over_floor']:.0f}x;"
          f" ordered by position / sources: {result['ordered_over_sources']:.0f}x")


if __name__ == "__main__":
    main()
