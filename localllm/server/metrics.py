"""Prometheus metrics on a registry of the app's own (no process-global state).

Request-side numbers (counts, TTFT, inter-token latency, tokens) are recorded as requests
run; engine-side ones (queue depth, KV blocks, prefix-cache hit rate, speculative
acceptance, preemptions) are read from the engine thread at scrape time.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from localllm.core import TokenEvent

if TYPE_CHECKING:
    from localllm.engine.engine import LLMEngine

PREFIX = "localllm"
LATENCY_BUCKETS = (0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0)
ITL_BUCKETS = (0.001, 0.002, 0.005, 0.01, 0.02, 0.03, 0.05, 0.075, 0.1, 0.2, 0.5, 1.0, 2.5)


class ServerMetrics:
    def __init__(self, engine_snapshot: Callable[[], dict[str, Any] | None]) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.http_requests = Counter(
            f"{PREFIX}_http_requests",
            "HTTP requests by route and status",
            ["route", "status"],
            registry=r,
        )
        self.requests = Counter(
            f"{PREFIX}_requests",
            "Finished generations by endpoint and reason",
            ["endpoint", "finish_reason"],
            registry=r,
        )
        self.prompt_tokens = Counter(
            f"{PREFIX}_prompt_tokens", "Prompt tokens of finished generations", registry=r
        )
        self.cached_tokens = Counter(
            f"{PREFIX}_cached_prompt_tokens",
            "Prompt tokens served from the prefix cache",
            registry=r,
        )
        self.generation_tokens = Counter(
            f"{PREFIX}_generation_tokens", "Generated tokens", registry=r
        )
        self.ttft = Histogram(
            f"{PREFIX}_time_to_first_token_seconds",
            "Request arrival to first token",
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.itl = Histogram(
            f"{PREFIX}_inter_token_latency_seconds",
            "Time between tokens of one stream",
            buckets=ITL_BUCKETS,
            registry=r,
        )
        self.e2e = Histogram(
            f"{PREFIX}_request_latency_seconds",
            "Request arrival to last token",
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        r.register(EngineCollector(engine_snapshot))

    def observer(self, endpoint: str) -> RequestObserver:
        return RequestObserver(self, endpoint)

    def render(self) -> bytes:
        return generate_latest(self.registry)


class RequestObserver:
    """Times one engine request's stream of events."""

    def __init__(self, metrics: ServerMetrics, endpoint: str) -> None:
        self.m = metrics
        self.endpoint = endpoint
        self.start = time.perf_counter()
        self.last: float | None = None

    def on_event(self, ev: TokenEvent) -> None:
        now = time.perf_counter()
        n = len(ev.token_ids)
        if n:
            if self.last is None:
                self.m.ttft.observe(now - self.start)
                n -= 1
            else:
                for _ in range(n):  # a speculative step delivers several tokens at once
                    self.m.itl.observe((now - self.last) / n)
            self.last = now
        if ev.finished:
            self.m.requests.labels(self.endpoint, ev.finish_reason).inc()
            self.m.e2e.observe(now - self.start)
            if ev.usage is not None:
                self.m.prompt_tokens.inc(ev.usage.prompt_tokens)
                self.m.cached_tokens.inc(ev.usage.cached_tokens)
                self.m.generation_tokens.inc(ev.usage.completion_tokens)


def engine_snapshot(e: LLMEngine) -> dict[str, Any]:
    """What the collector needs, read on the engine thread (`AsyncEngine.run_sync`)."""
    return dataclasses.asdict(e.snapshot())


# (snapshot key, metric name, help) per kind
_GAUGES = [
    ("waiting", "queue_waiting_requests", "Requests waiting to be scheduled"),
    ("running", "running_requests", "Requests in the running batch"),
    ("blocks_total", "kv_blocks_total", "KV cache blocks in the pool"),
    ("blocks_used", "kv_blocks_used", "KV blocks referenced by running requests"),
    ("blocks_free", "kv_blocks_free", "KV blocks allocatable now (free or evictable cached)"),
    ("blocks_cached", "kv_blocks_cached", "KV blocks holding prefix-cache entries"),
    ("block_hit_rate", "prefix_cache_block_hit_rate", "Prefix-cache hits per block lookup"),
    ("token_hit_rate", "prefix_cache_hit_rate", "Cached prompt tokens / prompt tokens"),
]
_COUNTERS = [
    ("spec_proposed", "spec_draft_tokens", "Speculative draft tokens proposed"),
    ("spec_accepted", "spec_accepted_tokens", "Speculative draft tokens accepted"),
    ("preemptions", "preemptions", "Sequences preempted (recomputed later)"),
    ("steps", "engine_steps", "Engine steps run"),
    (
        "steps_ahead",
        "engine_steps_ahead",
        "Steps launched before the previous step's tokens reached the host (step overlap)",
    ),
    (
        "steps_early",
        "engine_steps_early",
        "Steps launched before the previous step's events were made (step overlap)",
    ),
    ("requests_aborted", "engine_aborted_requests", "Requests aborted (client gone ...)"),
]


class EngineCollector(Collector):
    def __init__(self, snapshot: Callable[[], dict[str, Any] | None]) -> None:
        self._snapshot = snapshot

    def describe(self) -> list[Metric]:
        return []  # dynamic: nothing to check at registration

    def collect(self) -> Iterator[Metric]:
        snap = self._snapshot()
        if snap is None:  # still loading
            return
        for key, name, doc in _GAUGES:
            yield GaugeMetricFamily(f"{PREFIX}_{name}", doc, value=snap[key])
        for key, name, doc in _COUNTERS:
            yield CounterMetricFamily(f"{PREFIX}_{name}", doc, value=snap[key])
        rate = snap["spec_accepted"] / snap["spec_proposed"] if snap["spec_proposed"] else 0.0
        yield GaugeMetricFamily(
            f"{PREFIX}_spec_acceptance_rate", "Accepted / proposed speculative tokens", value=rate
        )
