"""A live gateway (uvicorn) plus a fleet scraper, as separate processes, for API tests."""

import subprocess
import sys

from foundation.embedded_redis import free_port
from tests.conftest import REPO_ROOT, child_env
from tests.sims import wait_until_answers


class LiveGateway:
    def __init__(self, redis_url: str, **env: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        environment = child_env(
            redis_url, FLEET_SCRAPE_INTERVAL_S="0.3", FLEET_REFRESH_S="0.2", **env
        )
        self.processes = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "uvicorn",
                    "gateway.asgi:application",
                    "--port",
                    str(self.port),
                    "--no-access-log",
                ],
                cwd=REPO_ROOT,
                env=environment,
            ),
            subprocess.Popen(
                [sys.executable, "manage.py", "scrape_workers"], cwd=REPO_ROOT, env=environment
            ),
        ]
        try:
            wait_until_answers(f"{self.url}/readyz", 30, "gateway")
        except RuntimeError:
            self.stop()  # leave no server behind a failed start
            raise

    def stop(self) -> None:
        for process in self.processes:
            process.terminate()
        for process in self.processes:
            process.wait(timeout=10)
