"""Prometheus /metrics for this gateway process (queue length, in-flight per worker), and
the platform-wide figures it reads from Redis at scrape time.

Each gateway process reports its own dispatcher; Prometheus sums across processes. The
figures from Redis are the same whichever process answers, so take one (max by label),
never the sum: `sluice_queue_depth{deployment}` (the dispatch queues of every gateway
process, summed; scaling/routing/queue_depth.py), `sluice_autoscaler_ticks_total` and
`sluice_autoscaler_decisions_total{deployment,action}` (the autoscaler loop runs in its own
process and counts in Redis; scaling/autoscale/status.py). When Redis does not answer they
are left out. Set METRICS_BEARER_TOKEN to require a token (worker addresses are internal
information).
"""

import hmac
import ipaddress
import logging
from collections.abc import Iterator, Sequence

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.http import HttpRequest, HttpResponse
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from foundation.metrics import registry
from foundation.redis_clients import REDIS_FAILURES, async_redis
from gateway.serving.completion import dispatcher
from inference.snapshot import fleet_view
from scaling.autoscale.status import aread_stats
from scaling.routing.queue_depth import aread_depths

logger = logging.getLogger(__name__)


class DispatcherCollector(Collector):
    def collect(self) -> Iterator[Metric]:
        queue = GaugeMetricFamily(
            "sluice_queue_length", "Requests waiting for a worker slot", labels=["deployment"]
        )
        for deployment in sorted(dispatcher.queues):
            queue.add_metric([deployment], dispatcher.queue_length(deployment))
        yield queue
        in_flight = GaugeMetricFamily(
            "sluice_worker_in_flight", "Requests this gateway has in flight", labels=["worker"]
        )
        # Every worker in the fleet (0 when idle), and any this process still holds a slot
        # on: none of a worker gone and done with (pods come and go, and their URLs).
        for worker in sorted(fleet_view.cached_urls() | dispatcher.in_flight.keys()):
            in_flight.add_metric([worker], dispatcher.in_flight.get(worker, 0))
        yield in_flight


registry.register(DispatcherCollector())


class FixedCollector(Collector):
    """Families already read (from Redis, by the async view) for one scrape."""

    def __init__(self, families: Sequence[Metric]) -> None:
        self.families = families

    def collect(self) -> Iterator[Metric]:
        yield from self.families


async def shared_families() -> list[Metric]:
    """The platform-wide figures in Redis; none when Redis does not answer."""
    try:
        client = async_redis()
        depths = await aread_depths(client)
        stats = await aread_stats(client)
    except (*REDIS_FAILURES, ImproperlyConfigured) as exc:
        logger.warning("/metrics: the figures kept in Redis are left out: %s", exc)
        return []
    depth = GaugeMetricFamily(
        "sluice_queue_depth",
        "Requests waiting in the gateways' dispatch queues for a worker slot, summed over "
        "gateway processes (every process reports the same figure)",
        labels=["deployment"],
    )
    for deployment, n in sorted(depths.items()):
        depth.add_metric([deployment], n)
    ticks = CounterMetricFamily(
        "sluice_autoscaler_ticks", "Ticks the autoscaler loop's leader has taken"
    )
    ticks.add_metric([], stats.ticks)
    decisions = CounterMetricFamily(
        "sluice_autoscaler_decisions",
        "Autoscaler decisions by deployment and action (up, down, hold, warm, drain), one per "
        "deployment per tick, recorded in the diary or not",
        labels=["deployment", "action"],
    )
    for (deployment, action), n in sorted(stats.decisions.items()):
        decisions.add_metric([deployment, action], n)
    return [depth, ticks, decisions]


def _from_loopback(request: HttpRequest) -> bool:
    try:
        return ipaddress.ip_address(request.META.get("REMOTE_ADDR") or "").is_loopback
    except ValueError:
        return False


async def metrics(request: HttpRequest) -> HttpResponse:
    """Prometheus text. Without METRICS_BEARER_TOKEN only this host may read it: the
    figures name teams' models, workers and traffic."""
    token: str = settings.METRICS_BEARER_TOKEN
    if not token and not _from_loopback(request):
        return HttpResponse(
            "metrics are served to this host only; set METRICS_BEARER_TOKEN to scrape them "
            "from elsewhere\n",
            status=403,
            content_type="text/plain",
        )
    if token:
        sent = request.headers.get("Authorization", "")
        if not hmac.compare_digest(sent.encode(), f"Bearer {token}".encode()):
            return HttpResponse(
                "metrics need 'Authorization: Bearer <METRICS_BEARER_TOKEN>'\n",
                status=401,
                content_type="text/plain",
            )
    shared = CollectorRegistry(auto_describe=False)
    shared.register(FixedCollector(await shared_families()))
    body = generate_latest(registry) + generate_latest(shared)
    return HttpResponse(body, content_type="text/plain; version=0.0.4")
