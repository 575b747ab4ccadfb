"""Start simulator processes for fleet tests."""

import sys
import urllib.request
from pathlib import Path

from foundation.embedded_redis import free_port
from tests.children import Child, wait_until_serving
from tests.conftest import REPO_ROOT
from tests.waiting import wait_until_answers

__all__ = ["SimProcess", "wait_until_answers"]


class SimProcess:
    def __init__(
        self,
        profile: str = "cpu-smollm2-135m",
        model: str = "sim",
        port: int | None = None,
        fixed_ttft_ms: float | None = None,
        fixed_itl_ms: float = 0.0,
        scripted_replies: Path | None = None,
    ):
        """scripted_replies: a JSON file of {last message's text: the reply to send}."""
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        fixed = (
            []
            if fixed_ttft_ms is None
            else ["--fixed-ttft-ms", str(fixed_ttft_ms), "--fixed-itl-ms", str(fixed_itl_ms)]
        )
        self.child = Child(
            f"simulator :{self.port}",
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
                *(
                    []
                    if scripted_replies is None
                    else ["--scripted-replies", str(scripted_replies)]
                ),
            ],
            cwd=REPO_ROOT,
        )
        self.process = self.child.process
        wait_until_serving([self.child], f"{self.url}/health", 15, "the simulator")

    def metric(self, name: str) -> float:
        with urllib.request.urlopen(f"{self.url}/metrics", timeout=2) as response:
            for line in response.read().decode().splitlines():
                if line.startswith(name + "{") or line.startswith(name + " "):
                    return float(line.rsplit(" ", 1)[1])
        raise KeyError(name)

    def stop(self) -> None:
        self.child.stop()
