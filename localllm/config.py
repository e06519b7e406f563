"""Frozen settings: ModelConfig comes from the model file, EngineConfig from the user."""

from __future__ import annotations

from dataclasses import MISSING, dataclass, field
from typing import Any

from localllm.engine.speculative.policy import (
    DEFAULT_NGRAM_MAX,
    DEFAULT_NGRAM_MIN,
    DEFAULT_SPEC_MAX_BATCH,
    GPU_DEFAULT_SPEC_TOKENS,
    MAX_SPEC_TOKENS,
    default_spec_tokens,
)


@dataclass(frozen=True)
class RopeScaling:
    """RoPE frequency scaling. kind: "linear" or "llama3" (Llama 3.1+ smooth wavelength scaling)."""

    kind: str
    factor: float = 1.0
    low_freq_factor: float = 1.0
    high_freq_factor: float = 4.0
    original_context: int = 8192

    def __post_init__(self) -> None:
        if self.kind not in ("linear", "llama3"):
            raise ValueError(f"unsupported rope scaling type {self.kind!r}")
        if self.factor <= 0:
            raise ValueError("rope scaling factor must be > 0")


@dataclass(frozen=True)
class ModelConfig:
    """Architecture shapes and constants, read from file metadata (GGUF keys / HF config)."""

    arch: str  # registry key: "llama" | "qwen2" | "qwen3"
    vocab_size: int
    dim: int  # hidden size
    n_layers: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    ffn_dim: int
    context_length: int
    rope_theta: float = 10000.0
    rope_scaling: RopeScaling | None = None
    rope_style: str = (
        "interleaved"  # "interleaved" (GGUF llama: adjacent pairs) | "neox" (half split)
    )
    rms_eps: float = 1e-5
    tie_embeddings: bool = False
    qkv_bias: bool = False  # qwen2
    qk_norm: bool = False  # qwen3: RMSNorm over head_dim on q and k before RoPE
    name: str = ""

    def __post_init__(self) -> None:
        if self.n_heads % self.n_kv_heads:
            raise ValueError(
                f"n_heads {self.n_heads} is not a multiple of n_kv_heads {self.n_kv_heads}"
            )
        if self.rope_style not in ("interleaved", "neox"):
            raise ValueError(f"unknown rope style {self.rope_style!r}")
        if self.head_dim % 2:
            raise ValueError(f"head_dim must be even, got {self.head_dim}")

    @property
    def q_size(self) -> int:
        return self.n_heads * self.head_dim

    @property
    def kv_size(self) -> int:
        return self.n_kv_heads * self.head_dim


KV_DTYPES = ("auto", "fp32", "fp16", "bf16", "int8", "fp8")
BLOCK_SIZES = (8, 16, 32, 64)
# Tokens per KV block. At 64 a page holds whole 64-token attention tiles, so decode attention
# reads one page number per tile instead of one per token (kernels/attention `_tile_pages`):
# H200, tg128 at 64 against 16 (BENCHMARKS.md, session 36) llama3-8b fp16 KV +0.5% / +0.4% /
# +4.4% at depth 0 / 4,096 / 16,384, int8 +1.1% / +2.9% at 4,096 / 16,384; llama2-7b fp16
# +1.3% / +3.6% / +3.7%, int8 +3.4% / +1.7%; H100 (session 41) llama3 +0.1% / -0.1% / +1.6%,
# llama2 +0.9% / +2.7% / +1.4%, and a cold 4,000-token prompt's first token 4% sooner. The
# turn after a cached prefix (bench's 3,900 + 100) is the same at both since its partly matched
# block is copied in one launch: H100, three interleaved rounds (session 42) 12.3 / 12.4 / 11.9
# ms at 16, 12.1 / 12.0 / 12.3 ms at 64; cold 108.8-109.3 against 104.9-105.0 ms.
DEFAULT_BLOCK_SIZE = 64
# Tokens per prefix-cache key, whatever the block size (engine/block_manager.py): a hit that ends
# inside a 64-token block copies that block's leading units into the sequence's own block, so a
# turn after a cached prefix recomputes at most 15 tokens, not 63 (session 37: bench's 3,900 +
# 100 turn took 17.0 ms with whole 64-token blocks only, 13.9 ms at 16).
PREFIX_CACHE_UNIT = 16
STEP_OVERLAP = ("auto", "on", "off")  # --step-overlap (engine/overlap.py)

# Most prefill tokens in a step that also decodes, on a GPU, when --decode-prefill-chunk is not
# given (no cap on CPU). Such steps replay the mixed CUDA graphs (cuda_graphs.MIXED_CHUNK is this
# number), so streams keep their pace while a long prompt prefills (H200, 8 streams + an
# 8000-token prompt: p99 inter-token latency 1.41x unloaded, session 5; 512 tokens per step:
# 7.99x; session 37, with faster decode: 1.58x, and 1.50x once those steps chain (overlap.py);
# 16 or 12 tokens a step were no better than 24: 1.58x / 1.56x).
DECODE_PREFILL_CHUNK_GPU = 24


def option(
    default: Any,
    flag: str | None,
    help: str,
    *,
    choices: tuple[Any, ...] | None = None,
    shown: str | None = None,
    negate: bool = False,
    short: str | None = None,
) -> Any:
    """A config field and its command-line option (cli/args.py builds argparse from these;
    default MISSING: a required field):
    flag None = not on the command line; shown = how --help states the default (else the value);
    negate = a boolean field set False by a store_true flag (--no-...)."""
    meta = {"flag": flag, "help": help, "choices": choices, "shown": shown, "negate": negate}
    meta["short"] = short
    if default is MISSING:  # a required field
        return field(metadata=meta)
    return field(default=default, metadata=meta)


@dataclass(frozen=True)
class EngineConfig:
    """User knobs shared by chat, serve, bench and generate (one field = one CLI option)."""

    model: str = option(
        MISSING,
        "--model",
        "a .gguf file or model folder, a NAME from `localllm list`, or a Hugging Face "
        "owner/repo[:QUANT] or owner/repo/FILE.gguf (pulled on first use)",
        short="-m",
    )
    device: str = option("auto", "--device", "auto | cpu | cuda | cuda:N")
    backend: str = option(
        "auto",
        "--backend",
        "kernels: triton on CUDA, the torch reference elsewhere",
        choices=("auto", "triton", "reference"),
    )
    dtype: str = option(
        "auto",
        "--dtype",
        "activation dtype",
        choices=("auto", "fp16", "bf16", "fp32"),
        shown="auto: fp16 on GPU, fp32 on CPU",
    )
    max_model_len: int | None = option(
        None, "--max-model-len", "context length", shown="the model's, shrunk to fit the pool"
    )
    kv_dtype: str = option(
        "auto",
        "--kv-dtype",
        "KV cache storage (fp8 needs sm_89+)",
        choices=KV_DTYPES,
        shown="auto: fp16 on GPU, fp32 on CPU",
    )
    block_size: int = option(
        DEFAULT_BLOCK_SIZE,
        "--block-size",
        "tokens per KV cache block (64: decode attention reads one page per 64-token tile, "
        "faster at long contexts; the prefix cache reuses 16-token units either way)",
        choices=BLOCK_SIZES,
    )
    gpu_memory_utilization: float = option(
        0.90, "--gpu-memory-utilization", "fraction of GPU memory for weights + KV cache"
    )
    # override the measured pool size (tests, tiny pools)
    num_kv_blocks: int | None = option(None, None, "")
    max_num_seqs: int = option(64, "--max-num-seqs", "most concurrent sequences")
    max_num_batched_tokens: int = option(
        2048, "--max-num-batched-tokens", "token budget of one engine step (prefill chunk size)"
    )
    decode_prefill_chunk: int | None = option(
        None,
        "--decode-prefill-chunk",
        "most prefill tokens per step while other sequences decode: lower keeps streams "
        "smooth, higher gives new prompts a faster first token (0: no cap)",
        shown=f"{DECODE_PREFILL_CHUNK_GPU} on GPU, which replays CUDA graphs; no cap on CPU",
    )
    enable_prefix_caching: bool = option(
        True, "--no-prefix-caching", "disable the prefix cache", negate=True, shown="on"
    )
    cuda_graphs: bool = option(
        True, "--no-cuda-graphs", "decode without CUDA graphs", negate=True, shown="graphs on"
    )
    # one-row GEMVs (decode at batch 1) multiply int8-quantized activations with dp4a, as
    # llama.cpp does: ~1.7x faster kernels, activations rounded to 8 bits per 32 elements
    int8_activations: bool = option(
        True,
        "--fp16-gemv",
        "batch-1 decode multiplies fp16 activations (slower) instead of int8 ones quantized "
        "per 32 values",
        negate=True,
        shown="int8 activations, as llama.cpp",
    )
    # n-gram speculative decoding (engine/speculative/): drafts looked up in the prompt and
    # the output so far, verified k at a time by one forward; lossless
    spec_tokens: int | None = option(
        None,
        "--spec-tokens",
        f"n-gram speculative decoding: most draft tokens verified per step, 0-{MAX_SPEC_TOKENS} "
        "(0: off)",
        shown=f"on GPU {GPU_DEFAULT_SPEC_TOKENS}, raised to at most {MAX_SPEC_TOKENS} where the "
        "measured verify price pays; off on CPU",
    )
    spec_ngram_max: int = option(
        DEFAULT_NGRAM_MAX, "--spec-ngram-max", "longest n-gram looked up for drafts"
    )
    spec_ngram_min: int = option(
        DEFAULT_NGRAM_MIN, "--spec-ngram-min", "shortest n-gram looked up for drafts"
    )
    # most decoding sequences that still speculate (None: DEFAULT_SPEC_MAX_BATCH, measured);
    # not a command-line option: for measurements and tests
    spec_max_batch: int | None = option(None, None, "")
    step_overlap: str = option(
        "auto",
        "--step-overlap",
        "launch a greedy decode step before the previous step's tokens reach the host, so the "
        "GPU does not wait for detokenizing and scheduling",
        choices=STEP_OVERLAP,
        shown="auto: on with CUDA graphs",
    )
    threads: int | None = option(
        None,
        "--threads",
        "CPU threads of the torch kernels (intra-op and inter-op; CPU only)",
        shown="$OMP_NUM_THREADS, else the physical cores the current load leaves idle",
    )
    seed: int = option(0, None, "")  # seed of the sampler's shared generator

    def __post_init__(self) -> None:
        if self.kv_dtype not in KV_DTYPES:
            raise ValueError(
                f"--kv-dtype must be one of {', '.join(KV_DTYPES)}, got {self.kv_dtype!r}"
            )
        if not 0.05 <= self.gpu_memory_utilization <= 0.99:
            raise ValueError("--gpu-memory-utilization must be in [0.05, 0.99]")
        if self.block_size not in BLOCK_SIZES:
            raise ValueError("--block-size must be 8, 16, 32 or 64")
        if self.max_num_seqs < 1:
            raise ValueError("--max-num-seqs must be >= 1")
        if self.max_num_batched_tokens < 16:
            raise ValueError("--max-num-batched-tokens must be >= 16")
        if self.decode_prefill_chunk is not None and self.decode_prefill_chunk < 0:
            raise ValueError("--decode-prefill-chunk must be >= 0")
        if self.threads is not None and self.threads < 1:
            raise ValueError("--threads must be >= 1")
        if self.backend not in ("auto", "triton", "reference"):
            raise ValueError(f"unknown backend {self.backend!r}")
        if self.dtype not in ("auto", "fp16", "bf16", "fp32"):
            raise ValueError(f"--dtype must be auto, fp16, bf16 or fp32, got {self.dtype!r}")
        if self.spec_tokens is not None and not 0 <= self.spec_tokens <= MAX_SPEC_TOKENS:
            raise ValueError(f"--spec-tokens must be in [0, {MAX_SPEC_TOKENS}]")
        if self.spec_max_batch is not None and self.spec_max_batch < 1:
            raise ValueError("spec_max_batch must be >= 1")
        if self.step_overlap not in STEP_OVERLAP:
            raise ValueError(f"--step-overlap must be auto, on or off, got {self.step_overlap!r}")
        if not 1 <= self.spec_ngram_min <= self.spec_ngram_max:
            raise ValueError("need 1 <= --spec-ngram-min <= --spec-ngram-max")

    def decode_prefill_chunk_on(self, device_type: str) -> int:
        """The prefill cap of mixed steps on this device (0 = none): the flag, else the default."""
        if self.decode_prefill_chunk is not None:
            return self.decode_prefill_chunk
        return DECODE_PREFILL_CHUNK_GPU if device_type == "cuda" else 0

    def spec_tokens_on(self, device_type: str) -> int:
        """Draft tokens per step on this device (0 = off): the flag, else the default."""
        if self.spec_tokens is not None:
            return self.spec_tokens
        return default_spec_tokens(device_type)

    def spec_tokens_ceiling(self, device_type: str) -> int:
        """The most drafts per step the engine may raise its limit to after pricing a verify
        step: MAX_SPEC_TOKENS when --spec-tokens is not given on a GPU (policy.draft_limit),
        else the limit it starts with."""
        k = self.spec_tokens_on(device_type)
        return MAX_SPEC_TOKENS if k and self.spec_tokens is None else k

    def step_overlap_on(self, graphs: bool) -> bool:
        """Whether decode steps overlap (engine/overlap.py): the flag, else on exactly when
        steps replay CUDA graphs (eagerly, the host waits for each kernel's launch anyway)."""
        return graphs if self.step_overlap == "auto" else self.step_overlap == "on"

    @property
    def spec_batch_cutoff(self) -> int:
        """Above this many decoding sequences nobody speculates."""
        return self.spec_max_batch or DEFAULT_SPEC_MAX_BATCH
