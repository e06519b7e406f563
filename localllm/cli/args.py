"""Engine knobs shared by every subcommand that loads a model."""

from __future__ import annotations

import argparse

from localllm.config import KV_DTYPES, EngineConfig


def add_engine_args(p: argparse.ArgumentParser, model_required: bool = True) -> None:
    g = p.add_argument_group("engine")
    g.add_argument("--model", "-m", required=model_required, help="path to a .gguf model file")
    g.add_argument("--device", default="auto", help="auto | cpu | cuda | cuda:N (default: auto)")
    g.add_argument(
        "--backend",
        default="auto",
        choices=["auto", "triton", "reference"],
        help="kernels: triton on CUDA, the torch reference elsewhere (default: auto)",
    )
    g.add_argument(
        "--dtype",
        default="auto",
        choices=["auto", "fp16", "bf16", "fp32"],
        help="activation dtype (default: fp16 on GPU, fp32 on CPU)",
    )
    g.add_argument(
        "--max-model-len", type=int, default=None, help="context length (default: the model's)"
    )
    g.add_argument(
        "--kv-dtype",
        default="auto",
        choices=KV_DTYPES,
        help="KV cache storage: fp16 | int8 | fp8 (sm_89+) ... (default: fp16 on GPU)",
    )
    g.add_argument(
        "--gpu-memory-utilization",
        type=float,
        default=0.90,
        help="fraction of GPU memory to use for weights + KV cache (default: 0.90)",
    )
    g.add_argument("--max-num-seqs", type=int, default=64, help="max concurrent sequences")
    g.add_argument(
        "--max-num-batched-tokens",
        type=int,
        default=2048,
        help="token budget of one engine step (prefill chunk size)",
    )
    g.add_argument(
        "--decode-prefill-chunk",
        type=int,
        default=None,
        help="most prefill tokens per step while other sequences decode: lower keeps "
        "streams smooth, higher gives new prompts a faster first token "
        "(default on GPU: 24, which replays CUDA graphs; 0: no cap)",
    )
    g.add_argument("--no-prefix-caching", action="store_true", help="disable the prefix cache")
    g.add_argument("--no-cuda-graphs", action="store_true", help="decode without CUDA graphs")
    g.add_argument(
        "--fp16-gemv",
        action="store_true",
        help="batch-1 decode multiplies fp16 activations (slower) instead of int8 "
        "ones quantized per 32 values (the default, as llama.cpp)",
    )
    g.add_argument(
        "--speculative-tokens",
        type=int,
        default=0,
        help="n-gram speculative draft length (0 = off)",
    )


def engine_config(args: argparse.Namespace, **overrides: object) -> EngineConfig:
    kw = dict(
        model=args.model,
        device=args.device,
        backend=args.backend,
        dtype=args.dtype,
        max_model_len=args.max_model_len,
        kv_dtype=args.kv_dtype,
        gpu_memory_utilization=args.gpu_memory_utilization,
        max_num_seqs=args.max_num_seqs,
        max_num_batched_tokens=args.max_num_batched_tokens,
        enable_prefix_caching=not args.no_prefix_caching,
        decode_prefill_chunk=args.decode_prefill_chunk,
        cuda_graphs=not args.no_cuda_graphs,
        int8_activations=not args.fp16_gemv,
        speculative_tokens=args.speculative_tokens,
    )
    kw.update(overrides)
    return EngineConfig(**kw)
