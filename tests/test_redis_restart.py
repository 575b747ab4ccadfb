"""After a Redis restart, pooled connections the restart closed are found broken only when
next used; each such command is sent again on a new connection instead of failing its
request (the chaos run's late 503, seconds after the restart had ended)."""

import asyncio
import subprocess
from pathlib import Path

import pytest

from foundation import embedded_redis, redis_clients
from gateway.accounts.quotas import AdmissionRequest, admit
from gateway.accounts.records import QuotaLimits
from gateway.process_state import reset_process_state

WARM_CONNECTIONS = 12


def _restart(process: subprocess.Popen[bytes], url: str, data: Path) -> subprocess.Popen[bytes]:
    process.terminate()
    process.wait(timeout=10)
    port = int(url.rsplit(":", 1)[1].split("/")[0])
    restarted = subprocess.Popen(embedded_redis.redis_server_command(port, data, True))
    embedded_redis.wait_until_ready(url, restarted)
    return restarted


@pytest.mark.live
def test_admissions_and_batched_commands_after_a_restart_all_succeed(tmp_path, settings):
    data = tmp_path / "redis"
    process, url = embedded_redis.start(data)
    settings.REDIS_URL = settings.CACHE_REDIS_URL = url
    reset_process_state()
    limits = QuotaLimits(requests_per_minute=1_000)

    async def scenario() -> tuple[int, int, bytes | str | None]:
        nonlocal process
        client = redis_clients.async_redis()
        # Hold several connections at once, so the pool keeps them all when they return.
        await asyncio.gather(
            *(client.blpop([f"nothing-{n}"], timeout=0.2) for n in range(WARM_CONNECTIONS))
        )
        pooled = len(client.connection_pool._available_connections)
        process = await asyncio.to_thread(_restart, process, url, data)
        admitted = 0
        for _ in range(WARM_CONNECTIONS):  # each may meet one of the broken connections
            request = AdmissionRequest(team_id=7, key_id=None, prompt_tokens=5, max_tokens=5)
            await asyncio.gather(
                admit(limits, request),
                redis_clients.async_redis_batch().execute("INCR", "batched"),
                client.incr("plain"),
            )
            admitted += 1
        return pooled, admitted, await client.get("batched")

    try:
        pooled, admitted, batched = asyncio.run(scenario())
    finally:
        process.terminate()
        process.wait(timeout=10)
        reset_process_state()
    assert pooled >= WARM_CONNECTIONS  # the pool really held connections the restart broke
    assert admitted == WARM_CONNECTIONS
    # Sent once more only when the first try met a dead connection: never counted twice.
    assert batched == str(WARM_CONNECTIONS)
