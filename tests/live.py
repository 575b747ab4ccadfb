"""A live gateway (uvicorn) plus a fleet scraper, as separate processes, for API tests."""

import sys

from foundation.embedded_redis import free_port
from tests.children import Child, stop_all, wait_until_serving
from tests.conftest import REPO_ROOT, child_env


class LiveGateway:
    def __init__(self, redis_url: str, **env: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        environment = child_env(
            redis_url, FLEET_SCRAPE_INTERVAL_S="0.3", FLEET_REFRESH_S="0.2", **env
        )
        server = [
            sys.executable,
            "-m",
            "uvicorn",
            "gateway.asgi:application",
            "--port",
            str(self.port),
            "--no-access-log",
        ]
        self.children = [Child(f"gateway :{self.port}", server, REPO_ROOT, environment)]
        try:
            self.children.append(
                Child(
                    f"scraper for :{self.port}",
                    [sys.executable, "manage.py", "scrape_workers"],
                    REPO_ROOT,
                    environment,
                )
            )
        except BaseException:
            self.stop()
            raise
        # Ready once /readyz answers with the scraper still running; if not, both are stopped.
        wait_until_serving(self.children, f"{self.url}/readyz", 30, "the gateway")

    def stop(self) -> None:
        stop_all(self.children)
