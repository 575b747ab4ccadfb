"""Start simulator processes for fleet tests."""

import subprocess
import sys
import time
import urllib.request

from foundation.embedded_redis import free_port
from tests.conftest import REPO_ROOT


def wait_until_answers(url: str, timeout_s: float, what: str) -> None:
    """Poll url until it answers 200, or fail naming what did not start."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=1):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"{what} did not start ({url})")


class SimProcess:
    def __init__(
        self,
        profile: str = "cpu-smollm2-135m",
        model: str = "sim",
        port: int | None = None,
        fixed_ttft_ms: float | None = None,
        fixed_itl_ms: float = 0.0,
    ):
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        fixed = (
            []
            if fixed_ttft_ms is None
            else ["--fixed-ttft-ms", str(fixed_ttft_ms), "--fixed-itl-ms", str(fixed_itl_ms)]
        )
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "inference.sim",
                "--port",
                str(self.port),
                "--profile",
                profile,
                "--model",
                model,
                *fixed,
            ],
            cwd=REPO_ROOT,
        )
        wait_until_answers(f"{self.url}/health", 15, "simulator")

    def metric(self, name: str) -> float:
        with urllib.request.urlopen(f"{self.url}/metrics", timeout=2) as response:
            for line in response.read().decode().splitlines():
                if line.startswith(name + "{") or line.startswith(name + " "):
                    return float(line.rsplit(" ", 1)[1])
        raise KeyError(name)

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)
