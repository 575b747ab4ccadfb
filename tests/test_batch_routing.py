"""Where batch lines go: only to a worker with batch room of its own, spot workers first,
the room not divided among gateway processes; interactive routing as it was."""

import asyncio
import json
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from inference import fleet
from inference.chat_request import CHAT_PATH
from inference.client import UpstreamError, close_http_session
from inference.scraper import Scraper
from inference.snapshot import FleetView, WorkerView
from scaling.routing.batch_meter import END_LAG_S, BatchMeter, OwnLine, WorkerAllowance
from scaling.routing.dispatcher import Dispatcher, Lease, Priority, QueueTimeout
from scaling.routing.filters.has_batch_room import HasBatchRoom
from scaling.routing.policies import for_batch, least_loaded, new_router, prefix_aware
from scaling.routing.router import Load, RouteContext, Router
from scaling.routing.scorers.spot_first import SpotFirst
from scaling.routing.streaming import stream_completion
from tests.sims import SimProcess
from tests.test_fleet import StaticFleet
from tests.test_worker_first_chunk import worker as fake_worker

SHARED_PREFIX = RouteContext("sim", "prefix_aware", prefix_key="one system prompt for all")
STREAMED_CHUNK = {"choices": [{"index": 0, "delta": {"content": "Hi"}, "finish_reason": None}]}
WHOLE_REPLY = {
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hi"}}],
    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
}


def worker(
    url: str,
    *,
    running: float = 0,
    waiting: float = 0,
    max_in_flight: int = 10,
    spot: bool = False,
    scraped_at: float | None = None,
) -> WorkerView:
    return WorkerView(
        id=abs(hash(url)) % 10_000,
        url=url,
        deployment="sim",
        upstream_model="sim",
        state="ready",
        max_in_flight=max_in_flight,
        labels={"spot": True} if spot else {},
        healthy=True,
        running=running,
        waiting=waiting,
        kv_usage=0.0,
        prefix_hit_rate=None,
        ttft_p50_s=None,
        ttft_p99_s=None,
        scraped_at=time.time() if scraped_at is None else scraped_at,
        error="",
    )


def seeded() -> Callable[[str], Router]:
    """Routers whose ties break the same way on every run."""
    routers: dict[str, Router] = {}

    def router(policy: str) -> Router:
        if policy not in routers:
            routers[policy] = new_router(policy, random.Random(1))
        return routers[policy]

    return router


async def grant_all(dispatcher: Dispatcher, route: RouteContext | None = None) -> list[Lease]:
    """Batch leases until none is granted at once."""
    leases = []
    while True:
        try:
            leases.append(
                await dispatcher.acquire("sim", Priority.BATCH, route=route, timeout_s=0.05)
            )
        except QueueTimeout:
            return leases


def answered_lines(allowance: WorkerAllowance, count: int) -> tuple[WorkerView, list[OwnLine]]:
    """`count` lines granted on a 4-slot worker read a second ago, each answered (its first
    chunk came); the reading they were granted on."""
    before = worker("http://a", running=0, max_in_flight=4, scraped_at=time.time() - 1)
    lines = [allowance.granted(before) for _ in range(count)]
    for line in lines:
        line.answered()
    return before, lines


def per_worker(leases: list[Lease]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for lease in leases:
        counts[lease.worker.url] = counts.get(lease.worker.url, 0) + 1
    return counts


# --- the allowance and the filter -------------------------------------------------------


@pytest.mark.unit
def test_a_workers_room_is_its_own_spare_below_target(settings):
    settings.BATCH_HEADROOM = 0.1
    allowance = WorkerAllowance()
    assert allowance.room(worker("http://a", running=3, waiting=1)) == 9 - 4
    assert allowance.room(worker("http://a", running=9)) == 0
    assert allowance.room(worker("http://a", running=12)) == -3  # over target: none
    assert allowance.room(worker("http://a", running=2.5)) == 6  # part of a request is one


@pytest.mark.unit
def test_lines_placed_after_the_scrape_use_the_room_and_ending_frees_it(settings):
    settings.BATCH_HEADROOM = 0.0
    allowance = WorkerAllowance()
    scraped = worker("http://a", running=1, max_in_flight=4, scraped_at=time.time() - 1)
    started = [allowance.granted(scraped) for _ in range(3)]
    assert allowance.room(scraped) == 0  # 4 slots: 1 other request, 3 of ours
    allowance.released(scraped, started[0])
    assert allowance.room(scraped) == 1  # that scrape never saw it: its slot is free now


@pytest.mark.unit
def test_our_lines_the_scrape_saw_are_ours_not_interactive_load(settings):
    settings.BATCH_HEADROOM = 0.0
    allowance = WorkerAllowance()
    before, started = answered_lines(allowance, 3)
    # Scraped after they were answered: the worker runs our 3 and 1 interactive request.
    seen = replace(before, running=4, scraped_at=time.time() + 0.001)
    assert allowance.room(seen) == 0
    time.sleep(END_LAG_S + 0.01)
    allowance.released(seen, started[0])  # ended well after that scrape: its slot is free
    assert allowance.room(seen) == 1
    # The next scrape no longer sees it: nothing to add back, nothing double counted.
    later = replace(seen, running=3, scraped_at=time.time() + 0.001)
    assert allowance.room(later) == 1


@pytest.mark.unit
def test_a_line_that_ended_just_after_a_reading_waits_for_the_next_one(settings):
    """The worker drops a line from its counts before its last chunk reaches us: a reading
    taken in between does not hold it. Ended here just after that reading, it is not taken
    for one the reading saw (its slot would be offered twice); the next reading frees it."""
    settings.BATCH_HEADROOM = 0.0
    allowance = WorkerAllowance()
    before, lines = answered_lines(allowance, 3)
    time.sleep(0.002)
    # The worker has ended all 3; the reading, just in, shows only its interactive request.
    reading = replace(before, running=1, scraped_at=time.time() - 0.001)
    for line in lines:
        allowance.released(reading, line)  # their ends reach us now, just after it
    assert allowance.room(reading) == 3  # 4 slots less the interactive one, not 6
    next_reading = replace(reading, scraped_at=time.time() + 0.001)
    assert allowance.room(next_reading) == 3
    assert allowance.lines == {}  # nothing left to count


@pytest.mark.unit
def test_a_line_that_ended_well_after_a_reading_that_held_it_frees_its_slot_at_once(settings):
    settings.BATCH_HEADROOM = 0.0
    allowance = WorkerAllowance()
    before, lines = answered_lines(allowance, 3)
    reading = replace(before, running=4, scraped_at=time.time() + 0.001)  # ours and 1 other
    assert allowance.room(reading) == 0
    allowance.released(reading, lines[0])
    lines[0].ended_at = reading.scraped_at + END_LAG_S + 0.01  # its end came well after
    assert allowance.room(reading) == 1


@pytest.mark.unit
def test_a_line_the_worker_has_not_answered_is_not_taken_for_one_the_scrape_saw(settings):
    """Granted before the scrape began, but its request may not have reached the worker
    then: the scrape's running count need not hold it, so it is not added back."""
    settings.BATCH_HEADROOM = 0.0
    allowance = WorkerAllowance()
    before = worker("http://a", running=0, max_in_flight=4, scraped_at=time.time() - 1)
    lines = [allowance.granted(before) for _ in range(2)]
    lines[0].answered()
    # The scrape counted the answered line and 1 interactive request, not the other line.
    scraped = replace(before, running=2, scraped_at=time.time() + 0.001)
    assert allowance.room(scraped) == 1  # 4 - 2 running + 1 seen of ours - 2 of ours
    time.sleep(0.01)
    lines[1].answered()  # after the scrape: the next one will count it
    assert allowance.room(scraped) == 1
    allowance.released(scraped, lines[1])  # never counted: frees only its own slot
    assert allowance.room(scraped) == 2
    rescraped = replace(scraped, running=2, scraped_at=time.time() + 0.001)
    assert allowance.room(rescraped) == 2  # the answered line is ours, the other gone


@pytest.mark.unit
def test_a_scrape_counts_lines_answered_before_it_asked_that_had_not_ended_when_it_read(settings):
    """A scrape takes time: it began asking at `asked_at`, its reading was in at
    `scraped_at`. A line answered while it asked may be missing from the reading; a line
    ended while it read may be missing too; neither is added back."""
    settings.BATCH_HEADROOM = 0.0
    allowance = WorkerAllowance()
    now = time.time()
    before = worker("http://a", max_in_flight=8, scraped_at=now - 1)
    held, late, ended_early, ended_late = (allowance.granted(before) for _ in range(4))
    for line in (held, ended_early, ended_late):
        line.answered()  # now: before the scrape below began asking
    late.seen_from = now + 15  # answered while it asked
    allowance.released(before, ended_early)
    allowance.released(before, ended_late)
    ended_early.ended_at = now + 15  # ended while it read
    ended_late.ended_at = now + 25  # after its reading was in
    # Its reading: `held`, `ended_late` and one interactive request.
    scraped = replace(before, running=3, asked_at=now + 10, scraped_at=now + 20)
    # 8 slots; on the worker now: `held`, `late` and the interactive one.
    assert allowance.room(scraped) == 5


@pytest.mark.unit
def test_the_allowance_keeps_no_entry_for_a_worker_with_nothing_left_to_count(settings):
    settings.BATCH_HEADROOM = 0.0
    settings.FLEET_STALE_AFTER_S = 0.05
    allowance = WorkerAllowance()
    scraped = worker("http://a", max_in_flight=4, scraped_at=time.time() - 1)
    line = allowance.granted(scraped)
    line.answered()
    allowance.released(scraped, line)
    assert allowance.room(scraped) == 4
    assert "http://a" in allowance.lines  # a scrape under way may count it yet
    assert allowance.room(replace(scraped, scraped_at=time.time() + 0.001)) == 4
    assert allowance.lines == {}
    # A worker gone from the fleet is never asked about again: its entry goes once its
    # lines are older than any fresh snapshot, when another worker takes its first line.
    gone = worker("http://gone", max_in_flight=4, scraped_at=time.time() - 1)
    line = allowance.granted(gone)
    line.answered()
    allowance.released(gone, line)
    time.sleep(0.06)
    allowance.granted(worker("http://new"))
    assert set(allowance.lines) == {"http://new"}


@pytest.mark.unit
def test_the_filter_keeps_only_workers_with_room(settings):
    settings.BATCH_HEADROOM = 0.1
    room = HasBatchRoom(WorkerAllowance())
    assert room.keep(worker("http://a", running=8), SHARED_PREFIX, Load())
    assert not room.keep(worker("http://a", running=9), SHARED_PREFIX, Load())


# --- spot first ---------------------------------------------------------------------------


@pytest.mark.unit
def test_spot_first_rates_spot_workers_only():
    workers = [worker("http://a", spot=True), worker("http://b")]
    assert SpotFirst().scores(workers, SHARED_PREFIX, Load()) == [1.0, 0.0]
    labelled_off = replace(workers[0], labels={"spot": False})
    assert SpotFirst().scores([labelled_off], SHARED_PREFIX, Load()) == [0.0]


@pytest.mark.unit
def test_a_batch_line_takes_a_spot_worker_with_room_over_every_other_score(settings):
    settings.BATCH_HEADROOM = 0.1
    allowance = WorkerAllowance()
    router = for_batch(prefix_aware(random.Random(1)), allowance)
    spot = worker("http://spot", running=6, spot=True)
    idle = [worker(f"http://idle{n}") for n in range(3)]
    # Busier than the others and not the prefix's owner, still first while it has room.
    for n in range(20):
        request = RouteContext("sim", "prefix_aware", prefix_key=f"p{n}", session_key=f"u{n}")
        assert router.route([*idle, spot], request, Load()) == spot
    full = replace(spot, running=9)  # no room: the policy decides among the others
    assert router.route([*idle, full], SHARED_PREFIX, Load()) in idle


@pytest.mark.unit
def test_interactive_routing_ignores_spot_labels_and_batch_room(settings):
    settings.BATCH_HEADROOM = 0.1
    spot = worker("http://spot", running=5, spot=True)
    on_demand = worker("http://on-demand", running=1)
    interactive = least_loaded(random.Random(1))
    batch = for_batch(least_loaded(random.Random(1)), WorkerAllowance())
    assert interactive.route([spot, on_demand], SHARED_PREFIX, Load()) == on_demand
    assert batch.route([spot, on_demand], SHARED_PREFIX, Load()) == spot
    no_room = replace(on_demand, running=9)  # interactive requests still go there
    assert interactive.route([no_room], SHARED_PREFIX, Load()) == no_room
    assert batch.route([no_room], SHARED_PREFIX, Load()) is None


# --- the dispatcher -----------------------------------------------------------------------


@pytest.mark.unit
def test_batch_lines_fill_each_worker_to_its_own_room_however_the_policy_would_pile(settings):
    settings.BATCH_HEADROOM = 0.1
    busy = worker("http://busy", running=6)  # interactive load on one worker
    idle = worker("http://idle")
    dispatcher = Dispatcher(StaticFleet([busy, idle]), routers=seeded())

    async def scenario() -> None:
        # Every line shares one prefix: prefix affinity alone would send them to one worker.
        leases = await grant_all(dispatcher, SHARED_PREFIX)
        assert per_worker(leases) == {"http://busy": 3, "http://idle": 9}
        dispatcher.release(next(lease for lease in leases if lease.worker.url == "http://busy"))
        again = await grant_all(dispatcher, SHARED_PREFIX)
        assert per_worker(again) == {"http://busy": 1}

    asyncio.run(scenario())


@pytest.mark.unit
def test_a_batch_line_without_a_route_is_bound_by_room_too_and_prefers_spot(settings):
    settings.BATCH_HEADROOM = 0.1
    on_demand, spot = worker("http://on-demand"), worker("http://spot", running=4, spot=True)
    dispatcher = Dispatcher(StaticFleet([on_demand, spot]))

    async def scenario() -> None:
        first = [await dispatcher.acquire("sim", Priority.BATCH) for _ in range(5)]
        assert {lease.worker.url for lease in first} == {"http://spot"}  # 9 - 4 = 5 of room
        rest = await grant_all(dispatcher)
        assert per_worker(rest) == {"http://on-demand": 9}

    asyncio.run(scenario())


@pytest.mark.unit
def test_batch_room_is_not_divided_among_gateway_processes_but_interactive_slots_are(settings):
    settings.BATCH_HEADROOM = 0.1
    settings.GATEWAY_PROCESSES = 2
    dispatcher = Dispatcher(StaticFleet([worker("http://a")]))
    other = Dispatcher(StaticFleet([worker("http://a")]))

    async def scenario() -> None:
        assert len(await grant_all(dispatcher)) == 9  # the fleet's room, not 10 / 2
        interactive = []
        with pytest.raises(QueueTimeout):
            while True:
                interactive.append(await other.acquire("sim", timeout_s=0.05))
        assert len(interactive) == 5  # this process's share of the worker's 10 slots

    asyncio.run(scenario())


@pytest.mark.unit
def test_interactive_requests_are_placed_as_before_whatever_the_batch_room(settings):
    settings.BATCH_HEADROOM = 0.1
    over = worker("http://over", running=9)  # no batch room at all
    dispatcher = Dispatcher(StaticFleet([over]))

    async def scenario() -> None:
        leases = [await dispatcher.acquire("sim", route=SHARED_PREFIX) for _ in range(10)]
        assert {lease.worker.url for lease in leases} == {"http://over"}
        assert all(lease.batch_line is None for lease in leases)
        assert dispatcher.batch_allowance.lines == {}
        with pytest.raises(QueueTimeout):
            await dispatcher.acquire("sim", Priority.BATCH, timeout_s=0.05)

    asyncio.run(scenario())


@pytest.mark.unit
@pytest.mark.parametrize("whole", [True, False], ids=["asked-whole", "streamed"])
def test_a_batch_line_is_held_once_its_worker_has_it_whatever_comes_back(settings, whole):
    """Held (counted by a scrape that asks after it) from its first chunk when streamed;
    from when it is sent when asked whole, since nothing comes back before its end: a line
    counted twice for its whole life (ours, and in the worker's own counts) would fill
    only half the room."""
    settings.BATCH_HEADROOM = 0.1
    sent = asyncio.Event()
    reply = asyncio.Event()

    async def answer(request: web.Request) -> web.StreamResponse:
        sent.set()
        await reply.wait()
        if whole:
            return web.json_response(WHOLE_REPLY)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write(b"data: " + json.dumps(STREAMED_CHUNK).encode() + b"\n\n")
        await response.write(b"data: [DONE]\n\n")
        return response

    async def scenario() -> None:
        async with fake_worker(answer, CHAT_PATH) as url:
            dispatcher = Dispatcher(StaticFleet([worker(url)]))
            stream = stream_completion(
                dispatcher, "sim", long_body(4), Priority.BATCH, path=CHAT_PATH, whole=whole
            )
            reading = asyncio.create_task(anext(stream))
            try:
                await asyncio.wait_for(sent.wait(), 5)
                [line] = dispatcher.batch_allowance.lines[url].in_flight
                assert (line.seen_from is not None) is whole  # the worker has it, silent
            finally:
                reply.set()
            await asyncio.wait_for(reading, 5)
            assert line.seen_from is not None
            await stream.aclose()
        await close_http_session()

    asyncio.run(scenario())


@pytest.mark.unit
def test_a_batch_line_asked_whole_that_its_worker_refused_is_not_counted_as_held(settings):
    """Taken as held when sent, it would count, once ended, as a line the next scrape saw,
    and its slot would be offered again on the worker that refused it."""
    settings.BATCH_HEADROOM = 0.1
    settings.UPSTREAM_MAX_ATTEMPTS = 1

    async def refuse(request: web.Request) -> web.StreamResponse:
        return web.json_response({"error": {"message": "overloaded"}}, status=503)

    async def scenario() -> None:
        async with fake_worker(refuse, CHAT_PATH) as url:
            dispatcher = Dispatcher(StaticFleet([worker(url)]))
            stream = stream_completion(
                dispatcher, "sim", long_body(4), Priority.BATCH, path=CHAT_PATH, whole=True
            )
            with pytest.raises(UpstreamError):
                await anext(stream)
            lines = dispatcher.batch_allowance.lines[url]  # it was granted a slot there
            assert not lines.in_flight and not lines.ended
        await close_http_session()

    asyncio.run(scenario())


@pytest.mark.unit
def test_a_batch_line_asked_whole_has_its_own_timeout_for_all_of_it(settings):
    """Not UPSTREAM_REPLY_TIMEOUT_S, an interactive client's: a line may take longer."""
    settings.UPSTREAM_REPLY_TIMEOUT_S = 0.1

    async def slow(request: web.Request) -> web.StreamResponse:
        await asyncio.sleep(0.3)
        return web.json_response(WHOLE_REPLY)

    async def ask(reply_timeout_s: float | None) -> list[dict[str, Any]]:
        async with fake_worker(slow, CHAT_PATH) as url:
            dispatcher = Dispatcher(StaticFleet([worker(url)]))
            stream = stream_completion(
                dispatcher,
                "sim",
                long_body(4),
                Priority.BATCH,
                path=CHAT_PATH,
                whole=True,
                reply_timeout_s=reply_timeout_s,
            )
            try:
                return [chunk async for _, chunk in stream]
            finally:
                await close_http_session()

    with pytest.raises(UpstreamError, match="no whole reply in time"):
        asyncio.run(ask(None))
    [chunk] = asyncio.run(ask(5.0))
    assert chunk["usage"]["completion_tokens"] == 1


@pytest.mark.unit
def test_a_released_batch_line_frees_its_room_and_starts_the_next_waiting_line(settings):
    settings.BATCH_HEADROOM = 0.0
    dispatcher = Dispatcher(StaticFleet([worker("http://a", max_in_flight=2)]))

    async def scenario() -> None:
        leases = [await dispatcher.acquire("sim", Priority.BATCH) for _ in range(2)]
        waiting = asyncio.create_task(dispatcher.acquire("sim", Priority.BATCH, timeout_s=2))
        await asyncio.sleep(0.05)
        assert not waiting.done()
        dispatcher.release(leases[0])
        third = await asyncio.wait_for(waiting, 1)
        assert third.worker.url == "http://a"
        assert dispatcher.batch_allowance.held(third.worker) == 2

    asyncio.run(scenario())


# --- live: two simulators, interactive load on one ------------------------------------------


def long_body(tokens: int) -> dict[str, Any]:
    return {
        "messages": [{"role": "user", "content": "Hello"}],
        "max_tokens": tokens,
        "ignore_eos": True,
    }


async def hold_interactive(url: str, count: int, tokens: int) -> list[asyncio.Task[None]]:
    """`count` long streams straight to one worker: interactive load that took it."""

    async def stream() -> None:
        body = {**long_body(tokens), "model": "sim", "stream": True}
        async with (
            aiohttp.ClientSession() as session,
            session.post(f"{url}/v1/chat/completions", json=body) as response,
        ):
            async for _ in response.content:
                pass

    return [asyncio.create_task(stream()) for _ in range(count)]


@dataclass(frozen=True)
class Sample:
    """The simulators' own running counts, and the batch lines the dispatcher holds on each."""

    busy_running: float
    idle_running: float
    busy_lines: int
    idle_lines: int


@pytest.mark.live
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("whole", [True, False], ids=["asked-whole", "streamed"])
def test_batch_lines_keep_to_each_workers_spare_while_interactive_load_takes_one(settings, whole):
    """The runner's meter and the dispatcher as the batch runner uses them, on a fleet the
    scraper reads every 5 ms (often, so that readings fall between a worker's end of a
    line and ours): one worker carries 6 interactive streams, so its target of 9 leaves 3
    for batch lines, the other 9; every line shares one prefix, whose owner the policy
    alone would favour. The lines each worker runs keep to its spare, within one line (a
    reading's timing); neither worker ever runs past its slots, and the idle one is
    filled. The dispatcher's own count is not bounded here: a line the worker has ended
    is ours until its end reaches us, and a new one may take its slot on the worker
    meanwhile. Before END_LAG_S, a reading taken in between had the worker run 12 of its
    10 slots in one run of four. Lines are asked whole (as a chat line without logprobs
    is), held from when they are sent, or streamed, held from their first chunk."""
    settings.BATCH_HEADROOM = 0.1
    settings.BATCH_MAX_CONCURRENCY = 100
    settings.FLEET_REFRESH_S = 0.05
    deployment = fleet.ensure_deployment("sim", max_in_flight_per_worker=10)
    busy = SimProcess(fixed_ttft_ms=60, fixed_itl_ms=10)
    idle = SimProcess(fixed_ttft_ms=60, fixed_itl_ms=10)
    try:
        for sim in (busy, idle):
            fleet.register_worker(deployment, sim.url, registered_by="test")
        samples = asyncio.run(_batch_beside_interactive(busy.url, idle.url, whole))
    finally:
        busy.stop()
        idle.stop()
    assert len(samples) > 40, samples
    assert max(s.busy_running for s in samples) <= 6 + 3 + 1, samples  # its slots, 10
    assert max(s.idle_running for s in samples) <= 9 + 1, samples
    assert max(s.idle_running for s in samples) >= 7, samples  # the idle worker took lines
    assert max(s.busy_lines for s in samples) >= 1, samples  # and the busy one its spare


async def _batch_beside_interactive(busy: str, idle: str, whole: bool) -> list[Sample]:
    """For 4 s, start lines while the meter allows, as the runner does, beside 6 long
    interactive streams on `busy`; sample every 50 ms."""
    scraper = Scraper()
    view = FleetView()
    meter = BatchMeter(view)
    dispatcher = Dispatcher(view, publisher=None)
    samples: list[Sample] = []
    stop = asyncio.Event()
    async with aiohttp.ClientSession() as session:

        async def scrape() -> None:
            while not stop.is_set():
                await scraper.scrape_once(session)
                await asyncio.sleep(0.005)

        async def running(url: str) -> float:
            async with session.get(f"{url}/metrics") as response:
                for line in (await response.text()).splitlines():
                    if line.startswith("vllm:num_requests_running"):
                        return float(line.rsplit(" ", 1)[1])
            raise AssertionError("no running gauge")

        def lines_on(url: str) -> int:
            return len(dispatcher.batch_allowance.lines.get(url, ()))

        async def sample() -> None:
            while not stop.is_set():
                busy_running, idle_running = await asyncio.gather(running(busy), running(idle))
                sample = Sample(busy_running, idle_running, lines_on(busy), lines_on(idle))
                samples.append(sample)
                await asyncio.sleep(0.05)

        async def line(started: OwnLine) -> None:
            try:
                body = long_body(40)  # 60 ms + 39 x 10 ms
                stream = stream_completion(
                    dispatcher, "sim", body, Priority.BATCH, SHARED_PREFIX, whole=whole
                )
                async for _ in stream:
                    pass
            finally:
                meter.finished_line("sim", started)

        scraping = asyncio.create_task(scrape())
        interactive = await hold_interactive(busy, 6, tokens=4000)
        await asyncio.sleep(0.6)  # scraped: the worker runs 6
        sampling = asyncio.create_task(sample())
        lines: set[asyncio.Task[None]] = set()
        deadline = time.monotonic() + 4
        while time.monotonic() < deadline:
            if await meter.may_start("sim"):
                # Counted as started before its task runs, as the runner does.
                task = asyncio.create_task(line(meter.started_line("sim")))
                lines.add(task)
                task.add_done_callback(lines.discard)
            else:
                await asyncio.sleep(0.01)
        await asyncio.gather(*lines)
        stop.set()
        for task in (*interactive, sampling, scraping):
            task.cancel()
        await asyncio.gather(*interactive, sampling, scraping, return_exceptions=True)
    await close_http_session()
    return samples
