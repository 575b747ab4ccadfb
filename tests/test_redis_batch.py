"""Redis commands issued in one event-loop turn share one pipeline, each keeping its own
reply and error (foundation/redis_batch.py), against a real Redis."""

import asyncio
from typing import Any

import pytest
import redis
import redis.asyncio as aioredis

from foundation.redis_batch import CommandBatcher


class CountingBatcher(CommandBatcher):
    """Counts the pipelines it sends."""

    def __init__(self, client: aioredis.Redis) -> None:
        super().__init__(client)
        self.pipelines = 0

    async def _send(self, batch: Any) -> None:
        self.pipelines += 1
        await super()._send(batch)


def _run(url: str, scenario: Any) -> Any:
    async def main() -> Any:
        client = aioredis.from_url(url, decode_responses=True)
        try:
            return await scenario(CountingBatcher(client))
        finally:
            await client.aclose()

    return asyncio.run(main())


@pytest.mark.live
def test_concurrent_commands_share_a_pipeline_and_each_gets_its_own_reply(redis_url):
    async def scenario(batch: CountingBatcher) -> tuple[list[int], int]:
        replies = await asyncio.gather(*(batch.execute("INCR", "counter") for _ in range(200)))
        return replies, batch.pipelines

    replies, pipelines = _run(redis_url, scenario)
    assert sorted(replies) == list(range(1, 201))
    assert pipelines == 1


@pytest.mark.live
def test_a_lone_command_is_sent_without_waiting_for_company(redis_url):
    async def scenario(batch: CountingBatcher) -> tuple[list[Any], int]:
        first = await batch.execute("SET", "a", "1")
        second = await batch.execute("GET", "a")
        return [first, second], batch.pipelines

    replies, pipelines = _run(redis_url, scenario)
    assert replies == [True, "1"] and pipelines == 2


@pytest.mark.live
def test_a_failing_command_fails_only_its_caller(redis_url):
    redis.Redis.from_url(redis_url).set("word", "abc")

    async def scenario(batch: CountingBatcher) -> Any:
        return await asyncio.gather(
            batch.execute("INCR", "number"),
            batch.execute("INCR", "word"),
            batch.execute("INCR", "number"),
            return_exceptions=True,
        )

    ok, failed, ok_again = _run(redis_url, scenario)
    assert (ok, ok_again) == (1, 2)
    assert isinstance(failed, redis.exceptions.ResponseError)


@pytest.mark.live
def test_a_caller_cancelled_before_its_batch_left_sends_nothing(redis_url):
    async def scenario(batch: CountingBatcher) -> None:
        leaving = asyncio.ensure_future(batch.execute("INCR", "left"))
        staying = asyncio.ensure_future(batch.execute("INCR", "stayed"))
        await asyncio.sleep(0)  # both submitted, the flush not yet run
        leaving.cancel()
        await staying

    _run(redis_url, scenario)
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    assert client.get("left") is None and client.get("stayed") == "1"


@pytest.mark.unit
def test_an_unreachable_redis_fails_every_command_of_the_batch(unreachable_redis_url):
    async def scenario(batch: CountingBatcher) -> list[Any]:
        return await asyncio.gather(
            *(batch.execute("GET", f"k{i}") for i in range(3)), return_exceptions=True
        )

    failures = _run(unreachable_redis_url, scenario)
    assert len(failures) == 3
    assert all(isinstance(f, redis.exceptions.ConnectionError) for f in failures)
