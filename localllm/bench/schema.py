"""The JSON Schema of a `localllm bench --json` document (schema "localllm-bench/1"): what a
script reading results may rely on. Checked by the tests against real runs."""

from __future__ import annotations

NUM = {"type": "number"}
INT = {"type": "integer", "minimum": 0}
OPT_NUM = {"type": ["number", "null"]}
STR = {"type": "string"}
OPT_STR = {"type": ["string", "null"]}
INTS = {"type": "array", "items": INT}
NUMS = {"type": "array", "items": NUM}
LATENCY = {
    "type": "object",
    "required": ["p50", "p90", "p99", "mean"],
    "properties": {k: OPT_NUM for k in ("p50", "p90", "p99", "mean")},
}


def _obj(props: dict, extra: dict | None = None) -> dict:
    """An object whose listed properties are all required."""
    return {"type": "object", "required": list(props), "properties": {**props, **(extra or {})}}


SPEED = {"reps": INT, "tok_s": NUM, "stdev_tok_s": NUM, "samples_tok_s": NUMS}
DECODE = {
    **SPEED,
    "n_gen": INT,
    "depth": INT,
    "kv_dtype": STR,
    "generated_tokens": INTS,
    "bytes_per_token": INT,
    "ceiling_tok_s": OPT_NUM,
    "fraction_of_ceiling": OPT_NUM,
}
SERVE = {
    "mode": {"enum": ["concurrency", "poisson"]},
    "requests": INT,
    "prompt": INT,
    "gen": INT,
    "generated_tokens": INT,
    "duration_s": NUM,
    "throughput_tok_s": NUM,
    "decode_tok_s": OPT_NUM,
    "request_rate": NUM,
    "ttft_ms": LATENCY,
    "itl_ms": LATENCY,
    "slo": _obj({"ttft_ms": NUM, "itl_ms": NUM}),
    "slo_met": INT,
    "goodput_req_s": NUM,
    "finish_reasons": {"type": "array", "items": STR},
}
ITL_RUN = {
    "unloaded_p99_ms": NUM,
    "loaded_p99_ms": NUM,
    "ratio": NUM,
    "unloaded_p50_ms": NUM,
    "loaded_p50_ms": NUM,
    "loaded_max_ms": NUM,
    "unloaded_steps": INT,
    "loaded_steps": INT,
}
ROWS = {
    "pp": _obj({**SPEED, "n_prompt": INT, "prompt_tokens": INTS}),
    "tg": _obj(DECODE),
    "serve": _obj(SERVE, {"concurrency": INT, "rate": NUM}),
    "prefix": _obj({"prefix_tokens": INT, "suffix_tokens": INT, "reps": INT, "cold_ttft_ms": NUM,
                    "warm_ttft_ms": NUM, "cold_samples_ms": NUMS, "warm_samples_ms": NUMS,
                    "ratio": NUM, "cached_tokens": INTS, "cacheable_tokens": INT}),
    "itl": _obj({"streams": INT, "long_prompt": INT, "reps": INT, **ITL_RUN, "ratio_samples": NUMS,
                 "runs": {"type": "array", "items": _obj(ITL_RUN)}}),
    "kv": _obj({**DECODE, "capacity_tokens": INT, "kv_bytes_per_token": INT, "tokens_per_gib": INT,
                "max_model_len": INT}),
    "spec": _obj({"prompt": STR, "prompt_set": STR, "spec_tokens": INT, "gen": INT, "reps": INT, "prompts": INT,
                  "identical": INT, "tok_s_on": NUM, "tok_s_off": NUM, "speedup": NUM,
                  "drafted": INT, "accepted": INT, "acceptance": NUM, "mean_run": NUM,
                  "steps": INT, "tokens_on": INT}),
}  # fmt: skip
PAIR = _obj(
    {"figure": STR, "kind": {"enum": ["pp", "tg", "serve_decode", "serve_e2e"]},
     "localllm": OPT_NUM, "llama_cpp": OPT_NUM, "ratio": OPT_NUM,
     "localllm_of_ceiling": OPT_NUM, "llama_cpp_of_ceiling": OPT_NUM},
)  # fmt: skip

SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "required": ["schema", "started", "command", "system", "code", "model", "engine", "sizes",
                 "scenarios", "results", "skipped", "notes"],
    "properties": {
        "schema": {"const": "localllm-bench/1"},
        "started": STR,
        "command": OPT_STR,
        "system": _obj({"device": {"enum": ["cpu", "cuda"]}, "name": STR, "driver": OPT_STR,
                        "torch": STR, "copy_bandwidth_GBps": OPT_NUM, "bandwidth_method": STR}),
        "code": _obj({"version": STR, "git_commit": OPT_STR,
                      "git_dirty": {"type": ["boolean", "null"]}}),
        "model": _obj({"name": STR, "file": STR, "arch": STR,
                       "sha256": {"type": "string", "pattern": "^[0-9a-f]{64}$"}, "bytes": INT,
                       "method": STR, "weight_bytes_per_token": INT, "ceiling_tok_s": OPT_NUM}),
        "engine": _obj({"backend": STR, "kv_dtype": STR, "block_size": INT, "max_model_len": INT,
                        "max_num_seqs": INT, "kv_capacity_tokens": INT,
                        "cuda_graphs": {"type": "boolean"}},
                       # absent before sessions 9 and 10's results
                       {"pdl": {"type": "boolean"}, "step_overlap": {"type": "boolean"}}),
        "sizes": {"type": "object"},
        "scenarios": {"type": "array", "items": {"enum": list(ROWS)}},
        "results": {"type": "object", "additionalProperties": False,
                    "properties": {k: {"type": "array", "items": v} for k, v in ROWS.items()}},
        "skipped": {"type": "object", "additionalProperties": STR},
        "notes": {"type": "array", "items": STR},
        "profile": {"type": "array"},
        "compare": _obj({"commands": {"type": "array", "items": STR},
                         "pairs": {"type": "array", "items": PAIR},
                         "tool": {"type": "object"}, "notes": {"type": "array", "items": STR}}),
    },
}  # fmt: skip
