"""A non-streamed reply goes out before its billing round trip, and is billed all the same:
the quota was reserved at admission, so the client need not wait for the reconcile."""

import threading
import time
from typing import Any

import pytest
import redis

from gateway.accounts.quota_usage import read_team_usage
from gateway.accounts.records import quota_limits_from_row
from gateway.usage.ledger import ingest
from gateway.usage.models import UsageRecord
from tests.conftest import live_platform
from tests.sims import SimProcess
from tests.waiting import wait_until

PAUSE_S = 8


@pytest.fixture
def slow_platform(redis_url):
    """A worker that takes a second to its first token."""
    sim = SimProcess(model="sim-upstream", fixed_ttft_ms=1000, fixed_itl_ms=5)
    try:
        yield from live_platform(redis_url, sim)
    finally:
        sim.stop()


def _minute_tokens(platform: dict[str, Any]) -> int:
    team = platform["team"]
    usage = read_team_usage(team.pk, quota_limits_from_row(team.quota))
    return next(u.used for u in usage if u.limit == "tokens_per_minute")


@pytest.mark.live
@pytest.mark.django_db(transaction=True)
def test_a_reply_is_not_held_back_by_its_billing_and_is_billed_once_redis_takes_writes(
    slow_platform,
):
    platform = slow_platform
    primary = redis.Redis.from_url(platform["redis_url"])
    before = _minute_tokens(platform)

    def pause_writes_once_admitted() -> None:
        time.sleep(0.5)  # admitted (reserved) and waiting on the worker's first token
        primary.execute_command("CLIENT", "PAUSE", PAUSE_S * 1000, "WRITE")

    pausing = threading.Thread(target=pause_writes_once_admitted)
    pausing.start()
    reply = platform["client"].chat.completions.create(
        model="small-model",
        messages=[{"role": "user", "content": "Name a colour."}],
        max_tokens=400,
        temperature=0.7,
    )
    pausing.join()
    # The reply came while the primary Redis refused writes: its reservation (the prompt
    # plus the 400 tokens asked for) is still what the team's minute counts.
    assert reply.choices[0].message.content
    reserved = _minute_tokens(platform) - before
    used = reply.usage.prompt_tokens + reply.usage.completion_tokens
    assert reserved >= reply.usage.prompt_tokens + 400 > used
    primary.execute_command("CLIENT", "UNPAUSE")
    wait_until(lambda: _minute_tokens(platform) - before == used, 10, "the reconcile")

    def recorded() -> list[UsageRecord]:
        ingest("test-consumer")
        return list(UsageRecord.objects.filter(request_id=reply.id))

    [record] = wait_until(recorded, 10, "the usage record")
    assert (record.prompt_tokens, record.completion_tokens) == (
        reply.usage.prompt_tokens,
        reply.usage.completion_tokens,
    )
