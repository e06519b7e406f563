"""Decode paged-attention micro-benchmark: achieved GB/s of KV read (plus one prefill line).

    python3 scripts/bench_attention.py [--heads 32 --kv-heads 8 --head-dim 128]

Times the Triton `paged_attention` op with CUDA graphs (no launch overhead) for batch 1/8/32 x
context 512/4096 and every KV dtype, over shuffled 16-token pages.
"""

from __future__ import annotations

import argparse

import torch
import triton.testing

from localllm.kernels.attention.paged_triton import run_paged_attention
from localllm.kernels.registry import Ops

KV_DTYPES = {"fp16": torch.float16, "int8": torch.int8, "fp8": torch.float8_e4m3fn}


def paged_inputs(
    batch: int, seq: int, q_len: int, hq: int, hkv: int, d: int, kv: torch.dtype, block: int = 16
) -> tuple:
    """Random pages in shuffled order; every sequence has `seq` KV tokens and `q_len` queries."""
    per_seq = -(-seq // block)
    n_blocks = batch * per_seq
    cache = torch.randn(n_blocks, hkv, block, d, device="cuda").to(kv)
    v_cache = torch.randn(n_blocks, hkv, block, d, device="cuda").to(kv)
    quant = kv in (torch.int8, torch.float8_e4m3fn)
    scales = [
        torch.rand(n_blocks, hkv, block, device="cuda") * 0.02 if quant else None for _ in range(2)
    ]
    tables = torch.randperm(n_blocks, device="cuda").view(batch, per_seq).to(torch.int32)
    cu = torch.arange(batch + 1, device="cuda", dtype=torch.int32) * q_len
    lens = torch.full((batch,), seq, device="cuda", dtype=torch.int32)
    q = torch.randn(batch * q_len, hq, d, device="cuda", dtype=torch.float16)
    return (q, cache, v_cache, *scales, tables, cu, lens, q_len, seq, d**-0.5)


def kv_token_bytes(hkv: int, d: int, kv: torch.dtype) -> int:
    """K and V of one token over all KV heads, with their fp32 scales for int8 / fp8."""
    scales = 4 if kv in (torch.int8, torch.float8_e4m3fn) else 0
    return 2 * hkv * (d * kv.itemsize + scales)


def kv_bytes(args: tuple) -> int:
    _, k, _, _, _, _, _, lens, _, seq, _ = args
    return kv_token_bytes(k.shape[1], k.shape[3], k.dtype) * seq * lens.shape[0]


def time_ms(fn) -> float:
    fn()
    torch.cuda.synchronize()
    return triton.testing.do_bench_cudagraph(fn, rep=50)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--kv-heads", type=int, default=8)
    ap.add_argument("--head-dim", type=int, default=128)
    a = ap.parse_args()
    op = Ops("triton").paged_attention
    print(f"{torch.cuda.get_device_name()}  Hq={a.heads} Hkv={a.kv_heads} D={a.head_dim}")
    print(f"{'kv':>5} {'batch':>5} {'seq':>5} {'q':>2} {'us':>8} {'GB/s':>7}")
    for name, kv in KV_DTYPES.items():
        for batch in (1, 8, 32):
            for seq in (512, 4096):
                for q_len in (1, 4):
                    args = paged_inputs(batch, seq, q_len, a.heads, a.kv_heads, a.head_dim, kv)
                    ms = time_ms(lambda args=args: op(*args))
                    gbs = kv_bytes(args) / ms / 1e6
                    print(f"{name:>5} {batch:>5} {seq:>5} {q_len:>2} {ms * 1e3:8.1f} {gbs:7.0f}")
    for name, kv in KV_DTYPES.items():  # software-pipeline depth at the largest decode shape
        args = paged_inputs(32, 4096, 1, a.heads, a.kv_heads, a.head_dim, kv)
        for stages in (1, 2, 3, 4):
            ms = time_ms(lambda args=args, s=stages: run_paged_attention(*args, num_stages=s))
            print(f"{name} b32 s4096 num_stages={stages}: {kv_bytes(args) / ms / 1e6:.0f} GB/s")
    for seq in (2048, 8192):  # prefill: one causal sequence, the whole prompt at once
        args = paged_inputs(1, seq, seq, a.heads, a.kv_heads, a.head_dim, torch.float16)
        ms = time_ms(lambda args=args: op(*args))
        flops = 2 * 2 * a.heads * a.head_dim * seq * seq / 2  # QK^T and PV, causal half
        print(f"prefill fp16 seq {seq}: {ms:.3f} ms, {flops / ms / 1e9:.0f} TFLOP/s")


if __name__ == "__main__":
    main()
