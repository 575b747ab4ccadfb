"""Read a worker's Prometheus /metrics into the few numbers routing needs: vLLM's names,
and the same figures under SGLang's (`--enable-metrics`) and TGI's names, so an
OpenAI-compatible server of those kinds is routed on its load too."""

import math
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

# vLLM first; then SGLang's, then TGI's name for the same figure.
RUNNING = ("vllm:num_requests_running", "sglang:num_running_reqs", "tgi_batch_current_size")
WAITING = ("vllm:num_requests_waiting", "sglang:num_queue_reqs", "tgi_queue_size")
# vLLM's new name, its old name, SGLang's (the KV pool's share in use, 0 to 1).
KV_USAGE = ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc", "sglang:token_usage")
PREFIX_QUERIES = "vllm:prefix_cache_queries"
PREFIX_HITS = "vllm:prefix_cache_hits"
TTFT_BUCKETS = (
    "vllm:time_to_first_token_seconds_bucket",
    "sglang:time_to_first_token_seconds_bucket",
)


@dataclass
class MetricsReading:
    running: float = 0.0
    waiting: float = 0.0
    kv_usage: float = 0.0
    prefix_queries: float = 0.0
    prefix_hits: float = 0.0
    ttft_buckets: dict[float, float] = field(default_factory=dict)  # le -> cumulative count
    # Whether the text held a running or waiting gauge under a name this module knows: a
    # worker without one (a generic OpenAI-compatible server) is routed on health and the
    # gateway's own in-flight count, and the fleet page says so.
    reports_load: bool = False


def parse_metrics(text: str) -> MetricsReading:
    """Sum over label sets (one worker may report several engines or model names).

    A worker's /metrics is its own words: a value that is not a finite number of zero or
    more (NaN, Inf, negative) counts as nothing, and a bucket without a readable `le` is
    skipped. One NaN gauge made the routing policies' maximum fail (every request to the
    deployment a 500) and the autoscaler's arithmetic raise; a bucket without `le` failed
    the whole scrape, and with it every worker's snapshot."""
    reading = MetricsReading()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            name, value = sample.name, sample.value
            if not (math.isfinite(value) and value >= 0):
                value = 0.0
            if name in RUNNING:
                reading.running += value
                reading.reports_load = True
            elif name in WAITING:
                reading.waiting += value
                reading.reports_load = True
            elif name in KV_USAGE:
                reading.kv_usage = max(reading.kv_usage, value)
            elif name == f"{PREFIX_QUERIES}_total":
                reading.prefix_queries += value
            elif name == f"{PREFIX_HITS}_total":
                reading.prefix_hits += value
            elif name in TTFT_BUCKETS:
                bound = _bucket_bound(sample.labels.get("le"))
                if bound is not None:
                    reading.ttft_buckets[bound] = reading.ttft_buckets.get(bound, 0.0) + value
    return reading


def _bucket_bound(le: str | None) -> float | None:
    """A bucket's upper bound (+Inf included); None for one missing or not a number."""
    try:
        bound = float(le) if le is not None else math.nan
    except ValueError:
        return None
    return None if math.isnan(bound) or bound < 0 else bound


def histogram_quantile(buckets: dict[float, float], quantile: float) -> float | None:
    """Prometheus-style quantile from cumulative buckets (linear within a bucket)."""
    bounds = sorted(buckets)
    if not bounds or buckets[bounds[-1]] <= 0:
        return None
    rank = quantile * buckets[bounds[-1]]
    lower_bound, lower_count = 0.0, 0.0
    for bound in bounds:
        count = buckets[bound]
        if count >= rank:
            if bound == float("inf"):
                return lower_bound
            span = count - lower_count
            share = (rank - lower_count) / span if span else 1.0
            return lower_bound + (bound - lower_bound) * share
        lower_bound, lower_count = bound, count
    return lower_bound


def bucket_delta(now: dict[float, float], before: dict[float, float]) -> dict[float, float]:
    """Requests observed between two scrapes; a restart (counts went down) starts afresh."""
    if any(now.get(bound, 0.0) < count for bound, count in before.items()):
        return dict(now)
    return {bound: count - before.get(bound, 0.0) for bound, count in now.items()}
