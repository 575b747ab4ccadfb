"""Every chat completion says how long it spent in the gateway, not counting the worker:
x-sluice-overhead-ms on the response and sluice_gateway_overhead_seconds in /metrics."""

import http.client
import time

import pytest

from tests.conftest import MESSAGES, live_platform
from tests.sims import SimProcess

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]
WORKER_TTFT_S = 0.5


@pytest.fixture
def slow_worker_platform(redis_url):
    sim = SimProcess(model="sim-upstream", fixed_ttft_ms=WORKER_TTFT_S * 1000, fixed_itl_ms=20)
    try:
        yield from live_platform(redis_url, sim)
    finally:
        sim.stop()


@pytest.mark.parametrize("stream", [False, True])
def test_the_overhead_header_leaves_out_the_time_spent_waiting_for_the_worker(
    slow_worker_platform, stream
):
    client = slow_worker_platform["client"]
    started = time.monotonic()
    raw = client.chat.completions.with_raw_response.create(
        model="small-model", messages=MESSAGES, max_tokens=3, temperature=0.7, stream=stream
    )
    if stream:
        list(raw.parse())  # a stream's headers come with its first chunk: read to the end
    waited_s = time.monotonic() - started
    overhead_ms = float(raw.headers["x-sluice-overhead-ms"])
    assert waited_s >= WORKER_TTFT_S  # the worker's first token alone takes this long
    assert 0 < overhead_ms < (waited_s - WORKER_TTFT_S * 0.8) * 1000


def test_the_overhead_is_a_histogram_in_metrics(slow_worker_platform):
    client = slow_worker_platform["client"]
    client.chat.completions.create(model="small-model", messages=MESSAGES, max_tokens=2)
    connection = http.client.HTTPConnection("127.0.0.1", slow_worker_platform["gateway"].port)
    connection.request("GET", "/metrics")
    text = connection.getresponse().read().decode()
    counts = [
        line
        for line in text.splitlines()
        if line.startswith('sluice_gateway_overhead_seconds_count{model="small-model"}')
    ]
    assert counts and float(counts[0].split()[-1]) >= 2  # the warm-up request and this one
