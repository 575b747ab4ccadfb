"""Fair queueing across teams (issue 14): the queue order of the dispatcher, then the attack
it stops, a team flooding the queue, against a live gateway."""

import asyncio
from collections.abc import Iterator
from typing import Any

import openai
import pytest

from gateway.accounts import actions
from scaling.routing.dispatcher import Dispatcher, QueueTimeout
from scaling.routing.fair_queue import FairQueue, Tenant
from tests.conftest import live_platform
from tests.sims import SimProcess
from tests.test_fleet import StaticFleet, view
from tests.waiting import async_wait_until

A, B = Tenant("team:a"), Tenant("team:b")


def served_order(queue: FairQueue[str]) -> list[str]:
    order = []
    while (item := queue.next()) is not None:
        queue.take(item)
        order.append(item)
    return order


async def grant_order(
    dispatcher: Dispatcher,
    requests: list[tuple[str, Tenant]],
    cancel: frozenset[str] = frozenset(),
    holder_tenant: Tenant | None = None,
) -> list[str]:
    """Take the last free slot (for holder_tenant), queue `requests` in order (then cancel
    those named in `cancel`), then free one slot at a time: the order of the grants."""
    lease = await dispatcher.acquire("sim", tenant=holder_tenant)
    waiting = {
        asyncio.create_task(dispatcher.acquire("sim", tenant=tenant)): name
        for name, tenant in requests
    }
    await async_wait_until(
        lambda: dispatcher.queue_length("sim") == len(requests), 1, "every request to queue"
    )
    for task in [t for t, name in waiting.items() if name in cancel]:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        del waiting[task]
    assert dispatcher.queue_length("sim") == len(waiting)
    order: list[str] = []
    while waiting:
        dispatcher.release(lease)
        done, _ = await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
        assert len(done) == 1, "one free slot, one grant"
        task = done.pop()
        order.append(waiting.pop(task))
        lease = task.result()
    dispatcher.release(lease)
    return order


def flood_then(victim: int, flood: int = 6) -> list[tuple[str, Tenant]]:
    return [(f"a{i}", A) for i in range(1, flood + 1)] + [
        (f"b{i}", B) for i in range(1, victim + 1)
    ]


@pytest.mark.unit
def test_equal_weights_alternate_between_teams_however_many_one_has_queued() -> None:
    dispatcher = Dispatcher(fleet=StaticFleet([view("http://w1", max_in_flight=1)]))
    order = asyncio.run(grant_order(dispatcher, flood_then(victim=3)))
    assert order == ["a1", "b1", "a2", "b2", "a3", "b3", "a4", "a5", "a6"]


@pytest.mark.unit
def test_weights_one_to_three_give_three_grants_for_every_one() -> None:
    heavy = Tenant("team:b", weight=3)
    queue: FairQueue[str] = FairQueue()
    for i in range(1, 5):
        queue.append(f"a{i}", A)
    for i in range(1, 7):
        queue.append(f"b{i}", heavy)
    assert served_order(queue) == ["a1", "b1", "b2", "b3", "a2", "b4", "b5", "b6", "a3", "a4"]


@pytest.mark.unit
def test_teams_weighted_one_to_three_hold_the_slots_one_to_three() -> None:
    light, heavy = Tenant("team:a", weight=1), Tenant("team:b", weight=3)
    dispatcher = Dispatcher(fleet=StaticFleet([view("http://w1", max_in_flight=4)]))

    async def scenario() -> None:
        holders = [await dispatcher.acquire("sim") for _ in range(4)]
        waiting = [
            asyncio.create_task(dispatcher.acquire("sim", tenant=tenant))
            for tenant in [light] * 8 + [heavy] * 8
        ]
        await async_wait_until(lambda: dispatcher.queue_length("sim") == 16, 1, "all queued")
        for lease in holders:
            dispatcher.release(lease)
        assert dispatcher.tenant_in_flight == {"team:a": 1, "team:b": 3}
        await async_wait_until(lambda: sum(t.done() for t in waiting) == 4, 1, "four grants")
        leases = [t.result() for t in waiting if t.done()]
        dispatcher.release(next(lease for lease in leases if lease.tenant == heavy))
        assert dispatcher.tenant_in_flight == {"team:a": 1, "team:b": 3}  # B's again
        for task in waiting:
            task.cancel()
        await asyncio.gather(*waiting, return_exceptions=True)

    asyncio.run(scenario())


@pytest.mark.unit
def test_a_team_below_its_share_of_the_slots_gets_the_next_free_one() -> None:
    """A holds all four slots and has more queued; B asks once: the next free slot is B's,
    though A's requests queued first (fairness in slots, not only in turns)."""
    dispatcher = Dispatcher(fleet=StaticFleet([view("http://w1", max_in_flight=4)]))
    requests = [("a5", A), ("a6", A), ("b1", B)]

    async def scenario() -> list[str]:
        held = [await dispatcher.acquire("sim", tenant=A) for _ in range(3)]
        order = await grant_order(dispatcher, requests, holder_tenant=A)
        for lease in held:
            dispatcher.release(lease)
        return order

    assert asyncio.run(scenario()) == ["b1", "a5", "a6"]


@pytest.mark.unit
def test_a_team_below_a_flooders_share_borrows_a_slot_and_the_next_release_repays_it() -> None:
    """16 slots lend one: B need not wait for a release while A holds every slot."""
    dispatcher = Dispatcher(fleet=StaticFleet([view("http://w1", max_in_flight=16)]))

    async def scenario() -> None:
        a_leases = [await dispatcher.acquire("sim", tenant=A) for _ in range(16)]
        a_waiting = [asyncio.create_task(dispatcher.acquire("sim", tenant=A)) for _ in "ab"]
        await async_wait_until(lambda: dispatcher.queue_length("sim") == 2, 1, "A's backlog")
        b_first = await dispatcher.acquire("sim", tenant=B, timeout_s=1)  # no release needed
        assert dispatcher.in_flight["http://w1"] == 17
        b_second = asyncio.create_task(dispatcher.acquire("sim", tenant=B))
        await async_wait_until(lambda: dispatcher.queue_length("sim") == 3, 1, "B to wait")

        dispatcher.release(a_leases.pop())  # B is still below A: it borrows again
        assert dispatcher.tenant_in_flight == {"team:a": 15, "team:b": 2}
        dispatcher.release(a_leases.pop())  # back to 16: repaid, nobody starts
        assert dispatcher.in_flight["http://w1"] == 16
        assert dispatcher.queue_length("sim") == 2

        for lease in [*a_leases, b_first, await b_second]:
            dispatcher.release(lease)
        for lease in await asyncio.gather(*a_waiting):
            dispatcher.release(lease)
        assert "http://w1" not in dispatcher.in_flight  # none left: no entry kept

    asyncio.run(scenario())


@pytest.mark.unit
def test_requests_of_one_team_are_served_first_come_first_served() -> None:
    queue: FairQueue[str] = FairQueue()
    for item, tenant in [("a1", A), ("b1", B), ("a2", A), ("a3", A), ("b2", B), ("a4", A)]:
        queue.append(item, tenant)
    order = served_order(queue)
    assert [i for i in order if i.startswith("a")] == ["a1", "a2", "a3", "a4"]
    assert [i for i in order if i.startswith("b")] == ["b1", "b2"]


@pytest.mark.unit
def test_with_fair_queueing_off_the_queue_is_first_come_first_served(
    settings: Any,
) -> None:
    settings.FAIR_QUEUEING = False
    dispatcher = Dispatcher(fleet=StaticFleet([view("http://w1", max_in_flight=1)]))
    order = asyncio.run(grant_order(dispatcher, flood_then(victim=2, flood=3)))
    assert order == ["a1", "a2", "a3", "b1", "b2"]


@pytest.mark.unit
def test_a_team_at_its_concurrency_cap_waits_while_other_teams_are_served() -> None:
    capped = Tenant("team:a", max_concurrent=1)
    dispatcher = Dispatcher(fleet=StaticFleet([view("http://w1", max_in_flight=4)]))

    async def scenario() -> None:
        held = await dispatcher.acquire("sim", tenant=capped)
        a_waits = [asyncio.create_task(dispatcher.acquire("sim", tenant=capped)) for _ in "ab"]
        b_leases = [await dispatcher.acquire("sim", tenant=B) for _ in "ab"]
        assert dispatcher.in_flight["http://w1"] == 3  # a free slot, and still A waits
        assert dispatcher.queue_length("sim") == 2
        assert not any(task.done() for task in a_waits)

        dispatcher.release(held)  # under its cap again: its next request starts
        await async_wait_until(lambda: sum(t.done() for t in a_waits) == 1, 1, "A's next grant")
        assert dispatcher.tenant_in_flight == {"team:a": 1, "team:b": 2}
        for lease in [*b_leases, *(t.result() for t in a_waits if t.done())]:
            dispatcher.release(lease)
        last = await asyncio.gather(*(t for t in a_waits if not t.done()))
        dispatcher.release(last[0])
        assert dispatcher.tenant_in_flight == {}

    asyncio.run(scenario())


@pytest.mark.unit
def test_the_cap_is_shared_among_gateway_processes_and_a_capped_wait_says_why(
    settings: Any,
) -> None:
    settings.GATEWAY_PROCESSES = 2
    capped = Tenant("team:a", max_concurrent=3)  # ceil(3 / 2) = 2 in this process
    dispatcher = Dispatcher(fleet=StaticFleet([view("http://w1", max_in_flight=16)]))

    async def scenario() -> None:
        leases = [await dispatcher.acquire("sim", tenant=capped) for _ in "ab"]
        with pytest.raises(QueueTimeout, match="limit of 3 concurrent requests"):
            await dispatcher.acquire("sim", timeout_s=0.3, tenant=capped)
        assert dispatcher.queue_length("sim") == 0
        for lease in leases:
            dispatcher.release(lease)

    asyncio.run(scenario())


@pytest.mark.unit
def test_a_release_under_the_cap_serves_the_teams_requests_for_other_deployments() -> None:
    capped = Tenant("team:a", max_concurrent=1)
    workers = [view("http://w1", max_in_flight=1), view("http://w2", deployment="other")]
    dispatcher = Dispatcher(fleet=StaticFleet(workers))

    async def scenario() -> None:
        held = await dispatcher.acquire("sim", tenant=capped)
        other = asyncio.create_task(dispatcher.acquire("other", tenant=capped))
        await async_wait_until(lambda: dispatcher.queue_length("other") == 1, 1, "it to queue")
        dispatcher.release(held)
        assert dispatcher.queue_length("other") == 0  # granted by the release itself
        dispatcher.release(await other)

    asyncio.run(scenario())


@pytest.mark.unit
def test_a_cancelled_request_leaves_the_queue_without_costing_its_team_a_turn() -> None:
    dispatcher = Dispatcher(fleet=StaticFleet([view("http://w1", max_in_flight=1)]))
    requests = [("a1", A), ("a2", A), ("b1", B)]
    order = asyncio.run(grant_order(dispatcher, requests, cancel=frozenset({"a1"})))
    assert order == ["a2", "b1"]
    assert "http://w1" not in dispatcher.in_flight  # none left: no entry kept


@pytest.mark.unit
@pytest.mark.parametrize("other_team", [A, B], ids=["same team", "another team"])
def test_a_retry_kept_off_the_worker_it_failed_on_does_not_hold_that_workers_slot_from_others(
    other_team: Tenant,
) -> None:
    """Two one-slot workers, both busy; the request on w1 fails and is retried away from w1
    while w2 stays busy. The next request takes w1's free slot rather than waiting behind
    the retry (it waited until its queue timeout), and the retry, keeping its place, gets
    the next slot it may use before a request that came after it."""
    dispatcher = Dispatcher(
        fleet=StaticFleet([view("http://w1", max_in_flight=1), view("http://w2", max_in_flight=1)])
    )

    async def scenario() -> tuple[bool, bool, bool]:
        first = await dispatcher.acquire("sim", tenant=A)
        second = await dispatcher.acquire("sim", tenant=other_team)  # w2: both busy now
        dispatcher.release(first)  # its request failed before its first token
        retry = asyncio.ensure_future(
            dispatcher.acquire("sim", tenant=A, exclude=frozenset({first.worker.url}), timeout_s=5)
        )
        await asyncio.sleep(0)  # the retry queues first
        other = await dispatcher.acquire("sim", tenant=other_team, timeout_s=2)
        retry_waited = not retry.done()
        later = asyncio.ensure_future(dispatcher.acquire("sim", tenant=A, timeout_s=5))
        await asyncio.sleep(0)
        dispatcher.release(second)  # w2 frees: the retry's, not the later request's
        retried = await retry
        later.cancel()
        return other.worker.url == first.worker.url, retry_waited, retried.worker == second.worker

    assert asyncio.run(scenario()) == (True, True, True)


# The attack, live: one team floods a deployment's queue, another sends a few requests.


@pytest.fixture
def two_slot_platform(redis_url: str) -> Iterator[dict[str, Any]]:
    """One worker of fixed latency (about 0.5 s a request) behind two slots."""
    sim = SimProcess(model="sim-upstream", fixed_ttft_ms=300, fixed_itl_ms=20)
    try:
        yield from live_platform(
            redis_url, sim, requests_per_minute=1000, max_in_flight_per_worker=2
        )
    finally:
        sim.stop()


@pytest.mark.live
@pytest.mark.django_db(transaction=True)
def test_a_team_flooding_the_queue_does_not_make_another_team_wait_behind_its_backlog(
    two_slot_platform: dict[str, Any],
) -> None:
    """Team A queues 16 requests on two slots; once its first is answered, team B sends two.
    FIFO serves B after all of A's; fair queueing serves B within A's next few."""
    platform = two_slot_platform
    victim = actions.create_team("Victim", requests_per_minute=1000, tokens_per_minute=100_000)
    keys = {"A": platform["key"], "B": actions.issue_api_key(victim).plaintext}
    base_url = platform["client"].base_url
    finished: list[str] = []

    async def ask(team: str, number: int) -> None:
        client = openai.AsyncOpenAI(base_url=base_url, api_key=keys[team], max_retries=0)
        async with client:
            reply = await client.chat.completions.create(
                model="small-model",
                messages=[{"role": "user", "content": f"Request {number} of team {team}"}],
                max_tokens=10,
                temperature=1.0,  # sampled: no cache, no coalescing, every request queues
                timeout=60,
            )
        assert reply.choices[0].message.content
        finished.append(team)

    async def attack() -> None:
        flood = [asyncio.create_task(ask("A", n)) for n in range(16)]
        await asyncio.wait(flood, return_when=asyncio.FIRST_COMPLETED)  # A's backlog is queued
        await asyncio.gather(*flood, ask("B", 1), ask("B", 2))

    asyncio.run(attack())
    a_done_before_b = finished[: max(i for i, team in enumerate(finished) if team == "B")]
    # FIFO: all 16 of A's are done first. Fair: B gets every other free slot (A's first two
    # were served before B arrived, and A may have one turn ahead of B's at each release).
    assert a_done_before_b.count("A") <= 8, finished
