"""Structured output: grammar-constrained sampling (llguidance) and OpenAI tool calls.

`spec.py` what a request asks for; `compiler.py` specs -> validated, cached grammars for one
tokenizer; `constraint.py` one sequence's grammar state; `bitmask.py` batch masks on logits;
`vocab.py` our tokenizer as byte strings; `tools/` tool-call formats, prompts, parsing.
"""
