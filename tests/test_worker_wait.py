"""Bookkeeping waits for a request to have called its worker, a deadline at the latest
(foundation/worker_wait.py)."""

import asyncio
import functools

import pytest

from foundation import worker_wait


async def _ran_by(trigger: str) -> tuple[list[int], list[int]]:
    """Which callbacks had run before the trigger, and after it."""
    ran: list[int] = []
    for number in range(3):
        worker_wait.at_next_moment(functools.partial(ran.append, number))
    await asyncio.sleep(0.002)
    before = list(ran)
    if trigger == "worker call":
        worker_wait.waiting_on_worker()
        await asyncio.sleep(0)
    else:
        await asyncio.sleep(worker_wait.DEADLINE_S * 5)
    return before, ran


@pytest.mark.unit
@pytest.mark.parametrize("trigger", ["worker call", "deadline"])
def test_waiting_callbacks_run_once_at_a_worker_call_or_by_the_deadline(trigger):
    assert asyncio.run(_ran_by(trigger)) == ([], [0, 1, 2])


@pytest.mark.unit
def test_a_worker_call_runs_only_what_waited_before_it():
    async def scenario() -> list[str]:
        ran: list[str] = []
        worker_wait.at_next_moment(lambda: ran.append("first"))
        worker_wait.waiting_on_worker()
        await asyncio.sleep(0)
        worker_wait.at_next_moment(lambda: ran.append("second"))
        await asyncio.sleep(0)
        return ran

    assert asyncio.run(scenario()) == ["first"]
