"""`--plot DIR`: PNG charts of a bench result with matplotlib (the `bench` extra): throughput
vs latency (serve), tok/s vs context (tg, kv, pp), tok/s vs streams (serve), with llama.cpp's
figures beside ours when the result has a comparison."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from localllm.errors import LocalLLMError


def require_matplotlib() -> Any:
    """matplotlib.pyplot on the file-only Agg backend, or a one-line error saying how to get it."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise LocalLLMError(
            "--plot needs matplotlib: pip install 'localllm[bench]' (or pip install matplotlib)"
        ) from None
    return plt


def _plain(axis: Any) -> None:
    """Tick labels of a log axis as plain numbers (6.5, 128, 2048), not powers."""
    from matplotlib.ticker import FuncFormatter

    fmt = FuncFormatter(lambda v, _pos: f"{v:g}")
    axis.set_major_formatter(fmt)
    axis.set_minor_formatter(fmt)


def _log2_axis(ax: Any) -> None:
    """A log2 x axis labelled with plain numbers (128, 512, 2048; 1, 4, 16, 64)."""
    from matplotlib.ticker import FuncFormatter

    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))


def _pairs(doc: dict, kind: str) -> list[dict]:
    return [
        p for p in doc.get("compare", {}).get("pairs", []) if p["kind"] == kind and p["llama_cpp"]
    ]


def _latency(plt: Any, doc: dict) -> Any:
    rows = doc["results"].get("serve")
    if not rows:
        return None
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for ax, key, title in ((axes[0], "itl_ms", "inter-token latency"), (axes[1], "ttft_ms", "time to first token")):  # fmt: skip
        for mode, marker in (("concurrency", "o-"), ("poisson", "s--")):
            pts = sorted(
                (r for r in rows if r["mode"] == mode), key=lambda r: r["throughput_tok_s"]
            )
            if not pts:
                continue
            x = [r["throughput_tok_s"] for r in pts]
            for q in ("p50", "p99"):
                ax.plot(x, [r[key][q] for r in pts], marker, label=f"{q}, {'fixed streams' if mode == 'concurrency' else 'Poisson arrivals'}")  # fmt: skip
        ax.set(xlabel="generated tokens/s (all streams)", ylabel="ms", title=title, yscale="log")
        _plain(ax.yaxis)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    return fig


def _context(plt: Any, doc: dict) -> Any:
    res = doc["results"]
    if not (res.get("tg") or res.get("kv") or res.get("pp")):
        return None
    fig, (ax, ax_pp) = plt.subplots(1, 2, figsize=(11, 4.2))
    series: dict[str, list[tuple[int, float]]] = {}
    for r in res.get("tg", []) + res.get("kv", []):
        series.setdefault(f"localllm, {r['kv_dtype']} KV", []).append((r["depth"], r["tok_s"]))
    for p in _pairs(doc, "tg"):
        series.setdefault(f"llama.cpp, {p['kv_dtype']} KV", []).append((p["depth"], p["llama_cpp"]))
    for label, pts in series.items():
        pts = sorted(set(pts))
        ax.plot([d for d, _ in pts], [v for _, v in pts], "o-" if "localllm" in label else "s--", label=label)  # fmt: skip
    ax.set(xlabel="tokens already in context (depth)", ylabel="tokens/s", title="batch-1 decode")
    pp = sorted((r["n_prompt"], r["tok_s"]) for r in res.get("pp", []))
    if pp:
        ax_pp.plot([n for n, _ in pp], [v for _, v in pp], "o-", label="localllm")
    them = sorted((p["n"], p["llama_cpp"]) for p in _pairs(doc, "pp"))
    if them:
        ax_pp.plot([n for n, _ in them], [v for _, v in them], "s--", label="llama.cpp")
    ax_pp.set(xlabel="prompt tokens", ylabel="tokens/s", title="prefill")
    _log2_axis(ax_pp)
    for a in (ax, ax_pp):
        a.grid(alpha=0.3)
        a.legend(fontsize=8)
    return fig


def _streams(plt: Any, doc: dict) -> Any:
    rows = [r for r in doc["results"].get("serve", []) if r["mode"] == "concurrency"]
    if not rows:
        return None
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    c = [r["concurrency"] for r in rows]
    ax.plot(c, [r["throughput_tok_s"] for r in rows], "o-", label="localllm, end to end")
    ax.plot(c, [r["decode_tok_s"] or 0 for r in rows], "o:", label="localllm, decode")
    for kind, label in (("serve_decode", "llama.cpp, decode (S_TG)"), ("serve_e2e", "llama.cpp, end to end")):  # fmt: skip
        pts = sorted((p["concurrency"], p["llama_cpp"]) for p in _pairs(doc, kind))
        if pts:
            ax.plot([x for x, _ in pts], [y for _, y in pts], "s--", label=label)
    ax.set(xlabel="concurrent streams", ylabel="generated tokens/s", title="throughput vs streams")  # fmt: skip
    _log2_axis(ax)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return fig


CHARTS: dict[str, Callable[[Any, dict], Any]] = {
    "throughput_vs_latency.png": _latency,
    "tok_s_vs_context.png": _context,
    "tok_s_vs_streams.png": _streams,
}


def write_plots(doc: dict, folder: str) -> list[str]:
    """The charts the result has data for, as PNG files in folder; their paths."""
    plt = require_matplotlib()
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    title = f"{doc['model']['name']} on {doc['system']['name']}"
    for name, chart in CHARTS.items():
        fig = chart(plt, doc)
        if fig is None:
            continue
        fig.suptitle(title, fontsize=10)
        fig.tight_layout()
        fig.savefig(out / name, dpi=110)
        plt.close(fig)
        written.append(str(out / name))
    return written
