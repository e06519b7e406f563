"""One `localllm bench` run: the main engine, the copy bandwidth measured at start, the chosen
scenarios in order, and the result document (schema SCHEMA) with everything needed to know
what was measured on what."""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import Any

from localllm.bench.engines import Engines
from localllm.bench.progress import BenchProgress
from localllm.bench.provenance import code_version, model_digest, system_info
from localllm.bench.scenarios import measure_bandwidth
from localllm.bench.sizes import Sizes
from localllm.bench.suite import SCENARIOS, Context, Skip
from localllm.config import EngineConfig
from localllm.engine.block_manager import cdiv

SCHEMA = "localllm-bench/1"
BANDWIDTH_METHOD = "device-to-device copy of 1 GiB, bytes read + written per second"


def _header(eng: Any, bandwidth: float, model_label: str, command: str | None) -> dict:
    r = eng.runner
    ceiling = bandwidth / r.weight_bytes if bandwidth else None
    return {
        "schema": SCHEMA,
        "started": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": command,
        "system": {
            **system_info(r.device.type, r.device.index),
            "copy_bandwidth_GBps": bandwidth / 1e9 if bandwidth else None,
            "bandwidth_method": BANDWIDTH_METHOD,
        },
        "code": code_version(),
        "model": {
            "name": model_label,
            "file": eng.cfg.model,
            "arch": eng.model_cfg.arch,
            **model_digest(eng.cfg.model),
            "weight_bytes_per_token": r.weight_bytes,
            # batch-1 decode can be no faster than reading every weight once per token
            "ceiling_tok_s": ceiling,
        },
        "engine": {
            "backend": r.backend,
            "kv_dtype": r.kv_dtype,
            "block_size": r.block_size,
            "max_model_len": eng.max_model_len,
            "max_num_seqs": eng.cfg.max_num_seqs,
            "kv_capacity_tokens": r.num_kv_tokens,
            "cuda_graphs": r.graphs is not None and r.graphs.enabled,
            "pdl": r.launches_pdl,
            "step_overlap": eng.overlap,
        },
    }


def run_suite(
    base: EngineConfig,
    names: list[str],
    sizes: Sizes,
    build: Callable[[EngineConfig], Any],
    *,
    model_label: str,
    command: str | None,
    spec_k: int | None = None,
    spec_prompts: str = "auto",
    profile_batches: tuple[int, ...] = (),
    profile_depths: tuple[int, ...] = (0,),
    live: bool | None = None,
) -> dict:
    bandwidth = measure_bandwidth()  # before the KV pool takes the GPU's free memory
    _release_cached_memory()
    engines = Engines(base, build)
    doc = _header(engines.main(), bandwidth, model_label, command)
    doc.update(sizes=dict(vars(sizes)), scenarios=names, results={}, skipped={})
    total = sum(SCENARIOS[n].units(sizes) for n in names)
    with BenchProgress(total, live) as progress:
        ctx = Context(sizes, engines, bandwidth, progress, spec_k, spec_prompts)
        for name in names:
            progress.begin(name)
            try:
                ctx.results[name] = SCENARIOS[name].run(ctx)
            except Skip as e:
                doc["skipped"][name] = str(e)
    doc["results"] = ctx.results
    doc["notes"] = ctx.notes
    if profile_batches:
        doc["profile"] = _profile(engines.main(), profile_batches, profile_depths, ctx.notes)
    engines.close()
    return doc


def _release_cached_memory() -> None:
    import torch

    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def _profile(eng: Any, batches: tuple[int, ...], depths: tuple[int, ...],
             notes: list[str]) -> list[dict]:  # fmt: skip
    """The per-kernel breakdown of decode steps at each batch and context depth (--profile,
    --profile-depth; CUDA's profiler). A batch whose contexts do not fit the KV cache at a
    depth is left out with a note."""
    if eng.runner.device.type != "cuda":
        notes.append("--profile needs a CUDA GPU: skipped")
        return []
    from localllm.bench.profile import PROFILE_CONTEXT, profile_decode

    out = []
    bs = eng.runner.block_size
    for depth in depths:
        for b in batches:
            need = b * cdiv(depth + PROFILE_CONTEXT, bs) * bs  # whole blocks per sequence
            if need > eng.runner.num_kv_tokens:
                notes.append(f"--profile {b} at depth {depth}: {need:,} KV tokens needed, the "
                             f"cache holds {eng.runner.num_kv_tokens:,}: skipped")  # fmt: skip
                continue
            out.append(profile_decode(eng, b, depth=depth))
    return out
