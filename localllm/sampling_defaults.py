"""The sampling defaults of every front end, in one place (front ends import these).

- API: what `SamplingParams()` and an OpenAI request without the field get. The OpenAI API
  defines temperature 1 and top_p 1 (the model's own distribution), so clients written for
  hosted models behave the same here.
- GENERATE: `localllm generate`, llama.cpp's command-line defaults (temperature 0.8, top-p
  0.95, top-k 40), so figures and outputs compare with `llama-cli`.
- CHAT: the terminal chat (`localllm chat`, its settings panel's initial values): a little
  cooler (0.7) for conversation, top-p 0.95, no top-k, and room for longer answers (512).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SamplingDefaults:
    max_tokens: int
    temperature: float  # 0 = greedy
    top_p: float
    top_k: int  # 0 = off
    min_p: float = 0.0
    repetition_penalty: float = 1.0


API = SamplingDefaults(max_tokens=256, temperature=1.0, top_p=1.0, top_k=0)
GENERATE = SamplingDefaults(max_tokens=256, temperature=0.8, top_p=0.95, top_k=40)
CHAT = SamplingDefaults(max_tokens=512, temperature=0.7, top_p=0.95, top_k=0)
