"""From the outcomes of one level to the figures a reader compares."""

import math
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

from bench.loadtest.probe import Outcome
from caching.outcome import Outcome as CacheOutcome

CACHE_HITS = (CacheOutcome.HIT_EXACT, CacheOutcome.HIT_SEMANTIC)


def percentile(values: list[float], share: float) -> float | None:
    """Nearest-rank percentile (no interpolation: every figure is a measured request)."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(share * len(ordered)) - 1)]


@dataclass(frozen=True)
class LevelSummary:
    endpoint: str
    level: float  # concurrency (closed loop) or arrival rate per second (open loop)
    mode: str
    requests: int
    ok: int
    elapsed_s: float
    requests_per_s: float
    output_tokens_per_s: float
    latency_p50_s: float | None
    latency_p90_s: float | None
    latency_p99_s: float | None
    ttft_p50_s: float | None
    ttft_p99_s: float | None
    tpot_p50_s: float | None
    errors: dict[str, int] = field(default_factory=dict)
    cache_hit_share: float | None = None  # None when the endpoint sends no x-sluice-cache

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def summarize(
    endpoint: str, level: float, mode: str, outcomes: list[Outcome], elapsed_s: float
) -> LevelSummary:
    good = [o for o in outcomes if o.error is None]
    latencies = [o.latency_s for o in good]
    ttfts = [o.ttft_s for o in good if o.ttft_s is not None]
    tpots = [t for o in good if (t := o.time_per_output_token_s) is not None]
    labelled = [o.cache for o in outcomes if o.cache is not None]
    hits = sum(1 for label in labelled if label in CACHE_HITS)
    return LevelSummary(
        endpoint=endpoint,
        level=level,
        mode=mode,
        requests=len(outcomes),
        ok=len(good),
        elapsed_s=elapsed_s,
        requests_per_s=len(good) / elapsed_s if elapsed_s else 0.0,
        output_tokens_per_s=sum(o.output_tokens for o in good) / elapsed_s if elapsed_s else 0.0,
        latency_p50_s=percentile(latencies, 0.50),
        latency_p90_s=percentile(latencies, 0.90),
        latency_p99_s=percentile(latencies, 0.99),
        ttft_p50_s=percentile(ttfts, 0.50),
        ttft_p99_s=percentile(ttfts, 0.99),
        tpot_p50_s=percentile(tpots, 0.50),
        errors=dict(Counter(o.error for o in outcomes if o.error is not None)),
        cache_hit_share=hits / len(labelled) if labelled else None,
    )


def ratios(this: LevelSummary, other: LevelSummary) -> dict[str, float | None]:
    """This endpoint against the compared one: throughput as a ratio, latency as seconds
    added (what a gateway in front of a worker costs)."""

    def ratio(a: float, b: float) -> float | None:
        return a / b if b else None

    def added(a: float | None, b: float | None) -> float | None:
        return None if a is None or b is None else a - b

    return {
        "throughput_ratio": ratio(this.requests_per_s, other.requests_per_s),
        "tokens_ratio": ratio(this.output_tokens_per_s, other.output_tokens_per_s),
        "added_latency_p50_s": added(this.latency_p50_s, other.latency_p50_s),
        "added_latency_p99_s": added(this.latency_p99_s, other.latency_p99_s),
        "added_ttft_p50_s": added(this.ttft_p50_s, other.ttft_p50_s),
    }
