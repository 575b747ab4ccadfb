"""Fair queueing across tenants: one FIFO lane per tenant, so a tenant that floods the queue
mostly delays itself.

Which lane is served when a slot frees, in order:
1. only lanes whose tenant may start a request now (not at its concurrency cap); a capped
   tenant's requests wait while others are served;
2. the lane whose tenant holds the fewest slots of this deployment per unit of weight;
3. among those, the lowest virtual time: each lane carries a tag that grows by 1 / weight
   at each grant (start-time fair queueing with unit cost, a virtual-time WFQ); a lane
   that becomes backlogged starts at the current virtual time, so an idle tenant banks
   nothing for later;
4. then the lane that became backlogged first.

Why slots held come first: a request keeps its slot for its whole generation (seconds),
and the dispatcher cannot take it back. Fairness in grants alone (deficit round robin or
WFQ over requests, the first version of this module) lets a flooding tenant take every
slot that frees while another tenant's next request is still on its way (a client's round
trip), so the other tenant slowly loses its share of the slots: in `manage.py
bench_fairness` its P99 TTFT was 2.7 to 3.3x what it was alone. Ordered by slots held per
weight, a tenant below its weighted share of the slots gets the next free one, and
tenants that are all backlogged hold slots in proportion to their weights whatever the
length of their requests (a tenant of long requests gets fewer grants: it holds its slots
longer). Virtual time decides when holdings tie, which is always the case with one slot
(every grant follows a release), so weights also hold there.

Within a lane, first come first served. Which lane a request joins is the caller's
choice: the dispatcher puts every request in one lane when fair queueing is off, which
is plain FIFO.
"""

from collections import deque
from collections.abc import Callable, Collection, Hashable
from dataclasses import dataclass, field
from fractions import Fraction
from itertools import count
from typing import Generic, TypeVar

Item = TypeVar("Item", bound=Hashable)


@dataclass(frozen=True)
class Tenant:
    """Who a request is queued for, in plain values (the gateway builds it from a team).

    key: the lane (one per tenant); weight: its share of the slots relative to other
    backlogged tenants; max_concurrent: the most of its requests holding a slot at once
    across all gateway processes (None: no cap)."""

    key: str
    weight: int = 1
    max_concurrent: int | None = None

    def __post_init__(self) -> None:
        if self.weight < 1:
            raise ValueError(f"tenant {self.key!r}: weight must be at least 1, not {self.weight}")
        if self.max_concurrent is not None and self.max_concurrent < 1:
            raise ValueError(f"tenant {self.key!r}: max_concurrent must be at least 1 or None")


# Requests that name no tenant (internal callers, benchmarks) share one uncapped lane.
ANONYMOUS = Tenant("")


def _nobody_holds(_: str) -> int:
    return 0


def _anyone_may_start(_: Tenant) -> bool:
    return True


@dataclass(eq=False)
class _Lane(Generic[Item]):
    tenant: Tenant  # the latest seen: a changed weight or cap applies from the next request
    tag: Fraction  # virtual time: grows by 1 / weight at each grant
    backlogged_since: int  # order of becoming backlogged, the last tie-break
    items: deque[Item] = field(default_factory=deque)


class FairQueue(Generic[Item]):
    """Items in per-tenant lanes, served in the order the module docstring gives.

    `next()` only looks; `take()` serves (and advances its lane's virtual time);
    `remove()` drops an item that will not be served (cancelled, timed out, failed)."""

    def __init__(self) -> None:
        self._lanes: dict[str, _Lane[Item]] = {}
        self._lane_of: dict[Item, str] = {}
        self._now = Fraction(0)  # virtual time: the tag of the last lane served
        self._arrivals = count()

    def __len__(self) -> int:
        return len(self._lane_of)

    def __contains__(self, item: object) -> bool:
        return item in self._lane_of

    def append(self, item: Item, tenant: Tenant) -> None:
        lane = self._lanes.get(tenant.key)
        if lane is None:
            lane = _Lane(tenant, self._now, next(self._arrivals))
            self._lanes[tenant.key] = lane
        lane.tenant = tenant
        lane.items.append(item)
        self._lane_of[item] = tenant.key

    def next(
        self,
        may_start: Callable[[Tenant], bool] = _anyone_may_start,
        held: Callable[[str], int] = _nobody_holds,
        skip: Collection[Item] = (),
    ) -> Item | None:
        """The item to serve next, without taking it. held(key): slots the tenant holds
        now. skip: items that cannot be served now (each keeps its place; the one behind
        it in its lane stands in). None: no tenant with queued items may start one."""
        heads: list[tuple[_Lane[Item], Item]] = []
        for lane in self._lanes.values():
            if may_start(lane.tenant):
                if not skip:
                    head: Item | None = lane.items[0]
                else:
                    head = next((item for item in lane.items if item not in skip), None)
                if head is not None:
                    heads.append((lane, head))
        if not heads:
            return None

        def order(entry: tuple[_Lane[Item], Item]) -> tuple[Fraction, Fraction, int]:
            lane = entry[0]
            share = Fraction(held(lane.tenant.key), lane.tenant.weight)
            return share, lane.tag, lane.backlogged_since

        return min(heads, key=order)[1]

    def holds_more_than(self, tenant: Tenant, held: Callable[[str], int]) -> bool:
        """Whether another tenant with items queued holds more slots per weight."""
        mine = Fraction(held(tenant.key), tenant.weight)
        return any(
            Fraction(held(key), lane.tenant.weight) > mine
            for key, lane in self._lanes.items()
            if key != tenant.key
        )

    def take(self, item: Item) -> None:
        """Serve `item`, as next() returned it: the head of its lane, or the first behind
        items next() was told to skip."""
        lane = self._lanes[self._lane_of[item]]
        self._now = max(self._now, lane.tag)
        lane.tag += Fraction(1, lane.tenant.weight)
        self._drop(item)

    def remove(self, item: Item) -> None:
        """Drop an item that will not be served; its lane's virtual time does not advance."""
        if item in self._lane_of:
            self._drop(item)

    def _drop(self, item: Item) -> None:
        key = self._lane_of.pop(item)
        lane = self._lanes[key]
        lane.items.remove(item)
        if not lane.items:
            del self._lanes[key]  # an idle tenant starts again at the virtual time then
