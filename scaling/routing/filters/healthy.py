"""Drop workers that failed their health checks or whose last scrape is too old to trust.

A worker the scraper has not heard from lately may be gone; sending it a request would
cost the client a connection error or a timeout.
"""

import time

from django.conf import settings

from inference.snapshot import WorkerView
from scaling.routing.router import Filter, Load, RouteContext


class Healthy(Filter):
    """Answered its last health checks, in a scrape recent enough to believe."""

    def keep(self, worker: WorkerView, request: RouteContext, load: Load) -> bool:
        fresh = time.time() - worker.scraped_at < settings.FLEET_STALE_AFTER_S
        return worker.healthy and fresh
