"""Which workers a decision touches: promotions, drains, the warm pool and safe stops.

Pure functions over FleetState. The invariants the tests hold them to:
- a worker that is loading (starting, or warm and not yet healthy) is never stopped;
- a worker is stopped only after it was drained and a scrape taken after the drain shows
  no streams in flight (so a request routed just before the drain is never cut off);
- a worker is put to sleep only while out of traffic (warm, or drained and idle), and a
  sleeping one is woken before it is promoted.
"""

from dataclasses import replace

from scaling.autoscale.types import (
    DRAINING,
    READY,
    WARM,
    Decision,
    FleetState,
    PolicySpec,
    WorkerState,
)


def promotions(fleet: FleetState, count: int) -> tuple[int, ...]:
    """Cheapest capacity first: draining replicas (loaded, in memory) are put back, then
    warm ones that finished loading, then sleeping ones (woken in seconds), then warm ones
    still loading (ahead of a cold start)."""
    if count <= 0:
        return ()
    draining = sorted(fleet.in_state(DRAINING), key=lambda w: -w.in_flight)
    warm = sorted(fleet.in_state(WARM), key=lambda w: (_warm_rank(w), w.since))
    return tuple(w.id for w in [*draining, *warm][:count])


def _warm_rank(worker: WorkerState) -> int:
    if not worker.healthy:
        return 2  # still loading (or not answering): minutes, perhaps
    return 1 if worker.asleep else 0


def wakes(fleet: FleetState, promote: tuple[int, ...]) -> tuple[int, ...]:
    """The promoted workers that must be woken from sleep mode first."""
    asleep = {w.id for w in fleet.workers if w.asleep}
    return tuple(i for i in promote if i in asleep)


def pick_drains(fleet: FleetState, count: int) -> tuple[int, ...]:
    """Ready replicas with the fewest streams first (they drain soonest), newest first on a
    tie. Starting replicas are never picked (they are loading), nor workers no actuator
    started (SLUICE_WORKERS, the admin): the autoscaler could not stop them."""
    if count <= 0:
        return ()
    ready = sorted(
        (w for w in fleet.in_state(READY) if w.managed), key=lambda w: (w.in_flight, -w.since)
    )
    return tuple(w.id for w in ready[:count])


def drained(worker: WorkerState) -> bool:
    """Safe to stop: draining, reachable, and idle in a scrape taken after the drain began."""
    return (
        worker.state == DRAINING
        and worker.healthy
        and worker.in_flight == 0
        and worker.observed_at > worker.since
    )


def with_warm_pool(policy: PolicySpec, fleet: FleetState, decision: Decision) -> Decision:
    """Keep warm_pool replicas warm: drained replicas refill it before anything starts (none
    is started while a drain in progress can fill the slot); drained replicas beyond it are
    stopped; excess warm replicas stop once loaded. With warm_sleeps, warm replicas able to
    sleep are put to sleep (drained ones as they join)."""
    taken = set(decision.promote)
    warm = [w for w in fleet.in_state(WARM) if w.id not in taken]
    idle = [w for w in fleet.workers if w.id not in taken and w.managed and drained(w)]
    short = max(policy.warm_pool - len(warm), 0)
    joining = idle[:short]
    to_warm, stop = tuple(w.id for w in joining), tuple(w.id for w in idle[short:])
    # A replica draining now (or from this decision) will refill the pool once idle, which
    # beats a cold start: none is started for a slot it can take.
    idle_ids = {w.id for w in idle}
    coming = len(decision.drain) + sum(
        1
        for w in fleet.in_state(DRAINING)
        if w.managed and w.id not in taken and w.id not in idle_ids
    )
    start_warm = max(short - len(to_warm) - coming, 0)
    excess = len(warm) - policy.warm_pool
    if excess > 0:
        loaded = sorted(
            (w for w in warm if w.healthy and w.managed and w.in_flight == 0),
            key=lambda w: -w.since,
        )
        stop += tuple(w.id for w in loaded[:excess])
    sleep, wake = _pool_sleep(policy, joining, [w for w in warm if w.id not in stop])
    if not (to_warm or stop or start_warm or sleep or wake):
        return decision
    action = decision.action
    if action == "hold":
        pool_work = to_warm or start_warm or excess > 0 or sleep or wake
        action = "warm" if pool_work else "drain"
    note = _pool_note(to_warm, start_warm, stop, sleep, wake)
    return replace(
        decision,
        action=action,
        to_warm=to_warm,
        start_warm=start_warm,
        stop=decision.stop + stop,
        sleep=decision.sleep + sleep,
        wake=decision.wake + wake,
        spot=policy.spot,
        reason=f"{decision.reason}; {note}",
    )


def _pool_sleep(
    policy: PolicySpec, joining: list[WorkerState], warm: list[WorkerState]
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(sleep, wake). With warm_sleeps, every pool member able to sleep goes to sleep once
    loaded and idle; without (the policy was changed), sleeping members are woken."""
    kept = [w for w in warm if w.managed and w.healthy]
    if policy.warm_sleeps:
        able = [w for w in [*joining, *kept] if w.can_sleep and not w.asleep]
        return tuple(w.id for w in able if w.in_flight == 0), ()
    return (), tuple(w.id for w in kept if w.asleep)


def _pool_note(
    to_warm: tuple[int, ...],
    start_warm: int,
    stop: tuple[int, ...],
    sleep: tuple[int, ...] = (),
    wake: tuple[int, ...] = (),
) -> str:
    parts = []
    if to_warm:
        parts.append(f"drained {list(to_warm)} kept warm")
    if sleep:
        parts.append(f"sleep {list(sleep)} (warm, no GPU memory)")
    if wake:
        parts.append(f"wake {list(wake)} (the warm pool is kept awake)")
    if start_warm:
        parts.append(f"start {start_warm} for the warm pool")
    if stop:
        parts.append(f"stop {list(stop)} (idle, not loading)")
    return ", ".join(parts)
