"""Prometheus /metrics for this gateway process (queue length, in-flight per worker).

Each gateway process reports its own dispatcher; Prometheus sums across processes. Set
METRICS_BEARER_TOKEN to require a token (worker addresses are internal information).
"""

import hmac
import ipaddress
from collections.abc import Iterator

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from prometheus_client import generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from foundation.metrics import registry
from gateway.serving.completion import dispatcher


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
        for worker, count in sorted(dispatcher.in_flight.items()):
            in_flight.add_metric([worker], count)
        yield in_flight


registry.register(DispatcherCollector())


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
    return HttpResponse(generate_latest(registry), content_type="text/plain; version=0.0.4")
