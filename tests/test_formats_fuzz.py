"""Mutation fuzzing of a real model file through the CLI: no traceback, no hang, and no
structurally damaged file accepted.

A few hundred mutants of stories260K (seeded): byte changes inside header fields (metadata
keys, values and tensor infos), tensor types and data offsets rewritten, and metadata values
replaced through gguf's writer (zero, negative, huge, NaN, wrong type, dropped, duplicated).
Each goes through `localllm generate` in process. A mutant must be either refused (exit 2,
one line naming the file) or accepted with the original's output, or accepted with another
output only when its structure (keys and their types, tensor names, types, shapes and
offsets) is the original's, i.e. only metadata *values* changed, each inside the spec's
range (a different BOS id or RoPE base is a different valid model, not a corrupt one).
"""

from __future__ import annotations

import contextlib
import io
import math
import random
import signal
import struct
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from gguf import GGUFReader
from gguf_edit import Q, V, duplicate_key, patch_tensor_info, read_kv, rewrite, tensor_info_offsets

from localllm.cli import main
from localllm.errors import LocalLLMError
from localllm.formats.gguf import GGUFFile

SEED = 14
N_FLIPS, N_TYPES, N_OFFSETS, N_VALUES = 200, 40, 40, 60
HANG_S = 30  # one mutant may not take longer than this (a normal run takes ~0.1 s)
ARGS = ["-p", "", "-n", "4", "-t", "0", "--device", "cpu", "--max-model-len", "64"]


def _header_regions(path: Path) -> list[tuple[int, int]]:
    """(start, end) byte ranges of the fixed header, each metadata field and tensor info."""
    r = GGUFReader(path)
    raw = path.read_bytes()
    regions = [(4, 24)]  # version, tensor count, kv count
    for key, f in r.fields.items():
        if not key.startswith("GGUF."):
            regions.append((f.offset, f.offset + sum(int(p.nbytes) for p in f.parts)))
    for name, at in tensor_info_offsets(path).items():
        start = at - 8 - len(name.encode())
        n_dims = struct.unpack_from("<I", raw, at)[0]
        regions.append((start, at + 4 + 8 * n_dims + 4 + 8))
    return regions


def _flips(src: Path, d: Path, rng: random.Random) -> Iterator[Path]:
    raw, regions = src.read_bytes(), _header_regions(src)
    for i in range(N_FLIPS):
        buf = bytearray(raw)
        start, end = rng.choice(regions)
        for _ in range(rng.randint(1, 2)):
            buf[rng.randrange(start, end)] = rng.randrange(256)
        p = d / f"flip{i}.gguf"
        p.write_bytes(bytes(buf))
        yield p


def _types(src: Path, d: Path, rng: random.Random) -> Iterator[Path]:
    names = list(tensor_info_offsets(src))
    choices = [Q.F16, Q.BF16, Q.Q4_0, Q.Q8_0, Q.Q4_K, Q.Q6_K, Q.I8, Q.F64, 99]
    for i in range(N_TYPES):
        yield patch_tensor_info(
            src, d / f"type{i}.gguf", rng.choice(names), qtype=int(rng.choice(choices))
        )


def _offsets(src: Path, d: Path, rng: random.Random) -> Iterator[Path]:
    r = GGUFReader(src)
    offsets = {t.name: int(t.data_offset) - r.data_offset for t in r.tensors}
    names = list(offsets)
    for i in range(N_OFFSETS):
        name = rng.choice(names)
        new = rng.choice(
            [
                offsets[rng.choice(names)],
                offsets[name] + 32,
                offsets[name] - 32,
                offsets[name] + 4,
                0,
                1 << 40,
            ]
        )
        yield patch_tensor_info(src, d / f"offset{i}.gguf", name, offset=new % (1 << 64))


def _value(rng: random.Random, original: object) -> tuple[object, V, V | None]:
    kind = rng.randrange(9)
    num = original if isinstance(original, int | float) and not isinstance(original, bool) else 1
    return [
        (0, V.UINT32, None),
        (-1, V.INT32, None),
        (1 << 40, V.UINT64, None),
        (float(num), V.FLOAT32, None),
        (math.nan, V.FLOAT32, None),
        (-math.inf, V.FLOAT64, None),
        ("x", V.STRING, None),
        ([1, 2], V.ARRAY, V.UINT32),
        (int(num) + rng.choice([-1, 1]), V.UINT64 if num > 1 << 31 else V.INT32, None),
    ][kind]


def _values(src: Path, d: Path, rng: random.Random) -> Iterator[Path]:
    kv = read_kv(src)
    keys = [k for k, (_, t, _) in kv.items() if t != V.ARRAY] + ["tokenizer.ggml.token_type"]
    for i in range(N_VALUES):
        key, p = rng.choice(keys), d / f"value{i}.gguf"
        what = rng.randrange(10)
        if what == 0:
            yield rewrite(src, p, kv={key: None})
        elif what == 1:
            yield duplicate_key(src, p, key)
        elif key == "tokenizer.ggml.token_type":
            types = list(kv[key][0])
            types[rng.randrange(len(types))] = rng.choice([0, 7, 255, -3, 3, 6])
            yield rewrite(src, p, kv={key: (types, V.ARRAY, V.INT32)})
        else:
            yield rewrite(src, p, kv={key: _value(rng, kv[key][0])})


def _structure(path: Path) -> tuple:
    """Keys with their types, tensors in order with type and shape (an accepted file's
    offsets follow from these: its data tile the data section)."""
    g = GGUFFile(path)
    keys = tuple(sorted(g.metadata_types.items()))
    infos = tuple((t.name, t.qtype, t.shape) for t in g.tensors.values())
    return keys, infos, g.data_offset


class _Hang(Exception):
    pass


def _alarm(signum: int, frame: object) -> None:
    raise _Hang


def _generate(path: Path) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["generate", "--model", str(path), *ARGS])
    return code, out.getvalue(), err.getvalue()


def _judge(path: Path, want: str, original: tuple) -> str:
    """What happened: "refused", "same" or "value-only" when handled correctly, else
    "problem: ..." naming what went wrong."""
    signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(HANG_S)
    try:
        code, out, err = _generate(path)
    except _Hang:
        return "problem: hang"
    except BaseException as e:  # a traceback: the CLI let an exception escape
        return f"problem: traceback {type(e).__name__}: {e}"
    finally:
        signal.alarm(0)
    if code == 2:
        lines = err.strip().splitlines()
        ok = len(lines) == 1 and str(path) in lines[0]
        return "refused" if ok else f"problem: refused without one line naming it: {err!r}"
    if code != 0:
        return f"problem: exit {code}: {err!r}"
    if out == want:
        return "same"
    if _structure(path) == original:
        return "value-only"
    return f"problem: structurally changed file accepted, output {out!r}"


@pytest.fixture(scope="module")
def mutants(tmp_path_factory) -> list[Path]:
    from conftest import testdata_path

    src = testdata_path("models", "stories260K.gguf")
    d = tmp_path_factory.mktemp("fuzz")
    rng = random.Random(SEED)
    out: list[Path] = []
    for make in (_flips, _types, _offsets, _values):
        out += make(src, d, rng)
    return out


def test_mutants_are_refused_or_harmless(mutants: list[Path], stories_path: Path) -> None:
    code, want, err = _generate(stories_path)
    assert code == 0 and want.strip(), err
    original = _structure(stories_path)
    outcomes = {p.name: _judge(p, want, original) for p in mutants}
    problems = {k: v for k, v in outcomes.items() if v.startswith("problem")}
    assert not problems, f"{len(problems)} of {len(mutants)} mutants: {list(problems.items())[:5]}"
    counts = Counter(outcomes.values())
    assert counts["refused"] > len(mutants) // 2 and counts["same"] > 0, counts


def test_refusals_are_one_line_in_a_real_process(mutants: list[Path]) -> None:
    refused = []
    for p in mutants:
        try:
            GGUFFile(p)
        except LocalLLMError:
            refused.append(p)
    assert len(refused) > len(mutants) // 3
    path = refused[len(refused) // 2]
    r = subprocess.run(
        [sys.executable, "-m", "localllm.cli", "generate", "--model", str(path), *ARGS],
        capture_output=True,
        text=True,
        timeout=120,
        cwd="/",
    )
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and str(path) in lines[0], r.stderr
