"""Reading llama.cpp's benchmark output: llama-bench's `-o json` array and the markdown table
llama-batched-bench prints (its columns: PP, TG, B, N_KV, T_PP s, S_PP t/s, T_TG s, S_TG t/s,
T s, S t/s)."""

from __future__ import annotations

import json

from localllm.errors import LocalLLMError

BATCHED_COLUMNS = ("pp", "tg", "b", "n_kv", "t_pp", "s_pp", "t_tg", "s_tg", "t", "s")


def parse_llama_bench(text: str) -> list[dict]:
    """The tests of llama-bench -o json: n_prompt, n_gen, n_depth, type_k, avg_ts, stddev_ts,
    samples_ts, gpu_info, build_commit, model_type, ..."""
    start = text.find("[")
    if start < 0:
        raise LocalLLMError("llama-bench printed no JSON array (was it run with -o json?)")
    try:
        tests, _ = json.JSONDecoder().raw_decode(text[start:])
    except ValueError as e:
        raise LocalLLMError(f"llama-bench's JSON output does not parse: {e}") from None
    if not isinstance(tests, list) or not all(isinstance(t, dict) for t in tests):
        raise LocalLLMError("llama-bench's JSON output is not a list of tests")
    for t in tests:
        missing = [k for k in ("n_prompt", "n_gen", "avg_ts") if k not in t]
        if missing:
            raise LocalLLMError(f"llama-bench's JSON test lacks {', '.join(missing)}")
        t.setdefault("n_depth", 0)  # before llama-bench had -d
    return tests


def parse_batched_bench(text: str) -> list[dict]:
    """The rows of llama-batched-bench's table (lines starting with '|' whose cells are
    numbers; the header and the separator line are skipped)."""
    rows = []
    for line in text.splitlines():
        if not line.lstrip().startswith("|"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != len(BATCHED_COLUMNS):
            continue
        try:
            values = [float(c) for c in cells]
        except ValueError:  # the header or the |---| line
            continue
        row = dict(zip(BATCHED_COLUMNS, values))
        for k in ("pp", "tg", "b", "n_kv"):
            row[k] = int(row[k])
        rows.append(row)
    if not rows:
        raise LocalLLMError("llama-batched-bench printed no result table")
    return rows
