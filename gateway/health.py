"""/healthz says the process is alive; /readyz says it can serve (database and Redis answer)."""

import asyncio
import logging

from asgiref.sync import sync_to_async
from django.db import connection
from django.http import HttpRequest, JsonResponse

from foundation.redis_clients import REDIS_FAILURES, async_redis
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
    async def redis_ping() -> None:
        await async_redis().ping()

    results = dict(
        await asyncio.gather(
            _check("database", sync_to_async(_database_answers)()),
            _check("redis", redis_ping()),
        )
    )
    ready = all(value == "ok" for value in results.values())
    body: dict[str, object] = {"status": "ready" if ready else "not ready", "checks": results}
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
