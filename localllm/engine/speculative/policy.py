"""When and how much to speculate: the defaults, a cost model, per-sequence adaptivity.

Pure Python; the one owner of every speculative default and threshold.

A verify step of a sequence with k drafts costs `verify_cost(k)` plain decode steps (more
query rows through the same weights; measured on the GPU, see BENCHMARKS.md) and yields on
average E(a, k) = (1 - a^(k+1)) / (1 - a) tokens when each draft is accepted with
probability a given the ones before it were. Each sequence keeps a recent estimate of a
(decayed counts of accepted / tried draft positions) and drafts the k <= k_max that
maximises E / cost, or nothing when no k beats a plain step by MIN_GAIN. A sequence that
does not draft still measures a for free ("shadow" drafts): its proposal's first token is
compared with the token the model then produces, so it resumes as soon as the text starts
repeating its input again.

Globally, above `max_batch` decoding sequences no sequence speculates: a large decode batch
already reads each weight once for many tokens, so extra verify rows are no longer free.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# --spec-tokens when not given: off on CPU; on a GPU 8 to start with, raised after the engine
# prices its verify step where that price pays (`draft_limit`, LIMIT_ACCEPT below). Why 8 (H200,
# scripts/spec_measure.py, see BENCHMARKS.md, session 7): k=8 gained more than k=4 on grounded
# work (SmolLM2 2.37x vs 2.14x, pycode-22m 2.12x vs 1.80x), open-ended prompts 1.23-1.33x either
# way, 32 streams unchanged (1.006-1.013x); the cost model below keeps a sequence from drafting
# unless it expects to gain MIN_GAIN, and drafts as many tokens as pay
GPU_DEFAULT_SPEC_TOKENS = 8
CPU_DEFAULT_SPEC_TOKENS = 0
DEFAULT_NGRAM_MIN = 2
DEFAULT_NGRAM_MAX = 4
# 1 + k query rows stay within the split-KV decode attention (kernels/plan.ATTN_DECODE_MAX_Q)
MAX_SPEC_TOKENS = 15
# above this many decoding sequences nobody speculates (H200, llama3-8b-q4_k_m, session 6: a
# k=4 verify step cost 1.07x / 1.17x a plain step at batch 2 / 4, but 2.0x at batch 8; session
# 7, with batch-2/4 plain steps themselves on the multi-row int8 GEMV: 1.77x / 1.64x, still
# paying for grounded drafts)
DEFAULT_SPEC_MAX_BATCH = 4
# a k-draft verify step at batch 1 costs 1 + fixed + k * per_draft plain steps, per device type.
# GPU (H200, llama3-8b-q4_k_m, scripts/spec_measure.py, session 7: k=4 1.579x, k=8 2.122x): up
# to plan.DP4A_MAX_T rows the int8 GEMV reads each weight tile once for all rows, each row
# adding its integer dot products (~0.14 of a step); wider verifies take the fused GEMM
# (~2.1x flat). The linear fit through k = 4 and 8 prices both. CPU (the reference path):
# every row costs about the same small extra, no fixed part.
# Session 10 (H200, PDL on, the plain step 2.13 ms) measured k=4 1.74-1.80x and k=8 2.40-2.42x,
# but pricing drafts by that fit (0.080, 0.1645) drafted shorter runs and measured slower
# (pycode-22m grounded k=8: mean run 2.74 vs 3.31, 1.25x vs 1.47x; the 8B speedup implied by
# the measured cost and acceptance 1.74x vs 1.78x; benchmarks/session10/): drafts accept in
# runs, which the per-position acceptance model undervalues, so the session-7 price stays.
# Session 13: on a GPU the engine measures its own price at start-up, once per model and GPU
# (speculative/calibrate.py), and drafts by PRICE_DISCOUNT x that: the session-7 price above
# is ~0.7x the 8B's measured line (0.058 + 0.1895 k, session 12): the per-position acceptance
# model undervalues drafts, which accept in runs. Replaying the policy on recorded outputs
# (scripts/spec_policy_sim.py) under pycode-22m's price (~1.4 + 0.09 k: its plain steps hide
# their host time, its verify steps cannot) gave 1.67x on grounded code drafting by 0.7x of it,
# 1.60x by all of it, 1.52x by the 8B's table; on the H200, A/B in one call, SmolLM2 grounded
# k = 8 went 2.08x -> 2.19x and pycode open-ended 1.00-1.05x -> 1.10-1.19x (BENCHMARKS.md).
# The table stays the price where nothing is measured (CPU, no CUDA graphs).
VERIFY_PRICE = {"cuda": (0.036, 0.136), "cpu": (0.0, 0.05)}  # device type -> (fixed, per_draft)
PRICE_DISCOUNT = 0.7
MIN_PRICE_PER_DRAFT = 0.01  # a measured line flatter than this (timing noise) is not believed
VERIFY_COST_FIXED, VERIFY_COST_PER_DRAFT = VERIFY_PRICE["cpu"]
# tokens of a sequence indexed per step at most: a 32K-token prompt is indexed over a few
# steps (a few ms each) instead of stalling every stream for one long step
SYNC_TOKENS_PER_STEP = 4096
# step overlap (engine/overlap.py) launches a step before the previous step's token is known,
# so the speculator can only look for a draft a step late: a sequence's steps chain only after
# this many proposals in a row found no draft, so grounded text (drafts every few steps) keeps
# verifying at once and open-ended text (long stretches without drafts) chains
QUIET_STEPS = 4
# --spec-tokens not given on a GPU: the engine starts at GPU_DEFAULT_SPEC_TOKENS, measures its
# verify price (calibrate.py) and then raises its draft limit, up to MAX_SPEC_TOKENS, to the k
# where one more draft stops paying at LIMIT_ACCEPT acceptance (`draft_limit`). Where a verify
# step's price is mostly fixed (host time: small models), long drafts are nearly free; on an 8B
# each draft row costs ~0.19 of a step and the limit stays 8. Replay of the policy on recorded
# outputs (scripts/spec_policy_sim.py, session 23), grounded work, limit 8 -> 12 -> 15: pycode-22m
# at its price 2.05x -> 2.16x -> 2.21x, SmolLM2 2.19x -> 2.26x -> 2.30x; at the 8B's price -2% to
# +1% (this rule keeps the 8B at 8: at 0.85 its best k is 8, at 0.9 it would be 9)
LIMIT_ACCEPT = 0.85
MIN_GAIN = 1.05  # draft only when the expected tokens per unit cost beat a plain step by this
DECAY = 0.85  # weight of the past in the acceptance estimate, per observation
PRIOR_ACCEPT, PRIOR_WEIGHT = 0.5, 2.0  # a new sequence starts as if 1 of 2 drafts was accepted


def verify_price(device_type: str) -> tuple[float, float]:
    """(fixed, per_draft) of a verify step on this device type."""
    return VERIFY_PRICE.get(device_type, VERIFY_PRICE["cpu"])


def drafting_price(fixed: float, per_draft: float) -> tuple[float, float]:
    """The (fixed, per_draft) price the policy drafts by, from a measured one."""
    return PRICE_DISCOUNT * max(fixed, 0.0), PRICE_DISCOUNT * max(per_draft, MIN_PRICE_PER_DRAFT)


def default_spec_tokens(device_type: str) -> int:
    return GPU_DEFAULT_SPEC_TOKENS if device_type == "cuda" else CPU_DEFAULT_SPEC_TOKENS


def verify_cost(
    k: int, per_draft: float = VERIFY_COST_PER_DRAFT, fixed: float = VERIFY_COST_FIXED
) -> float:
    """A k-draft step's time in plain decode steps."""
    return 1.0 + (fixed if k else 0.0) + per_draft * k


def expected_tokens(a: float, k: int) -> float:
    """Tokens per verify step (accepted drafts + the target's own) at acceptance a."""
    if a >= 1.0:
        return float(k + 1)
    return (1.0 - a ** (k + 1)) / (1.0 - a)


def best_draft_len(
    a: float, k_max: int, per_draft: float = VERIFY_COST_PER_DRAFT, fixed: float = VERIFY_COST_FIXED
) -> int:
    """The k in [1, k_max] with the most tokens per unit cost, or 0 if none gains MIN_GAIN."""
    best_k, best = 0, MIN_GAIN
    for k in range(1, k_max + 1):
        gain = expected_tokens(a, k) / verify_cost(k, per_draft, fixed)
        if gain > best:
            best_k, best = k, gain
    return best_k


def draft_limit(fixed: float, per_draft: float, lo: int = GPU_DEFAULT_SPEC_TOKENS) -> int:
    """The draft limit an engine takes from the price it drafts by: the k in [lo,
    MAX_SPEC_TOKENS] with the most tokens per unit cost at LIMIT_ACCEPT (the first of equals)."""
    ks = range(lo, MAX_SPEC_TOKENS + 1)
    return max(
        ks, key=lambda k: expected_tokens(LIMIT_ACCEPT, k) / verify_cost(k, per_draft, fixed)
    )


@dataclass
class SpecPolicy:
    """Engine-wide settings of speculation (from EngineConfig)."""

    num_tokens: int  # k_max for sequences that do not override it; 0 = off
    ngram_min: int = DEFAULT_NGRAM_MIN
    ngram_max: int = DEFAULT_NGRAM_MAX
    max_batch: int = DEFAULT_SPEC_MAX_BATCH
    cost_per_draft: float = VERIFY_COST_PER_DRAFT
    cost_fixed: float = VERIFY_COST_FIXED

    def __post_init__(self) -> None:
        if not 0 <= self.num_tokens <= MAX_SPEC_TOKENS:
            raise ValueError(f"spec tokens must be in [0, {MAX_SPEC_TOKENS}]")
        if not 1 <= self.ngram_min <= self.ngram_max:
            raise ValueError("need 1 <= spec-ngram-min <= spec-ngram-max")
        if self.max_batch < 1:
            raise ValueError("spec max batch must be >= 1")


@dataclass
class Acceptance:
    """One sequence's recent acceptance: decayed accepted / tried draft positions."""

    accepted: float = PRIOR_ACCEPT * PRIOR_WEIGHT
    tried: float = PRIOR_WEIGHT
    shadow: int | None = field(default=None)  # first token of an unverified proposal

    @property
    def rate(self) -> float:
        return self.accepted / self.tried

    def observe(self, drafted: int, accepted: int) -> None:
        """After a verify step: `accepted` of `drafted` drafts were taken (a run, then a miss)."""
        tried = accepted + (1 if accepted < drafted else 0)  # positions past a miss were not tried
        self.accepted = self.accepted * DECAY + accepted
        self.tried = self.tried * DECAY + tried

    def observe_shadow(self, next_token: int) -> None:
        """A step without verification: was the held proposal's first token right?"""
        if self.shadow is not None:
            self.observe(1, int(self.shadow == next_token))
            self.shadow = None
