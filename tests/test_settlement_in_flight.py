"""Each event loop counts its own admitted requests (gateway/serving/settlement.py): the
count decides whether a reply's settlement waits for the next worker call, and one loop's
requests (a batch run's, in another thread) say nothing about another loop's."""

import asyncio
import threading

import pytest

from gateway.serving import settlement

pytestmark = pytest.mark.unit


def test_each_event_loop_counts_only_its_own_requests_in_flight():
    counted: dict[str, int] = {}

    async def admit(times: int) -> int:
        for _ in range(times):
            settlement.admitted()
        return settlement.in_flight()

    def other_loop() -> None:
        counted["other thread's loop"] = asyncio.run(admit(2))

    thread = threading.Thread(target=other_loop)
    thread.start()
    thread.join()
    counted["this loop"] = asyncio.run(admit(1))
    counted["a later loop, before admitting"] = asyncio.run(admit(0))
    assert counted == {
        "other thread's loop": 2,
        "this loop": 1,
        "a later loop, before admitting": 0,
    }
