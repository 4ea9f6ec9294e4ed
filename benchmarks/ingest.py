"""Ingestion throughput: messages written per second, keyword-indexed and with embeddings.

    python benchmarks/ingest.py [--messages 20000] [--embed-messages 2000] [--seed 1] [--locomo N]

1. Keyword-indexed: chat turns written through ``Conversations.add_message`` in bulk transactions
   of 10,000 (FTS5 kept in step by the schema's triggers), in threads of about 200 messages.
2. With embeddings: the same writes followed by ``embed_pending`` (what ``hearth reindex`` and the
   background job run), beside the raw embedder on the same texts (the speaker-labelled turn with
   the start of the previous one, as ``embed_pending`` builds them) in the same batch size. The
   pipeline's cost over the raw model is also shown with a hashed stand-in embedder, where the
   model's own time is near zero and only the pipeline remains.

3. With ``--locomo N``: the first N LoCoMo conversations saved through the public API, then
   embedded by ``embed_pending`` beside the raw model given the very same strings in one call.

Targets: >= 2,000 messages/s keyword-indexed; embedding within 1.2x of the raw embedder; on
LoCoMo, the raw model's time over ``embed_pending``'s >= 0.8 (S19).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (
    HashedEmbedder,
    StopwatchProvider,
    TextMaker,
    embedder_dim,
    load_embedder,
    machine,
    page_cache,
    page_cache_end,
    page_cache_line,
    vectors_missing,  # noqa: E402
)

from hearth import Hearth, Settings  # noqa: E402

BATCH = 10_000
THREAD = 200


def write_messages(scope: Any, persona_id: int, texts: list[str]) -> float:
    """Seconds to write ``texts`` as alternating turns in threads of THREAD messages."""
    conversation_id = None
    started = time.perf_counter()
    for start in range(0, len(texts), BATCH):
        with scope.conversations.store.write():  # the store the messages are written through
            for i in range(start, min(start + BATCH, len(texts))):
                if i % THREAD == 0:
                    conversation_id = scope.conversations.create(persona_id, f"Thread {i // THREAD}").id
                scope.conversations.add_message(conversation_id, "user" if i % 2 == 0 else "assistant", texts[i])
    return time.perf_counter() - started


def fts_floor(texts: list[str], directory: str) -> tuple[float, float]:
    """Messages per second (wall, CPU) of the floor: the same texts inserted into a bare FTS5 table (same tokenizer, one
    transaction per 10,000, WAL) in a scratch database on the same disk, in the same minute of a
    shared machine. No ledger, no message row, no triggers."""
    import sqlite3

    path = Path(directory) / "fts-floor.db"
    conn = sqlite3.connect(str(path), isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("CREATE VIRTUAL TABLE floor_fts USING fts5(content, tokenize='unicode61 remove_diacritics 2')")
        started, cpu = time.perf_counter(), time.process_time()
        for start in range(0, len(texts), BATCH):
            conn.execute("BEGIN")
            conn.executemany("INSERT INTO floor_fts (content) VALUES (?)", ((t,) for t in texts[start:start + BATCH]))
            conn.execute("COMMIT")
        return len(texts) / (time.perf_counter() - started), len(texts) / (time.process_time() - cpu)
    finally:
        conn.close()
        for suffix in ("", "-wal", "-shm"):
            Path(str(path) + suffix).unlink(missing_ok=True)


def fresh(home: str) -> tuple[Any, Any, int]:
    hearth = Hearth(Settings.resolve({"home": home}, environ={}), provider=StopwatchProvider())
    scope = hearth.scope()
    persona = scope.personas.create("companion", "Wren")
    return hearth, scope, persona.id


def labelled_texts(scope: Any, persona_id: int, texts: list[str]) -> list[str]:
    """What embed_pending embeds for these turns: label, text, and the start of the previous turn."""
    from hearth.retrieval.semantic import message_text

    persona = scope.personas.get(persona_id)
    out = []
    for i, text in enumerate(texts):
        label = persona.user_label if i % 2 == 0 else persona.assistant_label
        previous = texts[i - 1] if i % THREAD else ""
        out.append(message_text(label, text, previous))
    return out


def raw_seconds(embedder: Any, texts: list[str], batch: int) -> float:
    from hearth.retrieval.semantic import embed_texts

    started = time.perf_counter()
    for start in range(0, len(texts), batch):
        embed_texts(embedder, texts[start:start + batch])
    return time.perf_counter() - started


def embedding_run(embedder: Any, texts: list[str], label: str) -> dict[str, Any]:
    from hearth.retrieval.semantic import EMBED_BATCH, embed_pending

    with tempfile.TemporaryDirectory() as home:
        hearth, scope, persona_id = fresh(home)
        write_s = write_messages(scope, persona_id, texts)
        embed_texts_list = labelled_texts(scope, persona_id, texts)
        raw_seconds(embedder, embed_texts_list[:EMBED_BATCH], EMBED_BATCH)  # warm the model
        started = time.perf_counter()
        report = embed_pending(hearth.store, embedder, user_id=scope.user_id)
        pipeline_s = time.perf_counter() - started
        raw_s = raw_seconds(embedder, embed_texts_list, EMBED_BATCH)
        hearth.close()
    n = len(texts)
    return {"embedder": label, "messages": n, "embedded": report.messages,
            "write_s": round(write_s, 2), "embed_pending_s": round(pipeline_s, 2), "raw_embedder_s": round(raw_s, 2),
            "with_embeddings_msgs_per_s": round(n / (write_s + pipeline_s)),
            "raw_embedder_texts_per_s": round(n / raw_s),
            "pipeline_over_raw": round(pipeline_s / raw_s, 2) if raw_s else None}


def keyword_run(scope: Any, persona_id: int, texts: list[str], floor_dir: str) -> dict[str, Any]:
    """Keyword-indexed writes beside the bare FTS5 floor, in wall time and in this process's CPU
    time (on a shared machine the CPU rates move far less than the wall rates)."""
    cpu = time.process_time()
    seconds = write_messages(scope, persona_id, texts)
    cpu = time.process_time() - cpu
    floor_rate, floor_cpu_rate = fts_floor(texts, floor_dir)
    rate, cpu_rate = len(texts) / seconds, len(texts) / cpu
    return {"messages": len(texts), "seconds": round(seconds, 2), "msgs_per_s": round(rate),
            "msgs_per_cpu_s": round(cpu_rate), "chars_per_message": round(sum(map(len, texts)) / len(texts)),
            "floor_fts5_msgs_per_s": round(floor_rate), "floor_fts5_msgs_per_cpu_s": round(floor_cpu_rate),
            "floor_over_ingest": round(floor_rate / rate, 2), "floor_over_ingest_cpu": round(floor_cpu_rate / cpu_rate, 2),
            "load_average": [round(x, 1) for x in os.getloadavg()]}


def locomo_run(embedder: Any, conversations: int, batch: int | None = None,
               data: str | None = None) -> dict[str, Any]:
    """The first ``conversations`` LoCoMo conversations saved through the public API (keyword-only
    save), then embedded by ``embed_pending`` (the import's and ``hearth reindex``'s path), beside
    the raw model given the very same strings (speaker label, turn, start of the previous turn) in
    one call, in the same run. The ratio is raw seconds over pipeline seconds (S19: >= 0.8), in
    wall time and in this process's CPU time (steadier on a shared machine)."""
    from locomo import DEFAULT_DATA, load

    from hearth.retrieval.semantic import EMBED_BATCH, _pending_messages, embed_pending, model_id

    samples = json.loads(Path(data or DEFAULT_DATA).read_text())[:conversations]
    with tempfile.TemporaryDirectory() as home:
        hearth = Hearth(Settings.resolve({"home": home}, environ={}), provider=StopwatchProvider())
        started = time.perf_counter()
        for sample in samples:
            load(hearth, sample)
        save_s = time.perf_counter() - started
        texts = [text for _, _, text in _pending_messages(hearth.store.connection(), model_id(embedder), None, 10**9)]
        embedder.embed(texts[:16])  # warm the model
        started, cpu = time.perf_counter(), time.process_time()
        report = embed_pending(hearth.store, embedder, batch=batch or EMBED_BATCH)
        pipeline_s, pipeline_cpu = time.perf_counter() - started, time.process_time() - cpu
        started, cpu = time.perf_counter(), time.process_time()
        embedder.embed(texts)
        raw_s, raw_cpu = time.perf_counter() - started, time.process_time() - cpu
        hearth.close()
    n = len(texts)
    return {"conversations": [s["sample_id"] for s in samples], "turns": n, "embedded": report.messages,
            "batch": batch or EMBED_BATCH, "save_turns_per_s": round(n / save_s, 1),
            "with_embeddings_turns_per_s": round(n / (save_s + pipeline_s), 1),
            "embed_pending_s": round(pipeline_s, 2), "raw_model_s": round(raw_s, 2),
            "raw_model_texts_per_s": round(n / raw_s, 1),
            "ratio_wall": round(raw_s / pipeline_s, 2), "ratio_cpu": round(raw_cpu / pipeline_cpu, 2),
            "load_average": [round(x, 1) for x in os.getloadavg()]}


def run_into(args: argparse.Namespace) -> dict[str, Any]:
    """Ingest into an existing (large) deployment: keyword-indexed writes of ``--messages`` turns,
    removed again afterwards; then ``--embed-messages`` turns embedded by ``embed_pending`` as the
    background job runs it (following its cursor) beside the raw model on the same texts. The
    embedded turns stay (removing them would make the next start rebuild the vector index)."""
    home = Path(args.deployment).expanduser().resolve()
    manifest = json.loads((home / "bench.json").read_text())
    cache = page_cache(home, "cold" if args.cold else "warm")  # a stated input of the run (S16)
    tm = TextMaker(args.seed + 7)
    texts = tm.messages(["user" if i % 2 == 0 else "assistant" for i in range(args.messages)])
    hearth = Hearth(Settings.resolve({"home": str(home)}, environ={}), provider=StopwatchProvider())
    scope = hearth.scope(manifest["user_id"])
    persona_id = scope.conversations.get(manifest["active_conversation_id"]).persona_id
    conn = hearth.store.connection()
    before = conn.execute("SELECT max(id) FROM conversations").fetchone()[0]
    rows = conn.execute("SELECT count(*) FROM messages_fts_docsize").fetchone()[0]
    keyword = keyword_run(scope, persona_id, texts, str(home))
    with hearth.store.write() as w:
        for (cid,) in w.execute("SELECT id FROM conversations WHERE id > ?", (before,)).fetchall():
            w.execute("DELETE FROM conversations WHERE id = ?", (cid,))
    result: dict[str, Any] = {"machine": machine(), "deployment_rows": rows, "keyword": keyword,
                              "page_cache": page_cache_end(cache, home)}
    embedder, reason = load_embedder(hearth)
    if embedder is None:
        result["model"] = reason
        hearth.close()
        return result
    from hearth.retrieval.semantic import EMBED_BATCH, embed_pending, model_id

    sample = texts[:args.embed_messages]
    write_s = write_messages(scope, persona_id, sample)
    labelled = labelled_texts(scope, persona_id, sample)
    raw_seconds(embedder, labelled[:EMBED_BATCH], EMBED_BATCH)  # warm the model
    started = time.perf_counter()
    # As the background job runs it: its cursor, and a pause (here free) before each model call.
    report = embed_pending(hearth.store, embedder, user_id=scope.user_id, follow=True, pause=lambda: None)
    pipeline_s = time.perf_counter() - started
    raw_s = raw_seconds(embedder, labelled, EMBED_BATCH)
    hearth.close()
    n = len(sample)
    result["model"] = {"embedder": model_id(embedder), "messages": n, "embedded": report.messages,
                       "write_s": round(write_s, 2), "embed_pending_s": round(pipeline_s, 2),
                       "raw_embedder_s": round(raw_s, 2), "with_embeddings_msgs_per_s": round(n / (write_s + pipeline_s)),
                       "raw_embedder_texts_per_s": round(n / raw_s),
                       # Per text: the job also embeds whatever else arrived since its cursor.
                       "pipeline_over_raw": round((pipeline_s / max(report.messages, 1)) / (raw_s / n), 2)
                       if raw_s else None}
    return result


def run(args: argparse.Namespace) -> dict[str, Any]:
    tm = TextMaker(args.seed)
    texts = tm.messages(["user" if i % 2 == 0 else "assistant" for i in range(args.messages)])
    result: dict[str, Any] = {"machine": machine()}
    with tempfile.TemporaryDirectory() as home:
        hearth, scope, persona_id = fresh(home)
        result["keyword"] = keyword_run(scope, persona_id, texts, home)
        hearth.close()
    embed_texts_sample = texts[:args.embed_messages]
    probe_hearth, _scope, _ = fresh(tempfile.mkdtemp())
    real, reason = load_embedder(probe_hearth)
    probe_hearth.close()
    if real is None:
        result["model"] = reason
        if vectors_missing():
            result["hashed"] = vectors_missing()
            return result
        result["hashed"] = embedding_run(HashedEmbedder("hashed-stand-in", 384), embed_texts_sample, "hashed stand-in")
        return result
    from hearth.retrieval.semantic import model_id

    result["model"] = embedding_run(real, embed_texts_sample, model_id(real))
    if args.locomo:
        result["locomo"] = locomo_run(real, args.locomo, data=args.locomo_data)
    result["hashed"] = embedding_run(HashedEmbedder(model_id(real), embedder_dim(real)), embed_texts_sample,
                                     "hashed stand-in")
    return result


def print_result(r: dict[str, Any]) -> None:
    print(f"machine: {r['machine']}")
    if "deployment_rows" in r:
        print(f"into a deployment of {r['deployment_rows']:,} indexed messages")
        print(page_cache_line(r["page_cache"]))
    k = r["keyword"]
    print(f"keyword-indexed: {k['messages']:,} messages ({k['chars_per_message']} chars on average) in "
          f"{k['seconds']:.2f} s = {k['msgs_per_s']:,} messages/s, {k['msgs_per_cpu_s']:,} per CPU second (target"
          f" >= 4,000 at 1M); floor (bare FTS5 inserts of the same texts, same run) {k['floor_fts5_msgs_per_s']:,}/s,"
          f" {k['floor_fts5_msgs_per_cpu_s']:,} per CPU second: {k['floor_over_ingest']}x wall,"
          f" {k['floor_over_ingest_cpu']}x CPU; load average {k['load_average']}")
    lo = r.get("locomo")
    if lo:
        print(f"LoCoMo {', '.join(lo['conversations'])}: {lo['turns']:,} turns; keyword-only save "
              f"{lo['save_turns_per_s']:,} turns/s; with embeddings {lo['with_embeddings_turns_per_s']:,} turns/s "
              f"(embed_pending {lo['embed_pending_s']:.2f} s in windows of {lo['batch']}); raw model on the same "
              f"texts in one call {lo['raw_model_s']:.2f} s ({lo['raw_model_texts_per_s']:,} texts/s); raw / "
              f"embed_pending {lo['ratio_wall']} wall, {lo['ratio_cpu']} CPU (target >= 0.8); "
              f"load average {lo['load_average']}")
    for key in ("model", "hashed"):
        e = r.get(key)
        if e is None:
            continue
        if isinstance(e, str):
            print(f"with embeddings ({key}): {e}")
            continue
        print(f"with embeddings ({e['embedder']}): {e['messages']:,} messages, write {e['write_s']:.2f} s + "
              f"embed_pending {e['embed_pending_s']:.2f} s = {e['with_embeddings_msgs_per_s']:,} messages/s; "
              f"raw embedder on the same texts {e['raw_embedder_s']:.2f} s ({e['raw_embedder_texts_per_s']:,} texts/s); "
              f"embed_pending / raw = {e['pipeline_over_raw']} (target <= 1.2 for the model)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=20_000, help="keyword-indexed messages")
    parser.add_argument("--embed-messages", type=int, default=2_000, help="messages for the embedding runs")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--locomo", type=int, default=0, metavar="N",
                        help="also embed the first N LoCoMo conversations beside the raw model (S19)")
    parser.add_argument("--locomo-data", help="LoCoMo file (default: as benchmarks/locomo.py)")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--deployment", help="ingest into this deployment (made by generate.py) instead of a fresh one")
    parser.add_argument("--cold", action="store_true",
                        help="with --deployment: evict its files from the page cache first (else read in, not locked)")
    args = parser.parse_args()
    result = run_into(args) if args.deployment else run(args)
    if args.json:
        print(json.dumps(result))
    else:
        print_result(result)


if __name__ == "__main__":
    main()
