"""`make run`: everything on embedded defaults, in the foreground, under one supervisor.

Unless REDIS_URL is set, starts the bundled Redis 8 twice: the primary, which never evicts,
and a memory-capped one for the response caches (unless CACHE_REDIS_URL is set). Then it
migrates, rotates the demo login and API key, and runs the ASGI server, the fleet scraper,
the autoscaler loop, a Celery worker and Celery beat. Values a second terminal needs (Redis
URLs, secret key) are recorded under var/.

Ctrl-C drains: the ASGI server is stopped first and alone, and given GATEWAY_DRAIN_TIMEOUT_S
to finish the requests and chat replies in flight (gateway/drain.py), while the model
worker, Redis and the rest still run under them; then the rest stop. Ctrl-C again stops at
once.
"""

import json
import math
import os
import re
import secrets
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

from foundation import embedded_redis
from foundation.env import env_float
from gateway.drain import DEFAULT_TIMEOUT_S as DEFAULT_DRAIN_TIMEOUT_S
from gateway.supervisor import Supervisor
from inference import worker_command

BASE_DIR = Path(__file__).resolve().parent.parent
READY_TIMEOUT_S = 300.0  # vLLM on two CPU cores takes a minute or more to start
SERVERS = {
    "uvicorn": [
        "-m",
        "uvicorn",
        "gateway.asgi:application",
        "--loop",
        "uvloop",
        "--http",
        "httptools",
        "--no-access-log",
    ],
    "daphne": ["-m", "daphne", "gateway.asgi:application"],
}


def fail(message: str) -> "None":
    print(f"sluice: {message}", file=sys.stderr, flush=True)
    raise SystemExit(2)


def var_dir() -> Path:
    path = Path(os.environ.get("SLUICE_VAR_DIR", BASE_DIR / "var"))
    path.mkdir(parents=True, exist_ok=True)
    return path


def ensure_secret_key(var: Path) -> None:
    if os.environ.get("SECRET_KEY"):
        return
    path = var / "secret_key"
    if not path.exists():
        path.write_text(secrets.token_urlsafe(50))
        path.chmod(0o600)


def manage(env: dict[str, str], *args: str) -> str:
    result = subprocess.run(
        [sys.executable, str(BASE_DIR / "manage.py"), *args],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        fail(f"`manage.py {' '.join(args)}` failed:\n{result.stdout}{result.stderr}")
    return result.stdout


def drain_timeout_s() -> float:
    """GATEWAY_DRAIN_TIMEOUT_S, as gateway/settings.py reads it (read here before Django)."""
    try:
        value = env_float("GATEWAY_DRAIN_TIMEOUT_S", DEFAULT_DRAIN_TIMEOUT_S)
    except ImproperlyConfigured as exc:
        fail(str(exc))
    if value < 0:
        fail(f"GATEWAY_DRAIN_TIMEOUT_S={value} is negative")
    return value


def server_command(port: int) -> list[str]:
    name = os.environ.get("SLUICE_SERVER", "uvicorn")
    if name not in SERVERS:
        fail(f"SLUICE_SERVER={name!r} is not one of {', '.join(SERVERS)}")
    args = [sys.executable, *SERVERS[name]]
    processes = os.environ.get("GATEWAY_PROCESSES", "1")
    if name == "daphne":
        if processes != "1":
            fail("daphne serves from one process; use SLUICE_SERVER=uvicorn for GATEWAY_PROCESSES")
        return [*args, "--bind", "127.0.0.1", "--port", str(port)]
    # uvicorn's own wait for HTTP on SIGTERM, in whole seconds; gateway/drain.py sets it to
    # what is left of the same timeout when it hands the shutdown over.
    graceful = str(math.ceil(drain_timeout_s()))
    return [
        *args,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--workers",
        processes,
        "--timeout-graceful-shutdown",
        graceful,
    ]


def start_redis(
    supervisor: Supervisor, env: dict[str, str], name: str, command: list[str], port: int
) -> str:
    child = supervisor.start(name, command, env)
    url = f"redis://127.0.0.1:{port}/0"
    try:
        embedded_redis.wait_until_ready(url, child.process)
    except embedded_redis.EmbeddedRedisError as exc:
        fail(f"{name}: {exc}")
    return url


def cache_maxmemory() -> str:
    """CACHE_REDIS_MAXMEMORY in Redis's notation (256mb, 1gb, 0 for no limit)."""
    value = os.environ.get("CACHE_REDIS_MAXMEMORY", "").strip().lower()
    value = value or embedded_redis.CACHE_MAXMEMORY_DEFAULT
    if not re.fullmatch(r"\d+(b|k|kb|m|mb|g|gb)?", value):
        fail(f"CACHE_REDIS_MAXMEMORY={value!r} is not a size such as 256mb or 1gb")
    return value


def start_redises(supervisor: Supervisor, var: Path, env: dict[str, str]) -> None:
    """The primary Redis and the caches' Redis, each unless its URL is set; their URLs go to
    the children in env and to a second terminal under var/."""
    primary_file, cache_file = var / "redis.url", var / "cache-redis.url"
    if os.environ.get("REDIS_URL"):
        primary_file.unlink(missing_ok=True)  # a second terminal must use REDIS_URL too
    else:
        port = embedded_redis.free_port()
        command = embedded_redis.redis_server_command(port, var / "redis", persistent=True)
        env["REDIS_URL"] = start_redis(supervisor, env, "redis", command, port)
        primary_file.write_text(env["REDIS_URL"] + "\n")
    if os.environ.get("CACHE_REDIS_URL"):
        cache_file.unlink(missing_ok=True)
        return
    if os.environ.get("REDIS_URL"):
        cache_file.unlink(missing_ok=True)
        print(
            "sluice: warning: REDIS_URL is set and CACHE_REDIS_URL is not, so the response "
            "caches share the primary Redis and its memory; set CACHE_REDIS_URL to a Redis "
            f"with maxmemory and maxmemory-policy {embedded_redis.CACHE_POLICY}",
            file=sys.stderr,
            flush=True,
        )
        return
    # Not persistent: a cache is rebuilt by traffic, and an AOF would double its writes.
    port = embedded_redis.free_port()
    command = embedded_redis.redis_server_command(
        port,
        var / "cache-redis",
        persistent=False,
        maxmemory=cache_maxmemory(),
        maxmemory_policy=embedded_redis.CACHE_POLICY,
    )
    env["CACHE_REDIS_URL"] = start_redis(supervisor, env, "cache", command, port)
    cache_file.write_text(env["CACHE_REDIS_URL"] + "\n")


def answers(url: str, needs_worker: bool = False) -> bool:
    """200 from url; for /readyz with needs_worker, also a model worker in rotation."""
    try:
        with urllib.request.urlopen(url, timeout=2) as response:  # noqa: S310 - our local URLs
            if response.status != 200:
                return False
            return not needs_worker or json.loads(response.read()).get("routable_workers", 0) > 0
    except (urllib.error.URLError, ConnectionError, TimeoutError, ValueError):
        return False


def wait_for_ready(supervisor: Supervisor, readyz: str, needs_worker: bool) -> bool:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline and not supervisor.stopping:
        if supervisor.first_exited() is not None:
            return False
        if answers(readyz, needs_worker):
            return True
        time.sleep(0.5)
    return False


def start_model_worker(supervisor: Supervisor, env: dict[str, str]) -> None:
    """Start the embedded vLLM worker; returns its base URL (registered via SLUICE_WORKERS)."""
    models_dir = Path(os.environ.get("SLUICE_MODELS_DIR", BASE_DIR / "var" / "models"))
    try:
        model_dir = worker_command.prepared_model_dir(models_dir)
    except worker_command.WorkerNotPrepared as exc:
        fail(str(exc))
    port = embedded_redis.free_port()
    device = worker_command.detect_device()
    python = worker_command.worker_python(BASE_DIR)
    supervisor.start(
        "vllm",
        worker_command.worker_command(python, str(model_dir), port, device),
        worker_command.worker_env(env),
    )
    url = f"http://127.0.0.1:{port}"
    workers = [w for w in env.get("SLUICE_WORKERS", "").split(",") if w]
    env["SLUICE_WORKERS"] = ",".join([*workers, f"{worker_command.EMBEDDED_MODEL}@{url}"])
    print(
        f"sluice: starting the {device} model worker at {url} (about a minute on CPU)…", flush=True
    )


def banner(port: int, demo: dict[str, str]) -> str:
    base = f"http://127.0.0.1:{port}"
    return "\n".join(
        [
            "",
            "Sluice is ready.",
            f"  Web chat:    {base}/   (admin pages at {base}/admin/)",
            f"  Demo login:  {demo['username']} / {demo['password']}  (staff, admin of team "
            f"'{demo['team']}'; rotated each start)",
            f"  API key:     {demo['api_key']}  (shown once; rotated each start)",
            f"  Try it:      curl -s {base}/v1/chat/completions -H 'Authorization: Bearer "
            f"{demo['api_key']}' -H 'Content-Type: application/json' -d '{{\"model\": "
            f'"{demo["model"]}", "messages": [{{"role": "user", "content": '
            f'"What is the capital of France?"}}], "temperature": 0}}\'',
            f"  Usage:       curl -s -H 'Authorization: Bearer {demo['api_key']}' "
            f"{base}/api/v1/teams/{demo['team']}/usage/",
            f"  Ctrl-C stops everything (replies in flight get {drain_timeout_s():g} s to "
            "finish; Ctrl-C again: at once).",
            "",
        ]
    )


def main() -> int:
    os.chdir(BASE_DIR)
    var = var_dir()
    ensure_secret_key(var)
    port = int(os.environ.get("PORT", "8000"))
    if not embedded_redis.port_is_free(port):
        fail(f"port {port} is already in use; stop what holds it or run with PORT=<other port>")
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "SLUICE_VAR_DIR": str(var)}
    supervisor = Supervisor()
    supervisor.install_signal_handlers()
    try:
        return start_and_supervise(supervisor, env, var, port)
    finally:
        supervisor.stop_all()  # also on a failed start: no orphaned Redis or vLLM


def start_and_supervise(supervisor: Supervisor, env: dict[str, str], var: Path, port: int) -> int:
    start_redises(supervisor, var, env)
    embedded_worker = os.environ.get("SLUICE_EMBEDDED_WORKER", "1") != "0"
    if embedded_worker:
        start_model_worker(supervisor, env)
    manage(env, "migrate", "--no-input", "-v", "0")
    demo = json.loads(manage(env, "setup_demo", "--json").strip().splitlines()[-1])
    start_platform(supervisor, env, port, var, embedded_worker)
    if wait_for_ready(supervisor, f"http://127.0.0.1:{port}/readyz", embedded_worker):
        print(banner(port, demo), flush=True)
    elif not supervisor.stopping and supervisor.first_exited() is None:
        print(
            f"sluice: not ready after {READY_TIMEOUT_S:.0f} s (no model worker in rotation); "
            "still running, see the log above",
            file=sys.stderr,
            flush=True,
        )
    return supervisor.wait()


def start_platform(
    supervisor: Supervisor, env: dict[str, str], port: int, var: Path, embedded_worker: bool = True
) -> None:
    supervisor.start("web", server_command(port), env, drain_s=drain_timeout_s())
    manage_py = [sys.executable, str(BASE_DIR / "manage.py")]
    supervisor.start("scraper", [*manage_py, "scrape_workers"], env)
    # Every deployment with an enabled policy (setup_demo gives the embedded one min 1, max
    # 1: it holds, with reasons, on the fleet page). One leader by the Redis lease, so a
    # second `manage.py autoscale` elsewhere stands by. A replica is its deployment's
    # worker kind; without the embedded worker this host starts no vLLM replica either.
    autoscale_env = env if embedded_worker else {**env, "AUTOSCALE_LOCAL_VLLM": "0"}
    supervisor.start("autoscaler", [*manage_py, "autoscale"], autoscale_env)
    celery = [sys.executable, "-m", "celery", "-A", "gateway"]
    worker = [*celery, "worker", "--loglevel", "INFO", "--concurrency", "1"]
    supervisor.start("worker", [*worker, "--queues", "celery", "--hostname", "main@%h"], env)
    # Batches run for minutes to hours, each on its own event loop: a worker of their own.
    supervisor.start("batches", [*worker, "--queues", "batches", "--hostname", "batches@%h"], env)
    schedule = str(var / "celerybeat-schedule")
    supervisor.start("beat", [*celery, "beat", "--loglevel", "INFO", "--schedule", schedule], env)


if __name__ == "__main__":
    raise SystemExit(main())
