"""A live gateway (uvicorn) plus a fleet scraper, as separate processes, for API tests."""

import subprocess
import sys
import time
import urllib.request

from gateway.embedded_redis import free_port
from tests.conftest import REPO_ROOT, child_env


class LiveGateway:
    def __init__(self, redis_url: str, **env: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        environment = child_env(redis_url, FLEET_SCRAPE_INTERVAL_S="0.3", FLEET_REFRESH_S="0.2",
                                **env)  # fmt: skip
        self.processes = [
            subprocess.Popen([sys.executable, "-m", "uvicorn", "gateway.asgi:application",
                              "--port", str(self.port), "--no-access-log"],
                             cwd=REPO_ROOT, env=environment),
            subprocess.Popen([sys.executable, "manage.py", "scrape_workers"],
                             cwd=REPO_ROOT, env=environment),
        ]  # fmt: skip
        self._wait_until_ready()

    def _wait_until_ready(self) -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"{self.url}/readyz", timeout=1):
                    return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError("gateway did not become ready")

    def stop(self) -> None:
        for process in self.processes:
            process.terminate()
        for process in self.processes:
            process.wait(timeout=10)
