"""formats.gguf: the reader matches gguf-py on real files; every bad file is one ModelLoadError."""

from __future__ import annotations

import struct
import time
from pathlib import Path

import numpy as np
import pytest
from gguf import GGMLQuantizationType, GGUFReader, GGUFWriter
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from localllm.errors import ModelLoadError
from localllm.formats.gguf import GGUFFile

Q = GGMLQuantizationType


def write_tiny(
    path: Path, tensors: dict[str, tuple[np.ndarray, Q | None]], n_tokens: int = 8
) -> Path:
    """A small GGUF through the gguf writer: a few metadata keys, a vocab and `tensors`."""
    w = GGUFWriter(path, "llama")
    w.add_block_count(1)
    w.add_context_length(64)
    w.add_string("general.name", "tiny")
    w.add_token_list([f"tok{i}" for i in range(n_tokens)])
    w.add_token_scores([float(-i) for i in range(n_tokens)])
    w.add_token_types([1] * n_tokens)
    for name, (arr, raw_dtype) in tensors.items():
        w.add_tensor(name, arr, raw_dtype=raw_dtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def simple_tensors() -> dict[str, tuple[np.ndarray, Q | None]]:
    rng = np.random.default_rng(0)
    return {
        "norm.weight": (rng.standard_normal(64).astype(np.float32), None),
        "w.weight": (rng.integers(0, 256, (4, 2 * 34), dtype=np.uint8), Q.Q8_0),
    }


def load_error(path: Path) -> str:
    with pytest.raises(ModelLoadError) as e:
        GGUFFile(path)
    msg = str(e.value)
    assert str(path) in msg and "\n" not in msg
    return e.value.reason


# ---- the reader agrees with gguf-py -------------------------------------------------------


@pytest.mark.parametrize(
    "rel",
    ["models/pycode-22m-q4_k_m.gguf", "models/stories260K.gguf"],
)
def test_matches_gguf_reader(testdata, rel: str) -> None:
    path = testdata / rel
    ours, ref = GGUFFile(path), GGUFReader(path)
    keys = [k for k in ref.fields if not k.startswith("GGUF.")]
    assert list(ours.metadata) == keys
    for k in keys:
        assert ours.metadata[k] == ref.fields[k].contents(), k
    assert [t.name for t in ref.tensors] == list(ours.tensors)
    for t in ref.tensors:
        raw = ours.tensors[t.name]
        assert raw.qtype == t.tensor_type and raw.shape == tuple(reversed(t.shape.tolist()))
        assert raw.data.dtype == t.data.dtype and raw.data.shape == t.data.shape
        assert np.array_equal(raw.data.view(np.uint8), t.data.view(np.uint8))
    assert ours.data_offset == ref.data_offset


def test_tiny_roundtrip(tmp_path) -> None:
    tensors = simple_tensors()
    g = GGUFFile(write_tiny(tmp_path / "t.gguf", tensors))
    assert g.arch == "llama" and g.get("llama.block_count") == 1 and g.version == 3
    assert g.get("tokenizer.ggml.tokens")[3] == "tok3"
    assert g.get("tokenizer.ggml.scores")[2] == -2.0
    assert g.tensor("w.weight").shape == (4, 64) and g.tensor("w.weight").qtype == Q.Q8_0
    assert np.array_equal(g.tensor("norm.weight").data, tensors["norm.weight"][0])
    with pytest.raises(ModelLoadError, match="missing tensor 'nope'"):
        g.tensor("nope")
    with pytest.raises(ModelLoadError, match="missing metadata key"):
        g.require("llama.nope")


def test_large_vocab_metadata_is_fast(tmp_path) -> None:
    n = 128_256
    path = write_tiny(tmp_path / "v.gguf", simple_tensors(), n_tokens=n)
    t0 = time.perf_counter()
    g = GGUFFile(path)
    elapsed = time.perf_counter() - t0
    assert (
        len(g.get("tokenizer.ggml.tokens")) == n
        and g.get("tokenizer.ggml.tokens")[-1] == f"tok{n - 1}"
    )
    assert elapsed < 1.0, f"opening a {n}-token vocab took {elapsed:.2f} s"


# ---- bad files ----------------------------------------------------------------------------


def test_missing_path(tmp_path) -> None:
    assert load_error(tmp_path / "nope.gguf") == "no such file"


def test_directory(tmp_path) -> None:
    assert "directory" in load_error(tmp_path)


@pytest.mark.parametrize("content", [b"", b"GG", b"hello, this is a text file\n" * 10])
def test_not_gguf(tmp_path, content: bytes) -> None:
    p = tmp_path / "x.gguf"
    p.write_bytes(content)
    assert "not a GGUF file" in load_error(p)


def _section_offsets(path: Path) -> dict[str, int]:
    """Byte offsets inside each part of a real file: header, metadata, tensor infos, data."""
    data = path.read_bytes()
    ref = GGUFReader(path)
    first_info = min(t.field.offset for t in ref.tensors)
    last = max(ref.tensors, key=lambda t: t.data_offset)
    return {
        "header": 12,
        "metadata": (24 + first_info) // 2,
        "tensor info": first_info + 20,
        f"tensor {ref.tensors[0].name!r}": ref.tensors[0].data_offset + 1,
        f"tensor {last.name!r}": len(data) - 1,
    }


def test_truncated_real_file(testdata, tmp_path) -> None:
    src = testdata / "models" / "pycode-22m-q4_k_m.gguf"
    data = src.read_bytes()
    for where, cut in _section_offsets(src).items():
        p = tmp_path / f"cut{cut}.gguf"
        p.write_bytes(data[:cut])
        reason = load_error(p)
        assert reason.startswith("truncated file"), (cut, reason)
        assert where in reason, (cut, reason)
        p.unlink()


@pytest.mark.parametrize("qtype", [Q.IQ2_XS, Q.TQ1_0, Q.IQ4_NL])
def test_unsupported_quant_type(tmp_path, qtype: Q) -> None:
    from gguf import GGML_QUANT_SIZES

    type_size = GGML_QUANT_SIZES[qtype][1]
    tensors = {"blk.0.attn_q.weight": (np.zeros((2, type_size), dtype=np.uint8), qtype)}
    p = write_tiny(tmp_path / "iq.gguf", tensors)
    assert load_error(p) == f"unsupported quant type {qtype.name} in tensor 'blk.0.attn_q.weight'"
    assert GGUFFile(p, check_types=False).tensor("blk.0.attn_q.weight").qtype == qtype


def _patch(src: Path, dst: Path, offset: int, fmt: str, value: int) -> Path:
    data = bytearray(src.read_bytes())
    struct.pack_into(fmt, data, offset, value)
    dst.write_bytes(bytes(data))
    return dst


def test_unknown_type_id(tmp_path) -> None:
    src = write_tiny(tmp_path / "ok.gguf", simple_tensors())
    info = GGUFReader(src).tensors[1].field  # "w.weight": name, n_dims, dims, type, offset
    type_off = info.offset + sum(int(p.nbytes) for p in info.parts[:4])
    bad = _patch(src, tmp_path / "bad.gguf", type_off, "<I", 99)
    assert load_error(bad) == "unsupported quant type id 99 in tensor 'w.weight'"


def test_bad_version_and_endianness(tmp_path) -> None:
    src = write_tiny(tmp_path / "ok.gguf", simple_tensors())
    assert "version 1" in load_error(_patch(src, tmp_path / "v1.gguf", 4, "<I", 1))
    assert "big-endian" in load_error(_patch(src, tmp_path / "be.gguf", 4, ">I", 3))


def test_huge_array_length_is_truncation_not_memory_error(tmp_path) -> None:
    src = write_tiny(tmp_path / "ok.gguf", simple_tensors())
    field = GGUFReader(src).fields["tokenizer.ggml.tokens"]
    count_off = field.offset + sum(
        int(p.nbytes) for p in field.parts[:4]
    )  # klen, key, type, subtype
    bad = _patch(src, tmp_path / "huge.gguf", count_off, "<Q", 1 << 60)
    reason = load_error(bad)
    assert reason.startswith("truncated file") and "tokenizer.ggml.tokens" in reason


@pytest.fixture(scope="module")
def tiny_bytes(tmp_path_factory) -> tuple[bytes, int]:
    p = write_tiny(tmp_path_factory.mktemp("fuzz") / "f.gguf", simple_tensors())
    return p.read_bytes(), GGUFReader(p).data_offset


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_corrupted_header_never_raises_anything_else(tiny_bytes, tmp_path, data) -> None:
    raw, header_len = tiny_bytes
    buf = bytearray(raw)
    for _ in range(data.draw(st.integers(1, 4))):
        buf[data.draw(st.integers(4, header_len - 1))] = data.draw(st.integers(0, 255))
    cut = data.draw(st.sampled_from([len(buf), data.draw(st.integers(4, len(buf)))]))
    p = tmp_path / "fuzz.gguf"
    p.write_bytes(bytes(buf[:cut]))
    try:
        g = GGUFFile(p)
    except ModelLoadError as e:
        assert str(p) in str(e) and "\n" not in str(e)
        return
    for raw_t in g.tensors.values():  # what opened must be in bounds and consistent
        assert raw_t.data.nbytes <= len(buf)
