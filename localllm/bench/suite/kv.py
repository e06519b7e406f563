"""kv: each KV cache dtype's capacity (tokens the pool holds in this memory budget) and its
batch-1 decode speed at each --depth, one engine per dtype."""

from __future__ import annotations

from localllm.bench.suite.base import Context, Skip
from localllm.bench.suite.speed import decode_at_depth
from localllm.errors import LocalLLMError

CPU_POOL_NOTE = (
    "kv: on the CPU the pool is capped at --max-model-len x --max-num-seqs tokens, so the pool "
    "sizes are equal; tokens/GiB shows what each dtype holds per GiB"
)


def default_kv_dtypes() -> tuple[str, ...]:
    """fp16 and int8 everywhere; fp8 where the GPU stores it natively (sm_89+)."""
    import torch

    if torch.cuda.is_available() and torch.cuda.get_device_capability() < (8, 9):
        return ("fp16", "int8")
    return ("fp16", "int8", "fp8")


def kv_dtypes(ctx: Context) -> tuple[str, ...]:
    return ctx.sizes.kv_dtypes or default_kv_dtypes()


def run_kv(ctx: Context) -> list[dict]:
    from localllm.engine.kv_cache import bytes_per_block

    rows, refused = [], []
    main_dtype = ctx.engines.main().runner.kv_dtype
    # the main engine's dtype first: no engine is built for it
    device = "cpu"
    for dtype in sorted(kv_dtypes(ctx), key=lambda d: d != main_dtype):
        eng = None  # the previous dtype's engine must go before the next one is built
        try:
            eng = ctx.engines.get(**({} if dtype == main_dtype else {"kv_dtype": dtype}))
        except LocalLLMError as e:  # e.g. fp8 on a GPU older than sm_89
            refused.append(f"kv {dtype} refused: {e}")
            for d in ctx.sizes.depths:
                ctx.progress.advance(f"kv {dtype} @ d{d} (refused)")
            continue
        r, device = eng.runner, eng.runner.device.type
        per_token = bytes_per_block(eng.model_cfg, r.block_size, r.kv_dtype) // r.block_size
        for i, depth in enumerate(ctx.sizes.depths):
            row = decode_at_depth(ctx, eng, depth, seed=200 + i)
            rows.append(
                {
                    "capacity_tokens": r.num_kv_tokens,  # the pool this engine allocated
                    "kv_bytes_per_token": per_token,
                    "tokens_per_gib": (1 << 30) // per_token,
                    "max_model_len": eng.max_model_len,
                    **row,
                }
            )
            ctx.progress.advance(f"kv {dtype} @ d{depth}")
    if not rows:
        raise Skip("; ".join(refused))
    ctx.notes += refused
    if device != "cuda":
        ctx.notes.append(CPU_POOL_NOTE)
    return rows
