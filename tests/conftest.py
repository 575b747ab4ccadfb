"""Test fixtures: a real Redis 8 (the bundled one) per session, a clean slate per test."""

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
import redis
from channels.layers import channel_layers
from django.db import connection
from openai.types.chat import ChatCompletionMessageParam

from foundation import embedded_redis
from foundation.channel_layer import channel_layers_for
from foundation.redis_clients import reset_clients
from gateway.accounts import authentication
from gateway.accounts.records import key_records, team_limits
from inference.deployments import catalog
from inference.snapshot import fleet_view

REPO_ROOT = Path(__file__).resolve().parent.parent
MESSAGES: list[ChatCompletionMessageParam] = [
    {"role": "user", "content": "What is the capital of France?"}
]


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    process, url = embedded_redis.start(tmp_path_factory.mktemp("redis"), persistent=False)
    yield url
    process.terminate()
    process.wait(timeout=10)


@pytest.fixture(autouse=True)
def redis_url(redis_server: str, settings: object) -> Iterator[str]:
    """Point the platform at the test Redis and start every test from an empty one."""
    settings.REDIS_URL = redis_server  # type: ignore[attr-defined]
    settings.CACHE_REDIS_URL = redis_server  # type: ignore[attr-defined]
    settings.CHANNEL_LAYERS = channel_layers_for(redis_server)  # type: ignore[attr-defined]
    channel_layers.backends.clear()
    reset_clients()
    redis.Redis.from_url(redis_server).flushall()
    key_records.clear_local()
    team_limits.clear_local()
    catalog.clear_local()
    fleet_view.invalidate()  # a copy from the last test names workers that are gone
    authentication._last_noted.clear()
    yield redis_server
    reset_clients()


@pytest.fixture
def upstream_sim():
    """A simulator serving the model name `sim-upstream` (deployments map to it)."""
    from tests.sims import SimProcess

    process = SimProcess(model="sim-upstream")
    yield process
    process.stop()


@pytest.fixture
def platform(redis_url: str, upstream_sim: Any) -> Iterator[dict[str, Any]]:
    """A live gateway with team Acme, a key, `small-model` on a simulator worker and
    `model-without-workers`; ready once the scraper has published the worker."""
    yield from live_platform(redis_url, upstream_sim)


def live_platform(
    redis_url: str,
    upstream_sim: Any,
    requests_per_minute: int = 100,
    max_in_flight_per_worker: int = 8,
) -> Iterator[dict[str, Any]]:
    from gateway.accounts import actions
    from inference import fleet
    from tests.live import LiveGateway

    team = actions.create_team(
        "Acme", requests_per_minute=requests_per_minute, tokens_per_minute=100_000
    )
    deployment = fleet.ensure_deployment(
        "small-model",
        served_model_name="sim-upstream",
        max_in_flight_per_worker=max_in_flight_per_worker,
    )
    fleet.register_worker(deployment, upstream_sim.url, registered_by="test")
    fleet.ensure_deployment("model-without-workers")
    gateway = LiveGateway(redis_url)
    try:
        key = actions.issue_api_key(team).plaintext
        client = openai.OpenAI(base_url=f"{gateway.url}/v1", api_key=key, max_retries=0)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # until the scraper has published the worker
            try:
                client.chat.completions.create(model="small-model", messages=MESSAGES, max_tokens=1)
                break
            except openai.InternalServerError:
                time.sleep(0.2)
        yield {
            "gateway": gateway,
            "team": team,
            "key": key,
            "client": client,
            "sim": upstream_sim,
            "redis_url": redis_url,
        }
    finally:
        gateway.stop()


def database_url() -> str:
    """A URL for the database this test run uses, for child processes."""
    db = connection.settings_dict
    if db["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{db['NAME']}"
    password = f":{db['PASSWORD']}" if db.get("PASSWORD") else ""
    return (
        f"postgres://{db['USER']}{password}@{db['HOST'] or '127.0.0.1'}:"
        f"{db['PORT'] or 5432}/{db['NAME']}"
    )


def child_env(redis_url: str, **extra: str) -> dict[str, str]:
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "gateway.settings",
        "PYTHONPATH": str(REPO_ROOT),
        "REDIS_URL": redis_url,
        "DATABASE_URL": database_url(),
        **extra,
    }


def start_worker(script: str, args: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(REPO_ROOT / "tests" / "workers" / script), *args],
        env=env,
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
