"""Which quant type each 2-D weight of a synthetic GGUF model gets (the anchors' Q4_K_M mix
or one type everywhere), and the general.file_type that names the mix."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from gguf import GGMLQuantizationType, LlamaFileType

Q = GGMLQuantizationType
# (kind, layer or None, n_layers) -> type of that 2-D weight; kind is "token_embd", "output",
# "attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up" or "ffn_down"
TypeRule = Callable[[str, "int | None", int], GGMLQuantizationType]


@dataclass(frozen=True)
class UniformRule:
    """Every 2-D weight `qtype`, except `output.weight` (`output`, default the same)."""

    qtype: GGMLQuantizationType
    output: GGMLQuantizationType | None = None

    def __call__(self, kind: str, layer: int | None, n_layers: int) -> GGMLQuantizationType:
        return self.output if kind == "output" and self.output is not None else self.qtype


def use_more_bits(layer: int, n_layers: int) -> bool:
    """llama.cpp's Q4_K_M rule for which layers keep attn_v / ffn_down at 6 bits."""
    eighth = n_layers // 8
    return layer < eighth or layer >= 7 * n_layers // 8 or (layer - eighth) % 3 == 2


def q4_k_m_rule(kind: str, layer: int | None, n_layers: int) -> GGMLQuantizationType:
    if kind == "output":
        return Q.Q6_K
    if kind in ("attn_v", "ffn_down") and layer is not None and use_more_bits(layer, n_layers):
        return Q.Q6_K
    return Q.Q4_K


# general.file_type names that are not simply MOSTLY_<type> (K-quants: the _M mixes)
_FILE_TYPE_NAMES = {
    "F32": "ALL_F32",
    "Q3_K": "MOSTLY_Q3_K_M",
    "Q4_K": "MOSTLY_Q4_K_M",
    "Q5_K": "MOSTLY_Q5_K_M",
}


def file_type_for(qtype: GGMLQuantizationType) -> int:
    """llama.cpp's general.file_type for a model whose bulk weights are `qtype`."""
    return int(LlamaFileType[_FILE_TYPE_NAMES.get(qtype.name, f"MOSTLY_{qtype.name}")])
