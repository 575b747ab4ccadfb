"""Which worker gets a request: filter, then score, then pick.

A router is three kinds of small parts, each with one base class here and its concrete
kinds one per module in filters/, scorers/ and pickers/, put together by policies.py
(the shape of llm-d's scheduler):

- a Filter says yes or no to one worker (healthy? below its in-flight limit?);
- a Scorer rates every candidate left from 0 (worst) to 1 (best) on one concern (load,
  prefix affinity, session affinity); the router adds the ratings up by weight;
- a Picker turns the weighted totals into one worker (best total, ties broken at random).

The dispatcher decides *when* a request gets a worker (it queues while every worker is
full); the router decides *which*. Routers keep a little state of their own (a
round-robin position, where sessions went), so each gateway process holds one per policy.
"""

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from inference.snapshot import WorkerView


@dataclass(frozen=True)
class RouteContext:
    """What routing knows of one request, computed once when it is admitted.

    prefix_key groups requests whose prompts start alike (scaling/routing/prefix.py), so they can
    land where those leading tokens are already in a prefix cache; session_key (the OpenAI
    `user` field) groups one user's requests, whose conversation history is cached too.
    """

    deployment: str
    policy: str = "prefix_aware"
    prefix_key: str | None = None
    session_key: str | None = None


def _own_limit(worker: WorkerView) -> int:
    return worker.max_in_flight


@dataclass(frozen=True)
class Load:
    """This gateway process's own requests per worker, next to the scraped figures.

    The scrape is up to a second old; `in_flight` changes at every grant and release, so
    adding it to the scraped queue lets the next request see the one just sent (an
    optimistic update between scrapes). `slots` is the most this process may have in
    flight on a worker (the dispatcher's share of the deployment's target).
    """

    in_flight: Mapping[str, int] = field(default_factory=dict)
    slots: Callable[[WorkerView], int] = _own_limit

    def own(self, worker: WorkerView) -> int:
        return self.in_flight.get(worker.url, 0)

    def requests(self, worker: WorkerView) -> float:
        """Requests on the worker: what it reported running and waiting, plus ours.

        Ours that the last scrape already saw count twice; that bias is the same on every
        worker when they carry alike, and it errs towards spreading, never towards piling on.
        """
        return worker.running + worker.waiting + self.own(worker)

    def capacity(self, workers: Sequence[WorkerView], epsilon: float) -> float:
        """The bounded-load cap: (1 + epsilon) x the average load once this request is
        placed, rounded up. Some candidate is always below it (the least loaded one is at
        or below the average), so a walk along a hash ring always finds a worker."""
        total = sum(self.requests(w) for w in workers) + 1
        return math.ceil((1 + epsilon) * total / len(workers))


class Filter:
    """Keeps or drops one worker; every filter must keep a worker for it to be scored."""

    def keep(self, worker: WorkerView, request: RouteContext, load: Load) -> bool:
        raise NotImplementedError


class Scorer:
    """Rates the candidates on one concern, each from 0 (worst) to 1 (best)."""

    def scores(
        self, workers: Sequence[WorkerView], request: RouteContext, load: Load
    ) -> list[float]:
        raise NotImplementedError

    def picked(self, worker: WorkerView, request: RouteContext) -> None:
        """Told the router's final choice, for scorers that learn from it (sessions)."""


class Picker:
    """Turns weighted score totals (one per candidate, same order) into one worker."""

    def pick(
        self, workers: Sequence[WorkerView], totals: Sequence[float], request: RouteContext
    ) -> WorkerView:
        raise NotImplementedError


@dataclass
class Router:
    """Filters, then weighted scores, then a pick. None: no worker passed the filters."""

    name: str
    filters: Sequence[Filter]
    scorers: Sequence[tuple[Scorer, float]]  # (scorer, weight)
    picker: Picker

    def candidates(
        self, workers: Sequence[WorkerView], request: RouteContext, load: Load
    ) -> list[WorkerView]:
        return [w for w in workers if all(f.keep(w, request, load) for f in self.filters)]

    def totals(
        self, workers: Sequence[WorkerView], request: RouteContext, load: Load
    ) -> list[float]:
        totals = [0.0] * len(workers)
        for scorer, weight in self.scorers:
            for index, score in enumerate(scorer.scores(workers, request, load)):
                totals[index] += weight * score
        return totals

    def route(
        self, workers: Sequence[WorkerView], request: RouteContext, load: Load
    ) -> WorkerView | None:
        candidates = self.candidates(workers, request, load)
        if not candidates:
            return None
        worker = self.picker.pick(candidates, self.totals(candidates, request, load), request)
        for scorer, _ in self.scorers:
            scorer.picked(worker, request)
        return worker
