"""Byte-level BPE pre-tokenizers: the `tokenizer.ggml.pre` registry.

Each preset is a sequence of regexes as llama.cpp's `llm_tokenizer_bpe` lists them (and as
the model's HF `tokenizer.json` defines them: `Split` pre-tokenizers with `Isolated`
behaviour): every regex splits each piece from the previous one, and the text between
matches is kept as pieces too (`unicode_regex_split`). Where llama.cpp rewrites a regex for
its own engine (tekken's `\\p{Lu}` classes), the original from `tokenizer.json` is used: the
`regex` module supports it. A name that is not here is refused, as llama.cpp does: encoding
with the wrong preset gives a model token sequences it never saw in training.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import regex

from localllm.errors import LocalLLMError

_CONTRACTIONS = "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
_GPT2 = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)"
_GPT4_TAIL = r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
_CJK = "[一-龥ࠀ-一가-퟿]+"
# DeepSeek LLM's letters: the cased-letter ranges its tokenizer.json spells out (escaped: a
# Unicode normalization of this file would otherwise change range ends such as U+1F7D)
_DEEPSEEK_LETTERS = (
    "A-Za-z\u00b5\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u01ba\u01bc-\u01bf\u01c4-\u0293\u0295-"
    "\u02af\u0370-\u0373\u0376\u0377\u037b-\u037d\u037f\u0386\u0388-\u038a\u038c\u038e-"
    "\u03a1\u03a3-\u03f5\u03f7-\u0481\u048a-\u052f\u0531-\u0556\u10a0-\u10c5\u13a0-\u13f5"
    "\u13f8-\u13fd\u1c90-\u1cba\u1cbd-\u1cbf\u1d00-\u1d2b\u1d6b-\u1d77\u1d79-\u1d9a\u1e00"
    "-\u1f15\u1f18-\u1f1d\u1f20-\u1f45\u1f48-\u1f4d\u1f50-\u1f57\u1f59\u1f5b\u1f5d\u1f5f-"
    "\u1f7d\u1f80-\u1fb4\u1fb6-\u1fbc\u1fbe\u1fc2-\u1fc4\u1fc6-\u1fcc\u1fd0-\u1fd3\u1fd6-"
    "\u1fdb\u1fe0-\u1fec\u1ff2-\u1ff4\u1ff6-\u1ffc\u2102\u2107\u210a-\u2113\u2115\u2119-"
    "\u211d\u2124\u2126\u2128\u212a-\u212d\u212f-\u2134\u2139\u213c-\u213f\u2145-\u2149"
    "\u214e\u2183\u2184\u2c00-\u2c7b\u2c7e-\u2ce4\u2ceb-\u2cee\u2cf2\u2cf3\ua640-\ua66d"
    "\ua680-\ua69b\ua722-\ua76f\ua771-\ua787\ua78b-\ua78e\uab70-\uabbf\ufb00-\ufb06\ufb13"
    "-\ufb17\uff21-\uff3a\uff41-\uff5a\U00010400-\U0001044f\U000104b0-\U000104d3"
    "\U000104d8-\U000104fb\U00010c80-\U00010cb2\U00010cc0-\U00010cf2\U000118a0-\U000118df"
    "\U0001e900-\U0001e943"
)
_UPPERISH = r"[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]"
_LOWERISH = r"[\p{Ll}\p{Lm}\p{Lo}\p{M}]"
_NO_PUNCT_RUN = r" ?[^(\s|.,!?…。，、।۔،)]+"  # BLOOM / Poro / Viking


@dataclass(frozen=True)
class PreTokenizer:
    """A llama.cpp pre-tokenizer preset: regexes applied in sequence, and vocab options."""

    patterns: tuple[str, ...]
    ignore_merges: bool = False  # a word that is itself a vocab entry is not merged
    add_bos: bool = False  # llama.cpp's default for this preset, before metadata overrides
    default_bos: bool = True  # False: no BOS id unless the metadata names one (chatglm)

    def split(self, text: str) -> list[str]:
        pieces = [text]
        for pattern in _compiled(self.patterns):
            out: list[str] = []
            for piece in pieces:
                pos = 0
                for m in pattern.finditer(piece):
                    start, end = m.span()
                    if start > pos:
                        out.append(piece[pos:start])
                    if end > start:
                        out.append(piece[start:end])
                    pos = end
                if pos < len(piece):
                    out.append(piece[pos:])
            pieces = out
        return pieces


@cache
def _compiled(patterns: tuple[str, ...]) -> tuple[regex.Pattern[str], ...]:
    return tuple(regex.compile(p) for p in patterns)


_DEFAULT = PreTokenizer((r"[\p{P}\$\+<=>\^~\|]+", _GPT2, r"\p{N}+", "[0-9][0-9][0-9]"))
_GPT2_PRE = PreTokenizer((_GPT2,))
_LLAMA3_REGEX = _CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}" + _GPT4_TAIL
_LLAMA3 = PreTokenizer((_LLAMA3_REGEX,), ignore_merges=True, add_bos=True)
_QWEN2 = PreTokenizer((_CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}" + _GPT4_TAIL,))
_STARCODER = PreTokenizer((r"\p{N}", _GPT2))
_FALCON = PreTokenizer((r"[\p{P}\$\+<=>\^~\|`]+", _GPT2, "[0-9][0-9][0-9]"))
_DEEPSEEK_CODER = PreTokenizer(("[\r\n]", r"\s?\p{L}+", r"\s?\p{P}+", _CJK, r"\p{N}"))
_DEEPSEEK_LLM = PreTokenizer(
    (
        "[\r\n]",
        rf"\s?[{_DEEPSEEK_LETTERS}]+",
        r"\s?[!-/:-~！-／：-～‘-‟　-。]+",
        r"\s+\Z",  # llama.cpp's `\s+$`: the end of the piece
        _CJK,
        r"\p{N}+",
    )
)
_DEEPSEEK_V3 = PreTokenizer(
    (
        r"\p{N}{1,3}",
        "[一-龥぀-ゟ゠-ヿ]+",
        r"[!\"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+"
        r"| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    )
)
_TEKKEN = PreTokenizer(
    (
        rf"[^\r\n\p{{L}}\p{{N}}]?{_UPPERISH}*{_LOWERISH}+|[^\r\n\p{{L}}\p{{N}}]?{_UPPERISH}+"
        rf"{_LOWERISH}*|\p{{N}}| ?[^\s\p{{L}}\p{{N}}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    ),
    ignore_merges=True,
    add_bos=True,
)
_CHAMELEON = PreTokenizer(
    (
        "<sentinel:[0-9]+>",
        "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z",
        "([\\t\\n]|    |  )",
        r"\p{N}",
        r"[\p{P}!-/:-@\[-`{-~]",
        _GPT2,
    ),
    add_bos=True,
)

# `tokenizer.ggml.pre` name -> preset (names as llama.cpp's llama_vocab::load accepts them)
PRE_TOKENIZERS: dict[str, PreTokenizer] = {
    "default": _DEFAULT,
    **dict.fromkeys(
        (
            "gpt-2",
            "phi-2",
            "jina-es",
            "jina-de",
            "gigachat",
            "jina-v1-en",
            "jina-v2-es",
            "jina-v2-de",
            "jina-v2-code",
            "roberta-bpe",
            "mpt",
            "olmo",
            "jais",
            "exaone4",
            "mellum",
        ),
        _GPT2_PRE,
    ),
    **dict.fromkeys(
        ("llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2"),
        _LLAMA3,
    ),
    **dict.fromkeys(("dbrx", "smaug-bpe"), PreTokenizer(_LLAMA3.patterns)),
    **dict.fromkeys(
        ("qwen2", "deepseek-r1-qwen", "kormo", "megrez", "stablelm2", "hunyuan"), _QWEN2
    ),
    **dict.fromkeys(
        ("starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b"),
        _STARCODER,
    ),
    "falcon": _FALCON,
    "deepseek-coder": _DEEPSEEK_CODER,
    "deepseek-llm": _DEEPSEEK_LLM,
    "deepseek-v3": _DEEPSEEK_V3,
    "tekken": _TEKKEN,
    "chatglm-bpe": PreTokenizer((_LLAMA3_REGEX,), default_bos=False),
    **dict.fromkeys(("bloom", "poro-chat", "gpt3-finnish"), PreTokenizer((_NO_PUNCT_RUN,))),
    "viking": PreTokenizer((_NO_PUNCT_RUN, r"\p{N}")),
    "chameleon": _CHAMELEON,
}


def pre_tokenizer(name: str | None) -> PreTokenizer:
    """The preset for a `tokenizer.ggml.pre` value; a file without one gets llama.cpp's
    default (it warns that such files were converted before pre-tokenizers were recorded)."""
    if not name:
        return _DEFAULT
    found = PRE_TOKENIZERS.get(name)
    if found is None:
        raise LocalLLMError(
            f"unknown pre-tokenizer type tokenizer.ggml.pre {name!r}: this tokenizer is not "
            "supported (its text would be split into the wrong tokens)"
        )
    return found
