"""Moving a memory in the manual order among many (M-ordering): time inside the write transaction.

    python benchmarks/memory_move.py [--memories 20000] [--conversations 50] [--sent 10] [--moves 40]

Memories are imported, then ``--conversations`` threads are created (each snapshot holds
every memory) and ``--sent`` of them get a stored prompt. Each move runs in one write transaction,
so its duration is how long it holds the write lock. Two peers are timed in the same run: a text
edit of the same memories (which rebuilds the same prompts) and a one-row UPDATE (the floor).
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import StopwatchProvider, summary  # noqa: E402

from hearth import Hearth, Settings  # noqa: E402


def line(label: str, samples: list[float]) -> str:
    s = summary(samples)
    return f"{label}: median {s['median_ms']:.1f} ms, p99 {s['p99_ms']:.1f} ms ({len(samples)} runs)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--memories", type=int, default=20_000)
    parser.add_argument("--conversations", type=int, default=50)
    parser.add_argument("--sent", type=int, default=10)
    parser.add_argument("--moves", type=int, default=40)
    args = parser.parse_args()
    rng = random.Random(7)
    with tempfile.TemporaryDirectory() as home:
        # Every memory is in each prompt: the input limit must hold them all (about 12 tokens each).
        settings = Settings.resolve({"home": home, "input_token_limit": 20 * args.memories + 50_000}, environ={})
        hearth = Hearth(settings, provider=StopwatchProvider())
        me = hearth.scope()
        persona = me.personas.create("bench")
        start = time.perf_counter()
        for first in range(0, args.memories, 10_000):
            me.memories.import_many([{"text": f"memory number {i}: a fact about the person"}
                                     for i in range(first, min(args.memories, first + 10_000))])
        ids = [m.id for m in me.memories.list()]
        conversations = [me.conversations.create(persona.id).id for _ in range(args.conversations)]
        for conversation_id in conversations[:args.sent]:
            me.send(conversation_id, "hello")
        print(f"setup: {args.memories} memories, {args.conversations} threads holding them, "
              f"{args.sent} stored prompts in {time.perf_counter() - start:.1f} s")
        moves, edits, floor = [], [], []
        for i in range(args.moves):
            memory_id = rng.choice(ids)
            position = rng.randint(1, len(ids))
            t = time.perf_counter()
            me.memories.move(memory_id, position)
            moves.append((time.perf_counter() - t) * 1000)
            t = time.perf_counter()
            me.memories.edit(memory_id, text=f"edited text {i} of the memory")
            edits.append((time.perf_counter() - t) * 1000)
            t = time.perf_counter()
            with me.store.write() as conn:
                conn.execute("UPDATE memories SET importance = ? WHERE id = ?", (i % 10, memory_id))
            floor.append((time.perf_counter() - t) * 1000)
        print(line("move one memory (write lock held)", moves))
        print(line("peer: edit the same memory's text", edits))
        print(line("floor: a one-row UPDATE in a write transaction", floor))
        hearth.close()


if __name__ == "__main__":
    main()
