"""The routing policies a deployment can choose, assembled from filters, scorers and pickers.

- round_robin: every worker in turn, blind to load (the baseline).
- least_loaded: the worker with the fewest requests (scraped running + waiting, plus this
  gateway's own in flight), KV-cache usage breaking near ties.
- prefix_aware (the default): requests sharing a prefix go to one worker, so its prefix
  cache holds that prefix once instead of every worker computing it; consistent hashing
  with bounded load keeps one hot prefix from melting that worker. A returning session
  goes back where it went; load decides whatever neither affinity does.

Batch lines use their deployment's policy made for batch (`for_batch`): only workers with
batch room of their own, spot workers first.

The parts live one per module in scaling/routing/filters/, scorers/ and pickers/ (the shape
of llm-d's scheduler); this module only chooses and weighs them. docs/routing.md explains
the choice and what `manage.py bench_routing` measured.
"""

import random
from collections.abc import Callable

from scaling.routing.batch_meter import WorkerAllowance
from scaling.routing.filters.below_in_flight_limit import BelowInFlightLimit
from scaling.routing.filters.has_batch_room import HasBatchRoom
from scaling.routing.filters.healthy import Healthy
from scaling.routing.filters.in_rotation import InRotation
from scaling.routing.filters.serves_model import ServesModel
from scaling.routing.hash_ring import EPSILON
from scaling.routing.pickers.best_score import BestScore
from scaling.routing.pickers.round_robin import RoundRobin
from scaling.routing.router import Filter, Router, Scorer
from scaling.routing.scorers.load import LoadScorer
from scaling.routing.scorers.prefix_affinity import PrefixAffinityScorer
from scaling.routing.scorers.session_affinity import SessionAffinityScorer
from scaling.routing.scorers.spot_first import SpotFirst

FILTERS: tuple[Filter, ...] = (Healthy(), ServesModel(), InRotation(), BelowInFlightLimit())


def round_robin() -> Router:
    """No scores and no randomness: the rotation alone picks."""
    return Router("round_robin", FILTERS, [], RoundRobin())


def least_loaded(rng: random.Random | None = None) -> Router:
    """rng breaks ties between equally loaded workers (a seeded one repeats a run)."""
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


def for_batch(router: Router, allowance: WorkerAllowance) -> Router:
    """A policy as batch lines use it: its filters, scorers and picker, plus HasBatchRoom
    (a line goes only to a worker with spare capacity of its own, by `allowance`) and
    SpotFirst weighted above all the policy's scorers together, so a spot worker with room
    takes a batch line before any on-demand one and the policy decides among equals.
    RoundRobin ignores scores: a round_robin deployment's lines go round the workers with
    room, spot or not. The scorers are the policy's own objects (sessions are shared)."""
    top = 1.0 + sum(weight for _, weight in router.scorers)
    return Router(
        f"{router.name}+batch",
        [*router.filters, HasBatchRoom(allowance)],
        [(SpotFirst(), top), *router.scorers],
        router.picker,
    )


POLICIES: dict[str, Callable[..., Router]] = {
    "round_robin": round_robin,
    "least_loaded": least_loaded,
    "prefix_aware": prefix_aware,
}
_routers: dict[str, Router] = {}


def _known(policy: str) -> Callable[..., Router]:
    if policy not in POLICIES:
        raise ValueError(f"unknown routing policy {policy!r}; choose from {sorted(POLICIES)}")
    return POLICIES[policy]


def new_router(policy: str, rng: random.Random | None = None) -> Router:
    """A fresh router for a policy. rng breaks ties between equally scored workers, so a
    seeded one makes a benchmark repeatable; round_robin never ties and takes none."""
    factory = _known(policy)
    return factory() if factory is round_robin else factory(rng)


def router_for(policy: str) -> Router:
    """This process's router for a policy (one each: routers remember rotation and sessions)."""
    factory = _known(policy)
    if policy not in _routers:
        _routers[policy] = factory()
    return _routers[policy]
