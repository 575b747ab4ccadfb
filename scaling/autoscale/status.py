"""What the autoscaler loop tells the rest of the platform through Redis: that it runs (a
heartbeat the leader renews each tick) and what it did (counters for /metrics).

The loop runs in its own process (`manage.py autoscale`, started by `make run`), so the
gateway's /metrics and the Tuning page cannot count in memory: they read these keys.

- HEARTBEAT_KEY: JSON {at, tick_s, actuator, host, pid, policies}, set by the leader each
  tick with a TTL of three ticks (at least HEARTBEAT_MIN_TTL_S): absent means no loop runs.
- STATS_KEY: a hash of counters; field `ticks` (ticks the leader took) and a field per
  JSON `[deployment, action]` (decisions taken, recorded in the diary or not: an unchanged
  hold is recorded at most every 5 minutes but counted every tick). Kept in the primary
  Redis, which persists, so the counters only ever rise.
"""

import json
import os
import socket
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import redis
import redis.asyncio as aioredis

HEARTBEAT_KEY = "sluice:autoscale:heartbeat"
STATS_KEY = "sluice:autoscale:stats"
HEARTBEAT_MIN_TTL_S = 10.0
TICKS_FIELD = "ticks"


def beat(client: redis.Redis, tick_s: float, actuator: str, policies: int) -> None:
    body = {
        "at": time.time(),
        "tick_s": tick_s,
        "actuator": actuator,
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "policies": policies,
    }
    ttl_ms = int(max(3 * tick_s, HEARTBEAT_MIN_TTL_S) * 1000)
    client.set(HEARTBEAT_KEY, json.dumps(body), px=ttl_ms)


def clear(client: redis.Redis) -> None:
    client.delete(HEARTBEAT_KEY)


def count_tick(client: redis.Redis) -> None:
    client.hincrby(STATS_KEY, TICKS_FIELD, 1)


def count_decision(client: redis.Redis, deployment: str, action: str) -> None:
    client.hincrby(STATS_KEY, json.dumps([deployment, action]), 1)


@dataclass(frozen=True)
class LoopStatus:
    at: float
    tick_s: float
    actuator: str
    host: str
    pid: int
    policies: int

    @property
    def age_s(self) -> float:
        return max(time.time() - self.at, 0.0)


def loop_status(client: redis.Redis) -> LoopStatus | None:
    """The running loop's last heartbeat; None: no loop has ticked within three ticks."""
    raw = client.get(HEARTBEAT_KEY)
    if raw is None:
        return None
    try:
        body: dict[str, Any] = json.loads(str(raw))
        return LoopStatus(
            at=float(body["at"]),
            tick_s=float(body["tick_s"]),
            actuator=str(body["actuator"]),
            host=str(body["host"]),
            pid=int(body["pid"]),
            policies=int(body["policies"]),
        )
    except (ValueError, KeyError, TypeError):
        return None


@dataclass(frozen=True)
class Stats:
    ticks: int
    decisions: dict[tuple[str, str], int]  # (deployment, action) -> count


def parse_stats(raw: Mapping[str, str]) -> Stats:
    ticks, decisions = 0, {}
    for key, value in raw.items():
        try:
            if key == TICKS_FIELD:
                ticks = int(value)
                continue
            deployment, action = json.loads(key)
            decisions[(str(deployment), str(action))] = int(value)
        except (ValueError, TypeError):
            continue
    return Stats(ticks, decisions)


async def aread_stats(client: aioredis.Redis) -> Stats:
    raw: dict[str, str] = await client.hgetall(STATS_KEY)  # type: ignore[assignment]
    return parse_stats(raw)


def read_stats(client: redis.Redis) -> Stats:
    raw: dict[str, str] = client.hgetall(STATS_KEY)  # type: ignore[assignment]
    return parse_stats(raw)
