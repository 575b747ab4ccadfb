"""Consistent hashing with bounded load: which worker a key (a prefix, say) belongs to.

Hashing keys onto a ring of workers keeps most keys where they were when a worker joins or
leaves, so caches stay warm through scaling; capping each worker at (1 + EPSILON) x the
average load keeps one hot key from piling onto its owner (Mirrokni, Thorup and
Zadimoghaddam, "Consistent Hashing with Bounded Loads", 2018).
"""

import bisect
import hashlib
from collections.abc import Sequence
from functools import lru_cache

from inference.snapshot import WorkerView
from scaling.routing.router import Load

# How far above the average load a worker may carry before affinity gives way: 0.25 caps
# any worker at 1.25 x its fair share (the paper above suggests 0.25 as a good trade-off).
EPSILON = 0.25
VIRTUAL_NODES = 64  # points per worker on the ring: keeps the arcs, and so the keys, even


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
