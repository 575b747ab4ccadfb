"""The usage ledger under a real Celery worker, SIGKILLed mid-batch and restarted: every
request is recorded exactly once."""

import asyncio
import os
import signal
import subprocess
import sys
import time
import uuid

import pytest
import redis

from foundation.redis_clients import reset_clients, sync_redis
from gateway.accounts import actions
from gateway.usage.ledger import GROUP, STREAM, UsageEvent, record_usage
from gateway.usage.models import UsageRecord
from tests.conftest import REPO_ROOT, child_env
from tests.waiting import wait_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.live]
EVENTS = 20_000
CELERY = [sys.executable, "-m", "celery", "-A", "gateway"]


def push_events(team_id: int, count: int) -> list[str]:
    """Append events the way the request path does (record_usage), many at a time."""
    ids = [f"chatcmpl-{uuid.uuid4().hex}" for _ in range(count)]

    async def append_all() -> None:
        for start in range(0, count, 500):
            await asyncio.gather(
                *(
                    record_usage(
                        UsageEvent(
                            request_id=request_id,
                            team_id=team_id,
                            api_key_id="abcd1234",
                            model="m",
                            prompt_tokens=10,
                            completion_tokens=5,
                            status="ok",
                            latency_ms=100,
                            ttft_ms=20,
                            worker="http://w",
                            cost_micros=7,
                            created_at=time.time(),
                        )
                    )
                    for request_id in ids[start : start + 500]
                )
            )

    asyncio.run(append_all())
    reset_clients()  # the async pool belonged to that loop
    return ids


def start_celery_worker(env: dict[str, str]) -> subprocess.Popen[bytes]:
    # solo pool: the task runs in the worker process itself, so SIGKILL lands mid-task.
    return subprocess.Popen(
        [
            *CELERY,
            "worker",
            "--pool",
            "solo",
            "--loglevel",
            "INFO",
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
        ],
        cwd=REPO_ROOT,
        env=env,
        start_new_session=True,
    )


def queue_ingest(env: dict[str, str]) -> None:
    subprocess.run(
        [*CELERY, "call", "gateway.usage.tasks.ingest_usage_events"],
        cwd=REPO_ROOT,
        env=env,
        check=True,
        capture_output=True,
    )


def running(worker: subprocess.Popen[bytes]) -> bool:
    """True, or fail at once if the worker has exited (its output is in the test's)."""
    if worker.poll() is not None:
        raise AssertionError(f"the Celery worker exited with code {worker.returncode}")
    return True


def kill_while_holding_a_batch(worker: subprocess.Popen[bytes], client: redis.Redis) -> None:
    """SIGKILL the worker at a moment it has committed some batches and holds another it
    has read but not acknowledged (checked with the worker frozen by SIGSTOP)."""

    def caught() -> bool:
        running(worker)
        os.killpg(worker.pid, signal.SIGSTOP)
        if UsageRecord.objects.exists() and client.xpending(STREAM, GROUP)["pending"] > 0:
            os.killpg(worker.pid, signal.SIGKILL)
            worker.wait(timeout=10)
            return True
        os.killpg(worker.pid, signal.SIGCONT)
        return False

    wait_until(caught, 60, "the worker to be caught holding a batch", poll_s=0.01)


def least_pending_idle_ms(client: redis.Redis) -> int:
    """How long the most recently delivered pending event has been held, in ms."""
    pending = client.xpending_range(STREAM, GROUP, min="-", max="+", count=EVENTS)
    return min(int(entry["time_since_delivered"]) for entry in pending)


def test_a_celery_worker_killed_mid_batch_loses_nothing_and_counts_nothing_twice(redis_url):
    team = actions.create_team("Acme")
    sent = push_events(team.pk, EVENTS)
    env = child_env(redis_url, USAGE_RECLAIM_IDLE_S="1")
    client = sync_redis()

    worker = start_celery_worker(env)
    try:
        queue_ingest(env)
        kill_while_holding_a_batch(worker, client)
    finally:
        if worker.poll() is None:
            os.killpg(worker.pid, signal.SIGKILL)
            worker.wait(timeout=10)
    recorded_at_kill = UsageRecord.objects.count()
    assert recorded_at_kill > 0
    assert client.xpending(STREAM, GROUP)["pending"] > 0  # it died holding a batch

    # The dead consumer's batch becomes reclaimable once idle for USAGE_RECLAIM_IDLE_S.
    wait_until(
        lambda: least_pending_idle_ms(client) >= 1000, 10, "the dead consumer's batch to idle 1 s"
    )
    worker = start_celery_worker(env)
    try:
        queue_ingest(env)
        wait_until(lambda: running(worker) and client.xlen(STREAM) == 0, 60, "the stream to drain")
    finally:
        worker.terminate()
        worker.wait(timeout=10)
    recorded = list(UsageRecord.objects.values_list("request_id", flat=True))
    assert len(recorded) == EVENTS
    assert sorted(recorded) == sorted(sent)
    assert client.xpending(STREAM, GROUP)["pending"] == 0
