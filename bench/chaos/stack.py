"""The processes of a chaos run, each one restartable with its own command line.

Why its own stack and not `make run`: the faults need a handle on every process (a pid to
SIGKILL or SIGSTOP, a command line to start again on the same port and data directory),
and the run must never touch a platform's Redis. So, as `make run` starts them but each
separately: the bundled Redis 8 as the primary with AOF on (`appendonly yes`,
`appendfsync everysec`) in the run's directory, so a restart replays it; a cache Redis
capped by maxmemory (volatile-lru, as `make run`'s); two gateway processes (uvicorn, each
on its own port, GATEWAY_PROCESSES=2 so each takes half of a worker's slots); a Celery
worker on the default queue, one on `batches`, and beat; the scraper; N simulator workers
of fixed latency. Every child runs in a session of its own (signals reach it and its
children only) and logs to <run dir>/logs/<name>.log.
"""

import asyncio
import os
import signal
import subprocess
import sys
import time
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

import aiohttp
from django.conf import settings

from foundation import embedded_redis
from foundation.embedded_redis import free_port


class StackError(RuntimeError):
    pass


class Proc:
    """A child process that can be signalled, stopped and started again as it was."""

    def __init__(self, name: str, args: list[str], env: dict[str, str], logs: Path) -> None:
        self.name = name
        self.args = args
        self.env = env
        self.log_path = logs / f"{name}.log"
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def start(self) -> None:
        with self.log_path.open("ab") as log:
            log.write(f"--- start {self.starts + 1} at {time.time():.3f}\n".encode())
            log.flush()
            self.process = subprocess.Popen(
                self.args,
                cwd=settings.BASE_DIR,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.starts += 1

    @property
    def pid(self) -> int:
        if self.process is None:
            raise StackError(f"{self.name} was never started")
        return self.process.pid

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def signal(self, sig: signal.Signals, group: bool = False) -> None:
        if not self.alive:
            raise StackError(f"{self.name} is not running")
        if group:
            os.killpg(self.pid, sig)
        else:
            os.kill(self.pid, sig)

    async def exited(self, timeout_s: float) -> bool:
        """Waits up to timeout_s for the process to exit; True if it did."""
        if self.process is None:
            return True
        try:
            await asyncio.to_thread(self.process.wait, timeout_s)
        except subprocess.TimeoutExpired:
            return False
        return True

    def kill(self) -> None:
        """SIGKILL the process and everything in its session."""
        if self.process is None:
            return
        with suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=10)

    def stop(self, timeout_s: float = 10) -> None:
        """SIGCONT (a stopped process cannot exit), SIGTERM, then SIGKILL after timeout_s."""
        if self.process is None or self.process.poll() is not None:
            return
        try:
            os.killpg(self.process.pid, signal.SIGCONT)
            os.killpg(self.process.pid, signal.SIGTERM)
            self.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()
        except ProcessLookupError:
            self.process.wait(timeout=10)


class RedisServer(Proc):
    def __init__(self, name: str, command: list[str], port: int, logs: Path) -> None:
        super().__init__(name, command, dict(os.environ), logs)
        self.port = port
        self.url = f"redis://127.0.0.1:{port}/0"

    async def ready(self) -> None:
        await asyncio.to_thread(embedded_redis.wait_until_ready, self.url, self.process)


@dataclass(frozen=True)
class StackSetup:
    workers: int = 4
    slots: int = 4  # max_in_flight_per_worker
    ttft_ms: float = 400.0
    itl_ms: float = 60.0
    max_tokens: int = 16  # every reply is exactly this long (ignore_eos)
    cache_maxmemory: str = "32mb"

    @property
    def request_s(self) -> float:
        """How long one request takes on a worker."""
        return (self.ttft_ms + (self.max_tokens - 1) * self.itl_ms) / 1000

    @property
    def capacity_per_s(self) -> float:
        return self.workers * self.slots / self.request_s


class Stack:
    def __init__(self, setup: StackSetup, run_dir: Path) -> None:
        self.setup = setup
        self.run_dir = run_dir
        self.logs = run_dir / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        port = free_port()
        primary = embedded_redis.redis_server_command(port, run_dir / "redis", persistent=True)
        self.primary = self._redis("redis", [*primary, "--appendfsync", "everysec"], port)
        self.cache = self._redis(
            "cache-redis",
            embedded_redis.redis_server_command(
                port := free_port(),
                run_dir / "cache-redis",
                persistent=False,
                maxmemory=setup.cache_maxmemory,
                maxmemory_policy=embedded_redis.CACHE_POLICY,
            ),
            port,
        )
        self.sims: list[Proc] = []
        self.sim_urls: list[str] = []
        self.gateways: list[Proc] = []
        self.gateway_urls: list[str] = []
        self.others: dict[str, Proc] = {}

    def _redis(self, name: str, command: list[str], port: int) -> RedisServer:
        return RedisServer(name, command, port, self.logs)

    def env(self) -> dict[str, str]:
        """What every platform process shares, as `make run` gives them one environment."""
        return {
            **os.environ,
            "PYTHONUNBUFFERED": "1",
            "DJANGO_SETTINGS_MODULE": "gateway.settings",
            "REDIS_URL": self.primary.url,
            "CACHE_REDIS_URL": self.cache.url,
            "DATABASE_URL": settings.DATABASE_URL,
            "SLUICE_WORKERS": "",  # the run registers its own
            "GATEWAY_PROCESSES": "2",
            "BATCH_FILE_DIR": str(self.run_dir / "files"),
            "LOG_LEVEL": "WARNING",
            # Every socket of the run comes from 127.0.0.1: the per-address message limit
            # (600 a minute) is for people behind one NAT, not for a load generator.
            "WS_ADDRESS_MESSAGES_PER_MINUTE": "1000000",
            # The caches' own budget stays under the cache Redis's maxmemory, as in production.
            "CACHE_MEMORY_BUDGET_BYTES": str(8 * 1024 * 1024),
        }

    async def start_redis(self) -> None:
        for server in (self.primary, self.cache):
            server.start()
            await server.ready()

    async def start_simulators(self) -> None:
        setup = self.setup
        for number in range(setup.workers):
            port = free_port()
            args = [sys.executable, "-m", "inference.sim", "--port", str(port)]
            args += ["--profile", "h100-llama3-8b", "--model", "sim"]
            args += ["--fixed-ttft-ms", f"{setup.ttft_ms:g}", "--fixed-itl-ms", f"{setup.itl_ms:g}"]
            sim = Proc(f"sim-{number}", args, dict(os.environ), self.logs)
            sim.start()
            self.sims.append(sim)
            self.sim_urls.append(f"http://127.0.0.1:{port}")
        for sim, url in zip(self.sims, self.sim_urls, strict=True):
            await answers(f"{url}/health", sim)

    async def start_platform(self) -> None:
        """The gateways, Celery and the scraper (the simulators are registered by then)."""
        env = self.env()
        for number in range(2):
            port = free_port()
            server = [sys.executable, "-m", "uvicorn", "gateway.asgi:application", "--loop"]
            server += ["uvloop", "--http", "httptools", "--no-access-log", "--host"]
            server += ["127.0.0.1", "--port", str(port), "--log-level", "info"]
            self.gateways.append(Proc(f"gateway-{number}", server, env, self.logs))
            self.gateway_urls.append(f"http://127.0.0.1:{port}")
        celery = [sys.executable, "-m", "celery", "-A", "gateway"]
        worker = [*celery, "worker", "--loglevel", "WARNING", "--concurrency", "1"]
        schedule = self.run_dir / "celerybeat-schedule"
        self.others = {
            "worker": Proc("worker", [*worker, "--queues", "celery"], env, self.logs),
            "batches": Proc("batches", [*worker, "--queues", "batches"], env, self.logs),
            "beat": Proc(
                "beat",
                [*celery, "beat", "--loglevel", "WARNING", "--schedule", str(schedule)],
                env,
                self.logs,
            ),
            "scraper": Proc(
                "scraper", [sys.executable, "manage.py", "scrape_workers"], env, self.logs
            ),
        }
        for proc in [*self.gateways, *self.others.values()]:
            proc.start()
        for proc, url in zip(self.gateways, self.gateway_urls, strict=True):
            await answers(f"{url}/readyz", proc, timeout_s=60)

    @property
    def worker(self) -> Proc:
        return self.others["worker"]

    @property
    def batches(self) -> Proc:
        return self.others["batches"]

    @property
    def scraper(self) -> Proc:
        return self.others["scraper"]

    def stop_platform(self) -> None:
        for proc in [*self.gateways, *self.others.values(), *self.sims]:
            proc.stop()

    def stop_all(self) -> None:
        self.stop_platform()
        for server in (self.cache, self.primary):
            server.stop()

    def describe(self) -> str:
        setup = self.setup
        return (
            f"Redis 8 (AOF, appendfsync everysec) at {self.primary.url}, cache Redis "
            f"(maxmemory {setup.cache_maxmemory}) at {self.cache.url}; gateways "
            f"{', '.join(self.gateway_urls)} (GATEWAY_PROCESSES=2); Celery worker, batches "
            f"worker, beat; scraper; {setup.workers} simulator workers x {setup.slots} slots, "
            f"fixed TTFT {setup.ttft_ms:g} ms then {setup.itl_ms:g} ms a token, "
            f"{setup.max_tokens} tokens: {setup.request_s:.2f} s a request, capacity "
            f"{setup.capacity_per_s:.1f} requests/s; logs in {self.logs}"
        )


async def answers(url: str, proc: Proc, timeout_s: float = 30) -> None:
    """Until url answers 200 (or raise, naming the process, if it exits or times out)."""
    deadline = time.monotonic() + timeout_s
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as session:
        while time.monotonic() < deadline:
            if not proc.alive:
                raise StackError(f"{proc.name} exited; see {proc.log_path}")
            try:
                async with session.get(url) as response:
                    if response.status == 200:
                        return
            except (aiohttp.ClientError, TimeoutError):
                pass
            await asyncio.sleep(0.2)
    raise StackError(f"{proc.name} did not answer {url} within {timeout_s:g} s")
