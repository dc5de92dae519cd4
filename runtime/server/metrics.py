"""Prometheus metrics, one registry per app (so several apps in one process do not clash).

Counters and histograms are updated by the routes as requests finish; the engine's numbers
(running, waiting, KV blocks, prefix-cache hit rate, aborts) are read from the engine
loop's last published stats when /metrics is scraped.
"""
from __future__ import annotations

from typing import Callable

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
ENGINE_GAUGES = {
    "running": ("samevm_running_sequences", "Sequences being generated"),
    "waiting": ("samevm_waiting_sequences", "Sequences waiting to be scheduled"),
    "kv_blocks_used": ("samevm_kv_blocks_used", "KV cache blocks in use (all revisions)"),
    "kv_blocks_total": ("samevm_kv_blocks_total", "KV cache blocks of the live revision"),
    "draining_engines": ("samevm_draining_engines", "Old revisions finishing their requests"),
}
ENGINE_COUNTERS = {
    "aborted_requests": ("samevm_aborted_requests", "Requests aborted before they finished (client gone)"),
    "preemptions": ("samevm_preemptions", "Sequences preempted for lack of KV blocks (live revision)"),
}


class EngineCollector:
    """Reads the engine loop's last published stats at scrape time."""

    def __init__(self, stats: Callable[[], dict | None]):
        self.stats = stats

    def collect(self):
        s = self.stats() or {}
        for key, (name, doc) in ENGINE_GAUGES.items():
            yield GaugeMetricFamily(name, doc, value=s.get(key, 0))
        for key, (name, doc) in ENGINE_COUNTERS.items():
            yield CounterMetricFamily(name, doc, value=s.get(key, 0))
        lookups = s.get("prefix_cache_lookup_tokens", 0)
        yield GaugeMetricFamily("samevm_prefix_cache_hit_rate",
                                "Prompt tokens served from the prefix cache / prompt tokens looked up",
                                value=s.get("prefix_cache_hit_tokens", 0) / lookups if lookups else 0.0)


class Metrics:
    def __init__(self, stats: Callable[[], dict | None]):
        r = self.registry = CollectorRegistry()
        self.requests = Counter("samevm_requests", "Finished HTTP requests by route and status",
                                ["route", "status"], registry=r)
        self.prompt_tokens = Counter("samevm_prompt_tokens", "Prompt tokens of finished requests", registry=r)
        self.generation_tokens = Counter("samevm_generation_tokens", "Tokens generated", registry=r)
        self.ttft = Histogram("samevm_time_to_first_token_seconds", "Arrival to first generated token",
                              buckets=LATENCY_BUCKETS, registry=r)
        self.itl = Histogram("samevm_inter_token_latency_seconds", "Time between generated tokens",
                             buckets=LATENCY_BUCKETS, registry=r)
        self.tool_call_errors = Counter("samevm_tool_call_errors", "Model tool calls refused (bad JSON, "
                                        "unknown tool, invalid arguments)", registry=r)
        self.reloads = Counter("samevm_reloads", "Reload attempts by outcome", ["outcome"], registry=r)
        r.register(EngineCollector(stats))

    def render(self) -> bytes:
        return generate_latest(self.registry)

    def observe_request(self, route: str, status: int) -> None:
        self.requests.labels(route, str(status)).inc()

    def observe_tokens(self, timestamps: list[float], arrival: float, prompt_tokens: int) -> None:
        """timestamps: when the engine produced each token (time.monotonic)."""
        self.prompt_tokens.inc(prompt_tokens)
        self.generation_tokens.inc(len(timestamps))
        if timestamps:
            self.ttft.observe(timestamps[0] - arrival)
        for a, b in zip(timestamps, timestamps[1:], strict=False):
            self.itl.observe(b - a)
