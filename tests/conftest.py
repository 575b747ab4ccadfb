"""Test fixtures: a real Redis 8 (the bundled one) per session, a clean slate per test.

Every test belongs to one tier, by marker (pyproject.toml registers them):
- unit: in-process only (the test database is allowed): no Redis, no child processes, no
  network, no browser. `make test-unit` runs this tier alone, in well under a minute.
- live: the bundled Redis 8 and/or child processes (gateway, scraper, simulator, Celery).
- browser: Playwright driving Debian's chromium against a live server.
"""

import contextlib
import os
import socket
import subprocess
import sys
from collections.abc import Generator, Iterator
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
from gateway.process_state import reset_process_state
from tests.waiting import wait_until

REPO_ROOT = Path(__file__).resolve().parent.parent
MESSAGES: list[ChatCompletionMessageParam] = [
    {"role": "user", "content": "What is the capital of France?"}
]


TIERS = ("unit", "live", "browser")


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects: every collected test is checked
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Fail the collection unless every test has exactly one tier marker."""
    problems = []
    for item in items:
        tiers = sorted({marker.name for marker in item.iter_markers() if marker.name in TIERS})
        if len(tiers) != 1:
            problems.append(f"  {item.nodeid}: {' + '.join(tiers) or 'no tier marker'}")
    if problems:
        raise pytest.UsageError(
            "every test needs exactly one tier marker, pytest.mark.unit, .live or .browser "
            "(tests/conftest.py says what each allows):\n" + "\n".join(problems)
        )


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    process, url = embedded_redis.start(tmp_path_factory.mktemp("redis"), persistent=False)
    yield url
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=10)


@pytest.fixture(scope="session")
def unreachable_redis_url() -> Iterator[str]:
    """A Redis URL where nothing answers, for unit tests: a use of Redis fails at once.

    The port stays bound (never listening) for the whole session, so a connection is refused
    and no server started meanwhile (another test run's Redis, say) can take the port.
    """
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        yield f"redis://127.0.0.1:{holder.getsockname()[1]}/0"


@contextlib.contextmanager
def child_processes_refused(item: pytest.Item) -> Iterator[None]:
    """For a unit test, make starting any child process fail loudly instead of running."""
    if item.get_closest_marker("unit") is None:
        yield
        return

    def refuse(self: subprocess.Popen[Any], args: Any, *_: Any, **__: Any) -> None:
        raise AssertionError(
            f"a unit test started a child process ({args!r}): mark the test live instead"
        )

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(subprocess.Popen, "__init__", refuse)
        yield


# Around setup too: a module- or session-scoped fixture first set up for a unit test counts.
@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    with child_processes_refused(item):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    with child_processes_refused(item):
        return (yield)


@pytest.fixture(autouse=True)
def redis_url(request: pytest.FixtureRequest, settings: object) -> Iterator[str]:
    """Point the platform at the test Redis and start every test from an empty one.

    A unit test never starts or touches Redis: it gets an address where nothing listens,
    so code that secretly needs Redis fails loudly instead of passing by luck.
    """
    unit = request.node.get_closest_marker("unit") is not None
    if unit:
        url: str = request.getfixturevalue("unreachable_redis_url")
    else:
        url = request.getfixturevalue("redis_server")
    settings.REDIS_URL = url  # type: ignore[attr-defined]
    settings.CACHE_REDIS_URL = url  # type: ignore[attr-defined]
    settings.CHANNEL_LAYERS = channel_layers_for(url)  # type: ignore[attr-defined]
    channel_layers.backends.clear()
    reset_process_state()
    if not unit:
        redis.Redis.from_url(url).flushall()
    yield url
    reset_process_state()


@pytest.fixture
def stack(redis_url: str, tmp_path: Path) -> Iterator[Any]:
    """A live batch stack: gateway, simulator worker, Celery on demand (tests/batch_stack.py)."""
    from tests.batch_stack import batch_stack

    yield from batch_stack(redis_url, tmp_path)


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
) -> Generator[dict[str, Any], None, None]:
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

        def served() -> bool:
            client.chat.completions.create(model="small-model", messages=MESSAGES, max_tokens=1)
            return True

        wait_until(
            served,
            10,
            "the gateway to serve small-model (the scraper publishes the worker)",
            ignoring=(openai.InternalServerError,),
            poll_s=0.2,
        )
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
