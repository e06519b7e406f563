"""`localllm bench` end to end on stories260K with tiny sizes: every scenario, the JSON
document against its schema, token counts equal to what was asked, --plot's PNGs, and
--compare against stand-in llama-bench / llama-batched-bench programs that print llama.cpp's
real output formats."""

from __future__ import annotations

import json
import os
from pathlib import Path

import jsonschema
import pytest

from localllm.bench.llamacpp.parse import parse_batched_bench, parse_llama_bench
from localllm.bench.llamacpp.ratio_table import main as ratio_table_main
from localllm.bench.schema import SCHEMA
from localllm.cli import main
from localllm.engine.block_manager import cdiv

FAKE = Path(__file__).parent / "fake_llamacpp"
TESTDATA = Path(os.environ.get("LOCALLLM_TESTDATA", Path(__file__).parents[1] / ".." / "shared" / "testdata"))  # fmt: skip
MODEL = TESTDATA / "models" / "stories260K.gguf"
pytestmark = pytest.mark.skipif(not MODEL.exists(), reason="stories260K test data not found")
TINY = ["--model", str(MODEL), "--sizes", "tiny", "--rate", "40"]


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("LOCALLLM_CACHE", str(tmp_path_factory.mktemp("cache")))
        yield


@pytest.fixture(scope="module")
def full_run(cache, tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, Path, str]:
    """Every scenario once (tiny), with --json and --plot."""
    out = tmp_path_factory.mktemp("bench")
    args = ["bench", *TINY, "--scenario", "all", "--kv-types", "fp32,int8,fp8"]
    args += ["--json", str(out / "r.json"), "--plot", str(out / "plots")]
    assert main(args) == 0
    return json.loads((out / "r.json").read_text()), out / "plots", ""


def test_every_scenario_matches_the_schema(full_run) -> None:
    doc, _, _ = full_run
    jsonschema.validate(doc, SCHEMA)
    assert doc["scenarios"] == ["pp", "tg", "serve", "prefix", "itl", "kv", "spec"]
    assert doc["model"]["sha256"].startswith("270cba1b")  # testdata/README's hash
    assert doc["system"]["device"] == "cpu" and doc["engine"]["kv_dtype"] == "fp32"
    assert doc["engine"]["pdl"] is False and doc["engine"]["cuda_graphs"] is False


def test_tokens_counted_equal_tokens_requested(full_run) -> None:
    doc, _, _ = full_run
    res, s = doc["results"], doc["sizes"]
    assert [r["n_prompt"] for r in res["pp"]] == s["pp"]
    assert all(r["prompt_tokens"] == [r["n_prompt"]] * s["reps"] for r in res["pp"])
    assert [r["depth"] for r in res["tg"]] == s["depths"]
    assert all(r["generated_tokens"] == [s["tg"]] * s["reps"] for r in res["tg"] + res["kv"])
    fixed = [r for r in res["serve"] if r["mode"] == "concurrency"]
    assert [r["concurrency"] for r in fixed] == s["concurrency"]
    for r in res["serve"]:
        assert r["generated_tokens"] == r["requests"] * s["serve_gen"]
        assert r["finish_reasons"] == ["length"]
        assert r["slo_met"] <= r["requests"]
        assert r["throughput_tok_s"] == pytest.approx(r["generated_tokens"] / r["duration_s"])
    poisson = [r for r in res["serve"] if r["mode"] == "poisson"]
    assert [(r["rate"], r["requests"]) for r in poisson] == [(40.0, s["requests"])]
    (p,) = res["prefix"]
    assert p["cached_tokens"] == [p["cacheable_tokens"]] * s["reps"] and p["cacheable_tokens"] == 64
    (i,) = res["itl"]
    assert len(i["runs"]) == len(i["ratio_samples"]) == i["reps"] == s["reps"]
    for run in i["runs"]:
        assert run["unloaded_steps"] == s["itl_steps"] and run["loaded_steps"] >= 1
        assert run["loaded_p50_ms"] <= run["loaded_p99_ms"] <= run["loaded_max_ms"]
    assert i["ratio"] == sorted(i["ratio_samples"])[(i["reps"] - 1) // 2]


def test_itl_repeats_and_reports_the_median_run(cache, tmp_path: Path, capsys) -> None:
    """-r 3: three runs, each with fresh streams and a fresh long prompt; the row is the run of
    median ratio, and the table prints every run's ratio."""
    out = tmp_path / "itl.json"
    assert main(["bench", *TINY, "--scenario", "itl", "-r", "3", "--json", str(out)]) == 0
    (i,) = json.loads(out.read_text())["results"]["itl"]
    assert i["reps"] == 3 and len(i["runs"]) == 3
    median = sorted(i["runs"], key=lambda r: r["ratio"])[1]
    assert {k: i[k] for k in median} == median
    assert all(r["loaded_steps"] >= 1 and r["unloaded_steps"] == 8 for r in i["runs"])
    printed = capsys.readouterr().out
    assert all(f"{x:.2f}x" in printed for x in i["ratio_samples"])


def test_kv_scenario_covers_each_dtype_and_depth(full_run) -> None:
    doc, _, _ = full_run
    kv = doc["results"]["kv"]
    assert [(r["kv_dtype"], r["depth"]) for r in kv] == [
        (d, depth) for d in ("fp32", "int8", "fp8") for depth in doc["sizes"]["depths"]
    ]
    per_token = {r["kv_dtype"]: r["kv_bytes_per_token"] for r in kv}
    # stories260K: 5 layers x 4 KV heads x head_dim 8, K and V; int8/fp8 add a fp32 scale per head
    assert per_token == {"fp32": 5 * 2 * 4 * 8 * 4, "int8": 5 * 2 * 4 * (8 + 4), "fp8": 5 * 2 * 4 * (8 + 4)}  # fmt: skip
    assert all(r["tokens_per_gib"] == (1 << 30) // r["kv_bytes_per_token"] for r in kv)


def test_spec_scenario(full_run) -> None:
    """Speculation on vs off through bench/spec.py: greedy output identical, counts coherent."""
    doc, _, _ = full_run
    rows = doc["results"]["spec"]
    assert [r["prompt"] for r in rows] == ["grounded", "open"]
    gen = doc["sizes"]["spec_gen"]
    for r in rows:
        assert (r["spec_tokens"], r["gen"], r["prompt_set"]) == (4, gen, "auto")
        assert r["identical"] == r["prompts"] >= 1
        assert r["accepted"] <= r["drafted"] and r["tokens_on"] <= r["prompts"] * (gen - 1)


def test_plot_writes_readable_pngs(full_run) -> None:
    import matplotlib.image

    _, plots, _ = full_run
    names = sorted(p.name for p in plots.iterdir())
    assert names == ["throughput_vs_latency.png", "tok_s_vs_context.png", "tok_s_vs_streams.png"]
    for p in plots.iterdir():
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        img = matplotlib.image.imread(p)
        assert img.ndim == 3 and img.shape[0] > 200 and img.shape[1] > 400


def test_compare_with_llamacpp(cache, tmp_path: Path, monkeypatch, capsys) -> None:
    """--compare llama.cpp finds the programs on PATH, runs them with matching settings and
    pairs each figure with ours."""
    monkeypatch.setenv("PATH", f"{FAKE}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_LLAMACPP_LOG", str(tmp_path / "calls.log"))
    out = tmp_path / "r.json"
    args = ["bench", *TINY, "--scenario", "pp,tg,serve,kv", "--kv-types", "int8,fp8"]
    assert main([*args, "--compare", "llama.cpp", "--json", str(out)]) == 0
    doc = json.loads(out.read_text())
    jsonschema.validate(doc, SCHEMA)
    calls = (tmp_path / "calls.log").read_text().splitlines()
    m = str(MODEL)
    common = "-r 1 -o json -ngl 99 -fa on"
    assert calls == [
        f"llama-bench -m {m} {common} -p 16,32 -n 0 -ctk f32 -ctv f32",
        f"llama-bench -m {m} {common} -p 0 -n 8 -d 0,32 -ctk f32 -ctv f32",
        f"llama-bench -m {m} {common} -p 0 -n 8 -d 0,32 -ctk q8_0 -ctv q8_0",
        f"llama-batched-bench -m {m} -c 48 -b 2048 -ub 512 -npp 16 -ntg 8 -npl 1,2 -ngl 99 -fa on -ctk f32 -ctv f32",
    ]  # fmt: skip
    cmp, res = doc["compare"], doc["results"]
    assert cmp["tool"]["build_commit"] == "8cf427ff"
    assert "llama.cpp has no fp8 KV cache: not compared" in cmp["notes"]
    pairs = {p["figure"]: p for p in cmp["pairs"]}
    assert pairs["pp32"]["llama_cpp"] == pytest.approx(1032.0)  # the fake's 1000 + n_prompt
    assert pairs["pp32"]["ratio"] == pytest.approx(res["pp"][1]["tok_s"] / 1032.0)
    int8 = pairs["tg8 @ d32 (int8 KV)"]
    assert set(pairs) >= {"tg8 (fp32 KV)", "tg8 @ d32 (fp32 KV)", "tg8 (int8 KV)"}
    assert int8["llama_cpp"] == pytest.approx(150.0 * 1000 / 1032 + 0.08, rel=1e-5)
    ours = next(r for r in res["kv"] if r["kv_dtype"] == "int8" and r["depth"] == 32)
    assert int8["localllm"] == ours["tok_s"] and int8["depth"] == 32
    s_tg = pairs["2 streams x (16+8) decode"]
    assert s_tg["llama_cpp"] == pytest.approx(2 * 102, rel=1e-3)  # the fake's B * (100 + B)
    assert {"1 stream x (16+8) decode", "2 streams x (16+8) end to end"} <= set(pairs)
    printed = capsys.readouterr().out
    assert "localllm vs llama.cpp" in printed and "tg8 @ d32 (int8 KV)" in printed
    assert ratio_table_main([str(out), "--markdown"]) == 0
    md = capsys.readouterr().out
    assert "| stories260K | pp32 | 1,032.0 |" in md


def test_compare_folder_without_the_programs_fails_before_running(cache, tmp_path: Path, capsys) -> None:  # fmt: skip
    assert main(["bench", *TINY, "--compare", f"llama.cpp={tmp_path}"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("localllm: error: --compare llama.cpp=") and "\n" not in err
    assert "neither llama-bench nor llama-batched-bench" in err


@pytest.mark.parametrize(
    "flags, names",
    [
        ([], ["pp", "tg", "serve", "prefix"]),
        (["--scenario", "tg", "--scenario", "kv,spec"], ["tg", "kv", "spec"]),
        (["--scenario", "all", "-n", "0"], ["pp", "serve", "prefix", "itl", "kv", "spec"]),
        # the spellings scripts used before --scenario
        (["-p", "512", "-n", "128", "--parallel", "1,8", "--prefix-test", "--itl-test"],
         ["pp", "tg", "serve", "prefix", "itl"]),
        (["-p", "0", "-n", "0", "--itl-test", "--spec"], ["itl", "spec"]),
        (["-p", "512", "-n", "128", "-r", "3"], ["pp", "tg"]),
        (["--scenario", "serve", "-p", "0", "--prefix-test"], ["serve", "prefix"]),
    ],
)  # fmt: skip
def test_scenario_selection(flags: list[str], names: list[str]) -> None:
    from localllm.cli import build_parser
    from localllm.cli.bench import scenario_names

    assert scenario_names(build_parser().parse_args(["bench", *flags])) == names


def test_bad_options_are_one_line_errors(cache, capsys) -> None:
    assert main(["bench", *TINY, "--scenario", "pp,nope"]) == 2
    assert "unknown scenario 'nope'" in capsys.readouterr().err
    assert main(["bench", *TINY, "--depth", "x"]) == 2
    assert "--depth 'x' is not a valid value" in capsys.readouterr().err
    assert main(["bench", *TINY, "--scenario", "spec", "--spec-tokens", "0"]) == 2
    assert "give --spec-tokens >= 1" in capsys.readouterr().err
    assert main(["bench", *TINY, "--profile", "1,x"]) == 2
    assert "--profile '1,x': a comma list of batch sizes" in capsys.readouterr().err
    assert main(["bench", *TINY, "--scenario", "pp", "-p", "0"]) == 2
    assert "no scenario left" in capsys.readouterr().err


# llama.cpp's own recorded outputs (tools/llama-bench/README.md, tools/batched-bench/README.md)
LLAMA_BENCH_JSON = """[
  {
    "build_commit": "8cf427ff",
    "build_number": 5163,
    "cpu_info": "AMD Ryzen 7 7800X3D 8-Core Processor",
    "gpu_info": "NVIDIA GeForce RTX 4080",
    "backends": "CUDA",
    "model_filename": "models/Qwen2.5-7B-Instruct-Q4_K_M.gguf",
    "model_type": "qwen2 7B Q4_K - Medium",
    "model_size": 4677120000,
    "model_n_params": 7615616512,
    "n_batch": 2048,
    "n_ubatch": 512,
    "n_threads": 8,
    "cpu_mask": "0x0",
    "cpu_strict": false,
    "poll": 50,
    "type_k": "f16",
    "type_v": "f16",
    "n_gpu_layers": -1,
    "split_mode": "layer",
    "main_gpu": 0,
    "no_kv_offload": false,
    "flash_attn": false,
    "tensor_split": "0.00",
    "use_mmap": true,
    "embeddings": false,
    "n_prompt": 0,
    "n_gen": 128,
    "n_depth": 0,
    "test_time": "2025-04-24T11:58:51Z",
    "avg_ns": 1076767880,
    "stddev_ns": 9449585,
    "avg_ts": 118.881588,
    "stddev_ts": 1.041811,
    "samples_ns": [ 1075361300, 1065089400, 1071761200, 1081934900, 1089692600 ],
    "samples_ts": [ 119.03, 120.178, 119.43, 118.307, 117.464 ]
  }
]
"""
BATCHED_TABLE = """
main: n_kv_max = 16384, n_batch = 2048, n_ubatch = 512, flash_attn = 0, is_pp_shared = 0, n_gpu_layers = 99, n_threads = 8, n_threads_batch = 8

|    PP |     TG |    B |   N_KV |   T_PP s | S_PP t/s |   T_TG s | S_TG t/s |      T s |    S t/s |
|-------|--------|------|--------|----------|----------|----------|----------|----------|----------|
|   128 |    128 |    1 |    256 |    0.108 |  1186.64 |    3.079 |    41.57 |    3.187 |    80.32 |
|   128 |    128 |    2 |    512 |    0.198 |  1295.19 |    5.029 |    50.90 |    5.227 |    97.95 |
|   128 |    128 |    4 |   1024 |    0.373 |  1373.96 |    6.878 |    74.44 |    7.251 |   141.23 |

llama_print_timings:        load time =    1234.56 ms
"""


def test_parse_llama_bench_recorded_json() -> None:
    (t,) = parse_llama_bench("ggml_cuda_init: found 1 CUDA devices:\n" + LLAMA_BENCH_JSON)
    assert (t["n_prompt"], t["n_gen"], t["n_depth"], t["type_k"]) == (0, 128, 0, "f16")
    assert t["avg_ts"] == pytest.approx(118.881588) and len(t["samples_ts"]) == 5


def test_parse_batched_bench_recorded_table() -> None:
    rows = parse_batched_bench(BATCHED_TABLE)
    assert [(r["b"], r["s_tg"], r["t"]) for r in rows] == [(1, 41.57, 3.187), (2, 50.90, 5.227), (4, 74.44, 7.251)]  # fmt: skip
    assert rows[0]["pp"] == 128 and rows[0]["n_kv"] == 256


def test_profile_sizes_the_engine_for_its_sequences(cache) -> None:
    """--profile runs its own decode sequences (PROFILE_CONTEXT tokens, one per batch row):
    the engine is sized for them even when the scenarios need less (`-p 0 -n 16 --depth 0`)."""
    from localllm.bench.profile import PROFILE_CONTEXT
    from localllm.bench.sizes import sizes_from_args
    from localllm.cli import build_parser
    from localllm.cli.bench import _base_config, scenario_names

    flags = ["--scenario", "tg", "-p", "0", "-n", "16", "--depth", "0"]
    args = build_parser().parse_args(["bench", *TINY, *flags])
    names, sizes = scenario_names(args), sizes_from_args(args)
    plain = _base_config(args, names, sizes)
    assert plain.max_model_len < PROFILE_CONTEXT  # what the profile failed on before
    cfg = _base_config(args, names, sizes, (1, 32))
    assert cfg.max_model_len >= PROFILE_CONTEXT and cfg.max_num_seqs >= 32


def test_profile_report_with_and_without_pdl() -> None:
    """With programmatic dependent launch each kernel's span includes its wait for the one
    before: the report says so instead of printing shares of the step that overlap."""
    from localllm.bench.profile import format_profile

    p = {"batch": 1, "step_ms": 2.0, "kernel_us": 3000.0,
         "fractions": {"weights (GEMV/GEMM)": 1.3, "idle (launch gaps, host)": 0.0},
         "kernels": [("_dp4a_kernel", 2500.0, 96.0)]}  # fmt: skip
    plain = format_profile({**p, "pdl": False})
    assert "weights (GEMV/GEMM)" in plain and "LOCALLLM_PDL=0" not in plain
    pdl = format_profile({**p, "pdl": True})
    assert "LOCALLLM_PDL=0" in pdl and "130.0%" not in pdl and "_dp4a_kernel" in pdl


def test_profile_depth_sizes_the_engine_and_rejects_bad_input(cache, capsys) -> None:
    """--profile-depth D: the engine holds D tokens of context ahead of the profiled steps;
    a malformed or negative list is a one-line error."""
    from localllm.bench.profile import PROFILE_CONTEXT
    from localllm.bench.sizes import sizes_from_args
    from localllm.cli import build_parser
    from localllm.cli.bench import _base_config, scenario_names

    flags = ["--scenario", "tg", "-p", "0", "-n", "16", "--depth", "0"]
    args = build_parser().parse_args(["bench", *TINY, *flags])
    names, sizes = scenario_names(args), sizes_from_args(args)
    cfg = _base_config(args, names, sizes, (1,), (0, 300))
    assert cfg.max_model_len >= PROFILE_CONTEXT + 300
    for bad in ("x", "-4", ""):
        assert main(["bench", *TINY, "--profile", "1", "--profile-depth", bad]) == 2
        assert f"--profile-depth {bad!r}: a comma list of token counts" in capsys.readouterr().err
    assert main(["bench", *TINY, "--profile-depth", "64"]) == 2
    assert "give the batch sizes to profile with --profile" in capsys.readouterr().err


def test_profile_prompts_and_the_batches_that_do_not_fit(monkeypatch) -> None:
    """Each profiled sequence gets its own prompt of depth + 2 tokens; a (batch, depth) whose
    contexts exceed the KV cache is skipped with a note, the others are profiled."""
    from types import SimpleNamespace

    from localllm.bench import profile as prof
    from localllm.bench.run import _profile

    a, b = prof.depth_prompt(1, 0, 64, 32000), prof.depth_prompt(1, 1, 64, 32000)
    assert len(a) == len(b) == 66 and a[0] == b[0] == 1 and a[1:] != b[1:]
    assert all(100 <= t < 32000 for t in a[1:] + b[1:])
    assert len(prof.depth_prompt(1, 3, 0, 512)) == prof.PROMPT_TOKENS
    done = []
    monkeypatch.setattr(prof, "profile_decode", lambda eng, b, depth=0: done.append((b, depth)))
    per_seq = cdiv(1000 + prof.PROFILE_CONTEXT, 16) * 16  # whole 16-token blocks
    eng = SimpleNamespace(runner=SimpleNamespace(device=SimpleNamespace(type="cuda"),
                                                 block_size=16, num_kv_tokens=4 * per_seq))  # fmt: skip
    notes: list[str] = []
    _profile(eng, (1, 4, 8), (0, 1000), notes)  # 4 at depth 1000 fills the cache exactly
    assert done == [(1, 0), (4, 0), (8, 0), (1, 1000), (4, 1000)]
    assert len(notes) == 1 and "--profile 8 at depth 1000" in notes[0] and "skipped" in notes[0]


def test_profile_report_names_its_depth() -> None:
    from localllm.bench.profile import format_profile

    p = {"batch": 1, "step_ms": 2.0, "kernel_us": 1.0, "pdl": False,
         "fractions": {"attention": 0.5}, "kernels": []}  # fmt: skip
    assert "batch 1, 4,096 tokens of context: 2.00 ms" in format_profile({**p, "depth": 4096})
    assert "batch 1: 2.00 ms" in format_profile(p)


def test_profile_warm_up_prefills_deep_contexts_before_decoding() -> None:
    """A deep profile context takes several chunked prefill steps: warm-up runs them all, then
    WARM_STEPS decode steps, so the profiled steps are decode steps only."""
    from localllm.bench import profile as prof
    from localllm.bench.timing import greedy
    from localllm.config import EngineConfig
    from localllm.engine.engine import LLMEngine

    eng = LLMEngine(EngineConfig(model=str(MODEL), device="cpu", max_model_len=512, max_num_seqs=2,
                                 max_num_batched_tokens=64, threads=1))  # fmt: skip
    vocab = eng.tokenizer.vocab_size
    ids = [eng.add_request(prof.depth_prompt(1, i, 300, vocab), greedy(40)) for i in range(2)]
    prof.warm_up(eng, ids)  # 2 x 302 prompt tokens at 64 a step: ~10 prefill steps
    for r in ids:
        seq = eng.requests[r].seq
        assert not seq.in_prefill and seq.num_output >= prof.WARM_STEPS
