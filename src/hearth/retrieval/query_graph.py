"""The local model's query graph, derived in a child process (S7) once per model file (S20).

``LocalEmbedder.load_queries`` asks ``graph_bytes``: the graph from the user's cache folder when
one derived from the same model file is there (the file is named for the model's SHA-256 and the
versions of the tools that derive it, and holds a digest of the graph that is checked on every
read), otherwise ``python -m hearth.retrieval.query_graph MODEL``, whose standard output is the
graph, then written to the cache atomically (a temporary file in the same folder, renamed). A
cache file that does not match its digest is derived again and replaced; a cache folder that
cannot be written costs the derivation on every start, nothing else. The derivation needs onnx and
onnxruntime's quantization tools, about 3 s and 400 MB at its peak; in a child process none of that
stays in the server's memory, and a server stopped mid-derivation leaves nothing behind: the child
finishes, or on a stop signal of its own (a terminal's Ctrl-C reaches the whole process group)
removes its one temporary folder, where onnxruntime's working copies are made too, and exits.

A start reads no file twice to learn what it holds: the SHA-256 of the model file, of the
tokenizer and of the cached graph is remembered in the cache folder (``file-digests.json``),
each under the file's path and identity (device, inode, size, modification and change times, in
nanoseconds) when it was hashed, and hashed again only when one of those differs. The change
time moves on every write, and no program can set it back, so a file changed in place is hashed
again even if its modification time was restored; a file whose times are less than
``SETTLED_S`` old is not remembered (a second write within the clock's tick would keep them).
Without a cache folder every file is hashed on every start, as before.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import FrameType
from typing import Any

from ..errors import ConfigError
from ..extras import check_installed, require

log = logging.getLogger(__name__)

# Well above the 3 s a derivation takes on a small machine; a child that never answers is an error.
CHILD_TIMEOUT_S = 600
# Bumped when ``derive`` changes what it makes, so an older cached graph is not used.
DERIVATION = 2
CACHE_MAGIC = b"hearth-query-graph\n"
DIGEST_BYTES = 64  # hex SHA-256 of the graph, after the magic line


DIGESTS_FILE = "file-digests.json"
SETTLED_S = 1.0  # a file's times must be this old before its digest is remembered by them


class Counts:
    """What this process did for its query graph (numbers only; the S20 test reads them)."""

    derived = 0  # child processes started
    from_cache = 0  # graphs read from the cache folder
    rejected = 0  # cache files that did not match their digest
    hashed = 0  # files read to hash them (the model, the tokenizer, a cached graph)


# -- digests remembered by file identity -------------------------------------------------------------
def identity(stat: os.stat_result) -> list[int]:
    return [stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns]


def remembered(cache_dir: Path | None, path: Path, stat: os.stat_result) -> str | None:
    """The SHA-256 remembered for ``path`` when it had this identity, or None."""
    if cache_dir is None:
        return None
    entry = _digests(cache_dir).get(str(path))
    if isinstance(entry, list) and len(entry) == 6 and entry[:5] == identity(stat) and isinstance(entry[5], str):
        return entry[5]
    return None


def remember(cache_dir: Path | None, path: Path, stat: os.stat_result, digest: str) -> None:
    """Keep ``digest`` for ``path`` with the identity it had before it was read (a write while it
    was being read changes the identity, so that digest is never trusted for the new content)."""
    if cache_dir is None or time.time_ns() - max(stat.st_mtime_ns, stat.st_ctime_ns) < SETTLED_S * 1e9:
        return
    known = _digests(cache_dir)
    known[str(path)] = [*identity(stat), digest]
    temporary: str | None = None
    try:
        cache_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        handle, temporary = tempfile.mkstemp(prefix=".file-digests-", suffix=".tmp", dir=cache_dir)
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            json.dump(known, out)
        os.replace(temporary, cache_dir / DIGESTS_FILE)
        temporary = None
    except OSError as exc:
        # Not a warning: a folder that cannot be written is already one for the graph it cannot keep.
        log.debug("file digests not remembered (%s); the next start hashes the files again", type(exc).__name__)
    finally:
        if temporary is not None:
            Path(temporary).unlink(missing_ok=True)


def _digests(cache_dir: Path) -> dict:
    try:
        with open(cache_dir / DIGESTS_FILE, encoding="utf-8") as handle:
            found = json.load(handle)
    except (OSError, ValueError):
        return {}  # none yet, or unreadable: every file is hashed, and the file written again
    return found if isinstance(found, dict) else {}


def file_sha256(path: Path, cache_dir: Path | None = None) -> str:
    """The SHA-256 of a file: remembered in ``cache_dir`` by the file's identity, else read."""
    stat = os.stat(path)
    digest = remembered(cache_dir, path, stat)
    if digest is None:
        Counts.hashed += 1
        hasher = hashlib.sha256()
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                hasher.update(block)
        digest = hasher.hexdigest()
        remember(cache_dir, path, stat, digest)
    return digest


def derive(model_path: Path, folder: Path) -> Path:
    """Derive the query graph from ``model_path`` into ``folder`` with onnxruntime's own tools and
    return its path.

    ``quant_pre_process`` folds the stored int8 weights into float ones (as a session does when it
    loads the file) and infers the shapes; ``quantize_dynamic`` then keeps each matrix product's
    weights in int8, one scale per output channel, and quantizes its input on every call. The
    feed-forward down-projections stay in float: their input, the GELU's output, has a few large
    values that one uint8 scale per call cannot hold, and quantizing them too cost LoCoMo R@10
    0.006 (docs/embeddings.md). Their weights are the only ones with more rows than columns."""
    onnx = require("onnx", "local", "the local embedding model's query graph")
    quantization = require("onnxruntime.quantization", "local", "the local embedding model's query graph")
    from onnxruntime.quantization.shape_inference import quant_pre_process

    prepared, derived = folder / "prepared.onnx", folder / "query.onnx"
    quant_pre_process(str(model_path), str(prepared), skip_symbolic_shape=True)
    graph = onnx.load(str(prepared))
    shapes = {tensor.name: tuple(tensor.dims) for tensor in graph.graph.initializer}
    down = [node.name for node in graph.graph.node
            if node.op_type == "MatMul" and len(shapes.get(node.input[1], ())) == 2
            and shapes[node.input[1]][0] > shapes[node.input[1]][1]]
    quantization.quantize_dynamic(graph, str(derived), weight_type=quantization.QuantType.QInt8,
                                  per_channel=True, op_types_to_quantize=["MatMul"], nodes_to_exclude=down)
    graph = onnx.load(str(derived))
    _word_table_in_int8_rows(graph)
    onnx.save(graph, str(derived))
    return derived


def _word_table_in_int8_rows(graph: Any) -> None:
    """Keep the word-embedding table (two thirds of the graph's bytes, float once
    ``quant_pre_process`` folded it) in int8 with one scale per row, and turn only the rows a query
    looks up back into floats: a graph half the size opens in half the time, which a short-lived
    ``hearth search`` pays on every start (S20). One scale per row keeps each query vector within
    a cosine of 0.9999 of the float table's (docs/embeddings.md)."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    tables = {t.name: t for t in graph.graph.initializer}
    lookup = next(n for n in graph.graph.node if n.op_type == "Gather" and n.input[0] in tables
                  and "word_embeddings" in n.input[0])
    table, ids, out = lookup.input[0], lookup.input[1], lookup.output[0]
    weights = numpy_helper.to_array(tables[table]).astype(np.float32)
    scale = np.maximum(np.abs(weights).max(axis=1, keepdims=True), 1e-12) / 127.0
    rows = np.clip(np.rint(weights / scale), -127, 127).astype(np.int8)
    graph.graph.initializer.remove(tables[table])
    graph.graph.initializer.extend([numpy_helper.from_array(rows, f"{table}_int8"),
                                    numpy_helper.from_array(scale.astype(np.float32), f"{table}_scale")])
    at = list(graph.graph.node).index(lookup)
    graph.graph.node.remove(lookup)
    for offset, node in enumerate([
        helper.make_node("Gather", [f"{table}_int8", ids], [f"{out}_int8"], name=f"{lookup.name}_int8", axis=0),
        helper.make_node("Cast", [f"{out}_int8"], [f"{out}_float"], name=f"{lookup.name}_cast", to=TensorProto.FLOAT),
        helper.make_node("Gather", [f"{table}_scale", ids], [f"{out}_scale"], name=f"{lookup.name}_scale", axis=0),
        helper.make_node("Mul", [f"{out}_float", f"{out}_scale"], [out], name=f"{lookup.name}_rows"),
    ]):
        graph.graph.node.insert(at + offset, node)


def optimized(graph_path: Path, folder: Path) -> Path:
    """The graph with onnxruntime's hardware-independent optimizations (constant folding, the
    fusions of the extended level) applied ahead and saved: a process opening it turns them off
    (``embedder._session``), which takes about 40% off opening the session, paid by every
    short-lived ``hearth search`` (S20). The layout changes of the highest level are left to no one:
    they depend on the CPU, and this graph's products are already int8."""
    onnxruntime = require("onnxruntime", "local", "the local embedding model")
    out = folder / "optimized.onnx"
    options = onnxruntime.SessionOptions()
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    options.optimized_model_filepath = str(out)
    onnxruntime.InferenceSession(str(graph_path), options, providers=["CPUExecutionProvider"])
    return out


def derived_bytes(model_path: Path) -> bytes:
    """The query graph of ``model_path``, derived by a child process."""
    for module in ("onnx", "onnxruntime.quantization"):
        check_installed(module, "local", "the local embedding model's query graph")
    Counts.derived += 1
    started = time.perf_counter()
    try:
        child = subprocess.run([sys.executable, "-m", __name__, str(model_path)], capture_output=True,
                               timeout=CHILD_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        raise ConfigError(f"Deriving the local model's query graph took over {CHILD_TIMEOUT_S} s") from None
    if child.returncode != 0 or not child.stdout:
        reason = (child.stderr.decode(errors="replace").strip().splitlines() or ["no message"])[-1]
        raise ConfigError(f"Deriving the local model's query graph failed (exit code {child.returncode}): "
                          f"{reason}")
    log.info("query graph derived in %.1f s (%d bytes)", time.perf_counter() - started, len(child.stdout))
    return child.stdout


def cache_path(cache_dir: Path, model_sha256: str) -> Path:
    """Where the graph of the model file with this SHA-256 is kept; the tools' versions are part of
    the name, since another onnxruntime may derive another graph."""
    tools = "-".join(_version(name) for name in ("onnx", "onnxruntime"))
    return cache_dir / f"query-graph-{model_sha256}-d{DERIVATION}-{tools}.onnx"


def _version(distribution: str) -> str:
    from importlib import metadata  # here: it imports the email package, which a start has no use for

    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "none"


def read_cached(path: Path, digests: Path | None = None) -> bytes | None:
    """The graph in a cache file, or None when there is none or it does not match its digest. With
    ``digests`` (the cache folder), a file whose identity is remembered with that digest is not
    hashed again."""
    try:
        with open(path, "rb") as handle:
            stat = os.fstat(handle.fileno())  # of the file read, before it is read
            head = handle.read(len(CACHE_MAGIC) + DIGEST_BYTES + 1)
            graph = handle.read()  # read apart from its header: 70 MB are not copied once more
    except FileNotFoundError:
        return None
    except OSError as exc:
        log.warning("query graph cache unreadable (%s); deriving it", type(exc).__name__)
        return None
    stated = head[len(CACHE_MAGIC):len(CACHE_MAGIC) + DIGEST_BYTES].decode("ascii", "replace")
    if head.startswith(CACHE_MAGIC) and graph and remembered(digests, path, stat) == stated:
        return graph
    if not head.startswith(CACHE_MAGIC) or not graph or _sha256(graph) != stated:
        Counts.rejected += 1
        log.warning("query graph cache file does not match its digest (%d bytes); deriving it again",
                    len(head) + len(graph))
        return None
    remember(digests, path, stat, stated)
    return graph


def _sha256(data: bytes) -> str:
    Counts.hashed += 1
    return hashlib.sha256(data).hexdigest()


def write_cached(path: Path, graph: bytes) -> bool:
    """Keep ``graph`` at ``path`` atomically: readers see the old file, no file, or the whole new
    one. False (and a warning) when the folder cannot be written."""
    temporary: str | None = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        handle, temporary = tempfile.mkstemp(prefix=".query-graph-", suffix=".tmp", dir=path.parent)
        with os.fdopen(handle, "wb") as out:
            out.write(CACHE_MAGIC + hashlib.sha256(graph).hexdigest().encode() + b"\n" + graph)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, path)
        temporary = None
        return True
    except OSError as exc:
        log.warning("query graph cache not written (%s); the next start derives it again", type(exc).__name__)
        return False
    finally:
        if temporary is not None:
            Path(temporary).unlink(missing_ok=True)


def graph_bytes(model_path: Path, model_sha256: str, cache_dir: Path | None) -> bytes:
    """The query graph of the model file with this SHA-256: from the cache, or derived and cached."""
    if cache_dir is None:
        return derived_bytes(model_path)
    path = cache_path(cache_dir, model_sha256)
    graph = read_cached(path, cache_dir)
    if graph is not None:
        Counts.from_cache += 1
        log.info("query graph read from the cache (%d bytes)", len(graph))
        return graph
    graph = derived_bytes(model_path)
    write_cached(path, graph)
    return graph


def main(argv: list[str]) -> int:
    # Every temporary file of the derivation, onnxruntime's own included (they ask ``tempfile``),
    # goes into one folder of ours, removed on the way out however the process is asked to stop.
    scratch = Path(tempfile.mkdtemp(prefix="hearth-query-graph-"))
    tempfile.tempdir = str(scratch)

    def stop(signum: int, frame: FrameType | None) -> None:
        # Not an exception: raised inside a callback from onnx's C++ code, one would end the
        # process in an abort that skips every cleanup.
        shutil.rmtree(scratch, ignore_errors=True)  # best effort: the process ends either way
        os._exit(128 + signum)

    for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(signum, stop)
    try:
        graph = optimized(derive(Path(argv[0]), scratch), scratch).read_bytes()
    finally:
        shutil.rmtree(scratch)
    sys.stdout.buffer.write(graph)
    sys.stdout.buffer.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
