"""`scripts/wave_fill_configs.py`: the fused-GEMM configs it lists for a GPU A/B fill their
waves, fit shared memory and keep enough K steps, after the dispatch's own plain config (the
dispatch may take the stream-K form of it at 65..128 rows)."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

pytest.importorskip("triton")
SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"
sys.path.insert(0, str(SCRIPTS))

import wave_fill_configs as wf  # noqa: E402

from localllm.kernels.linear.qmm_triton import (  # noqa: E402
    MMConfig,
    _per_sm,
    mm_config,
    mm_smem,
    plain_mm_config,
)

H200 = (132, 232448, 90)


def test_llama3_qkv_at_100_rows() -> None:
    cfgs = wf.candidates("q4_k", 6144, 4096, 100, *H200, min_fill=0.9, min_steps=4)
    heur = plain_mm_config("q4_k", 6144, 4096, 100, *H200)
    assert cfgs[0] == heur and heur not in cfgs[1:]
    assert wf.fill(6144 // heur.bn * heur.split, _per_sm("q4_k", heur, H200[1], 90), 132) < 0.9
    assert len(cfgs) > 1
    for c in cfgs[1:]:
        programs = -(-6144 // c.bn) * c.split
        assert wf.fill(programs, _per_sm("q4_k", c, H200[1], 90), 132) >= 0.9
        assert mm_smem("q4_k", c, 90) <= H200[1]
        assert 4096 // 32 // c.split // c.ng >= 4


def test_fill() -> None:
    assert wf.fill(96, 1, 132) == pytest.approx(96 / 132)
    assert wf.fill(224, 1, 132) == pytest.approx(224 / 264)
    assert wf.fill(264, 2, 132) == 1.0


def test_writes_probe_qmm_config_lines(tmp_path: Path) -> None:
    out = tmp_path / "wf.jsonl"
    subprocess.run([sys.executable, str(SCRIPTS / "wave_fill_configs.py"), str(out), "--ts",
                    "100", "--shapes", "22016x4096"], check=True, capture_output=True)  # fmt: skip
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert rows and {(r["fmt"], r["n"], r["k"], r["t"]) for r in rows} == {
        ("q4_0", 22016, 4096, 100)
    }
    plain = plain_mm_config("q4_0", 22016, 4096, 100, *H200)
    assert [MMConfig(**r["cfg"]) for r in rows][0] == plain
    # 172 programs on 132 SMs: the dispatch runs that tile on the stream-K schedule
    assert mm_config("q4_0", 22016, 4096, 100, *H200) == replace(plain, streamk=132)


def test_streamk_forms_keep_the_dispatchs_tile() -> None:
    heur, sk = wf.streamk("q4_k", 6144, 4096, 100, *H200)
    assert heur == plain_mm_config("q4_k", 6144, 4096, 100, *H200)
    assert sk == mm_config("q4_k", 6144, 4096, 100, *H200)  # 0.73 of a wave: the dispatch's pick
    assert (sk.bm, sk.bn, sk.ng, sk.stages, sk.warps) == (heur.bm, heur.bn, heur.ng, heur.stages,
                                                          heur.warps)  # fmt: skip
    assert sk.split == 1 and sk.streamk == _per_sm("q4_k", heur, H200[1], 90) * 132 == 132
