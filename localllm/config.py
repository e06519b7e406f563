"""Frozen settings: ModelConfig comes from the model file, EngineConfig from the user."""

from __future__ import annotations

from dataclasses import dataclass, field


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


@dataclass(frozen=True)
class EngineConfig:
    """User knobs shared by chat, serve, bench and generate."""

    model: str
    device: str = "auto"  # "auto" | "cpu" | "cuda" | "cuda:N"
    backend: str = "auto"  # "auto" (triton on CUDA, reference on CPU) | "triton" | "reference"
    dtype: str = (
        "auto"  # activations: "auto" (fp16 on CUDA, fp32 on CPU) | "fp16" | "bf16" | "fp32"
    )
    max_model_len: int | None = None  # default: the model's context length
    kv_dtype: str = "auto"  # auto = fp16 on CUDA, fp32 on CPU
    block_size: int = 16
    gpu_memory_utilization: float = 0.90
    num_kv_blocks: int | None = None  # override the measured pool size (tests, tiny pools)
    max_num_seqs: int = 64
    max_num_batched_tokens: int = 2048
    # most prefill tokens in a step that also decodes (running streams' inter-token latency vs
    # the prompt's time to first token); None = 512 on CUDA, unlimited on CPU. At <= 24 such
    # steps replay a captured mixed graph and stay close to a plain decode step.
    decode_prefill_chunk: int | None = None
    enable_prefix_caching: bool = True
    cuda_graphs: bool = True
    # one-row GEMVs (decode at batch 1) multiply int8-quantized activations with dp4a, as
    # llama.cpp does: ~1.7x faster kernels, activations rounded to 8 bits per 32 elements
    int8_activations: bool = True
    speculative_tokens: int = 0  # n-gram draft length; 0 disables speculation
    seed: int = 0
    extra: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.kv_dtype not in KV_DTYPES:
            raise ValueError(
                f"--kv-dtype must be one of {', '.join(KV_DTYPES)}, got {self.kv_dtype!r}"
            )
        if not 0.05 <= self.gpu_memory_utilization <= 0.99:
            raise ValueError("--gpu-memory-utilization must be in [0.05, 0.99]")
        if self.block_size not in (8, 16, 32, 64):
            raise ValueError("--block-size must be 8, 16, 32 or 64")
        if self.max_num_seqs < 1:
            raise ValueError("--max-num-seqs must be >= 1")
        if self.max_num_batched_tokens < 16:
            raise ValueError("--max-num-batched-tokens must be >= 16")
        if self.backend not in ("auto", "triton", "reference"):
            raise ValueError(f"unknown backend {self.backend!r}")
        if self.dtype not in ("auto", "fp16", "bf16", "fp32"):
            raise ValueError(f"--dtype must be auto, fp16, bf16 or fp32, got {self.dtype!r}")
        if self.speculative_tokens < 0:
            raise ValueError("--speculative-tokens must be >= 0")
