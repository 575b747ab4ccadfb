"""The batch meter: batch lines start only while the fleet has spare capacity, counting
the runner's own lines once whether or not the last scrape saw them."""

import asyncio
import time
from dataclasses import replace

import pytest

from inference.snapshot import WorkerView
from scaling.routing.batch_meter import END_LAG_S, BatchMeter, spare_slots
from tests.test_fleet import StaticFleet, view

pytestmark = pytest.mark.unit


def worker(url: str, max_in_flight: int, running: float, waiting: float = 0.0) -> WorkerView:
    return replace(
        view(url, deployment="m"),
        max_in_flight=max_in_flight,
        running=running,
        waiting=waiting,
        scraped_at=time.time(),
    )


def test_spare_slots_leave_the_headroom_and_count_what_workers_run_and_queue():
    workers = [worker("http://a", 10, running=3), worker("http://b", 10, running=2, waiting=1)]
    assert spare_slots(workers, headroom=0.2) == (8 - 3) + (8 - 3)
    busy = [worker("http://a", 10, running=9, waiting=4), worker("http://b", 10, running=1)]
    assert spare_slots(busy, headroom=0.2) == (8 - 13) + (8 - 1)  # one over target offsets


def test_lines_started_after_the_scrape_are_not_counted_as_spare_again(settings):
    settings.BATCH_HEADROOM = 0.0
    settings.BATCH_MAX_CONCURRENCY = 100
    meter = BatchMeter(StaticFleet([worker("http://a", 4, running=0)]))

    async def start_while_allowed() -> int:
        started = 0
        while await meter.may_start("m"):
            meter.started_line("m")
            started += 1
        return started

    # The scrape saw an idle worker with 4 slots: 4 lines, not one more, until it is
    # scraped again, however often the meter is asked.
    assert asyncio.run(start_while_allowed()) == 4
    assert asyncio.run(start_while_allowed()) == 0


def test_the_runners_lines_the_scrape_saw_are_its_own_not_interactive_load(settings):
    settings.BATCH_HEADROOM = 0.0
    settings.BATCH_MAX_CONCURRENCY = 100
    fleet = StaticFleet([])
    meter = BatchMeter(fleet)
    started = [meter.started_line("m") for _ in range(3)]
    # Scraped after those 3 started: the worker runs them, nothing else.
    fleet._workers = [
        replace(worker("http://a", 4, running=3), scraped_at=started[-1].started_at + 0.001)
    ]
    assert asyncio.run(meter.may_start("m"))  # 3 own + 1 spare: a fourth may start
    time.sleep(0.01)  # after the scrape
    meter.started_line("m")
    assert not asyncio.run(meter.may_start("m"))
    # Interactive requests arrive: the worker now runs 3 of ours and 3 others.
    fleet._workers = [replace(worker("http://a", 4, running=6), scraped_at=time.time() + 1)]
    assert not asyncio.run(meter.may_start("m"))
    for line in started:
        meter.finished_line("m", line)
    assert not asyncio.run(meter.may_start("m"))  # still over target: wait for a scrape


@pytest.mark.django_db  # whether the deployment scales from zero (it does not here)
def test_no_routable_worker_means_no_line_starts(settings):
    meter = BatchMeter(StaticFleet([]))
    assert not asyncio.run(meter.may_start("m"))
    assert asyncio.run(meter.may_start("m", in_process=True))  # the built-in embedder


def test_lines_the_scrape_saw_that_have_ended_since_free_their_slots(settings):
    settings.BATCH_HEADROOM = 0.0
    settings.BATCH_MAX_CONCURRENCY = 100
    fleet = StaticFleet([])
    meter = BatchMeter(fleet)
    started = [meter.started_line("m") for _ in range(4)]
    fleet._workers = [
        replace(worker("http://a", 4, running=4), scraped_at=started[-1].started_at + 0.001)
    ]
    assert not asyncio.run(meter.may_start("m"))  # full, all of it ours
    time.sleep(END_LAG_S + 0.01)
    for line in started[:2]:
        meter.finished_line("m", line)  # two end before the next scrape
    assert asyncio.run(meter.may_start("m"))
    meter.started_line("m")
    assert asyncio.run(meter.may_start("m"))
    meter.started_line("m")
    assert not asyncio.run(meter.may_start("m"))  # their two slots, and no more
