"""N-gram speculation on an NVIDIA GPU: verify steps replay their CUDA graphs, accept most
drafts on code that repeats itself, agree with plain decoding and leak no KV block."""

from __future__ import annotations

import gc

import conftest
import pytest
import torch

from localllm.bench.spec_prompts import code_prompts
from localllm.config import EngineConfig
from localllm.core import SamplingParams
from localllm.engine.engine import LLMEngine

pytestmark = pytest.mark.gpu


def _run(spec: int, graphs: bool) -> tuple[list[list[int]], dict, tuple[int, int], bool]:
    path = conftest.testdata_path("models", "pycode-22m-q8_0.gguf")
    cfg = EngineConfig(model=str(path), device="cuda", gpu_memory_utilization=0.5,
                       max_model_len=2048, max_num_seqs=8, spec_tokens=spec, cuda_graphs=graphs)  # fmt: skip
    eng = LLMEngine(cfg)
    grounded = [eng.encode_prompt(t) for kind, t in code_prompts() if kind == "grounded"]
    p = SamplingParams(max_tokens=64, temperature=0.0, ignore_eos=True)
    outs = [eng.generate([ids], p)[0] for ids in grounded]  # batch 1
    outs += eng.generate(grounded, p)  # one batch of 5, drafts of different lengths
    replays = dict(eng.runner.graphs.replays) if eng.runner.graphs else {}
    bm = eng.block_manager
    clean = bm.num_used_blocks == 0 and bm.num_free_blocks == bm.num_blocks
    counts = (eng.stats.spec_proposed, eng.stats.spec_accepted)
    del eng
    gc.collect()
    torch.cuda.empty_cache()
    return outs, replays, counts, clean


@pytest.mark.parametrize("graphs", [True, False])
def test_speculation_on_gpu_agrees_with_plain_decoding(graphs: bool) -> None:
    plain, _, _, _ = _run(0, graphs)
    spec, replays, (drafted, accepted), clean = _run(4, graphs)
    print("replays", replays, "drafted", drafted, "accepted", accepted)
    assert clean
    assert accepted >= 0.5 * drafted > 0
    if graphs:
        assert replays["verify"] > 0
    # verify rows go through the batched GEMM (batch-1 decode uses the int8-activation GEMV),
    # so fp16 rounding differs as between batch sizes; they agree far into the answer
    agree = [
        next((i for i, (a, b) in enumerate(zip(x, y)) if a != b), len(x))
        for x, y in zip(plain, spec)
    ]
    print("tokens agreeing:", agree)
    assert sorted(agree)[len(agree) // 2] >= 32, agree


def test_engine_measures_its_verify_price_at_start(tmp_path, monkeypatch) -> None:
    """With CUDA graphs and speculation on, the engine times its own plain and verify steps
    at start-up (here always: a cache folder of its own; a later start reads what it measured)
    and drafts by that price (calibrate.py), leaving no trace behind."""
    from localllm.engine.speculative.policy import verify_price

    monkeypatch.setenv("LOCALLLM_CACHE", str(tmp_path))

    path = conftest.testdata_path("models", "pycode-22m-q8_0.gguf")
    cfg = EngineConfig(model=str(path), device="cuda", gpu_memory_utilization=0.5,
                       max_model_len=2048, max_num_seqs=8, spec_tokens=8)  # fmt: skip
    eng = LLMEngine(cfg)
    pol = eng.speculator.policy
    print("drafting price", pol.cost_fixed, pol.cost_per_draft)
    assert (pol.cost_fixed, pol.cost_per_draft) != verify_price("cuda")
    # a 22M model's verify step cannot hide its host time as a plain step does: its fixed part
    # is dearer than an 8B's (0.04; pycode-22m measured 0.21-0.52 on an H200 in session 30)
    assert pol.cost_fixed > 2 * verify_price("cuda")[0] and 0 < pol.cost_per_draft < 1
    bm = eng.block_manager
    assert eng.stats.steps == 0 and bm.num_cached_blocks == 0 and bm.num_used_blocks == 0
    assert not any(eng.runner.graphs.replays.values())
    price = (pol.cost_fixed, pol.cost_per_draft)
    del eng
    gc.collect()
    torch.cuda.empty_cache()
    again = LLMEngine(cfg)  # the cached price: the same drafts run after run
    assert (again.speculator.policy.cost_fixed, again.speculator.policy.cost_per_draft) == price
    del again
    gc.collect()
    torch.cuda.empty_cache()


def test_engine_raises_its_draft_limit_where_the_price_pays() -> None:
    """Without --spec-tokens, pycode-22m's verify price (mostly fixed host time) pays for longer
    drafts than 8: the engine captures the wider verify graphs after pricing and drafts up to
    its new limit, and its greedy output on grounded code is the one it gives at 8."""
    from localllm.engine.speculative.policy import (
        GPU_DEFAULT_SPEC_TOKENS,
        MAX_SPEC_TOKENS,
        draft_limit,
    )

    path = conftest.testdata_path("models", "pycode-22m-q8_0.gguf")
    kw = dict(model=str(path), device="cuda", gpu_memory_utilization=0.5, max_model_len=2048,
              max_num_seqs=8)  # fmt: skip
    p = SamplingParams(max_tokens=96, temperature=0.0, ignore_eos=True)
    outs, limits = [], []
    for k in (None, 8):
        eng = LLMEngine(EngineConfig(**kw, spec_tokens=k))
        pol, graphs = eng.speculator.policy, eng.runner.graphs
        limits.append(eng.spec_tokens)
        if k is None:
            assert eng.spec_tokens == draft_limit(pol.cost_fixed, pol.cost_per_draft)
            assert graphs.verify_widths[-1] == 1 + eng.spec_tokens
        else:
            assert graphs.verify_widths[-1] == 1 + k
        grounded = [eng.encode_prompt(t) for kind, t in code_prompts() if kind == "grounded"]
        outs.append([eng.generate([ids], p)[0] for ids in grounded])
        if k is None:
            assert graphs.replays["verify"] > 0 and eng.stats.spec_accepted > 0
        bm = eng.block_manager
        assert bm.num_used_blocks == 0 and bm.num_free_blocks == bm.num_blocks
        del eng, graphs
        gc.collect()
        torch.cuda.empty_cache()
    print("limits", limits)
    # its price, measured at start-up, moves run to run (13 and 15 seen on an H200)
    assert GPU_DEFAULT_SPEC_TOKENS < limits[0] <= MAX_SPEC_TOKENS and limits[1] == 8
    agree = [next((i for i, (a, b) in enumerate(zip(x, y)) if a != b), len(x))
             for x, y in zip(*outs)]  # fmt: skip
    print("tokens agreeing:", agree)
    assert sorted(agree)[len(agree) // 2] >= 48, agree


def test_bench_spec_runs_at_the_engines_own_limit(tmp_path) -> None:
    """`localllm bench --spec` without --spec-tokens drafts as `generate` does on a GPU: up to
    the limit the engine took from its measured price."""
    import json

    from localllm.cli import main

    path = conftest.testdata_path("models", "pycode-22m-q8_0.gguf")
    out = tmp_path / "spec.json"
    assert main(["bench", "--model", str(path), "-p", "0", "-n", "0", "--spec", "--spec-gen",
                 "64", "--json", str(out)]) == 0  # fmt: skip
    rows = json.loads(out.read_text())["results"]["spec"]
    print({r["prompt"]: (r["spec_tokens"], round(r["speedup"], 2)) for r in rows})
    assert {r["prompt"] for r in rows} == {"grounded", "open"}
    assert len({r["spec_tokens"] for r in rows}) == 1 and rows[0]["spec_tokens"] > 8
    assert all(r["tok_s_on"] > 0 for r in rows)
