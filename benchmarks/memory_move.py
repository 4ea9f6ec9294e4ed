"""Moving or editing a memory among many (M-ordering, M2, M7): how long the write lock is held.

    python benchmarks/memory_move.py [--memories 20000] [--conversations 50] [--sent 10] [--moves 40]
                                     [--writer-every-ms 0]

Memories are imported, then ``--conversations`` threads are created (each snapshot holds
every memory) and ``--sent`` of them get a stored prompt. Each move and each text edit rebuilds
those stored prompts. The figure that matters is the time the write lock is held: from the moment
the write transaction holds it to the moment its COMMIT returns (every other writer waits that
long). The whole call (which also composes the prompts from a read snapshot before taking the lock,
and for a move lists the memories afterwards) and its CPU time are printed beside it. The floor is
a one-row UPDATE in a write transaction, timed the same way in the same run.

``--writer-every-ms N`` runs another thread that commits a one-row UPDATE every N ms meanwhile: a
change whose read snapshot such a commit overtakes composes again, and after two such races under
the lock. The write transactions each change opened are counted (1: composed outside the lock at
the first try; 2: at the second; 3: under the lock).
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import threading
import time
from collections import Counter
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import StopwatchProvider, summary  # noqa: E402

from hearth import Hearth, Settings  # noqa: E402


class LockClock:
    """Records how long each outermost write transaction of a store holds the write lock."""

    def __init__(self, store: Any):
        self.held: list[float] = []
        self._start = 0.0
        begin, write = store._begin_write, store.write

        def timed_begin(conn: Any, exclusive: bool) -> None:
            begin(conn, exclusive)  # returns once the lock is held
            if threading.current_thread() is threading.main_thread():  # not the other writer's
                self._start = time.perf_counter()

        @contextmanager
        def timed_write(**kwargs: Any) -> Iterator[Any]:
            outer = not store.in_write and threading.current_thread() is threading.main_thread()
            with write(**kwargs) as conn:
                yield conn
            if outer:
                self.held.append((time.perf_counter() - self._start) * 1000)

        store._begin_write = timed_begin
        store.write = timed_write

    def take(self) -> tuple[float, int]:
        """The lock time of the transactions since the last call (one operation), in ms, and
        how many there were."""
        total, count = sum(self.held), len(self.held)
        self.held.clear()
        return total, count


def line(label: str, samples: list[float], floor: list[float] | None = None) -> str:
    s = summary(samples)
    text = f"{label}: median {s['median_ms']:.1f} ms, p99 {s['p99_ms']:.1f} ms ({len(samples)} runs)"
    if floor:
        text += f"; median {s['median_ms'] / summary(floor)['median_ms']:.1f}x the floor"
    return text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--memories", type=int, default=20_000)
    parser.add_argument("--conversations", type=int, default=50)
    parser.add_argument("--sent", type=int, default=10)
    parser.add_argument("--moves", type=int, default=40)
    parser.add_argument("--writer-every-ms", type=float, default=0)
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
        load_before = os.getloadavg()
        clock = LockClock(hearth.store)
        tries: Counter[str] = Counter()
        stop = threading.Event()

        def other_writer() -> None:  # renames a thread no prompt depends on (a commit that changes a row)
            n = 0
            while not stop.wait(args.writer_every_ms / 1000):
                n += 1
                with hearth.store.write() as conn:
                    conn.execute("UPDATE conversations SET title = ? WHERE id = ?", (f"t{n}", conversations[-1]))

        writer = threading.Thread(target=other_writer)
        if args.writer_every_ms:
            writer.start()
        lock: dict[str, list[float]] = {"move": [], "edit": [], "floor": []}
        call: dict[str, list[float]] = {"move": [], "edit": []}
        cpu: dict[str, list[float]] = {"move": [], "edit": []}

        def timed(kind: str, fn: Any) -> None:
            clock.take()
            wall, processor = time.perf_counter(), time.process_time()
            fn()
            call[kind].append((time.perf_counter() - wall) * 1000)
            cpu[kind].append((time.process_time() - processor) * 1000)
            held, transactions = clock.take()
            lock[kind].append(held)
            tries[f"{kind} {transactions}"] += 1

        for i in range(args.moves):
            memory_id = rng.choice(ids)
            position = rng.randint(1, len(ids))
            timed("move", lambda m=memory_id, p=position: me.memories.move(m, p))
            timed("edit", lambda m=memory_id, i=i: me.memories.edit(m, text=f"edited text {i} of the memory"))
            clock.take()
            with hearth.store.write() as conn:
                conn.execute("UPDATE memories SET importance = ? WHERE id = ?", (i % 10, memory_id))
            lock["floor"].append(clock.take()[0])
        stop.set()
        if args.writer_every_ms:
            writer.join()
        load_after = os.getloadavg()
        print(f"load average (1, 5, 15 min) before {', '.join(f'{x:.1f}' for x in load_before)},"
              f" after {', '.join(f'{x:.1f}' for x in load_after)}; {os.cpu_count()} cores")
        print(line("write lock held: move one memory", lock["move"], lock["floor"]))
        print(line("write lock held: edit the same memory's text", lock["edit"], lock["floor"]))
        print(line("write lock held: floor, a one-row UPDATE transaction", lock["floor"]))
        print(line("whole call: move (compose outside the lock, list after)", call["move"]))
        print(line("whole call: edit", call["edit"]))
        print(line("CPU time of the process: move", cpu["move"]))
        print(line("CPU time of the process: edit", cpu["edit"]))
        print("write transactions per change (1: composed outside the lock at once, 2: at the second try,"
              " 3: under the lock):", dict(sorted(tries.items())))
        hearth.close()


if __name__ == "__main__":
    main()
