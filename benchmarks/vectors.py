"""Benchmark of the S7 layer: local embedder throughput and vector index latency and recall.

    python benchmarks/vectors.py                 # embedder + 100k index
    python benchmarks/vectors.py --million       # also 1M vectors (several minutes, ~1.5 GB peak)
    python benchmarks/vectors.py --reference     # cosine agreement of int8 ONNX vs a float32 run
    python benchmarks/vectors.py --real 20000    # ANN recall on real MiniLM embeddings of N sentences
    python benchmarks/vectors.py --changes 100000  # S18: a deletion and a restart beside a build

Text comes from docstrings of the Python standard library and the descriptions of installed
packages: real English of mixed length, found on every machine, nothing downloaded. Index data is
"embedding-like": unit vectors near a random 24-dimensional subspace plus noise, which has the
neighbour structure of sentence embeddings; ``--isotropic`` adds the pathological uniform case.
"""

from __future__ import annotations

import argparse
import ast
import importlib.metadata
import json
import os
import re
import statistics
import struct
import sys
import sysconfig
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from hearth.retrieval import embedder as emb  # noqa: E402
from hearth.retrieval.vectors import VectorIndex  # noqa: E402
from hearth.text import unit_rows  # noqa: E402

DIM = 384


# -- text -------------------------------------------------------------------------------------


def corpus(limit: int) -> list[str]:
    """Up to ``limit`` distinct sentences, shortest messages to short paragraphs."""
    bodies: list[str] = []
    for dist in importlib.metadata.distributions():
        bodies.append(dist.metadata.get_payload() or "")
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    for path in sorted(stdlib.glob("*.py")) + sorted(stdlib.glob("*/*.py")):
        try:
            tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
        except (SyntaxError, ValueError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                doc = ast.get_docstring(node)
                if doc:
                    bodies.append(doc)
        if len(bodies) > limit * 2:
            break
    seen: dict[str, None] = {}
    for body in bodies:
        for sentence in re.split(r"(?<=[.!?])\s+", re.sub(r"\s+", " ", body)):
            if 15 <= len(sentence) <= 600 and sum(c.isalpha() for c in sentence) > 0.6 * len(sentence):
                seen.setdefault(sentence, None)
        if len(seen) >= limit:
            break
    return list(seen)[:limit]


def messages(n: int) -> list[str]:
    """Chat-sized messages: one to three sentences each."""
    sentences = corpus(n * 2)
    out, i, rng = [], 0, np.random.default_rng(0)
    while len(out) < n and i < len(sentences):
        take = int(rng.integers(1, 4))
        out.append(" ".join(sentences[i : i + take]))
        i += take
    return out


# -- embedder -------------------------------------------------------------------------------


def bench_embedder(n: int, runs: int) -> None:
    texts = messages(n)
    words = statistics.mean(len(t.split()) for t in texts)
    print(f"\nEmbedder {emb.LOCAL_MODEL_NAME}: {len(texts)} messages, mean {words:.0f} words, "
          f"median of {runs} runs, {os.cpu_count()} cores")
    for threads in (1, 2):
        for batch in (1, 8, 16, 32):
            model = emb.LocalEmbedder(batch_size=batch, threads=threads)
            t = time.perf_counter()
            model.load()
            load_s = time.perf_counter() - t
            rates = []
            for _ in range(runs):
                t = time.perf_counter()
                model.embed(texts)
                rates.append(len(texts) / (time.perf_counter() - t))
            print(f"  threads={threads} batch={batch:>2}: {statistics.median(rates):7.1f} msg/s "
                  f"(load {load_s:.2f}s)")
    model = emb.LocalEmbedder()
    model.embed(["warm up"])
    single = []
    for text in texts[:100]:
        t = time.perf_counter()
        model.embed([text])
        single.append((time.perf_counter() - t) * 1000)
    print(f"  one query (send path): median {statistics.median(single):.1f} ms, "
          f"p99 {np.percentile(single, 99):.1f} ms")


# -- float32 reference ----------------------------------------------------------------------


def _safetensors(path: Path) -> dict[str, np.ndarray]:
    with open(path, "rb") as handle:
        (size,) = struct.unpack("<Q", handle.read(8))
        header = json.loads(handle.read(size))
        data = handle.read()
    kinds = {"F32": np.float32, "I64": np.int64}
    return {name: np.frombuffer(data[a:b], dtype=kinds[v["dtype"]]).reshape(v["shape"])
            for name, v in header.items() if name != "__metadata__"
            for a, b in [v["data_offsets"]]}


def _erf(x: np.ndarray) -> np.ndarray:
    # Abramowitz and Stegun 7.1.26 (error < 1.5e-7): numpy has no erf and BERT's GELU needs one.
    sign, x = np.sign(x), np.abs(x)
    t = 1 / (1 + 0.3275911 * x)
    poly = ((((1.061405429 * t - 1.453152027) * t + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t
    return sign * (1 - poly * np.exp(-x * x))


def reference_embed(texts: list[str]) -> np.ndarray:
    """all-MiniLM-L6-v2 in float32 numpy from the safetensors weights (slow, for agreement only)."""
    model_dir = emb.package_file(emb.TOKENIZER_PACKAGE, "model", emb.TOKENIZER_DISTRIBUTION)
    w = _safetensors(model_dir / "model.safetensors")
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    tok.no_padding()
    tok.enable_truncation(emb.MAX_TOKENS)

    def norm(x: np.ndarray, prefix: str) -> np.ndarray:
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        return (x - mean) / np.sqrt(var + 1e-12) * w[prefix + ".weight"] + w[prefix + ".bias"]

    out = []
    for text in texts:
        ids = np.asarray(tok.encode(text).ids)
        x = w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][: len(ids)]
        x = norm(x + w["embeddings.token_type_embeddings.weight"][0], "embeddings.LayerNorm")
        for layer in range(6):
            p = f"encoder.layer.{layer}."

            def lin(h: np.ndarray, name: str, p: str = p) -> np.ndarray:
                return h @ w[p + name + ".weight"].T + w[p + name + ".bias"]

            q, k, v = (lin(x, f"attention.self.{n}").reshape(-1, 12, 32).transpose(1, 0, 2)
                       for n in ("query", "key", "value"))
            s = q @ k.transpose(0, 2, 1) / np.sqrt(32)
            s = np.exp(s - s.max(-1, keepdims=True))
            ctx = ((s / s.sum(-1, keepdims=True)) @ v).transpose(1, 0, 2).reshape(-1, DIM)
            x = norm(lin(ctx, "attention.output.dense") + x, p + "attention.output.LayerNorm")
            h = lin(x, "intermediate.dense")
            h = 0.5 * h * (1 + _erf(h / np.sqrt(2)))
            x = norm(lin(h, "output.dense") + x, p + "output.LayerNorm")
        out.append(x.mean(0))
    return unit_rows(np.vstack(out))


def bench_reference(n: int) -> None:
    texts = messages(n)
    ref = reference_embed(texts)
    got = emb.LocalEmbedder().embed(texts)
    cos = (ref * got).sum(1)
    print(f"\nint8 ONNX vs float32 reference on {len(texts)} messages: cosine mean {cos.mean():.5f}, "
          f"min {cos.min():.5f}")


# -- index ----------------------------------------------------------------------------------


def embedding_like(n: int, seed: int, rank: int = 24, noise: float = 0.15) -> np.ndarray:
    rng = np.random.default_rng(seed)
    basis = rng.standard_normal((rank, DIM)).astype(np.float32)
    out = np.empty((n, DIM), dtype=np.float32)
    for start in range(0, n, 100_000):  # in slices to keep the float32 temporaries small
        m = min(n, start + 100_000) - start
        x = rng.standard_normal((m, rank)).astype(np.float32) @ basis
        x /= np.linalg.norm(x, axis=1, keepdims=True)
        x += rng.standard_normal((m, DIM)).astype(np.float32) * (noise / np.sqrt(DIM))
        out[start : start + m] = x / np.linalg.norm(x, axis=1, keepdims=True)
    return out


def isotropic(n: int, seed: int) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal((n, DIM)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def latency(index: VectorIndex, queries: np.ndarray, **kwargs) -> tuple[float, float]:
    times = []
    for q in queries:
        t = time.perf_counter()
        index.search(q, 10, **kwargs)
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times), float(np.percentile(times, 99))


def bench_index(label: str, data: np.ndarray, queries: np.ndarray, efs: list[int] | None = None) -> None:
    n = len(data)
    ids = np.arange(1, n + 1, dtype=np.int64)
    print(f"\nIndex, {label}: {n:,} x {DIM}, {len(queries)} queries, k=10")
    truth = []
    for q in queries:
        scores = data @ q
        truth.append(set(ids[np.argpartition(-scores, 10)[:10]].tolist()))

    exact = VectorIndex(DIM, ann_threshold=n + 1)
    t = time.perf_counter()
    exact.add(ids, data)
    load = time.perf_counter() - t
    med, p99 = latency(exact, queries)
    print(f"  exact float32: load {load:.1f}s, "
          f"{exact.memory_bytes / 2**20:.0f} MiB, query median {med:.2f} ms, p99 {p99:.2f} ms")
    del exact

    ann = VectorIndex(DIM, ann_threshold=0)
    t = time.perf_counter()
    for start in range(0, n, 50_000):
        ann.add(ids[start : start + 50_000], data[start : start + 50_000])
    build = time.perf_counter() - t
    med, p99 = latency(ann, queries)
    hits = sum(len(tr & {i for i, _ in ann.search(q, 10)}) for q, tr in zip(queries, truth))
    print(f"  ann usearch {ann.ann_dtype} M={ann.connectivity} ef_add={ann.expansion_add} "
          f"ef={ann.effective_expansion(n)}: build {build:.1f}s, {ann.memory_bytes / 2**20:.0f} MiB, "
          f"query median {med:.2f} ms, p99 {p99:.2f} ms, recall@10 {hits / (10 * len(queries)):.3f}")
    for ef in efs or []:
        ann.expansion_search = ef
        med, p99 = latency(ann, queries)
        hits = sum(len(tr & {i for i, _ in ann.search(q, 10)}) for q, tr in zip(queries, truth))
        print(f"    ef={ef}: query median {med:.2f} ms, p99 {p99:.2f} ms, "
              f"recall@10 {hits / (10 * len(queries)):.3f}")
    ann.expansion_search = None
    rng = np.random.default_rng(1)
    for share in (0.01, 0.3):
        allowed = rng.choice(ids, int(n * share), replace=False)
        med, p99 = latency(ann, queries[:50], allowed_ids=allowed)
        print(f"  ann filtered to {share:.0%} of ids: median {med:.2f} ms, p99 {p99:.2f} ms")


def _restore(graph: Path) -> object:
    from hearth.retrieval.vectors import _usearch_index

    return _usearch_index().restore(str(graph))


def bench_changes(n: int, queries: int) -> None:
    """S18: what a deletion and a restart cost an in-process graph of ``n`` vectors, beside a
    build from the table (the cost before) and a graph search (the floor), in one run. The table
    is a real Hearth database file; its vectors are inserted directly (no messages behind them)."""
    import sqlite3
    import tempfile

    from hearth.retrieval import semantic
    from hearth.retrieval.vectors import to_blob
    from hearth.store.connection import Store

    data = embedding_like(n + queries, seed=n + 18)
    probes, data = data[:queries], data[queries:]
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "hearth.db"
        Store(path).close()  # the schema, by the migrations
        raw = sqlite3.connect(path)  # foreign keys off: vectors without messages behind them
        with raw:
            raw.executemany("INSERT INTO message_embeddings (message_id, user_id, model, embedding) VALUES (?, 1, 'm', ?)",
                            ((i + 1, to_blob(v)) for i, v in enumerate(data)))
        db_key = str(path)
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)

        def cache() -> semantic.IndexCache:
            made = semantic.IndexCache(ann_threshold=min(n - 1, 100_000))
            made.background_above = 0  # every build in the background, as above 100,000 vectors
            return made

        def timed(call) -> tuple[float, object]:
            t = time.perf_counter()
            out = call()
            return (time.perf_counter() - t) * 1000, out

        def delete(message_id: int) -> None:
            with raw:
                raw.execute("DELETE FROM message_embeddings WHERE message_id = ?", (message_id,))

        print(f"\nDeletions and restarts (S18), {n:,} x {DIM} vectors in a graph, "
              f"{len(probes)} queries, k=10")
        first = cache()
        build_ms, index = timed(lambda: first.get(conn, db_key, "messages", 1, "m", DIM))
        floor = latency(index, probes)
        print(f"  floor: graph search median {floor[0]:.2f} ms, p99 {floor[1]:.2f} ms")
        print(f"  build from the table and save (before: any change but an addition): {build_ms / 1000:.1f} s")
        delete(n // 2)
        ms, _ = timed(lambda: first.get(conn, db_key, "messages", 1, "m", DIM, wait=False))
        print(f"  one deletion, taken out in place at the next search: {ms:.0f} ms "
              f"({ms / floor[0]:.0f}x the search, {build_ms / ms:.0f}x less than the build)")
        ms, _ = timed(lambda: first.drop_saved(db_key, 1))
        print(f"  the forget's job saving the graph again, its free slot overwritten: {ms:.0f} ms")
        delete(n // 3)
        restarted = cache()
        ms, index = timed(lambda: restarted.get(conn, db_key, "messages", 1, "m", DIM, wait=False))
        search_ms, _ = timed(lambda: index.search(probes[0], 10))
        print(f"  restart: saved graph loaded and one deletion since applied: {ms:.0f} ms, first search "
              f"{search_ms:.1f} ms ({(ms + search_ms) / 1000:.2f} s to the first answer; "
              f"{build_ms / (ms + search_ms):.0f}x less than the build)")
        # Restarts again (the deletion since the save still applied each time), each beside the
        # floor: usearch reading the same file alone.
        graph = next(p for p in Path(db_key + ".vectors").iterdir() if not p.name.endswith(".json"))
        starts, floors = [], []
        for _ in range(3):
            floors.append(timed(lambda: _restore(graph))[0])
            starts.append(timed(lambda: cache().get(conn, db_key, "messages", 1, "m", DIM, wait=False))[0])
        print(f"  restart, 3 more: median {statistics.median(starts):.0f} ms beside usearch reading the file alone "
              f"{statistics.median(floors):.0f} ms ({statistics.median(starts) / statistics.median(floors):.1f}x)")
        with raw:
            raw.execute("UPDATE message_embeddings SET embedding = ? WHERE message_id = ?", (to_blob(probes[1]), 7))
        ms, _ = timed(lambda: restarted.get(conn, db_key, "messages", 1, "m", DIM, wait=False))
        print(f"  a vector replaced under its id (no id changed): every stored vector compared with the "
              f"graph's copy: {ms:.0f} ms ({build_ms / ms:.0f}x less than the build)")
        times = []
        for probe in probes[:5]:
            t = time.perf_counter()
            semantic.exact_table_search(conn, "messages", 1, "m", probe[None, :], 10)
            times.append((time.perf_counter() - t) * 1000)
        print(f"  exact search over the table while a build runs (missing or stale file): median "
              f"{statistics.median(times):.0f} ms over 5 ({statistics.median(times) / floor[0]:.0f}x the graph search)")
        conn.close()
        raw.close()


def bench_real(n: int) -> None:
    texts = corpus(n + 200)
    model = emb.LocalEmbedder()
    t = time.perf_counter()
    vectors = model.embed(texts)
    print(f"\nReal embeddings: {len(texts)} sentences embedded in {time.perf_counter() - t:.0f}s")
    bench_index("real MiniLM embeddings", vectors[200:], vectors[:200])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=256)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--million", action="store_true", help="also benchmark 1M vectors")
    parser.add_argument("--isotropic", action="store_true", help="also uniform random vectors")
    parser.add_argument("--reference", action="store_true", help="int8 vs float32 agreement")
    parser.add_argument("--real", type=int, default=0, help="ANN recall on N real embeddings")
    parser.add_argument("--skip-embedder", action="store_true")
    parser.add_argument("--sizes", type=int, nargs="*", help="index sizes instead of 100k [+1M]")
    parser.add_argument("--ef", type=int, nargs="*", default=[], help="extra expansion_search values")
    parser.add_argument("--changes", type=int, default=0,
                        help="only the S18 figures (deletion, restart, exact fallback) at N vectors")
    args = parser.parse_args()

    if args.changes:
        bench_changes(args.changes, min(args.queries, 100))
        return

    if not args.skip_embedder:
        bench_embedder(args.messages, args.runs)
    if args.reference:
        bench_reference(min(args.messages, 200))
    if args.real:
        bench_real(args.real)
    sizes = args.sizes or [100_000] + ([1_000_000] if args.million else [])
    for n in sizes:
        data = embedding_like(n + args.queries, seed=n)
        bench_index("embedding-like", data[args.queries :], data[: args.queries], args.ef)
        del data
        if args.isotropic:
            data = isotropic(n + args.queries, seed=n)
            bench_index("isotropic random", data[args.queries :], data[: args.queries], args.ef)
            del data


if __name__ == "__main__":
    main()
