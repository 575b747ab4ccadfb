"""Redis commands issued in one event-loop turn share one write, each keeping its own reply
and error (foundation/redis_batch.py, foundation/redis_pipe.py), against a real Redis."""

import asyncio
import contextlib
import time
from typing import Any

import pytest
import redis
import redis.asyncio as aioredis

from foundation import worker_wait
from foundation.lua import LuaScript
from foundation.redis_batch import CommandBatcher


class CountingBatcher(CommandBatcher):
    """Counts the pipelines it sends."""

    def __init__(self, client: aioredis.Redis) -> None:
        super().__init__(client)
        self.pipelines = 0

    def _send(self, batch: Any) -> None:
        self.pipelines += 1
        super()._send(batch)


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
    assert replies == ["OK", "1"] and pipelines == 2  # Redis's own replies, no callbacks


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
    assert "not an integer" in str(failed)


@pytest.mark.live
def test_an_unknown_script_fails_as_redis_pys_no_script_error(redis_url):
    """Callers reload a script Redis forgot by catching NoScriptError (foundation/lua.py)."""

    async def scenario(batch: CountingBatcher) -> Any:
        return await asyncio.gather(
            batch.execute("EVALSHA", "0" * 40, 0), batch.execute("PING"), return_exceptions=True
        )

    missing, pong = _run(redis_url, scenario)
    assert isinstance(missing, redis.exceptions.NoScriptError) and pong == "PONG"


@pytest.mark.live
def test_an_argument_redis_cannot_take_fails_only_its_command(redis_url):
    async def scenario(batch: CountingBatcher) -> Any:
        return await asyncio.gather(
            batch.execute("SET", "k", None), batch.execute("INCR", "n"), return_exceptions=True
        )

    refused, counted = _run(redis_url, scenario)
    assert isinstance(refused, redis.exceptions.DataError) and counted == 1


@pytest.mark.live
def test_batches_sent_before_earlier_replies_came_back_get_their_own_replies(redis_url):
    """Batches share one connection without waiting for each other: replies match in order."""

    async def scenario(batch: CountingBatcher) -> list[list[Any]]:
        async def turn(n: int) -> list[Any]:
            await asyncio.sleep(0.0001 * (n % 7))
            value = "x" * (n * 997 % 20_000)  # some replies span several socket reads
            await batch.execute("SET", f"key-{n}", value)
            return [n, len(await batch.execute("GET", f"key-{n}"))]

        return list(await asyncio.gather(*(turn(n) for n in range(300))))

    replies = _run(redis_url, scenario)
    assert replies == [[n, n * 997 % 20_000] for n in range(300)]


@pytest.mark.live
def test_a_command_on_a_connection_redis_closed_is_sent_again_on_a_new_one(redis_url):
    async def scenario(batch: CountingBatcher) -> Any:
        await batch.execute("CLIENT", "SETNAME", "batched")
        # Redis closes the batcher's connection (as a restart would); the next command must
        # not fail for it, and runs once.
        killer = aioredis.from_url(redis_url, decode_responses=True)
        await killer.client_kill_filter(_type="normal", skipme=True)
        await killer.aclose()
        return await batch.execute("INCR", "after-kill")

    assert _run(redis_url, scenario) == 1


@pytest.mark.live
def test_a_redis_that_stops_answering_fails_the_waiting_commands_with_a_timeout(redis_url):
    async def scenario(batch: CountingBatcher) -> Any:
        await batch.execute("PING")  # connected
        other = aioredis.from_url(redis_url, decode_responses=True)
        try:
            # Redis hangs for 1.5 s; the batcher's socket timeout is 0.3 s.
            pausing = asyncio.ensure_future(other.execute_command("CLIENT", "PAUSE", 1500))
            await pausing
            started = asyncio.get_running_loop().time()
            outcome = await asyncio.gather(batch.execute("PING"), return_exceptions=True)
            waited = asyncio.get_running_loop().time() - started
            await other.execute_command("CLIENT", "UNPAUSE")
            return outcome[0], waited, await batch.execute("PING")
        finally:
            await other.aclose()

    async def main() -> Any:
        client = aioredis.from_url(redis_url, decode_responses=True, socket_timeout=0.3)
        try:
            return await scenario(CountingBatcher(client))
        finally:
            await client.aclose()

    failure, waited, after = asyncio.run(main())
    assert isinstance(failure, redis.exceptions.TimeoutError)
    assert waited < 1.2  # given up on well before Redis answered
    assert after == "PONG"  # a new connection once Redis answers again


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


@pytest.mark.live
def test_the_database_named_in_the_url_is_the_one_written(redis_url):
    in_db_3 = redis_url.rsplit("/", 1)[0] + "/3"

    async def scenario(batch: CountingBatcher) -> Any:
        return await batch.execute("SET", "where", "three")

    assert _run(in_db_3, scenario) == "OK"
    assert redis.Redis.from_url(in_db_3, decode_responses=True).get("where") == "three"
    assert redis.Redis.from_url(redis_url, decode_responses=True).get("where") is None


@pytest.mark.live
def test_a_script_runs_in_order_with_the_commands_behind_it_on_a_redis_that_forgot_it(
    redis_url, tmp_path
):
    """Its first run on a connection loads it in the same batch, ahead of it, instead of
    drawing NOSCRIPT and running again after what was sent behind it; so does its first
    run after Redis forgot it and closed the connection (a restart)."""
    source = tmp_path / "set.lua"
    source.write_text("redis.call('SET', KEYS[1], ARGV[1]) return 1")
    script = LuaScript(source)

    async def scenario(batch: CountingBatcher) -> list[Any]:
        seen = []
        for value in ("first", "after a restart"):
            await batch.client.script_flush()
            ran = script.submitted(batch, ["written"], [value])
            seen.append(await batch.execute("GET", "written"))  # behind it, same batch
            await ran
            killer = aioredis.from_url(redis_url)
            await killer.client_kill_filter(_type="normal", skipme=True)
            await killer.aclose()
        return seen

    assert _run(redis_url, scenario) == ["first", "after a restart"]


@pytest.mark.live
def test_every_run_of_a_script_reaches_its_caller_or_abandoned_however_late_it_is_cancelled(
    redis_url, tmp_path
):
    """Callers cancelled at moments spread over a run that draws NOSCRIPT (Redis forgot the
    script) and runs again after reloading it: each run that happened is returned or
    handed to `abandoned` (admission gives a gone caller's reservation back there), never
    dropped. The run after the reload once was."""
    source = tmp_path / "count.lua"
    source.write_text("return redis.call('INCR', KEYS[1])")
    script = LuaScript(source)

    async def scenario(batch: CountingBatcher) -> tuple[list[int], list[int], int]:
        # How long such a run takes here, uncancelled: the cancels are spread over it
        # (the machine's speed sets the moments, not a fixed time).
        took = []
        for _ in range(5):
            await batch.client.script_flush()
            started = time.perf_counter()
            await script.run_batched(batch, ["warm-up"], [])
            took.append(time.perf_counter() - started)
        span = 1.5 * sorted(took)[2]
        returned: list[int] = []
        handed: list[int] = []
        for step in range(80):
            await batch.client.script_flush()  # the next run draws NOSCRIPT
            run = script.run_batched(batch, ["runs"], [], abandoned=handed.append)
            task = asyncio.ensure_future(run)
            await asyncio.sleep(span * step / 80)
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                returned.append(await task)
        for _ in range(100):  # until every run's reply has been handed over or returned
            runs = int(await batch.client.get("runs") or 0)
            if len(returned) + len(handed) >= runs:
                break
            await asyncio.sleep(0.01)
        return returned, handed, runs

    returned, handed, runs = _run(redis_url, scenario)
    assert sorted(returned + handed) == list(range(1, runs + 1))
    assert returned and handed


@pytest.mark.live
def test_background_commands_wait_for_a_worker_call_while_others_go_ahead(redis_url, monkeypatch):
    monkeypatch.setattr(worker_wait, "DEADLINE_S", 60.0)  # only the worker call

    async def scenario(batch: CountingBatcher) -> list[Any]:
        with batch.in_background():
            first = batch.submit("SET", "kept", "1")
            second = batch.submit("SET", "kept", "2")  # in order among themselves
        ahead = await batch.execute("GET", "kept")  # goes without them
        await asyncio.sleep(0.05)  # several loop turns: nothing sent on their account
        unsent = (batch.pipelines, first.done(), second.done())
        worker_wait.waiting_on_worker()
        await second
        return [ahead, unsent, await batch.execute("GET", "kept"), batch.pipelines]

    assert _run(redis_url, scenario) == [None, (1, False, False), "2", 3]


@pytest.mark.live
def test_background_commands_go_out_by_their_deadline_without_a_worker_call(redis_url):
    async def scenario(batch: CountingBatcher) -> list[Any]:
        with batch.in_background():
            reply = batch.submit("SET", "kept", "1")
        async with asyncio.timeout(5):  # worker_wait.DEADLINE_S is 10 ms
            return [await reply, await batch.execute("GET", "kept")]

    assert _run(redis_url, scenario) == ["OK", "1"]
