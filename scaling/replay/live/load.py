"""The load a live replay sends: a window of the trace, scaled in rate, as arrival times.

A trace's rates are for a fleet of hundreds of replicas; a live run has a few processes
on one host, so the rate is scaled down (by default so the window's peak needs all but
one of max_replicas) and the arrivals are drawn once, reproducibly, from a seed.
"""

import math
from typing import Any

import numpy as np

from scaling.autoscale.types import PolicySpec
from scaling.replay.live.options import LiveOptions
from scaling.replay.traces import Demand

PEAK_SHARE = 0.9  # the auto rate scale's peak, as a share of max_replicas - 1 at the target


def window(demand: Demand, start_s: float, duration_s: float | None) -> Demand:
    """The trace's seconds [start, start + duration)."""
    first = max(int(start_s), 0)
    last = (
        demand.seconds if duration_s is None else min(first + math.ceil(duration_s), demand.seconds)
    )
    if last <= first:
        raise ValueError(
            f"the trace has no seconds in [{start_s:g}, {last}) (it is {demand.seconds} s long)"
        )
    return Demand(
        rate=demand.rate[first:last],
        output_tokens=demand.output_tokens[first:last],
        meta=demand.meta,
    )


def mean_output_tokens(demand: Demand) -> float:
    """Output tokens per request over the window, weighted by rate (200 when unknown)."""
    total = sum(demand.rate)
    tokens = sum(r * t for r, t in zip(demand.rate, demand.output_tokens, strict=True))
    return tokens / total if total > 0 and tokens > 0 else 200.0


def fit_rate_scale(demand: Demand, policy: PolicySpec, options: LiveOptions) -> float:
    """Scale the window's peak to 90% of what max_replicas - 1 replicas carry at the target
    utilisation: the peak is reachable with a replica to spare, and does not sit on the
    boundary where one more replica is needed (which would make GPU-hours a coin toss)."""
    peak = max(demand.rate, default=0.0)
    if peak <= 0:
        return 1.0
    per_replica = policy.slots_per_replica * policy.target_utilisation / options.service_s
    return PEAK_SHARE * max(policy.max_replicas - 1, 1) * per_replica / peak


def arrivals(
    demand: Demand, rate_scale: float, speed: float, lead_in_s: float, seed: int
) -> np.ndarray[Any, np.dtype[np.float64]]:
    """Poisson arrival times in wall seconds from the window's start (the lead-in's are
    negative): trace second s carries rate(s) x rate_scale per wall second for 1/speed."""
    rng = np.random.default_rng(seed)
    lead = int(lead_in_s)
    rates = np.asarray([demand.rate[0]] * lead + list(demand.rate), dtype=float)
    counts = rng.poisson(rates * rate_scale / speed)
    seconds = np.repeat(np.arange(-lead, demand.seconds, dtype=float), counts)
    times: np.ndarray[Any, np.dtype[np.float64]] = np.sort(
        (seconds + rng.random(len(seconds))) / speed
    )
    return times
