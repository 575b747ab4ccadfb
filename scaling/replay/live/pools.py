"""Warm pool variants of one policy, for replaying cold starts against sleeping replicas.

`replay --live --pools cold,warm,asleep` runs each controller once per variant on the same
load, so what a warm pool buys (time to first token on a ramp) and what it costs
(GPU-hours) are measured side by side, under the same rate scale and seed:

- cold: no warm pool, every step up is a cold start (the scaled start-up time);
- warm: `size` warm replicas, loaded and awake out of traffic, promoted at once;
- asleep: the same pool in vLLM's sleep mode (the policy's warm_pool_sleeps), woken in
  the scaled wake time before it is promoted.

Only the warm pool differs: the bounds, thresholds and windows stay the policy's.
"""

from dataclasses import replace

from scaling.autoscale.types import PolicySpec

POOLS = ("cold", "warm", "asleep")
DEFAULT_POOL_SIZE = 1  # when --pools asks for a warm pool and --warm-pool gives none


def pool_policy(policy: PolicySpec, pool: str, size: int) -> PolicySpec:
    """The policy with the variant's warm pool: `size` replicas for warm and asleep."""
    if pool == "cold":
        return replace(policy, warm_pool=0, warm_sleeps=False)
    if size < 1:
        raise ValueError(f"a {pool} pool needs at least one replica, not {size}")
    if pool == "warm":
        return replace(policy, warm_pool=size, warm_sleeps=False)
    if pool == "asleep":
        return replace(policy, warm_pool=size, warm_sleeps=True)
    raise ValueError(f"unknown warm pool {pool!r}: use {', '.join(POOLS)}")


def parse_pools(text: str) -> list[str]:
    """`cold,asleep` -> ["cold", "asleep"], each known and named once."""
    pools = [p.strip() for p in text.split(",") if p.strip()]
    if not pools:
        raise ValueError(f"--pools names none of {', '.join(POOLS)}")
    for pool in pools:
        if pool not in POOLS:
            raise ValueError(f"unknown warm pool {pool!r}: use {', '.join(POOLS)}")
    if len(set(pools)) != len(pools):
        raise ValueError(f"--pools names a pool twice: {text}")
    return pools
