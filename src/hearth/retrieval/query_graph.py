"""The local model's query graph, derived in a child process (S7).

``LocalEmbedder.load_queries`` runs ``python -m hearth.retrieval.query_graph MODEL`` and opens the
graph from the bytes the child writes to its standard output. The derivation needs onnx and
onnxruntime's quantization tools, about 3 s and 400 MB at its peak; in a child process none of that
stays in the server's memory, and a server stopped mid-derivation leaves nothing behind: the child
finishes, or on a stop signal of its own (a terminal's Ctrl-C reaches the whole process group)
removes its one temporary folder, where onnxruntime's working copies are made too, and exits.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from types import FrameType

from ..errors import ConfigError
from ..extras import check_installed, require

# Well above the 3 s a derivation takes on a small machine; a child that never answers is an error.
CHILD_TIMEOUT_S = 600


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
    return derived


def derived_bytes(model_path: Path) -> bytes:
    """The query graph of ``model_path``, derived by a child process."""
    for module in ("onnx", "onnxruntime.quantization"):
        check_installed(module, "local", "the local embedding model's query graph")
    try:
        child = subprocess.run([sys.executable, "-m", __name__, str(model_path)], capture_output=True,
                               timeout=CHILD_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        raise ConfigError(f"Deriving the local model's query graph took over {CHILD_TIMEOUT_S} s") from None
    if child.returncode != 0 or not child.stdout:
        reason = (child.stderr.decode(errors="replace").strip().splitlines() or ["no message"])[-1]
        raise ConfigError(f"Deriving the local model's query graph failed (exit code {child.returncode}): "
                          f"{reason}")
    return child.stdout


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
        graph = derive(Path(argv[0]), scratch).read_bytes()
    finally:
        shutil.rmtree(scratch)
    sys.stdout.buffer.write(graph)
    sys.stdout.buffer.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
