"""Carrying out a decision's wakes and sleeps (vLLM's sleep mode), and recording what happened.

A decision names the replicas to wake (sleeping warm ones being promoted come first in
line, before any new start) and to put to sleep (warm ones). Each is an HTTP call that
takes seconds, so a decision's wakes run side by side in threads; the database is touched
only here, in the loop's thread.

Failures change the decision as carried out, which is what the diary row records:
- a replica that does not wake is stopped, and if it was being promoted a new replica is
  started in its place (the step up still happens, at cold-start speed);
- a replica that does not go to sleep stays warm and awake, and is marked (labels
  `sleep_mode` false) so it is not asked again every tick.

Each worker's labels carry `asleep` (what the autoscaler last did); the scraper's
`sleeping` (what the worker itself says) is what routing and the next decision read.
"""

import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import TypeVar

from inference.models import Worker
from scaling.autoscale.actuators import Actuator, ActuatorError
from scaling.autoscale.types import Decision

logger = logging.getLogger(__name__)
T = TypeVar("T")


def wake(actuator: Actuator, decision: Decision, workers: dict[int, Worker]) -> Decision:
    """Wake decision.wake side by side; returns the decision as it will be carried out."""
    if not decision.wake:
        return decision
    results = _each(actuator.wake_replica, [workers[i] for i in decision.wake])
    woken, failed = [], {}
    for worker_id, (took, error) in zip(decision.wake, results, strict=True):
        if error is None:
            set_asleep(workers[worker_id], False)
            woken.append(f"{worker_id} in {took:.1f} s")
        else:
            failed[worker_id] = error
            logger.warning("could not wake %s: %s", workers[worker_id].url, error)
    notes = [f"woke {', '.join(woken)}"] if woken else []
    if not failed:
        return replace(decision, reason=f"{decision.reason}; {'; '.join(notes)}")
    replaced = [i for i in failed if i in decision.promote]
    notes += [f"wake of {i} failed ({error}): stopped" for i, error in failed.items()]
    if replaced:
        notes.append(f"start {len(replaced)} in place of the replica that would not wake")
    return replace(
        decision,
        promote=tuple(i for i in decision.promote if i not in failed),
        wake=tuple(i for i in decision.wake if i not in failed),
        start=decision.start + len(replaced),
        stop=decision.stop + tuple(i for i in failed if i not in decision.stop),
        reason=f"{decision.reason}; {'; '.join(notes)}",
    )


def sleep(actuator: Actuator, decision: Decision, workers: dict[int, Worker]) -> Decision:
    """Put decision.sleep to sleep side by side (they are out of traffic by now)."""
    if not decision.sleep:
        return decision
    results = _each(actuator.sleep_replica, [workers[i] for i in decision.sleep])
    slept, failed = [], []
    for worker_id, (_, error) in zip(decision.sleep, results, strict=True):
        worker = workers[worker_id]
        if error is None:
            set_asleep(worker, True)
            slept.append(worker_id)
            continue
        logger.warning("could not put %s to sleep: %s", worker.url, error)
        _set_labels(worker, sleep_mode=False)
        failed.append(f"sleep of {worker_id} failed ({error}): kept warm, awake")
    if not failed:
        return decision
    return replace(decision, sleep=tuple(slept), reason=f"{decision.reason}; {'; '.join(failed)}")


def set_asleep(worker: Worker, asleep: bool) -> None:
    _set_labels(worker, asleep=asleep)


def _set_labels(worker: Worker, **changes: object) -> None:
    worker.labels = {**worker.labels, **changes}
    worker.save(update_fields=["labels"])


def _each(call: Callable[[Worker], T], workers: list[Worker]) -> list[tuple[T | None, str | None]]:
    """call(worker) for each, side by side: (its result, None) or (None, the error)."""

    def one(worker: Worker) -> tuple[T | None, str | None]:
        try:
            return call(worker), None
        except ActuatorError as exc:
            return None, str(exc)

    with ThreadPoolExecutor(max_workers=len(workers)) as pool:
        return list(pool.map(one, workers))
