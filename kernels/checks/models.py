"""The model shapes the kernel-config checks enumerate: the 7-8B models users run most, a
1.5B coder model with QKV bias, and the small test model (SmolLM2-135M)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ModelShape:
    name: str
    dim: int
    ffn: int
    vocab: int
    n_q: int  # query heads
    n_kv: int  # KV heads
    head_dim: int
    qkv_bias: bool = False

    def weights(self) -> list[tuple[str, int, int, bool]]:
        """(role, N, K, bias) of every matrix a layer (and the LM head) multiplies by, fused
        as the loader stacks them (q | k | v, gate | up) and separate (formats that differ per
        tensor: a Q4_K_M file's Q6_K v and down weights)."""
        d, q, kv = self.dim, self.n_q * self.head_dim, self.n_kv * self.head_dim
        b = self.qkv_bias
        return [
            ("qkv", q + 2 * kv, d, b), ("q", q, d, b), ("kv", kv, d, b), ("o", d, q, False),
            ("gate_up", 2 * self.ffn, d, False), ("gate", self.ffn, d, False),
            ("down", d, self.ffn, False), ("lm_head", self.vocab, d, False),
        ]  # fmt: skip


MODELS: dict[str, ModelShape] = {
    m.name: m
    for m in (
        ModelShape("llama2-7b", 4096, 11008, 32000, 32, 32, 128),
        ModelShape("llama3-8b", 4096, 14336, 128256, 32, 8, 128),
        ModelShape("qwen2.5-1.5b", 1536, 8960, 151936, 12, 2, 128, qkv_bias=True),
        ModelShape("smollm2-135m", 576, 1536, 49152, 9, 3, 64),
    )
}
