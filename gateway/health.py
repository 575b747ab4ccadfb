"""/healthz says the process is alive; /readyz says it can serve (database and Redis answer).

A draining process (SIGTERM, gateway/drain.py) is alive but not ready: /readyz answers 503
at once, without its checks, so a load balancer stops sending it requests.

A separate cache Redis is checked too, but does not decide readiness: without it every
request bypasses the caches and is still served, so taking the gateway out of rotation
would turn a slower platform into an outage. Its failure shows in `checks` and `degraded`.
"""

import asyncio
import logging

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import connection
from django.http import HttpRequest, JsonResponse

from foundation.redis_clients import REDIS_FAILURES, async_cache_redis, async_redis
from gateway.drain import drain
from inference.snapshot import fleet_view

logger = logging.getLogger(__name__)
READY_CHECK_TIMEOUT_S = 2.0


async def healthz(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"status": "ok"})


def _database_answers() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")


async def _check(name: str, probe: "asyncio.Future[object] | object") -> tuple[str, str]:
    try:
        await asyncio.wait_for(probe, READY_CHECK_TIMEOUT_S)  # type: ignore[arg-type]
    except Exception as exc:
        logger.warning("readiness check %s failed: %s: %s", name, type(exc).__name__, exc)
        return name, f"error: {type(exc).__name__} (details in the server log)"
    return name, "ok"


async def readyz(request: HttpRequest) -> JsonResponse:
    if drain.draining:
        return JsonResponse({"status": "not ready", "draining": True}, status=503)

    async def redis_ping() -> None:
        await async_redis().ping()

    async def cache_redis_ping() -> None:
        await async_cache_redis().ping()

    checks = [
        _check("database", sync_to_async(_database_answers)()),
        _check("redis", redis_ping()),
    ]
    if settings.CACHE_REDIS_URL and settings.CACHE_REDIS_URL != settings.REDIS_URL:
        checks.append(_check("cache_redis", cache_redis_ping()))
    results = dict(await asyncio.gather(*checks))
    ready = results["database"] == "ok" and results["redis"] == "ok"
    body: dict[str, object] = {"status": "ready" if ready else "not ready", "checks": results}
    if results.get("cache_redis", "ok") != "ok":
        body["degraded"] = ["cache_redis"]  # served, with every cache bypassed
    if ready:
        # Informational: the gateway can serve (and queue) with no worker in rotation.
        try:
            body["routable_workers"] = sum(w.routable for w in await fleet_view.workers())
        except REDIS_FAILURES as exc:
            return JsonResponse(
                {
                    "status": "not ready",
                    "checks": {
                        **results,
                        "redis": (f"error: {type(exc).__name__} (details in the server log)"),
                    },
                },
                status=503,
            )
    return JsonResponse(body, status=200 if ready else 503)
