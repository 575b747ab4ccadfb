"""Test fixtures: a real Redis 8 (the bundled one) per session, a clean slate per test."""

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from channels.layers import channel_layers
from django.db import connection

from gateway import embedded_redis
from gateway.accounts import authentication
from gateway.accounts.records import key_records, team_limits
from gateway.redis_clients import reset_clients

REPO_ROOT = Path(__file__).resolve().parent.parent


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
    settings.CHANNEL_LAYERS = {  # type: ignore[attr-defined]
        "default": {"BACKEND": "channels_redis.core.RedisChannelLayer",
                    "CONFIG": {"hosts": [redis_server], "prefix": "sluice:asgi"}},
    }  # fmt: skip
    channel_layers.backends.clear()
    reset_clients()
    redis.Redis.from_url(redis_server).flushall()
    key_records.clear_local()
    team_limits.clear_local()
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
