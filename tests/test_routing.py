"""Routing: filters, scorers, the three policies, and a deployment's policy through dispatch."""

import asyncio
import math
import random
import time
from collections import Counter

import pytest

from inference import fleet
from inference.deployments import catalog
from inference.models import ModelDeployment
from inference.snapshot import WorkerView
from scaling.routing.dispatcher import Dispatcher
from scaling.routing.filters.below_in_flight_limit import BelowInFlightLimit
from scaling.routing.filters.healthy import Healthy
from scaling.routing.filters.in_rotation import InRotation
from scaling.routing.filters.serves_model import ServesModel
from scaling.routing.hash_ring import EPSILON
from scaling.routing.policies import POLICIES, least_loaded, prefix_aware, round_robin, router_for
from scaling.routing.prefix import LEADING_CHARS, prefix_key, route_context
from scaling.routing.router import Load, RouteContext
from tests.test_fleet import StaticFleet

pytestmark = pytest.mark.unit

REQUEST = RouteContext("sim")


def worker(
    url: str,
    *,
    running: float = 0,
    waiting: float = 0,
    kv_usage: float = 0.0,
    state: str = "ready",
    healthy: bool = True,
    deployment: str = "sim",
    max_in_flight: int = 1000,
    scraped_ago_s: float = 0.0,
) -> WorkerView:
    return WorkerView(
        id=abs(hash(url)) % 10_000,
        url=url,
        deployment=deployment,
        upstream_model="sim",
        state=state,
        max_in_flight=max_in_flight,
        labels={},
        healthy=healthy,
        running=running,
        waiting=waiting,
        kv_usage=kv_usage,
        prefix_hit_rate=None,
        ttft_p50_s=None,
        ttft_p99_s=None,
        scraped_at=time.time() - scraped_ago_s,
        error="",
    )


def fleet_of(count: int) -> list[WorkerView]:
    return [worker(f"http://w{i}") for i in range(count)]


def test_each_filter_drops_what_it_names():
    load = Load({"http://full": 2})
    assert Healthy().keep(worker("http://a"), REQUEST, load)
    assert not Healthy().keep(worker("http://a", healthy=False), REQUEST, load)
    assert not Healthy().keep(worker("http://a", scraped_ago_s=60), REQUEST, load)  # stale
    assert ServesModel().keep(worker("http://a"), REQUEST, load)
    assert not ServesModel().keep(worker("http://a", deployment="other"), REQUEST, load)
    assert InRotation().keep(worker("http://a"), REQUEST, load)
    for state in ("draining", "starting", "warm", "dead"):
        assert not InRotation().keep(worker("http://a", state=state), REQUEST, load)
    assert BelowInFlightLimit().keep(worker("http://full", max_in_flight=3), REQUEST, load)
    assert not BelowInFlightLimit().keep(worker("http://full", max_in_flight=2), REQUEST, load)
    router = least_loaded()
    workers = [worker("http://a", state="draining"), worker("http://b")]
    assert router.route(workers, REQUEST, Load()) == workers[1]
    assert router.route(workers[:1], REQUEST, Load()) is None  # nothing passes: the caller waits


def test_round_robin_cycles_and_skips_a_full_worker():
    router, workers = round_robin(), fleet_of(3)
    picks = [router.route(workers, REQUEST, Load()) for _ in range(6)]
    assert [w.url for w in picks if w] == ["http://w0", "http://w1", "http://w2"] * 2
    full = Load({"http://w0": 1000})  # w0 at its in-flight limit
    picks = [router.route(workers, REQUEST, full) for _ in range(4)]
    assert [w.url for w in picks if w] == ["http://w1", "http://w2"] * 2


def test_least_loaded_counts_scraped_queues_the_gateways_own_in_flight_and_kv_usage():
    router = least_loaded(random.Random(1))
    busy, idle = worker("http://busy", running=5, waiting=2), worker("http://idle", running=1)
    assert router.route([busy, idle], REQUEST, Load()) == idle
    # Between scrapes the gateway's own requests are what changed: 7 sent to the idle one.
    assert router.route([busy, idle], REQUEST, Load({"http://idle": 7})) == busy
    fuller = worker("http://fuller", running=2, kv_usage=0.9)
    emptier = worker("http://emptier", running=2, kv_usage=0.1)
    assert router.route([fuller, emptier], REQUEST, Load()) == emptier


def test_prefix_aware_sends_one_prefix_to_one_worker_and_spreads_prefixes():
    router, workers = prefix_aware(random.Random(1)), fleet_of(4)
    request = RouteContext("sim", prefix_key="tenant-a")
    first = router.route(workers, request, Load())
    assert all(router.route(workers, request, Load()) == first for _ in range(20))
    owners = Counter(
        router.route(workers, RouteContext("sim", prefix_key=f"tenant-{n}"), Load()).url  # type: ignore[union-attr]
        for n in range(400)
    )
    assert len(owners) == 4 and min(owners.values()) >= 400 * 0.15  # even, not exact


def test_a_prefix_keeps_its_worker_when_another_worker_leaves():
    router, workers = prefix_aware(random.Random(1)), fleet_of(5)
    keys = [f"tenant-{n}" for n in range(200)]
    before = {k: router.route(workers, RouteContext("sim", prefix_key=k), Load()) for k in keys}
    gone = workers[0]
    rest = workers[1:]
    after = {k: router.route(rest, RouteContext("sim", prefix_key=k), Load()) for k in keys}
    moved = [k for k in keys if before[k] != after[k]]
    assert all(before[k] == gone for k in moved)  # consistent hashing: only its keys move


def test_a_hot_prefix_at_half_the_traffic_never_puts_more_than_the_bound_on_one_worker():
    rng = random.Random(7)
    router, workers = prefix_aware(random.Random(7)), fleet_of(4)
    in_flight: dict[str, int] = {}
    hot_placed: Counter[str] = Counter()
    for n in range(4000):
        hot = rng.random() < 0.5
        request = RouteContext("sim", prefix_key="hot" if hot else f"cold-{n}")
        chosen = router.route(workers, request, Load(in_flight))
        assert chosen is not None
        in_flight[chosen.url] = in_flight.get(chosen.url, 0) + 1
        hot_placed[chosen.url] += hot
        bound = math.ceil((1 + EPSILON) * sum(in_flight.values()) / len(workers))
        assert in_flight[chosen.url] <= bound  # (1 + epsilon) x average, rounded up
        if rng.random() < 0.45 and (busy := [u for u, c in in_flight.items() if c]):
            in_flight[rng.choice(busy)] -= 1  # requests finish too, in no particular order
    hot_total = sum(hot_placed.values())
    owner_count = hot_placed.most_common(1)[0][1]
    assert owner_count / hot_total > 0.3  # the ring owner serves the hot prefix most ...
    assert owner_count / hot_total < 0.9  # ... and the overflow goes to other workers
    assert sum(1 for c in hot_placed.values() if c) >= 2


def test_a_session_returns_to_its_worker_unless_that_worker_is_over_the_bound():
    router, workers = prefix_aware(random.Random(3)), fleet_of(4)
    first = router.route(workers, RouteContext("sim", prefix_key="a", session_key="u1"), Load())
    assert first is not None
    for n in range(10):  # other prefixes, same user: the conversation's cache wins
        again = router.route(
            workers, RouteContext("sim", prefix_key=f"p{n}", session_key="u1"), Load()
        )
        assert again == first
    overloaded = Load({first.url: 50})
    moved = router.route(workers, RouteContext("sim", prefix_key="a", session_key="u1"), overloaded)
    assert moved is not None and moved != first


def test_ties_are_broken_at_random_reproducibly_with_a_seed():
    workers = fleet_of(3)

    def picks(seed: int) -> list[str]:
        router = least_loaded(random.Random(seed))
        return [router.route(workers, REQUEST, Load()).url for _ in range(60)]  # type: ignore[union-attr]

    assert picks(5) == picks(5)
    assert set(picks(5)) == {w.url for w in workers}  # not always the first in the list


def test_prefix_key_is_the_system_prompt_or_the_first_messages_opening():
    system = {"role": "system", "content": "You are Acme's support bot."}
    one = prefix_key([system, {"role": "user", "content": "Where is my order?"}])
    two = prefix_key([system, {"role": "user", "content": "Cancel it."}])
    assert one == two
    other = prefix_key(
        [
            {"role": "system", "content": "You are Beta's bot."},
            {"role": "user", "content": "Cancel it."},
        ]
    )
    assert other != one
    opening = "x" * LEADING_CHARS
    assert prefix_key([{"role": "user", "content": opening + "one"}]) == prefix_key(
        [{"role": "user", "content": [{"type": "text", "text": opening + "two"}]}]
    )
    context = route_context("sim", "least_loaded", [system], user="alice")
    assert (context.policy, context.prefix_key, context.session_key) == (
        "least_loaded",
        one,
        "alice",
    )


def test_every_policy_a_deployment_can_choose_has_a_router():
    assert set(POLICIES) == set(ModelDeployment.RoutingPolicy.values)
    assert router_for("round_robin") is router_for("round_robin")  # one per process
    with pytest.raises(ValueError, match="unknown routing policy"):
        router_for("fastest")


@pytest.mark.django_db(transaction=True)
def test_the_policy_on_a_deployment_is_honoured_through_the_dispatcher():
    fleet.ensure_deployment("rr-model", routing_policy="round_robin")
    fleet.ensure_deployment("pa-model")  # prefix_aware, the default
    rr_workers = [worker(f"http://rr{i}", deployment="rr-model") for i in range(3)]
    pa_workers = [worker(f"http://pa{i}", deployment="pa-model") for i in range(3)]
    dispatcher = Dispatcher(fleet=StaticFleet(rr_workers + pa_workers))
    messages = [{"role": "system", "content": "shared"}, {"role": "user", "content": "hi"}]

    async def urls(model: str, count: int) -> list[str]:
        info = await catalog.get(model)
        assert info is not None
        route = route_context(model, info.routing_policy, messages)
        picked = []
        for _ in range(count):
            lease = await dispatcher.acquire(model, route=route)
            picked.append(lease.worker.url)
            dispatcher.release(lease)
        return picked

    async def without_route() -> list[str]:
        picked = []
        for _ in range(3):
            lease = await dispatcher.acquire("rr-model")
            picked.append(lease.worker.url)
            dispatcher.release(lease)
        return picked

    assert asyncio.run(urls("rr-model", 6)) == ["http://rr0", "http://rr1", "http://rr2"] * 2
    assert len(set(asyncio.run(urls("pa-model", 6)))) == 1  # one prefix, one worker
    assert asyncio.run(without_route()) == ["http://rr0"] * 3  # no context: least loaded
    with pytest.raises(ValueError, match="route is for"):
        asyncio.run(dispatcher.acquire("pa-model", route=RouteContext("rr-model")))
