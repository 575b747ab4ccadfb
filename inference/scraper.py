"""Scrape every worker's /health and /metrics each second into the shared fleet snapshot.

A worker leaves rotation after UNHEALTHY_AFTER consecutive failed checks and comes back
after HEALTHY_AFTER consecutive good ones, so one slow scrape does not flap it. A worker
out of rotation while it loads (`starting`, `warm`) has nothing to flap: its health is its
latest check. A `starting` worker is promoted to `ready` only on a check that finds it
healthy, in the same scrape, so the snapshot never shows a worker in rotation that is not
healthy. (Before, a replica that failed its first check while loading was `ready` and
unhealthy for one scrape, and the autoscaler counted it neither as loading nor as capacity.)

A worker in vLLM's sleep mode still answers /health, so each scrape also reads whether it
sleeps: from `vllm:engine_sleep_state{sleep_state="awake"}` on /metrics where vLLM reports
it, and from GET /is_sleeping for workers started with sleep mode (labels `sleep_mode`,
set by the autoscaler's actuators; that endpoint exists only with VLLM_SERVER_DEV_MODE=1).
A sleeping worker is published with `sleeping`, is never routable, and a starting one is
not promoted to ready while it sleeps.
"""

import asyncio
import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import aiohttp
from asgiref.sync import sync_to_async
from django.conf import settings

from foundation.redis_clients import async_redis
from inference import fleet
from inference.models import ModelDeployment, Worker
from inference.snapshot import SNAPSHOT_KEY, WorkerView
from inference.worker_auth import bearer, worker_api_key
from inference.worker_metrics import (
    MetricsReading,
    bucket_delta,
    histogram_quantile,
    parse_metrics,
)

logger = logging.getLogger(__name__)
UNHEALTHY_AFTER = 2
HEALTHY_AFTER = 2
_AWAKE = re.compile(
    r'^vllm:engine_sleep_state\{[^}]*sleep_state="awake"[^}]*\}\s+(\S+)', re.MULTILINE
)


@dataclass
class HealthTrack:
    healthy: bool = False
    observed: bool = False  # the first check decides at once; later ones need a streak
    streak: int = 0  # consecutive results that disagree with `healthy`
    ttft_buckets: dict[float, float] = field(default_factory=dict)
    ttft: tuple[float | None, float | None] = (None, None)
    max_model_len: int | None = None  # asked of /v1/models once, until it answers
    sleeping: bool = False  # in sleep mode at the last scrape that could tell


HealthCallback = Callable[[Worker, bool], None]


class Scraper:
    """Scrapes every live worker (or one deployment's, `deployment_id`); `on_health` is told
    each worker's reading (True: it answered), for callers that time readiness."""

    def __init__(
        self,
        timeout_s: float = 0.8,
        deployment_id: int | None = None,
        on_health: HealthCallback | None = None,
    ) -> None:
        self.timeout = aiohttp.ClientTimeout(total=timeout_s)
        self.tracks: dict[int, HealthTrack] = {}
        self.deployment_id = deployment_id
        self.on_health = on_health

    def live_workers(self) -> list[Worker]:
        workers = Worker.objects.select_related("deployment").exclude(state=Worker.State.DEAD)
        if self.deployment_id is not None:
            workers = workers.filter(deployment_id=self.deployment_id)
        return list(workers)

    async def scrape_once(self, session: aiohttp.ClientSession) -> list[WorkerView]:
        workers = await sync_to_async(self.live_workers)()
        live = {w.pk for w in workers}
        for gone in [pk for pk in self.tracks if pk not in live]:  # pods come and go
            del self.tracks[gone]
        views = await asyncio.gather(*(self._scrape(session, w) for w in workers))
        await self._publish(views)
        return views

    async def _scrape(self, session: aiohttp.ClientSession, worker: Worker) -> WorkerView:
        track = self.tracks.setdefault(worker.pk, HealthTrack())
        asked_at = time.time()  # the reading shows the worker at no earlier time
        reading, error = None, ""
        text = ""
        try:
            kind = worker.deployment.worker_kind
            if kind == ModelDeployment.WorkerKind.OPENAI:
                reading = await self._answers_models(session, worker)
            elif kind == ModelDeployment.WorkerKind.SGLANG:
                reading = await self._answers_health(session, worker)
            else:
                async with session.get(
                    f"{worker.url}/health", timeout=self.timeout, headers=_headers(worker)
                ) as health:
                    if health.status != 200:
                        raise aiohttp.ClientResponseError(
                            health.request_info, (), status=health.status
                        )
                async with session.get(
                    f"{worker.url}/metrics", timeout=self.timeout, headers=_headers(worker)
                ) as metrics:
                    text = await metrics.text()
                if worker.deployment.api_key_env:  # vLLM's --api-key guards /v1 routes only
                    await self._answers_models(session, worker)
                reading = parse_metrics(text)
        except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
            error = f"{type(exc).__name__}: {exc}"
        except Exception as exc:  # anything a worker's answer can provoke: its own failure
            logger.warning("worker %s: its answer could not be read", worker.url, exc_info=True)
            error = f"{type(exc).__name__}: {exc}"
        if reading is not None:
            track.sleeping = await self._sleeping(session, worker, text, track.sleeping)
        await self._update_health(worker, track, ok=reading is not None, error=error)
        if self.on_health is not None:
            self.on_health(worker, reading is not None)
        if reading is not None and track.max_model_len is None:
            track.max_model_len = await self._max_model_len(session, worker)
        if reading is not None:
            delta = bucket_delta(reading.ttft_buckets, track.ttft_buckets)
            if sum(delta.values()) > 0:
                track.ttft = (histogram_quantile(delta, 0.5), histogram_quantile(delta, 0.99))
            track.ttft_buckets = reading.ttft_buckets
        return WorkerView(
            id=worker.pk,
            url=worker.url,
            deployment=worker.deployment.name,
            upstream_model=worker.deployment.upstream_model,
            state=worker.state,
            max_in_flight=worker.deployment.max_in_flight_per_worker,
            labels=worker.labels,
            healthy=track.healthy,
            running=reading.running if reading else 0.0,
            waiting=reading.waiting if reading else 0.0,
            kv_usage=reading.kv_usage if reading else 0.0,
            prefix_hit_rate=(
                reading.prefix_hits / reading.prefix_queries
                if reading and reading.prefix_queries
                else None
            ),
            ttft_p50_s=track.ttft[0],
            ttft_p99_s=track.ttft[1],
            scraped_at=time.time(),
            error=error,
            max_model_len=track.max_model_len,
            sleeping=track.sleeping,
            reports_load=reading.reports_load if reading else True,
            asked_at=asked_at,
        )

    async def _answers_health(
        self, session: aiohttp.ClientSession, worker: Worker
    ) -> MetricsReading:
        """SGLang: healthy while GET /health answers 200 (it answers 503 until the model is
        loaded, and while the scheduler is stuck), load from its /metrics where it runs with
        --enable-metrics (else none, as for any OpenAI-compatible server)."""
        async with session.get(
            f"{worker.url}/health", timeout=self.timeout, headers=_headers(worker)
        ) as health:
            if health.status != 200:
                raise aiohttp.ClientResponseError(health.request_info, (), status=health.status)
        if worker.deployment.api_key_env:  # /health takes no key: prove ours is taken
            return await self._answers_models(session, worker)
        return await self._load(session, worker)

    async def _answers_models(
        self, session: aiohttp.ClientSession, worker: Worker
    ) -> MetricsReading:
        """An OpenAI-compatible server that is not vLLM (SGLang, llama.cpp, TGI, a hosted API)
        has no /health in common with it: it is healthy while GET /v1/models answers 200.
        Its load comes from its /metrics where it has one under a name worker_metrics.py
        knows (SGLang's, TGI's); otherwise it reports none, and the dispatcher's own
        in-flight count bounds it."""
        async with session.get(
            f"{worker.url}/v1/models", timeout=self.timeout, headers=_headers(worker)
        ) as models:
            if models.status != 200:
                raise aiohttp.ClientResponseError(models.request_info, (), status=models.status)
        return await self._load(session, worker)

    async def _load(self, session: aiohttp.ClientSession, worker: Worker) -> MetricsReading:
        """A non-vLLM worker's load from its /metrics, where it has one under names
        worker_metrics.py knows; an empty reading (reports_load False) otherwise."""
        try:
            async with session.get(
                f"{worker.url}/metrics", timeout=self.timeout, headers=_headers(worker)
            ) as metrics:
                text = await metrics.text() if metrics.status == 200 else ""
        except (aiohttp.ClientError, TimeoutError):
            text = ""  # no metrics is no failure: it was healthy above
        try:
            return parse_metrics(text)
        except ValueError:  # not Prometheus text (a hosted API's HTML page, say)
            return MetricsReading()

    async def _sleeping(
        self, session: aiohttp.ClientSession, worker: Worker, metrics: str, last: bool
    ) -> bool:
        """Whether the worker is in sleep mode: its /is_sleeping where it was started with
        sleep mode (the authority, true until a wake is complete), else the sleep-state
        gauge on its /metrics, else awake. A worker that fails to say keeps its last answer."""
        if worker.labels.get("sleep_mode"):
            try:
                url = f"{worker.url}/is_sleeping"
                async with session.get(
                    url, timeout=self.timeout, headers=_headers(worker)
                ) as reply:
                    body = await reply.json(content_type=None) if reply.status == 200 else {}
            except (aiohttp.ClientError, TimeoutError, ValueError):
                return last
            value = body.get("is_sleeping") if isinstance(body, dict) else None
            if isinstance(value, bool):
                return value
        awake = sleep_gauge_awake(metrics)
        return False if awake is None else not awake

    async def _max_model_len(self, session: aiohttp.ClientSession, worker: Worker) -> int | None:
        """The worker's context window from its /v1/models (vLLM reports max_model_len per
        model). A worker that does not say (or fails to) is asked again next scrape."""
        try:
            async with session.get(
                f"{worker.url}/v1/models", timeout=self.timeout, headers=_headers(worker)
            ) as reply:
                body = await reply.json(content_type=None) if reply.status == 200 else {}
        except (aiohttp.ClientError, TimeoutError, ValueError):
            return None
        entries = body.get("data") if isinstance(body, dict) else None
        if not isinstance(entries, list):
            return None
        upstream = worker.deployment.upstream_model
        models = [e for e in entries if isinstance(e, dict)]
        for entry in sorted(models, key=lambda e: e.get("id") != upstream):  # its own first
            value = entry.get("max_model_len")
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                return value
        return None

    async def _update_health(
        self, worker: Worker, track: HealthTrack, ok: bool, error: str
    ) -> None:
        first = not track.observed
        track.observed = True
        track.streak = 0 if ok == track.healthy else track.streak + 1
        loading = worker.state in (Worker.State.STARTING, Worker.State.WARM)
        if first or loading or track.streak >= (HEALTHY_AFTER if ok else UNHEALTHY_AFTER):
            if first or track.healthy != ok:
                level = logging.INFO if ok else logging.WARNING
                detail = f" ({error})" if error else ""
                logger.log(
                    level,
                    "worker %s is %s%s",
                    worker.url,
                    "healthy" if ok else "unhealthy, out of rotation",
                    detail,
                )
            track.healthy, track.streak = ok, 0
        if ok and track.healthy and not track.sleeping and worker.state == Worker.State.STARTING:
            promote = sync_to_async(fleet.set_worker_state)
            await promote(worker, Worker.State.READY, "answers health checks")

    async def _publish(self, views: list[WorkerView]) -> None:
        client = async_redis()
        pipe = client.pipeline(transaction=True)
        pipe.delete(SNAPSHOT_KEY)
        if views:
            pipe.hset(SNAPSHOT_KEY, mapping={str(v.id): v.to_json() for v in views})
        await pipe.execute()

    async def run_forever(self) -> None:
        interval = settings.FLEET_SCRAPE_INTERVAL_S
        async with aiohttp.ClientSession() as session:
            while True:
                started = time.monotonic()
                try:
                    await self.scrape_once(session)
                except Exception:
                    logger.exception("fleet scrape failed; retrying next interval")
                await asyncio.sleep(max(interval - (time.monotonic() - started), 0.05))


def sleep_gauge_awake(metrics: str) -> bool | None:
    """vLLM's `vllm:engine_sleep_state{sleep_state="awake"}`: True awake, False asleep, None
    when the worker does not report it (an older vLLM)."""
    found = _AWAKE.search(metrics)
    if found is None:
        return None
    try:
        return float(found.group(1)) >= 1.0
    except ValueError:
        return None


def _headers(worker: Worker) -> dict[str, str]:
    """The worker's deployment's API key, on every probe (a hosted API guards them all)."""
    deployment = worker.deployment
    return bearer(worker_api_key(deployment.api_key_env, deployment.name))
