"""Cost of memory edits and deletes (P5): prompts rebuilt and time, with many conversations.

    python benchmarks/memory_edits.py [--conversations 10000] [--memories 2000] [--sent 1000]

Memories are added while conversations are created, so each conversation's snapshot holds the
memories that existed at its creation, as in real use. ``--sent`` conversations have a stored
prompt (were sent to). An edit must rebuild exactly the stored prompts whose snapshot holds the
memory, so its cost follows the number of affected threads, not the size of the deployment.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import StopwatchProvider  # noqa: E402

from hearth import Hearth, Settings  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--conversations", type=int, default=10_000)
    parser.add_argument("--memories", type=int, default=2_000)
    parser.add_argument("--sent", type=int, default=1_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as home:
        hearth = Hearth(Settings.resolve({"home": home}, environ={}), provider=StopwatchProvider())
        me = hearth.scope()
        persona = me.personas.create("bench")
        per_memory = max(1, args.conversations // args.memories)
        start = time.perf_counter()
        conversation_ids = []
        with hearth.store.write():
            for i in range(args.conversations):
                if i % per_memory == 0 and i // per_memory < args.memories:
                    me.memories.add(f"memory number {i // per_memory}: a fact about the person")
                conversation_ids.append(me.conversations.create(persona.id).id)
        # The newest conversations are the ones being sent to.
        for conversation_id in conversation_ids[-args.sent:]:
            me.send(conversation_id, "hello")
        print(f"setup: {args.conversations} conversations, {args.memories} memories, "
              f"{args.sent} stored prompts in {time.perf_counter() - start:.1f} s")
        memories = me.memories.list()
        cases = [("edit the oldest memory (held by every thread)", memories[0].id),
                 ("edit a middle memory", memories[len(memories) // 2].id),
                 ("edit the newest memory (held by the newest threads)", memories[-1].id)]
        for label, memory_id in cases:
            t = time.perf_counter()
            _, rebuilt = me.memories.edit(memory_id, text="edited text of the memory")
            elapsed = (time.perf_counter() - t) * 1000
            per = elapsed / rebuilt if rebuilt else 0.0
            print(f"{label}: {rebuilt} prompts rebuilt in {elapsed:.1f} ms ({per:.2f} ms per prompt)")
        t = time.perf_counter()
        rebuilt = me.memories.delete(memories[1].id)
        elapsed = (time.perf_counter() - t) * 1000
        print(f"delete a memory held by every thread: {rebuilt} prompts rebuilt in {elapsed:.1f} ms")
        t = time.perf_counter()
        me.memories.add("a new memory")
        print(f"add a memory: 0 prompts rebuilt in {(time.perf_counter() - t) * 1000:.1f} ms")
        hearth.close()


if __name__ == "__main__":
    main()
