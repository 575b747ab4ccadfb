"""Per-team cache counters, readable by the team (management API) as well as in /metrics.

Prometheus counts by model and outcome across teams; a team asks "what did the cache save
us", so each team also has one Redis hash of running totals. One pipelined HINCRBY round
trip per request, after the reply has gone out.
"""

import logging

from caching.outcome import Outcome
from foundation.redis_clients import REDIS_FAILURES, async_cache_redis, sync_cache_redis

logger = logging.getLogger(__name__)
PREFIX = "sluice:cache:stats:"
OUTCOMES = [str(outcome) for outcome in Outcome]


def count_commands(
    team_id: int, result: str, tokens_saved: int, cost_saved_micros: int
) -> list[tuple[str | int, ...]]:
    """Count one request's outcome: raw commands for the caller's batch."""
    key = PREFIX + str(team_id)
    commands: list[tuple[str | int, ...]] = [("HINCRBY", key, result, 1)]
    if tokens_saved:
        commands.append(("HINCRBY", key, "tokens_saved", tokens_saved))
        commands.append(("HINCRBY", key, "cost_saved_micros", cost_saved_micros))
    return commands


async def count_false_hit(team_id: int) -> None:
    try:
        await async_cache_redis().hincrby(PREFIX + str(team_id), "false_hits", 1)
    except REDIS_FAILURES as exc:
        logger.warning("false-hit counter of team %s not updated: %s", team_id, exc)


def read(team_id: int) -> dict[str, int | float]:
    """Totals since the counters began; raises a Redis error if the cache is unreachable."""
    raw = sync_cache_redis().hgetall(PREFIX + str(team_id))
    totals = {
        name: int(raw.get(name, 0))
        for name in [*OUTCOMES, "tokens_saved", "cost_saved_micros", "false_hits"]
    }
    hits = totals[Outcome.HIT_EXACT] + totals[Outcome.HIT_SEMANTIC] + totals[Outcome.COALESCED]
    answered = hits + totals["miss"]
    hit_rate = round(hits / answered, 4) if answered else 0.0
    return {**totals, "requests": answered + totals["bypass"], "hit_rate": hit_rate}
