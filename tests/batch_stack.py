"""A live batch stack for the Batch API's tests: a gateway, a simulator worker and a Celery
worker running the batches, with the openai client of a team's key (conftest.py's `stack`
fixture)."""

import io
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator, Mapping
from decimal import Decimal
from pathlib import Path
from typing import Any

import openai

from gateway.accounts import actions
from inference import fleet
from tests.conftest import REPO_ROOT, child_env
from tests.live import LiveGateway
from tests.sims import SimProcess
from tests.waiting import wait_until

CELERY = [sys.executable, "-m", "celery", "-A", "gateway"]
FILE_LIMIT = 128 * 1024
TEAM_STORAGE = 4 * FILE_LIMIT
PRICE_IN, PRICE_OUT = Decimal("2"), Decimal("4")  # USD per million tokens


def chat_line(custom_id: str, text: str, model: str = "small-model") -> dict[str, Any]:
    body = {"model": model, "messages": [{"role": "user", "content": text}], "max_tokens": 8}
    return {"custom_id": custom_id, "method": "POST", "url": "/v1/chat/completions", "body": body}


def jsonl(lines: list[Any]) -> bytes:
    return b"".join((x if isinstance(x, bytes) else json.dumps(x).encode()) + b"\n" for x in lines)


class Stack:
    """A gateway (with its scraper), a simulator worker and, once started, a Celery worker
    consuming the batches queue (and the default one, for the sweep)."""

    def __init__(
        self, redis_url: str, files: Path, sim: SimProcess, env: Mapping[str, str] | None = None
    ) -> None:
        extra = dict(env or {})  # for the gateway and Celery alike (a storage backend, say)
        self.env = child_env(
            redis_url,
            BATCH_FILE_DIR=str(files),
            BATCH_FILE_MAX_BYTES=str(FILE_LIMIT),
            BATCH_RUNNER_STALE_S="2",
            FLEET_REFRESH_S="0.2",
            **extra,
        )
        self.team = actions.create_team("Acme", requests_per_minute=2, tokens_per_minute=100_000)
        deployment = fleet.ensure_deployment(
            "small-model", served_model_name="sim-upstream", max_in_flight_per_worker=5
        )
        deployment.price_input_per_million = PRICE_IN
        deployment.price_output_per_million = PRICE_OUT
        deployment.save()
        fleet.register_worker(deployment, sim.url, registered_by="test")
        self.key = actions.issue_api_key(self.team).plaintext
        self.gateway = LiveGateway(
            redis_url,
            BATCH_FILE_DIR=str(files),
            BATCH_FILE_MAX_BYTES=str(FILE_LIMIT),
            BATCH_TEAM_STORAGE_BYTES=str(TEAM_STORAGE),
            **extra,
        )
        self.client = openai.OpenAI(
            base_url=f"{self.gateway.url}/v1", api_key=self.key, max_retries=0
        )
        self.worker: subprocess.Popen[bytes] | None = None

    def start_worker(self) -> None:
        # solo pool: the batch runs in the worker process itself, so SIGKILL lands mid-batch.
        self.worker = subprocess.Popen(
            [
                *CELERY,
                "worker",
                "--pool",
                "solo",
                "--queues",
                "batches,celery",
                "--loglevel",
                "INFO",
                "--without-gossip",
                "--without-mingle",
                "--without-heartbeat",
            ],
            cwd=REPO_ROOT,
            env=self.env,
            start_new_session=True,
        )

    def kill_worker(self) -> None:
        if self.worker is not None and self.worker.poll() is None:
            os.killpg(self.worker.pid, signal.SIGKILL)
            self.worker.wait(timeout=10)
        self.worker = None

    def sweep(self) -> None:
        subprocess.run(
            [*CELERY, "call", "gateway.batches.tasks.sweep_batches"],
            cwd=REPO_ROOT,
            env=self.env,
            check=True,
            capture_output=True,
        )

    def upload(self, content: bytes, client: openai.OpenAI | None = None) -> str:
        sent = (client or self.client).files.create(
            file=("batch.jsonl", io.BytesIO(content)), purpose="batch"
        )
        return sent.id

    def submit(self, lines: list[Any]) -> str:
        batch = self.client.batches.create(
            input_file_id=self.upload(jsonl(lines)),
            endpoint="/v1/chat/completions",
            completion_window="24h",
        )
        assert batch.status == "validating"
        return batch.id

    def wait_for(self, batch_id: str, statuses: set[str], timeout_s: float = 60) -> Any:
        def ended() -> Any:
            if self.worker is not None and self.worker.poll() is not None:
                raise AssertionError(f"the Celery worker exited ({self.worker.returncode})")
            batch = self.client.batches.retrieve(batch_id)
            return batch if batch.status in statuses else None

        return wait_until(ended, timeout_s, f"batch {batch_id} to reach {statuses}", poll_s=0.2)

    def read(self, file_id: str | None) -> list[dict[str, Any]]:
        if file_id is None:
            return []
        return [json.loads(x) for x in self.client.files.content(file_id).text.splitlines()]

    def stop(self) -> None:
        self.kill_worker()
        self.gateway.stop()


def batch_stack(
    redis_url: str, tmp_path: Path, env: Mapping[str, str] | None = None
) -> Iterator[Stack]:
    """conftest.py's `stack` fixture; env adds variables the stack does not set itself to
    its children's environment (the gateway's and Celery's)."""
    sim = SimProcess(model="sim-upstream", fixed_ttft_ms=30, fixed_itl_ms=5)
    built: Stack | None = None
    try:
        built = Stack(redis_url, tmp_path / "files", sim, env)
        yield built
    finally:
        if built is not None:
            built.stop()
        sim.stop()
