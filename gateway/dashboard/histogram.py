"""Fixed latency buckets, so percentiles survive aggregation.

Percentiles cannot be summed, bucket counts can: each rollup row stores how many requests
fell into each bucket, any number of rows add up to one histogram, and P50/P99 are read
off it by linear interpolation inside the bucket that holds the rank. With these edges
the estimate is within one bucket's width (at most about 40% of the value, usually far
less); the point is a trend line that stays fast over millions of requests.
"""

from collections.abc import Sequence

# Upper edges in milliseconds; the last bucket is open (everything at or above 10 s).
EDGES_MS: tuple[int, ...] = (50, 100, 200, 350, 500, 750, 1000, 1500, 2500, 5000, 10000)
BUCKETS = len(EDGES_MS) + 1
LATENCY_FIELDS = [f"lat_{i}" for i in range(BUCKETS)]
TTFT_FIELDS = [f"ttft_{i}" for i in range(BUCKETS)]


def bounds() -> list[tuple[int, int | None]]:
    """(lower, upper) of each bucket in ms; upper None: open-ended."""
    lowers = (0, *EDGES_MS)
    return [(lo, EDGES_MS[i] if i < len(EDGES_MS) else None) for i, lo in enumerate(lowers)]


def percentile(counts: Sequence[int], q: float) -> float | None:
    """The q-quantile (0..1) in ms, estimated from bucket counts; None without data."""
    total = sum(counts)
    if total <= 0:
        return None
    rank = q * total
    seen = 0
    for (lo, hi), count in zip(bounds(), counts, strict=True):
        if count and seen + count >= rank:
            top = hi if hi is not None else lo * 2  # the open bucket: assume up to twice its edge
            return lo + (top - lo) * (rank - seen) / count
        seen += count
    return float(EDGES_MS[-1])
