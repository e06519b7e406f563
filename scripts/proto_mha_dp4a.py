"""Prototype (outside the engine): one-token MHA decode attention over an int8 KV cache with
Q K^T by `dp4a` instead of the tensor cores, timed against the engine's `_attn_kernel`.

The engine's int8 MHA decode (llama2-7b: 32 KV heads, one query row per head) widens every K
and V tile to fp16 and runs both products on the tensor cores over a 16-row tile of which one
row is real; BENCHMARKS (session 22) found it issue-bound at ~1.95 TB/s. Here q is quantized
to int8 per 32 elements (as the dp4a GEMV's activations) and each key's score is 32 `dp4a` over
its raw int8 words. No K widening and no K operand staging remain. P V keeps the tensor cores,
one of two ways:
  pv0: V widened to fp16 (as the engine does), P in fp16;
  pv1: V straight from int8, P quantized to int8 per KV tile (scale max(P) / 127): an int8 MMA
       with int32 accumulation, no widening at all (a numerics change: P to 8 bits).
Since session 33 the loop body is the engine's own long-context step (`_q_words`, `_kdot_step`
of `paged_triton_kernels.py`, KDOT 1 / 2 = pv0 / pv1), so this times that step without the
engine's plan and merge. Program (head, partition) writes its partition's (out, lse); a torch
log-sum-exp merge combines them (not timed: the engine's kernel merges in-kernel, ~3-4 us at these sizes).

    python3 scripts/proto_mha_dp4a.py [--seqs 4161,16513] [--parts 16,33,66] [--bns 32,64,128]
        [--warps 4,8] [--stages 0,2] [--heads 32]

Prints us per launch, GB/s of KV read and the error against the engine's output. JSON lines to
$OUT/proto_mha_dp4a.jsonl. On a CPU (`TRITON_INTERPRET=1`) `--check` runs a small case.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import sys

import torch
import triton
import triton.language as tl

from localllm.kernels.attention import paged_triton as pt
from localllm.kernels.attention.paged_triton_kernels import _kdot_step, _q_words
from localllm.kernels.device import interpreting

sys.path.insert(0, os.path.dirname(__file__))
from ab_attention import COLD_BYTES  # noqa: E402
from bench_attention import kv_token_bytes  # noqa: E402


@triton.jit
def _proto_kernel(Q, K, V, KS, VS, BT, OP, LP, seq_len, part_len, stride_kb, stride_kh,
                  stride_kt, stride_sb, stride_sh, qk_scale, D: tl.constexpr, BN: tl.constexpr,
                  BS: tl.constexpr, PV: tl.constexpr, WIDEN: tl.constexpr,
                  EMU: tl.constexpr):  # fmt: skip
    h = tl.program_id(0)
    p = tl.program_id(1)
    n_parts = tl.num_programs(1)
    d = tl.arange(0, D)
    rows = tl.arange(0, 16)
    # q of this head to int8 words, scales per 32 elements; the loop body is the engine's
    # long-context step (`_kdot_step`: KDOT 1 = pv0, 2 = pv1)
    qw, dq = _q_words(tl.load(Q + h * D + d).to(tl.float32), D)
    lo = p * part_len
    hi = tl.minimum(lo + part_len, seq_len)
    m_i = tl.full([16], float("-inf"), tl.float32)
    l_i = tl.zeros([16], tl.float32)
    acc = tl.zeros([16, D], tl.float32)
    for n0 in range(lo, hi, BN):
        n = n0 + tl.arange(0, BN)
        ok = n < hi
        page = tl.load(BT + n // BS, mask=ok, other=0).to(tl.int64)
        m_i, l_i, acc = _kdot_step(K, V, KS, VS, page, n % BS, ok, h, qw, dq, rows, m_i, l_i,
                                   acc, qk_scale, stride_kb, stride_kh, stride_kt, stride_kb,
                                   stride_kh, stride_kt, stride_sb, stride_sh, stride_sb,
                                   stride_sh, d, tl.float16, D, PV + 1, WIDEN, EMU)  # fmt: skip
    o = acc / tl.maximum(l_i, 1e-30)[:, None]
    o0 = tl.sum(tl.where(rows[:, None] == 0, o, 0.0), axis=0)  # [D]: row 0
    tl.store(OP + (h * n_parts + p) * D + d, o0)
    l0 = tl.max(l_i, axis=0)
    m0 = tl.max(m_i, axis=0)
    tl.store(LP + h * n_parts + p, tl.where(l0 > 0, m0 + tl.log2(tl.maximum(l0, 1e-30)),
                                            float("-inf")))  # fmt: skip


def proto(
    q,
    kc,
    vc,
    ks,
    vs,
    table,
    seq: int,
    scale: float,
    parts: int,
    pv: int,
    bn: int,
    warps: int = 4,
    stages: int | None = None,
):  # noqa: ANN001, ANN201
    """q [1, H, D] -> (out_p [H, P, D] fp32, lse_p [H, P] log2 units) of each partition."""
    _, h, d = q.shape
    part_len = triton.cdiv(triton.cdiv(seq, parts), bn) * bn
    parts = triton.cdiv(seq, part_len)
    op = torch.empty(h, parts, d, device=q.device, dtype=torch.float32)
    lp = torch.empty(h, parts, device=q.device, dtype=torch.float32)
    emu = interpreting()
    _proto_kernel[(h, parts)](
        q, kc, vc, ks, vs, table, op, lp, seq, part_len, *kc.stride()[:3], *ks.stride()[:2],
        scale * math.log2(math.e), D=d, BN=bn, BS=kc.shape[2], PV=pv,
        WIDEN=0 if emu or not q.is_cuda else 1, EMU=emu, num_warps=warps,
        **({"num_stages": stages} if stages else {}),
    )  # fmt: skip
    return op, lp


def merge(op: torch.Tensor, lp: torch.Tensor) -> torch.Tensor:
    w = torch.softmax(lp * math.log(2.0), dim=1)  # [H, P]
    return (w[:, :, None] * op).sum(1)


def inputs(seq: int, h: int, d: int, copies: int, device: str, block: int = 16):  # noqa: ANN201
    per = -(-seq // block)
    n = copies * per
    g = torch.Generator(device="cpu").manual_seed(seq)
    kc = torch.randint(-127, 128, (n, h, block, d), generator=g, dtype=torch.int8).to(device)
    vc = torch.randint(-127, 128, (n, h, block, d), generator=g, dtype=torch.int8).to(device)
    ks = (torch.rand(n, h, block, generator=g) * 0.0005 + 0.0003).to(device)
    vs = (torch.rand(n, h, block, generator=g) * 0.01).to(device)
    tables = torch.randperm(n, generator=g).view(copies, per).to(torch.int32).to(device)
    q = torch.randn(1, h, d, generator=g).to(device, torch.float16)
    return q, kc, vc, ks, vs, tables


_STEP: dict = {}  # (device, seq) -> (cu_seqlens, seq_lens): made once, outside graph capture


def engine(q, kc, vc, ks, vs, table, seq: int, scale: float, parts: int | None = None):  # noqa: ANN001, ANN201
    key = (q.device, seq)
    if key not in _STEP:
        _STEP[key] = (torch.tensor([0, 1], device=q.device, dtype=torch.int32),
                      torch.tensor([seq], device=q.device, dtype=torch.int32))  # fmt: skip
    cu, lens = _STEP[key]
    return pt.run_paged_attention(q, kc, vc, ks, vs, table[None], cu, lens, 1, seq, scale,
                                  parts=parts)  # fmt: skip


def check() -> None:
    """A small case on any device: the prototype against the engine's kernel."""
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    seq, h, d = 200, 2, 128
    q, kc, vc, ks, vs, tables = inputs(seq, h, d, 1, dev)
    want = engine(q, kc, vc, ks, vs, tables[0], seq, d**-0.5, parts=1)[0].float()
    for pv in (0, 1):
        got = merge(*proto(q, kc, vc, ks, vs, tables[0], seq, d**-0.5, 3, pv, 32))
        err = ((got - want).norm() / want.norm()).item()
        print(f"pv{pv}: relative error {err:.2e}")
        assert err < 2e-2, err


def run_seq(
    seq: int,
    h: int,
    d: int,
    parts_list: list[int],
    bns: list[int],
    out,
    warps: list[int],
    stages: list[int],
) -> None:  # noqa: ANN001
    """Time the engine and every prototype variant at one context length."""
    from triton.testing import do_bench_cudagraph

    one = kv_token_bytes(h, d, torch.int8) * seq  # K and V with their fp32 scales
    copies = max(2, min(64, COLD_BYTES // one))
    q, kc, vc, ks, vs, tables = inputs(seq, h, d, copies, "cuda")
    scale = d**-0.5

    def timed(fn) -> float:  # noqa: ANN001
        def run() -> None:
            for i in range(copies):
                fn(i)

        run()
        torch.cuda.synchronize()
        return do_bench_cudagraph(run, rep=30) * 1e3 / copies

    def rec(**r: object) -> None:
        r = dict(seq=seq, heads=h, **r)
        print(json.dumps(r), flush=True)
        out.write(json.dumps(r) + "\n")

    want = engine(q, kc, vc, ks, vs, tables[0], seq, scale)[0].float()
    us = timed(lambda i: engine(q, kc, vc, ks, vs, tables[i], seq, scale))
    rec(kind="engine", us=round(us, 2), gbs=round(one / us / 1e3))
    for pv, bn, parts, w, st in itertools.product((0, 1), bns, parts_list, warps, stages):
        cfg = dict(kind=f"pv{pv}", bn=bn, parts=parts, warps=w, stages=st)
        try:
            got = merge(*proto(q, kc, vc, ks, vs, tables[0], seq, scale, parts, pv, bn, w, st))
        except Exception as e:  # noqa: BLE001 (a config that does not compile: say so, go on)
            rec(**cfg, error=str(e).splitlines()[0][:160])
            continue
        err = ((got - want).norm() / want.norm()).item()

        def one_call(i: int, pv: int = pv, bn: int = bn, parts: int = parts, w: int = w,
                     st: int = st) -> None:  # fmt: skip
            proto(q, kc, vc, ks, vs, tables[i], seq, scale, parts, pv, bn, w, st)

        us = timed(one_call)
        rec(**cfg, us=round(us, 2), gbs=round(one / us / 1e3), rel_err=float(f"{err:.2e}"))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seqs", default="4161,16513")
    ap.add_argument("--parts", default="16,33,66")
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--bns", default="32,64")
    ap.add_argument("--warps", default="4")
    ap.add_argument("--stages", default="0", help="0: Triton's default")
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args()
    if a.check:
        check()
        return
    out = open(os.path.join(os.environ.get("OUT", "."), "proto_mha_dp4a.jsonl"), "a")
    print(torch.cuda.get_device_name())
    for seq in map(int, a.seqs.split(",")):
        run_seq(seq, a.heads, 128, [int(x) for x in a.parts.split(",")],
                [int(x) for x in a.bns.split(",")], out, [int(x) for x in a.warps.split(",")],
                [int(x) for x in a.stages.split(",")])  # fmt: skip


if __name__ == "__main__":
    main()
