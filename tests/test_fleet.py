"""Fleet: scraping, health, dispatch, streaming with failover and cancellation."""

import asyncio
import dataclasses
import time
from contextlib import aclosing

import aiohttp
import pytest
from aiohttp import web
from asgiref.sync import sync_to_async

from foundation.embedded_redis import free_port
from inference import fleet
from inference.client import UpstreamError, close_http_session
from inference.models import Worker
from inference.scraper import Scraper
from inference.snapshot import FleetView, WorkerView
from scaling.routing.cold_start import ColdStartDeployments
from scaling.routing.dispatcher import Dispatcher, NoHealthyWorker, Priority, QueueTimeout
from scaling.routing.streaming import stream_completion
from tests.sims import SimProcess
from tests.waiting import async_wait_until

BODY = {
    "messages": [{"role": "user", "content": "Tell me a story"}],
    "max_tokens": 200,
    "ignore_eos": True,
}


def view(url: str, max_in_flight: int = 4, deployment: str = "sim") -> WorkerView:
    return WorkerView(
        id=hash(url) % 10_000,
        url=url,
        deployment=deployment,
        upstream_model="sim",
        state="ready",
        max_in_flight=max_in_flight,
        labels={},
        healthy=True,
        running=0,
        waiting=0,
        kv_usage=0,
        prefix_hit_rate=None,
        ttft_p50_s=None,
        ttft_p99_s=None,
        scraped_at=time.time() + 3600,
        error="",
    )


class StaticFleet(FleetView):
    """A fixed fleet, so dispatch and client tests do not depend on scrape timing."""

    def __init__(self, workers: list[WorkerView]) -> None:
        super().__init__()
        self._workers = workers

    async def workers(self) -> list[WorkerView]:
        return self._workers


@pytest.fixture
def sims():
    started: list[SimProcess] = []

    def start(**kwargs) -> SimProcess:
        started.append(SimProcess(**kwargs))
        return started[-1]

    yield start
    for sim in started:
        sim.stop()


@pytest.mark.live
@pytest.mark.django_db(transaction=True)
def test_scraper_publishes_load_promotes_starting_workers_and_tracks_health(sims):
    deployment = fleet.ensure_deployment("sim", max_in_flight_per_worker=8)
    first, second = sims(), sims()
    for sim in (first, second):
        fleet.register_worker(deployment, sim.url, registered_by="test")

    async def scenario():
        scraper = Scraper()
        async with aiohttp.ClientSession() as session:
            views = await scraper.scrape_once(session)
            assert all(v.healthy for v in views)
            states = await sync_to_async(
                lambda: list(Worker.objects.values_list("state", flat=True))
            )()
            assert set(states) == {"ready"}
            view_ = FleetView()
            assert {w.url for w in await view_.routable("sim")} == {first.url, second.url}

            first.stop()
            await scraper.scrape_once(session)
            view_.invalidate()
            assert len(await view_.routable("sim")) == 2  # one failed check is not enough
            await scraper.scrape_once(session)
            view_.invalidate()
            assert [w.url for w in await view_.routable("sim")] == [second.url]

            sims(port=first.port)  # the worker comes back on the same address
            for _ in range(2):
                await scraper.scrape_once(session)
            view_.invalidate()
            assert {w.url for w in await view_.routable("sim")} == {first.url, second.url}

    asyncio.run(scenario())


@pytest.mark.unit
def test_dispatch_holds_workers_at_their_target_and_serves_interactive_first():
    worker = view("http://w1", max_in_flight=2)
    dispatcher = Dispatcher(fleet=StaticFleet([worker]))
    order: list[str] = []

    async def scenario():
        leases = [await dispatcher.acquire("sim") for _ in range(2)]

        async def wait(name: str, priority: Priority):
            lease = await dispatcher.acquire("sim", priority)
            order.append(name)
            return lease

        def queued(count: int) -> bool:
            return dispatcher.queue_length("sim") == count

        batch = asyncio.create_task(wait("batch", Priority.BATCH))
        await async_wait_until(lambda: queued(1), 1, "the batch request to queue")
        interactive = asyncio.create_task(wait("interactive", Priority.INTERACTIVE))
        await async_wait_until(lambda: queued(2), 1, "the interactive request to queue")
        assert dispatcher.in_flight["http://w1"] == 2
        dispatcher.release(leases[0])
        await async_wait_until(lambda: order, 1, "the freed slot to be taken")
        dispatcher.release(leases[1])
        await asyncio.gather(batch, interactive)
        assert dispatcher.queue_length("sim") == 0

    asyncio.run(scenario())
    assert order == ["interactive", "batch"]


@pytest.mark.unit
def test_dispatch_times_out_when_full_and_fails_fast_with_no_worker():
    dispatcher = Dispatcher(fleet=StaticFleet([view("http://w1", max_in_flight=1)]))

    async def scenario():
        lease = await dispatcher.acquire("sim")
        with pytest.raises(QueueTimeout):
            await dispatcher.acquire("sim", timeout_s=0.3)
        assert dispatcher.queue_length("sim") == 0
        dispatcher.release(lease)
        assert "http://w1" not in dispatcher.in_flight  # none left: no entry kept
        with pytest.raises(NoHealthyWorker):
            await dispatcher.acquire("other-model")

    asyncio.run(scenario())


@pytest.mark.live
def test_closing_the_stream_aborts_the_request_on_the_worker_within_a_second(sims):
    sim = sims()
    dispatcher = Dispatcher(fleet=StaticFleet([view(sim.url)]))

    async def scenario():
        async with aclosing(stream_completion(dispatcher, "sim", BODY)) as stream:
            for _ in range(3):
                await anext(stream)
            assert sim.metric("vllm:num_requests_running") == 1
        await async_wait_until(
            lambda: sim.metric("vllm:num_requests_running") == 0,
            1.0,
            "the worker to abort the request",
        )
        assert sim.url not in dispatcher.in_flight  # released: no entry kept
        await close_http_session()

    asyncio.run(scenario())


@pytest.mark.live
@pytest.mark.parametrize("whole", [False, True], ids=["streamed", "whole"])
def test_a_dead_worker_is_retried_elsewhere_before_the_first_token(sims, whole):
    sim = sims()
    dead = view(f"http://127.0.0.1:{free_port()}")
    dispatcher = Dispatcher(
        fleet=StaticFleet([dead, view(sim.url)]), pick=lambda workers, _: workers[0]
    )
    told: list[str | None] = []  # on_dispatch: each worker, None once the dead one failed

    async def scenario():
        chunks = [
            (lease.worker.url, chunk)
            async for lease, chunk in stream_completion(
                dispatcher,
                "sim",
                {**BODY, "max_tokens": 5},
                on_dispatch=lambda lease: told.append(lease.worker.url if lease else None),
                whole=whole,
            )
        ]
        assert {url for url, _ in chunks} == {sim.url}
        assert len(chunks) == 1 if whole else len(chunks) > 1
        assert chunks[-1][1]["choices"][0]["finish_reason"] == "length"
        assert told == [dead.url, None, sim.url]
        await close_http_session()

    asyncio.run(scenario())


@pytest.fixture
def breaks_after_first_token():
    """A worker that sends one chunk and then drops the connection."""
    import threading

    async def handler(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write(b'data: {"choices": [{"index": 0, "delta": {"content": "Hi"}}]}\n\n')
        await asyncio.sleep(0.3)  # the fake worker's script: the token gets out, then it dies
        assert request.transport is not None
        request.transport.close()
        return response

    app = web.Application()
    app.router.add_post("/v1/chat/completions", handler)
    port, loop = free_port(), asyncio.new_event_loop()
    runner = web.AppRunner(app)
    loop.run_until_complete(runner.setup())
    loop.run_until_complete(web.TCPSite(runner, "127.0.0.1", port).start())
    threading.Thread(target=loop.run_forever, daemon=True).start()
    yield f"http://127.0.0.1:{port}"
    loop.call_soon_threadsafe(loop.stop)


@pytest.mark.live
def test_a_failure_after_the_first_token_is_reported_not_retried(sims, breaks_after_first_token):
    healthy = sims()
    dispatcher = Dispatcher(
        fleet=StaticFleet([view(breaks_after_first_token), view(healthy.url)]),
        pick=lambda workers, _: workers[0],
    )
    received: list[str] = []

    async def scenario():
        with pytest.raises(UpstreamError) as failure:
            async for lease, _ in stream_completion(dispatcher, "sim", BODY):
                received.append(lease.worker.url)
        assert not failure.value.before_first_token
        await close_http_session()

    asyncio.run(scenario())
    assert received == [breaks_after_first_token]
    assert healthy.metric("vllm:request_success_total") == 0
    assert healthy.metric("vllm:num_requests_running") == 0


@pytest.mark.live
def test_a_request_the_worker_refuses_is_not_retried_elsewhere(sims):
    first, second = sims(), sims()
    dispatcher = Dispatcher(
        fleet=StaticFleet([view(first.url), view(second.url)]), pick=lambda workers, _: workers[0]
    )
    refused_body = {"messages": [{"role": "user", "content": ["not", "a", "string"]}]}

    async def scenario():
        with pytest.raises(UpstreamError) as refused:
            async for _ in stream_completion(dispatcher, "sim", refused_body):
                pass
        assert refused.value.client_error and refused.value.status == 400
        await close_http_session()

    asyncio.run(scenario())
    assert second.metric("vllm:request_success_total") == 0
    assert dispatcher.in_flight == {}  # released, and no entry kept at zero


class FailingFleet(StaticFleet):
    async def workers(self) -> list[WorkerView]:
        raise RuntimeError("the snapshot is unreadable")


@pytest.mark.unit
def test_a_failed_fleet_read_leaves_no_waiter_behind_for_a_release_to_grant():
    dispatcher = Dispatcher(fleet=FailingFleet([]))

    async def scenario() -> None:
        with pytest.raises(RuntimeError):
            await dispatcher.acquire("sim")
        assert dispatcher.queue_length("sim") == 0

    asyncio.run(scenario())


@pytest.mark.unit
def test_a_snapshot_gone_stale_is_no_cold_start():
    fresh, stale = view("http://w1"), view("http://w2", deployment="other")
    stale = dataclasses.replace(stale, scraped_at=time.time() - 3600)
    fleet = StaticFleet([fresh, stale])
    assert not fleet.stale("sim") and fleet.stale("other") and not fleet.stale("unknown")


@pytest.mark.unit
def test_a_request_held_for_a_replica_is_not_failed_by_a_later_one_that_is_no_cold_start():
    """A request held for a scale-from-zero replica; then a request arrives while the
    snapshot is stale (no cold start: it may fail at once). It failed the held one too."""

    class ScalesFromZero(ColdStartDeployments):
        async def waits_for_replica(self, deployment: str) -> bool:
            return True

    fleet = StaticFleet([])
    dispatcher = Dispatcher(fleet=fleet)
    dispatcher.cold_start = ScalesFromZero()

    async def scenario() -> bool:
        held = asyncio.ensure_future(dispatcher.acquire("sim", timeout_s=10))
        await asyncio.sleep(0.1)
        fleet._workers = [dataclasses.replace(view("http://w1"), scraped_at=time.time() - 3600)]
        later = asyncio.ensure_future(dispatcher.acquire("sim", timeout_s=10))
        await asyncio.sleep(0.2)
        still_held = not held.done()
        fleet._workers = [view("http://w1")]  # the replica is up
        lease = await asyncio.wait_for(held, 5)
        dispatcher.release(lease)
        dispatcher.release(await asyncio.wait_for(later, 5))
        return still_held

    assert asyncio.run(scenario())
