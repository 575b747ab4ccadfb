import asyncio
import json
import random
import socket
import time
from typing import Any

import pytest
import redis
import redis.asyncio
from asgiref.sync import async_to_sync

from foundation.embedded_redis import free_port
from foundation.redis_clients import reset_clients
from gateway.accounts import quotas
from gateway.accounts.quota_usage import read_team_usage
from gateway.accounts.quotas import (
    AdmissionRequest,
    AdmissionUnavailable,
    MaxTokensOverCap,
    QuotaExceeded,
    admit,
    month_of,
    reconcile,
)
from gateway.accounts.records import QuotaLimits
from gateway.serving import settlement
from tests.conftest import child_env, start_worker

admit_sync = async_to_sync(admit)
reconcile_sync = async_to_sync(reconcile)


def request(team_id=1, prompt=10, max_tokens=10, cost=0, key_id="k1"):
    return AdmissionRequest(team_id, key_id, prompt, max_tokens, cost)


def usage(team_id, limits):
    return {item.limit: item.used for item in read_team_usage(team_id, limits)}


@pytest.mark.live
def test_200_concurrent_admissions_from_two_processes_against_rpm_50_admit_exactly_50(
    redis_url,
):
    start_at = time.time() + 2.0
    args = ["--team", "7", "--rpm", "50", "--count", "100", "--start-at", str(start_at)]
    workers = [start_worker("admit_burst.py", args, child_env(redis_url)) for _ in range(2)]
    reports = []
    for worker in workers:
        out, err = worker.communicate(timeout=60)
        assert worker.returncode == 0, err
        reports.append(json.loads(out.strip().splitlines()[-1]))
    assert sum(r["admitted"] for r in reports) == 50
    retry_afters = [wait for r in reports for wait in r["retry_after"]]
    assert len(retry_afters) == 150
    assert all(55 < wait <= 60 for wait in retry_afters)
    assert usage(7, QuotaLimits(requests_per_minute=50))["requests_per_minute"] == 50


@pytest.mark.live
def test_concurrent_reservations_never_exceed_the_tpm_limit():
    limits = QuotaLimits(tokens_per_minute=5_000)
    rng = random.Random(7)
    sizes = [rng.randint(50, 400) for _ in range(120)]

    async def run() -> list[int]:
        async def one(size: int) -> int:
            try:
                await admit(limits, request(prompt=size // 2, max_tokens=size - size // 2))
            except QuotaExceeded:
                return 0
            return size

        return await asyncio.gather(*(one(s) for s in sizes))

    admitted = async_to_sync(run)()
    assert sum(admitted) <= 5_000
    assert sum(admitted) > 5_000 - max(sizes)  # it admitted until the limit was really near
    assert usage(1, limits)["tokens_per_minute"] == sum(admitted)


@pytest.mark.live
def test_reconcile_returns_unused_tokens_to_every_counter():
    limits = QuotaLimits(tokens_per_minute=1_000, tokens_per_month=10_000)
    first = admit_sync(limits, request(prompt=100, max_tokens=700, cost=800))
    with pytest.raises(QuotaExceeded) as rejected:
        admit_sync(limits, request(prompt=100, max_tokens=200))
    assert rejected.value.limit == "tokens_per_minute"
    reconcile_sync(first, used_tokens=150, used_cost_micros=150)
    admit_sync(limits, request(prompt=100, max_tokens=200))
    used = usage(1, limits)
    assert used["tokens_per_minute"] == 450
    assert used["tokens_per_month"] == 450
    assert used["budget_per_month_micros"] == 150


@pytest.mark.live
def test_reconcile_charges_what_was_really_used_when_it_exceeds_the_estimate():
    limits = QuotaLimits(tokens_per_minute=1_000)
    reservation = admit_sync(limits, request(prompt=10, max_tokens=10))
    reconcile_sync(reservation, used_tokens=35, used_cost_micros=0)
    assert usage(1, limits)["tokens_per_minute"] == 35


@pytest.mark.live
def test_a_rejected_request_changes_no_counter():
    limits = QuotaLimits(requests_per_minute=100, tokens_per_minute=100)
    admit_sync(limits, request(prompt=40, max_tokens=40))
    before = usage(1, limits)
    with pytest.raises(QuotaExceeded):
        admit_sync(limits, request(prompt=20, max_tokens=20))
    assert usage(1, limits) == before


@pytest.mark.live
def test_a_bucket_a_window_and_a_second_older_than_the_cutoff_still_ages_out(redis_url):
    """A window's key outlives its last write by 61 s, so the oldest second not yet aged
    can lag the cutoff by 61 s. Writes at t and t + 59 leave it so at t + 120 while the key
    lives: that bucket must age out (it once stayed counted, and a limit of 1 then refused
    every request as never passing, for as long as the team kept sending)."""
    limits = QuotaLimits(requests_per_minute=1)
    key = quotas.team_counter_keys(1, month_of(time.time())[0])["requests_per_minute"]
    client = redis.Redis.from_url(redis_url)
    for _ in range(3):  # until the script runs in the second the state was written for
        now = int(client.time()[0])
        state: Any = {
            now - 120: 1,
            now - 61: 1,
            "sum": 2,
            "from": now - 120,
            "last": now - 61,
        }
        client.delete(key)
        client.hset(key, mapping=state)
        client.expire(key, 5)
        try:
            admit_sync(limits, request())
            admitted = True
        except QuotaExceeded:
            admitted = False
        if int(client.time()[0]) == now:
            break
    assert admitted
    assert usage(1, limits)["requests_per_minute"] == 1
    assert not client.hexists(key, now - 120)


@pytest.mark.live
def test_retry_after_is_accurate_to_the_second():
    limits = QuotaLimits(requests_per_minute=1)
    admit_sync(limits, request())
    # The sleeps here are the test: time passes, and the promised retry time must hold.
    time.sleep(1.5)  # the window's first request is now 1.5 s old
    with pytest.raises(QuotaExceeded) as rejected:
        admit_sync(limits, request())
    retry_after = rejected.value.retry_after_s
    assert retry_after is not None
    assert 57.0 <= retry_after <= 59.0
    passes_at = time.monotonic() + retry_after
    time.sleep(max(passes_at - time.monotonic() - 1.0, 0))
    with pytest.raises(QuotaExceeded):
        admit_sync(limits, request())  # one second early: still refused
    time.sleep(max(passes_at - time.monotonic() + 0.05, 0))
    admit_sync(limits, request())  # just after the promised time: admitted


@pytest.mark.live
def test_monthly_tokens_refuse_until_the_next_calendar_month():
    limits = QuotaLimits(tokens_per_month=100)
    admit_sync(limits, request(prompt=50, max_tokens=50))
    with pytest.raises(QuotaExceeded) as rejected:
        admit_sync(limits, request(prompt=1, max_tokens=1))
    _, next_month = month_of(time.time())
    assert rejected.value.limit == "tokens_per_month"
    assert rejected.value.retry_after_s == pytest.approx(next_month - time.time(), abs=2)


@pytest.mark.live
def test_monthly_budget_refuses_a_request_whose_cost_would_exceed_it():
    limits = QuotaLimits(budget_per_month_micros=1_000_000)
    admit_sync(limits, request(cost=900_000))
    with pytest.raises(QuotaExceeded) as rejected:
        admit_sync(limits, request(cost=200_000))
    assert rejected.value.limit == "budget_per_month"


@pytest.mark.live
def test_a_request_larger_than_a_limit_can_never_pass():
    with pytest.raises(QuotaExceeded) as rejected:
        admit_sync(QuotaLimits(tokens_per_minute=100), request(prompt=60, max_tokens=60))
    assert rejected.value.retry_after_s is None


@pytest.mark.live
def test_max_tokens_above_the_team_cap_is_refused_before_reserving():
    limits = QuotaLimits(max_tokens_cap=256, requests_per_minute=10)
    with pytest.raises(MaxTokensOverCap, match="256"):
        admit_sync(limits, request(max_tokens=257))
    assert usage(1, limits)["requests_per_minute"] == 0


@pytest.mark.live
def test_per_key_rpm_limits_only_that_key():
    limits = QuotaLimits(requests_per_minute=100)
    for _ in range(2):
        admit_sync(limits, request(key_id="slow"), key_rpm=2)
    with pytest.raises(QuotaExceeded) as rejected:
        admit_sync(limits, request(key_id="slow"), key_rpm=2)
    assert rejected.value.limit == "key_requests_per_minute"
    admit_sync(limits, request(key_id="other"), key_rpm=2)


@pytest.mark.live
def test_teams_do_not_share_counters():
    limits = QuotaLimits(requests_per_minute=1)
    admit_sync(limits, request(team_id=1))
    admit_sync(limits, request(team_id=2))


@pytest.mark.live
def test_remaining_figures_for_rate_limit_headers():
    limits = QuotaLimits(requests_per_minute=10, tokens_per_minute=1_000)
    reservation = admit_sync(limits, request(prompt=100, max_tokens=100))
    assert reservation.state.remaining_requests == 9
    assert reservation.state.remaining_tokens == 800
    assert 59 <= reservation.state.reset_requests_s <= 60


@pytest.fixture
def silent_server():
    """Accepts TCP connections and never answers, like a hung Redis."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(16)
        yield server.getsockname()[1]


@pytest.mark.unit
@pytest.mark.parametrize("situation", ["refused", "hung"])
def test_admission_fails_closed_and_fast_when_redis_is_unreachable(
    settings, silent_server, situation
):
    port = free_port() if situation == "refused" else silent_server
    settings.REDIS_URL = f"redis://127.0.0.1:{port}/0"
    reset_clients()
    started = time.monotonic()
    with pytest.raises(AdmissionUnavailable):
        admit_sync(QuotaLimits(requests_per_minute=10), request())
    assert time.monotonic() - started < 2.0


@pytest.mark.live
def test_a_reconcile_run_twice_gives_unused_tokens_back_once():
    limits = QuotaLimits(tokens_per_minute=1_000, tokens_per_month=10_000)
    reservation = admit_sync(limits, request(prompt=100, max_tokens=700, cost=800))
    reconcile_sync(reservation, used_tokens=150, used_cost_micros=150)
    # Settlement's retry after a timeout, when Redis had run the first one anyway (its
    # reply read too late), or redis-py's resend on a new connection.
    reconcile_sync(reservation, used_tokens=150, used_cost_micros=150)
    used = usage(1, limits)
    assert used["tokens_per_minute"] == 150
    assert used["tokens_per_month"] == 150
    assert used["budget_per_month_micros"] == 150


@pytest.mark.live
def test_a_caller_gone_while_its_admission_is_in_redis_gets_its_tokens_given_back(settings):
    """Redis busy (a slow script ahead in line) when the client hangs up: the admission
    script still runs once Redis is free, and nothing would settle what it reserved. Its
    tokens come back; the request still counts toward requests per minute."""
    limits = QuotaLimits(requests_per_minute=100, tokens_per_minute=10_000)

    async def leave_mid_admission() -> None:
        busy = redis.asyncio.Redis.from_url(settings.REDIS_URL)
        await busy.ping()
        await admit(limits, request(prompt=1, max_tokens=1))  # the script loaded, warm pool
        await reconcile(await admit(limits, request(prompt=1, max_tokens=1)), 0, 0)
        blocking = asyncio.ensure_future(busy.eval(BUSY_FOR_HALF_A_SECOND, 0))
        await asyncio.sleep(0.1)  # the script is running: Redis reads nothing else
        admitting = asyncio.ensure_future(admit(limits, request(prompt=100, max_tokens=900)))
        await asyncio.sleep(0.1)  # its command sent, waiting behind the script
        admitting.cancel()
        await blocking
        await asyncio.sleep(0.3)  # the admission runs, then what it reserved is given back
        await busy.aclose()
        assert admitting.cancelled()

    async_to_sync(leave_mid_admission)()
    used = usage(1, limits)
    assert used["requests_per_minute"] == 3
    assert used["tokens_per_minute"] == 2  # the first request's, never settled here


@pytest.mark.live
def test_a_give_back_started_as_the_server_shuts_down_is_waited_for(settings):
    """The give-back of a caller that left mid-admission is work that outlives its request,
    like a bill sent beside its reply: the shutdown's settlement wait finishes it. Left to
    the loop's end, it was cancelled before it ran, and the reservation stayed charged."""
    limits = QuotaLimits(requests_per_minute=100, tokens_per_minute=10_000)
    left = request(prompt=100, max_tokens=900)

    async def shut_down_as_the_reply_arrives() -> None:
        charged = await admit(limits, left)
        # What the abandoned admission's reply hands over: admitted, in this second bucket.
        reply = [1, charged.bucket_second, 0, 0, 0, 0]
        quotas._give_back_if_admitted(left, limits, charged.month, reply)
        await settlement.finish_background(5)  # the ASGI lifespan's shutdown step

    asyncio.run(shut_down_as_the_reply_arrives())  # cancels whatever is left at its end
    assert usage(1, limits)["tokens_per_minute"] == 0


BUSY_FOR_HALF_A_SECOND = """
local start = os.clock()
while os.clock() - start < 0.5 do end
return 1
"""
