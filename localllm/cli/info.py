"""`localllm info`: metadata, tensor types and the memory a model needs, and whether it fits
this GPU (weights + the KV cache of a context, for each KV dtype)."""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path
from typing import Any

from localllm.cli.args import HelpFormatter, add_engine_args, engine_config

_KV_NOTES = {"fp8": "RTX 40xx / sm_89+"}


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "info",
        help="show a model's metadata, tensor types and the memory it needs",
        description="MODEL is a path, a NAME from `localllm list`, or owner/repo[:QUANT] "
        "(pulled first when it is not here).",
        formatter_class=HelpFormatter,
    )
    p.add_argument("model", metavar="MODEL", help="the model to describe")
    # the engine's own options: the KV figures are for the pool these settings give
    add_engine_args(p, only=("max_model_len", "block_size", "gpu_memory_utilization"))
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    p.set_defaults(func=run)


def _mib(n: float) -> str:
    from localllm.hub.discovery import format_size

    return format_size(int(n))


def _count(n: int) -> str:
    for unit, scale in (("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= scale:
            return f"{n / scale:.2f} {unit}"
    return str(n)


def _shape(report: Any) -> list[str]:
    c = report.config
    if c is None:
        return [f"  runs here      no: {report.unsupported}"]
    return [
        f"  layers         {c.n_layers} · hidden {c.dim} · heads {c.n_heads} (KV {c.n_kv_heads}) "
        f"· head dim {c.head_dim} · FFN {c.ffn_dim} · vocab {c.vocab_size}"
    ]


def _header(report: Any) -> list[str]:
    name = report.metadata.get("general.name") or report.metadata.get("_name_or_path") or "-"
    ctx = f"{report.trained_context} tokens" if report.trained_context else "unknown"
    return [
        str(report.path),
        f"  format         {report.format}",
        f"  name           {name}",
        f"  architecture   {report.arch}",
        f"  quantization   {report.quant}",
        f"  parameters     {_count(report.params)}",
        *_shape(report),
        f"  context        {ctx} (trained)",
        f"  file size      {_mib(report.file_bytes)}",
    ]


def _tensors(report: Any) -> list[str]:
    total = max(1, sum(t.nbytes for t in report.tensor_types))
    out = ["", "tensor types"]
    for t in report.tensor_types:
        share = 100 * t.nbytes / total
        out.append(f"  {t.name:<8} {t.count:>5} tensors  {_mib(t.nbytes):>11}  {share:5.1f}%")
    return out


def _memory(report: Any, util: float) -> list[str]:
    if not report.kv:
        return [
            "",
            f"memory: weights {_mib(report.weight_bytes)} (KV figures need a supported model)",
        ]
    gpu = report.gpu
    out = ["", f"memory for a {report.context}-token context (KV in blocks of {report.block_size})"]
    out.append(f"  weights                      {_mib(report.weight_bytes):>11}")
    for kv in report.kv:
        need = report.weight_bytes + kv.nbytes
        line = (
            f"  KV {kv.dtype:<5} {kv.bytes_per_token:>8,.0f} B/token  {_mib(kv.nbytes):>11}"
            f"   total {_mib(need):>11}"
        )
        if gpu is not None:
            most = gpu.max_context(report.weight_bytes, kv, report.block_size)
            line += f"   {'fits' if gpu.fits(need) else 'does NOT fit'} (up to {most:,} tokens)"
        note = _KV_NOTES.get(kv.dtype)
        out.append(line + (f"   [{note}]" if note else ""))
    if gpu is None:
        out.append("GPU: none (no CUDA device here): the totals are what a GPU would need")
    else:
        out.append(
            f"GPU: {gpu.name}: {_mib(gpu.free)} free of {_mib(gpu.total)}; the engine may use "
            f"{_mib(max(0, gpu.usable))} at --gpu-memory-utilization {util} (plus activations)"
        )
    return out


def render(report: Any, util: float) -> str:
    from localllm.hub.info import metadata_lines

    lines = _header(report) + _tensors(report) + _memory(report, util)
    lines += ["", "metadata"] + [f"  {k} = {v}" for k, v in metadata_lines(report.metadata)]
    return "\n".join(lines)


def as_json(report: Any) -> str:
    data = dataclasses.asdict(report)
    data["metadata"] = {
        k: (f"[{len(v)} items]" if isinstance(v, list) and len(v) > 64 else v)
        for k, v in report.metadata.items()
    }
    if report.gpu is not None:
        data["gpu"]["usable"] = report.gpu.usable
    return json.dumps(data, indent=2, default=str)


def run(args: argparse.Namespace) -> int:
    from localllm.hub.info import model_report
    from localllm.hub.memory import current_gpu

    cfg = engine_config(args, model=args.model)  # resolves MODEL, checks the options
    util = cfg.gpu_memory_utilization
    report = model_report(
        Path(cfg.model), context=cfg.max_model_len, block_size=cfg.block_size, gpu=current_gpu(util)
    )
    print(as_json(report) if args.json else render(report, util))
    return 0
