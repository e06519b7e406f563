"""The scenarios by name, in the order a run measures them (those that build engines of their
own last), and what each needs of the main engine (context, concurrent sequences)."""

from __future__ import annotations

from collections.abc import Iterable

from localllm.bench.sizes import Sizes
from localllm.bench.suite.base import Scenario
from localllm.bench.suite.itl import itl_context, run_itl
from localllm.bench.suite.kv import run_kv
from localllm.bench.suite.prefix import run_prefix
from localllm.bench.suite.serve import run_serve
from localllm.bench.suite.spec import KINDS, PROMPT_BUDGET, run_spec
from localllm.bench.suite.speed import WARMUP_GEN, run_pp, run_tg
from localllm.errors import LocalLLMError


def _tg_context(s: Sizes) -> int:
    return max(max(s.depths), 1) + max(s.tg, WARMUP_GEN) + 1


def _kv_units(s: Sizes) -> int:
    from localllm.bench.suite.kv import default_kv_dtypes

    return len(s.kv_dtypes or default_kv_dtypes()) * len(s.depths)


_LIST = (
    Scenario("pp", "prefill speed of one prompt at each -p length (llama-bench pp)", run_pp,
             lambda s: len(s.pp), lambda s: max(s.pp) + 1),
    Scenario("tg", "batch-1 decode speed at each --depth (llama-bench tg, -d)", run_tg,
             lambda s: len(s.depths), _tg_context),
    Scenario("serve", "streams through the server's engine: fixed --parallel, Poisson --rate",
             run_serve, lambda s: len(s.concurrency) + s.poisson_runs,
             lambda s: s.serve_prompt + s.serve_gen, lambda s: max(s.concurrency)),
    Scenario("prefix", "time to first token with a shared system prompt: cold vs cached",
             run_prefix, lambda s: s.reps, lambda s: s.prefix_len + s.prefix_suffix + 1),
    Scenario("itl", "inter-token latency of running streams while a long prompt prefills",
             run_itl, lambda s: s.reps, itl_context, lambda s: s.itl_streams + 1),
    Scenario("kv", "KV cache dtypes: capacity in tokens and decode speed at each --depth",
             run_kv, _kv_units, _tg_context),
    Scenario("spec", "speculative decoding on vs off: grounded and open-ended prompts",
             run_spec, lambda s: KINDS, lambda s: PROMPT_BUDGET + s.spec_gen),
)  # fmt: skip
SCENARIOS: dict[str, Scenario] = {s.name: s for s in _LIST}
DEFAULT = ("pp", "tg", "serve", "prefix")


def resolve_names(names: Iterable[str]) -> list[str]:
    """Scenario names (comma lists allowed, "all") in run order; an unknown one is an error."""
    wanted: set[str] = set()
    for item in names:
        for name in (x.strip() for x in item.split(",")):
            if name == "all":
                wanted |= set(SCENARIOS)
            elif name in SCENARIOS:
                wanted.add(name)
            elif name:
                known = ", ".join(SCENARIOS)
                raise LocalLLMError(f"bench: unknown scenario {name!r} (known: {known}, all)")
    return [name for name in SCENARIOS if name in wanted]


def context_needed(names: Iterable[str], sizes: Sizes) -> int:
    return max(SCENARIOS[n].context(sizes) for n in names)


def sequences_needed(names: Iterable[str], sizes: Sizes) -> int:
    return max(SCENARIOS[n].concurrency(sizes) for n in names)
