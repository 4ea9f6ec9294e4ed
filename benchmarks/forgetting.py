"""Cost of memory that stays correct (B1, B4): superseding a widely held memory, and forgetting a
long conversation in a large deployment, each next to a peer measured in the same run.

    python benchmarks/forgetting.py [--prompts 1000] [--home DIR] [--messages 1000] [--repeat 3]

Part 1 builds a fresh deployment with one memory held by ``--prompts`` stored prompts and times,
five times each: a **correction** (the in-place edit every edit was before versions: new text, the
prompts that hold it rebuilt; the figure benchmarks/memory_edits.py reports), a **supersede** (the
default edit now: the old version kept with its valid-until, a new version recorded, the same
prompts rebuilt), and a **restore** of an older version. The floor is rebuilding the same prompts
with nothing changed.

Part 2 opens a deployment made by benchmarks/generate.py (``--home``), adds a conversation of
``--messages`` turns (with hashed vectors when the deployment has them, and a canary word), and
times forgetting it (preview plus the confirmed transaction: messages, FTS rows, embeddings, search
log, suggestions, handoffs, prompts). Peers on the same database: moving the conversation to the
trash, and a plain cascading ``DELETE`` of it rolled back. The background compaction (FTS merge,
vector files, WAL truncation) that makes the forgetting verifiable is timed separately, and the
canary check is run on the raw files at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import HashedEmbedder, StopwatchProvider, TextMaker, machine, summary  # noqa: E402

from hearth import Hearth, Settings  # noqa: E402
from hearth.prompt import stored  # noqa: E402
from hearth.records.forget import CONFIRMATION_PHRASE, compact, verify  # noqa: E402

CANARY = "zephyrquokkacanary"


class Stopwatch:
    """``with Stopwatch(samples):`` appends the block's wall time in milliseconds."""

    def __init__(self, samples: list[float]):
        self.samples = samples

    def __enter__(self) -> None:
        self.start = time.perf_counter()

    def __exit__(self, *exc: object) -> None:
        self.samples.append((time.perf_counter() - self.start) * 1000)


def supersede_part(prompts: int, repeat: int) -> None:
    with tempfile.TemporaryDirectory() as home:
        settings = Settings.resolve({"home": home, "duplicate_embeddings": False}, environ={})
        hearth = Hearth(settings, provider=StopwatchProvider())
        me = hearth.scope()
        context = hearth.context(me.user_id)
        persona = me.personas.create("bench")
        memory = me.memories.add("Nora lives in Lyon with her two children")
        start = time.perf_counter()
        with hearth.store.write() as conn:
            for _ in range(prompts):
                conversation = me.conversations.create(persona.id)
                stored.ensure(conn, me.user_id, conversation.id, context.handoff_text)
        print(f"setup: one memory held by {prompts} stored prompts in {time.perf_counter() - start:.1f} s")
        floor, correction, supersede, restore = [], [], [], []
        holders = [r[0] for r in hearth.store.connection().execute(
            "SELECT conversation_id FROM conversation_memories WHERE memory_id = ?", (memory.id,))]
        print(f"  stored prompts holding the memory: {len(holders)}")
        for i in range(repeat):
            with Stopwatch(floor), hearth.store.write() as conn:
                context.rebuild_prompts(conn, holders)
            with Stopwatch(correction):
                me.memories.edit(memory.id, text=f"Nora lives in Lyon with her two kids ({i})", correction=True)
            with Stopwatch(supersede):
                me.memories.edit(memory.id, text=f"Nora lives in Marseille ({i})")
            version = me.memories.get(memory.id).version
            with Stopwatch(restore):
                me.memories.restore(memory.id, version - 1)
        rows = [("floor: rebuild the same prompts, nothing changed", floor),
                ("correction (the in-place edit, as memory_edits.py)", correction),
                ("supersede (new version, old one kept)", supersede),
                ("restore an older version", restore)]
        for label, samples in rows:
            s = summary(samples)
            print(f"  {label:<52} median {s['median_ms']:8.1f} ms  p99 {s['p99_ms']:8.1f} ms  (n={s['n']})")
        ratio = summary(supersede)["median_ms"] / summary(correction)["median_ms"]
        print(f"  supersede / correction median ratio: {ratio:.2f}")
        print(f"  versions kept for the memory: {len(me.memories.history(memory.id))}")
        hearth.close()


def forget_part(home: str, messages: int, repeat: int) -> None:
    settings = Settings.resolve({"home": home, "duplicate_embeddings": False}, environ={})
    hearth = Hearth(settings, provider=StopwatchProvider())
    me = hearth.scope()
    conn = hearth.store.connection()
    total = conn.execute("SELECT count(*) FROM messages").fetchone()[0]
    vectors = conn.execute("SELECT count(*) FROM message_embeddings").fetchone()[0]
    size = Path(settings.database_path).stat().st_size / 2**20
    print(f"deployment: {total:,} messages, {vectors:,} message vectors, {size:,.0f} MiB")
    persona = me.personas.default()
    tm = TextMaker(seed=7)
    model = conn.execute("SELECT model FROM message_embeddings LIMIT 1").fetchone()

    def make_thread(label: str) -> int:
        conversation = me.conversations.create(persona.id, title=label)
        roles = ["user" if i % 2 == 0 else "assistant" for i in range(messages)]
        texts = tm.messages(roles)
        texts[0] = f"{texts[0]} {CANARY}"
        with hearth.store.write():
            for role, text in zip(roles, texts):
                me.conversations.add_message(conversation.id, role, text)
        if model is not None:
            from hearth.retrieval.semantic import embed_pending

            # follow: as the background job does, only the turns after the newest vector.
            embed_pending(hearth.store, HashedEmbedder(model[0], 384), user_id=me.user_id, follow=True)
        return conversation.id

    trash, plain, forget, compaction = [], [], [], []
    for i in range(repeat):
        conversation_id = make_thread(f"forget me {i}")
        c = hearth.store.connection()
        with Stopwatch(plain):
            c.execute("BEGIN IMMEDIATE")
            c.execute("DELETE FROM conversations WHERE id = ?", (conversation_id,))
            c.execute("ROLLBACK")
        with Stopwatch(trash):
            me.conversations.trash(conversation_id)
        with Stopwatch(forget):
            preview = me.forget.preview("conversation", conversation_id)
            me.forget.apply("conversation", conversation_id, token=preview.token, phrase=CONFIRMATION_PHRASE)
        with Stopwatch(compaction):
            compact(hearth.store, me.user_id)
    rows = [("peer: move it to the trash", trash),
            ("peer: plain cascading DELETE (rolled back)", plain),
            ("forget: preview + confirmed transaction", forget),
            ("background compaction: FTS merge, vector files, WAL", compaction)]
    print(f"forget one conversation of {messages} messages (load average {os.getloadavg()[0]:.1f}):")
    for label, samples in rows:
        s = summary(samples)
        print(f"  {label:<52} median {s['median_ms']:9.1f} ms  p99 {s['p99_ms']:9.1f} ms  (n={s['n']})")
        print(f"    runs in order: {', '.join(f'{x:.0f}' for x in samples)} ms")
    ratio = summary(forget)["median_ms"] / summary(plain)["median_ms"]
    print(f"  forget / plain DELETE median ratio: {ratio:.2f}")
    check = verify(hearth.store, CANARY)
    print(f"  canary check on the raw files: {'clean' if check.clean else 'FOUND ' + json.dumps(check.to_dict())}"
          f" ({check.files_checked} files)")
    hearth.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prompts", type=int, default=1_000)
    parser.add_argument("--home", help="a deployment made by benchmarks/generate.py (part 2)")
    parser.add_argument("--messages", type=int, default=1_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(machine())
    supersede_part(args.prompts, max(9, args.repeat))
    if args.home:
        forget_part(args.home, args.messages, args.repeat)


if __name__ == "__main__":
    main()
