"""The decode kernels' programmatic dependent launch, built without a GPU: a llama3-8b decode
step's kernels captured as the dispatch launches them on sm_90 (PDL) and on sm_86 (without),
compiled for that arch, and what their PTX does before
`griddepcontrol.wait`. `python3 -m localllm.kernels.checks.pdl_check` prints one JSON record
per kernel variant (tests/test_kernels_pdl.py runs it; Triton's interpreter must be off)."""

from __future__ import annotations

import json
from typing import Any

import torch

from localllm.kernels import pdl
from localllm.kernels.checks import space
from localllm.kernels.checks.capture import Launch, capture
from localllm.kernels.checks.compile import build
from localllm.kernels.checks.models import MODELS
from localllm.kernels.device import profile
from localllm.kernels.linear.dp4a_triton import Dp4aConfig
from localllm.kernels.linear.qmm_triton import MMConfig
from localllm.kernels.plan import LinearKernel

M = MODELS["llama3-8b"]


def decode_launches(on: bool) -> list[Launch]:
    """QKV + RoPE (Q4_K q+k, Q6_K v), attention, the O / gate+up / down / LM head GEMVs and
    a split-K one, the fp16 GEMV (--fp16-gemv), norms, SiLU, argmax (+ masked), the int8
    quantizer, RoPE + int8 KV store, and the fused GEMM of a batched step, with PDL on or off."""
    d, f, h200 = M.dim, M.ffn, profile("h200")
    kv = space.kv_dtypes(h200)[0]
    with pdl.forced(on), capture() as launches:
        space._qkv_fused(M, torch.float16, kv, ("q4_k", "q6_k"))
        space._rope(M, torch.float16, 1, space.kv_dtypes(h200)[1])
        space._attention(h200, M, kv, torch.float16, 16, 1, 1, 4096)
        for n, k, split in ((d, d, 1), (2 * f, d, 1), (d, f, 1), (M.vocab, d, 1), (1024, d, 4)):
            space._linear(LinearKernel.DP4A_GEMV, Dp4aConfig(4, 1, 1, split), "q4_k", n, k, 1,
                          torch.float16, False)  # fmt: skip
        space._pointwise(M, torch.float16, 1)
        gemv = space._linear_config(h200, LinearKernel.GEMV, "q4_k", d, d, 1)  # --fp16-gemv
        space._linear(LinearKernel.GEMV, gemv, "q4_k", d, d, 1, torch.float16, False)
        space._linear(LinearKernel.FUSED_GEMM, MMConfig(32, 64, 8), "q4_k", d, d, 32,
                      torch.float16, False)  # fmt: skip
    return launches


def inspect(launch: Launch, arch: int) -> dict[str, Any]:
    """What the PTX of `launch` built for sm_`arch` does before its first wait."""
    ptx = build(launch, arch)[0].asm["ptx"]
    body = ptx[ptx.index(".entry") :]
    wait = body.find("griddepcontrol.wait")
    before = body[:wait] if wait >= 0 else ""
    return {
        "kernel": launch.kernel.split(":")[1],
        "arch": arch,
        "launch_pdl": bool(launch.kwargs.get("launch_pdl")),
        "wait": wait >= 0,
        "trigger": "griddepcontrol.launch_dependents" in body,
        "load_before_wait": "ld.global" in before,
    }


def main() -> None:
    for on, arch in ((True, 90), (False, 86)):
        seen: set[str] = set()
        for launch in decode_launches(on):
            if launch.kernel not in seen:
                seen.add(launch.kernel)
                print(json.dumps(inspect(launch, arch)), flush=True)
    for name in ("rtx4090", "h200"):  # what the compile check enumerates for a profile
        launches = space.enumerate_launches(profile(name), [MODELS["smollm2-135m"]])
        asks = [la for la in launches if la.kwargs.get("launch_pdl")]
        print(json.dumps({"profile": name, "launches": len(launches), "pdl": len(asks)}))


if __name__ == "__main__":
    main()
