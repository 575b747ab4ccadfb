"""Request metrics of this gateway process, registered on the /metrics registry."""

from typing import TypeVar, cast

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.metrics import MetricWrapperBase

registry = CollectorRegistry()
_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)

requests = Counter(
    "sluice_requests",
    "Chat completion requests by model and HTTP status",
    ["model", "status"],
    registry=registry,
)
latency = Histogram(
    "sluice_request_latency_seconds",
    "Admission to last token",
    ["model"],
    buckets=_LATENCY_BUCKETS,
    registry=registry,
)
ttft = Histogram(
    "sluice_time_to_first_token_seconds",
    "Admission to first token",
    ["model"],
    buckets=_LATENCY_BUCKETS,
    registry=registry,
)
tokens = Counter(
    "sluice_tokens",
    "Tokens settled, by model and kind (prompt, completion)",
    ["model", "kind"],
    registry=registry,
)
prompt_counted = Counter(
    "sluice_prompt_counted",
    "Prompts counted at admission, by how: tokenizer (the model's folder on this host), "
    "worker (its /tokenize), worker_remembered (a count asked before), estimated (bytes / 3)",
    ["model", "how"],
    registry=registry,
)
prompt_tokens_estimated = Counter(
    "sluice_prompt_tokens_estimated",
    "Requests whose prompt was billed on the admission estimate: the worker could not count it",
    ["model"],
    registry=registry,
)
quota_rejections = Counter(
    "sluice_quota_rejections", "Requests refused by a quota", ["limit"], registry=registry
)
cache_results = Counter(
    "sluice_cache_results",
    "Chat completions by cache outcome (hit-exact, hit-semantic, coalesced, miss, bypass)",
    ["model", "result"],
    registry=registry,
)
cache_tokens_saved = Counter(
    "sluice_cache_tokens_saved",
    "Tokens answered from the cache instead of a worker",
    ["model"],
    registry=registry,
)
cache_cost_saved = Counter(
    "sluice_cache_cost_saved_micros",
    "What the cached replies would have cost, in micro-dollars",
    ["model"],
    registry=registry,
)
cache_false_hits = Counter(
    "sluice_cache_false_hits",
    "Cached replies reported wrong by their caller (each report takes the entry out of service)",
    registry=registry,
)
semantic_skips = Counter(
    "sluice_cache_semantic_skips",
    "Deterministic requests the semantic cache did not consider, by reason",
    ["reason"],
    registry=registry,
)
semantic_rejections = Counter(
    "sluice_cache_semantic_rejections",
    "Semantic candidates turned down, by reason: verification's (each candidate the probe "
    "search found, whatever its cosine), 'reported' (the entry gave a reported false hit), "
    "'audit' (an audit of it disagreed) or 'over_bound' (its false-hit probability is over "
    "the team's max_false_hit_rate)",
    ["reason"],
    registry=registry,
)
semantic_audits = Counter(
    "sluice_cache_semantic_audits",
    "Sampled semantic hits answered again by the model and compared with the cached reply, "
    "by outcome: agreed, disagreed, failed (no answer to compare), skipped (two already "
    "running in the process); and sampled misses whose best candidate the error bound "
    "turned down, compared with the fresh reply: turned_down_agreed, turned_down_disagreed, "
    "turned_down_counted_before (the entry was counted already), turned_down_failed, "
    "turned_down_skipped (two comparisons already running in the process)",
    ["outcome"],
    registry=registry,
)
semantic_reasks = Counter(
    "sluice_cache_semantic_reasks",
    "Semantic hits whose very request was asked again within 10 minutes with the caches "
    "bypassed (Cache-Control: no-cache), the fresh reply compared with the cached one, by "
    "outcome: agreed, disagreed, repeated (agreed again for a request already counted), "
    "failed (the outcome could not be kept)",
    ["outcome"],
    registry=registry,
)
semantic_audit_tokens = Counter(
    "sluice_cache_semantic_audit_tokens",
    "Tokens the semantic cache's audits cost the platform (never billed to a team)",
    ["model"],
    registry=registry,
)
gateway_overhead = Histogram(
    "sluice_gateway_overhead_seconds",
    "Time a chat completion spent in the gateway, not waiting for a worker (the response's "
    "x-sluice-overhead-ms): up to the headers of a stream, the whole reply otherwise",
    ["model"],
    buckets=(0.0005, 0.001, 0.002, 0.003, 0.005, 0.0075, 0.01, 0.015, 0.025, 0.05, 0.1, 0.25),
    registry=registry,
)
semantic_lookup = Histogram(
    "sluice_cache_semantic_lookup_seconds",
    "Semantic lookups in a populated context: probe, search, verify, and MiniLM's scoring "
    "when a candidate passed verification",
    buckets=(0.001, 0.002, 0.003, 0.005, 0.0075, 0.01, 0.025, 0.05, 0.1, 0.25),
    registry=registry,
)


Metric = TypeVar("Metric", bound=MetricWrapperBase)
_children: dict[tuple[MetricWrapperBase, tuple[str, ...]], MetricWrapperBase] = {}
CHILDREN_KEPT = 4096  # label values are deployment names and fixed outcomes: far fewer


def labelled(metric: Metric, *values: str) -> Metric:
    """metric.labels(*values), remembered: prometheus_client checks the values and takes a
    lock on every labels() call, a few microseconds each, and a request makes about ten
    (4% of a cache hit's CPU in a profile). Never called with raw client input."""
    key = (metric, values)  # the metric itself: an id could be reused by another
    child = _children.get(key)
    if child is None:
        child = metric.labels(*values)
        if len(_children) < CHILDREN_KEPT:
            _children[key] = child
    return cast(Metric, child)
