"""The concrete filters, scorers and pickers, and the policies a deployment can choose.

- round_robin: every worker in turn, blind to load (the baseline).
- least_loaded: the worker with the fewest requests (scraped running + waiting, plus this
  gateway's own in flight), KV-cache usage breaking near ties.
- prefix_aware (the default): requests sharing a prefix go to one worker, so its prefix
  cache holds that prefix once instead of every worker computing it; consistent hashing
  with bounded load keeps one hot prefix from melting that worker. A returning session
  goes back where it went; load decides whatever neither affinity does.

docs/routing.md explains the choice and what `manage.py bench_routing` measured.
"""

import bisect
import hashlib
import random
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from functools import lru_cache

from django.conf import settings

from inference.snapshot import WorkerView
from scaling.routing.router import BestScore, Filter, Load, Picker, RouteContext, Router, Scorer

# How far above the average load a worker may carry before affinity gives way: 0.25 caps
# any worker at 1.25 x its fair share (Mirrokni, Thorup and Zadimoghaddam, "Consistent
# Hashing with Bounded Loads", 2018, suggest 0.25 as a good trade-off).
EPSILON = 0.25
VIRTUAL_NODES = 64  # points per worker on the ring: keeps the arcs, and so the keys, even


class Healthy(Filter):
    """Answered its last health checks, in a scrape recent enough to believe."""

    def keep(self, worker: WorkerView, request: RouteContext, load: Load) -> bool:
        fresh = time.time() - worker.scraped_at < settings.FLEET_STALE_AFTER_S
        return worker.healthy and fresh


class ServesModel(Filter):
    def keep(self, worker: WorkerView, request: RouteContext, load: Load) -> bool:
        return worker.deployment == request.deployment


class InRotation(Filter):
    """Only `ready` workers take new requests: a draining one finishes its streams and
    leaves; starting, warm and dead ones are not serving."""

    def keep(self, worker: WorkerView, request: RouteContext, load: Load) -> bool:
        return worker.state == "ready"


class BelowInFlightLimit(Filter):
    """Below this process's in-flight target for it: a fuller batch would only queue."""

    def keep(self, worker: WorkerView, request: RouteContext, load: Load) -> bool:
        return load.own(worker) < load.slots(worker)


FILTERS: tuple[Filter, ...] = (Healthy(), ServesModel(), InRotation(), BelowInFlightLimit())


class LoadScorer(Scorer):
    """Fewer requests is better; KV-cache usage (0-1) counts as a fraction of a request, so
    it separates workers with equal counts in favour of the one with more free memory.
    Scaled so the least loaded candidate scores 1 and the most loaded 0."""

    def scores(
        self, workers: Sequence[WorkerView], request: RouteContext, load: Load
    ) -> list[float]:
        values = [load.requests(w) + w.kv_usage for w in workers]
        low, high = min(values), max(values)
        if high - low < 1e-9:
            return [1.0] * len(workers)
        return [(high - value) / (high - low) for value in values]


def _point(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big")


@lru_cache(maxsize=256)
def _ring(urls: tuple[str, ...]) -> tuple[list[int], list[str]]:
    """A hash ring over these workers: sorted points and the worker owning each."""
    points = sorted((_point(f"{url}#{n}"), url) for url in urls for n in range(VIRTUAL_NODES))
    return [p for p, _ in points], [url for _, url in points]


def ring_walk(key: str, urls: Sequence[str]) -> list[str]:
    """The workers in the order a key meets them, clockwise from its hash: the owner first,
    then whoever takes over its keys if the owner leaves (consistent hashing)."""
    unique = tuple(sorted(set(urls)))
    points, owners = _ring(unique)
    start = bisect.bisect(points, _point(key))
    order: dict[str, None] = {}
    for index in range(len(owners)):
        order.setdefault(owners[(start + index) % len(owners)])
        if len(order) == len(unique):
            break
    return list(order)


def bounded_owner(
    key: str, workers: Sequence[WorkerView], load: Load, epsilon: float
) -> WorkerView:
    """Consistent hashing with bounded load: the key's first worker along the ring that
    carries less than the cap (1 + epsilon) x average. A hot key overflows onto the next
    workers along the ring, always the same ones, so their caches warm up to it too."""
    by_url = {w.url: w for w in workers}
    cap = load.capacity(workers, epsilon)
    for url in ring_walk(key, list(by_url)):
        if load.requests(by_url[url]) < cap:
            return by_url[url]
    return min(workers, key=load.requests)  # unreachable: the least loaded is below the cap


class PrefixAffinityScorer(Scorer):
    """1 for the worker the request's prefix maps to (bounded), 0 for the rest."""

    def __init__(self, epsilon: float = EPSILON) -> None:
        self.epsilon = epsilon

    def scores(
        self, workers: Sequence[WorkerView], request: RouteContext, load: Load
    ) -> list[float]:
        if request.prefix_key is None:
            return [0.0] * len(workers)
        owner = bounded_owner(request.prefix_key, workers, load, self.epsilon)
        return [1.0 if w is owner else 0.0 for w in workers]


class SessionAffinityScorer(Scorer):
    """1 for the worker this session used last, if it is a candidate still under the same
    load cap as prefixes; it holds the session's conversation so far in its cache."""

    def __init__(self, epsilon: float = EPSILON, max_sessions: int = 100_000) -> None:
        self.epsilon = epsilon
        self.max_sessions = max_sessions
        self.last_worker: OrderedDict[str, str] = OrderedDict()  # session -> url, LRU order

    def scores(
        self, workers: Sequence[WorkerView], request: RouteContext, load: Load
    ) -> list[float]:
        url = self.last_worker.get(request.session_key or "")
        if url is None:
            return [0.0] * len(workers)
        cap = load.capacity(workers, self.epsilon)
        return [1.0 if w.url == url and load.requests(w) < cap else 0.0 for w in workers]

    def picked(self, worker: WorkerView, request: RouteContext) -> None:
        if request.session_key is None:
            return
        self.last_worker[request.session_key] = worker.url
        self.last_worker.move_to_end(request.session_key)
        while len(self.last_worker) > self.max_sessions:
            self.last_worker.popitem(last=False)


class RoundRobin(Picker):
    """The next worker after the last one picked, in URL order, per deployment; blind to
    scores. Following URLs rather than a counter keeps the rotation fair while workers
    fill up, join and leave."""

    def __init__(self) -> None:
        self.last_url: dict[str, str] = {}

    def pick(
        self, workers: Sequence[WorkerView], totals: Sequence[float], request: RouteContext
    ) -> WorkerView:
        ordered = sorted(workers, key=lambda w: w.url)
        last = self.last_url.get(request.deployment, "")
        worker = next((w for w in ordered if w.url > last), ordered[0])
        self.last_url[request.deployment] = worker.url
        return worker


def round_robin(rng: random.Random | None = None) -> Router:
    return Router("round_robin", FILTERS, [], RoundRobin())


def least_loaded(rng: random.Random | None = None) -> Router:
    return Router("least_loaded", FILTERS, [(LoadScorer(), 1.0)], BestScore(rng))


def prefix_aware(rng: random.Random | None = None, epsilon: float = EPSILON) -> Router:
    """Weights 4, 2, 1 make a strict precedence (each outweighs all below it together):
    a returning session, then its prefix's worker, then the least loaded. Both affinities
    already yield to the load cap, so the precedence never piles onto a busy worker."""
    scorers: list[tuple[Scorer, float]] = [
        (SessionAffinityScorer(epsilon), 4.0),
        (PrefixAffinityScorer(epsilon), 2.0),
        (LoadScorer(), 1.0),
    ]
    return Router("prefix_aware", FILTERS, scorers, BestScore(rng))


POLICIES: dict[str, Callable[..., Router]] = {
    "round_robin": round_robin,
    "least_loaded": least_loaded,
    "prefix_aware": prefix_aware,
}
_routers: dict[str, Router] = {}


def router_for(policy: str) -> Router:
    """This process's router for a policy (one each: routers remember rotation and sessions)."""
    if policy not in POLICIES:
        raise ValueError(f"unknown routing policy {policy!r}; choose from {sorted(POLICIES)}")
    if policy not in _routers:
        _routers[policy] = POLICIES[policy]()
    return _routers[policy]
