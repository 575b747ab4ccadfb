"""Which workers a decision touches: promotions, drains, the warm pool and safe stops.

Pure functions over FleetState. The invariants the tests hold them to:
- a worker that is loading (starting, or warm and not yet healthy) is never stopped;
- a worker is stopped only after it was drained and a scrape taken after the drain shows
  no streams in flight (so a request routed just before the drain is never cut off).
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
    warm ones that finished loading, then warm ones still loading (ahead of a cold start)."""
    if count <= 0:
        return ()
    draining = sorted(fleet.in_state(DRAINING), key=lambda w: -w.in_flight)
    warm = sorted(fleet.in_state(WARM), key=lambda w: (not w.healthy, w.since))
    return tuple(w.id for w in [*draining, *warm][:count])


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
    """Keep warm_pool replicas warm: drained replicas refill it before anything starts;
    drained replicas beyond it are stopped; excess warm replicas stop once loaded."""
    taken = set(decision.promote)
    warm = [w for w in fleet.in_state(WARM) if w.id not in taken]
    idle = [w.id for w in fleet.workers if w.id not in taken and w.managed and drained(w)]
    short = max(policy.warm_pool - len(warm), 0)
    to_warm, stop = tuple(idle[:short]), tuple(idle[short:])
    start_warm = short - len(to_warm)
    excess = len(warm) - policy.warm_pool
    if excess > 0:
        loaded = sorted(
            (w for w in warm if w.healthy and w.managed and w.in_flight == 0),
            key=lambda w: -w.since,
        )
        stop += tuple(w.id for w in loaded[:excess])
    if not (to_warm or stop or start_warm):
        return decision
    action = decision.action
    if action == "hold":
        action = "warm" if (to_warm or start_warm or excess > 0) else "drain"
    note = _pool_note(to_warm, start_warm, stop)
    return replace(
        decision,
        action=action,
        to_warm=to_warm,
        start_warm=start_warm,
        stop=decision.stop + stop,
        spot=policy.spot,
        reason=f"{decision.reason}; {note}",
    )


def _pool_note(to_warm: tuple[int, ...], start_warm: int, stop: tuple[int, ...]) -> str:
    parts = []
    if to_warm:
        parts.append(f"drained {list(to_warm)} kept warm")
    if start_warm:
        parts.append(f"start {start_warm} for the warm pool")
    if stop:
        parts.append(f"stop {list(stop)} (idle, not loading)")
    return ", ".join(parts)
