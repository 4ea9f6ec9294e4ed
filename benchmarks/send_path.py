"""Send-path assembly time: everything before the provider call, for threads of growing length.

    python benchmarks/send_path.py [--sizes 1000 10000 100000] [--sends 50]

For each size, builds a thread of that many saved messages through the library (one bulk
transaction), then times ``send()`` from the call until the provider receives the request: saving
the user message, the stored prompt, every dynamic layer, history trimming and assembly. Prints the
median and p99 in milliseconds.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import StopwatchProvider, summary  # noqa: E402

from hearth import Hearth, Settings  # noqa: E402

WORDS = ("tea garden rain letter harbour morning cat music bread window river lamp story walk "
         "winter friend book kitchen train market sea song quiet light").split()


def build_thread(scope, persona_id: int, size: int, rng: random.Random) -> int:
    conversation = scope.conversations.create(persona_id, f"Thread of {size}")
    with scope.store.write():
        for i in range(size):
            text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 60)))
            scope.conversations.add_message(conversation.id, "user" if i % 2 == 0 else "assistant", text)
    return conversation.id


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000, 100_000])
    parser.add_argument("--sends", type=int, default=50)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rng = random.Random(7)
    results = {}
    with tempfile.TemporaryDirectory() as home:
        provider = StopwatchProvider()
        hearth = Hearth(Settings.resolve({"home": home, "input_token_limit": 128_000}, environ={}), provider=provider)
        scope = hearth.scope()
        persona = scope.personas.create("bench", "Bench", identity="A benchmark companion.")
        scope.memories.import_many([{"text": f"memory {i} " + " ".join(rng.sample(WORDS, 6))} for i in range(200)])
        for size in args.sizes:
            conversation_id = build_thread(scope, persona.id, size, rng)
            samples = []
            for i in range(args.sends):
                text = " ".join(rng.choice(WORDS) for _ in range(12))
                start = time.perf_counter()
                scope.send(conversation_id, text)
                samples.append((provider.arrivals[-1] - start) * 1000)
            results[size] = summary(samples)
            if not args.json:
                r = results[size]
                print(f"thread of {size:>7} messages: assembly median {r['median_ms']:.2f} ms, p99 {r['p99_ms']:.2f} ms")
        hearth.close()
    if args.json:
        print(json.dumps(results))


if __name__ == "__main__":
    main()
