"""A Redis for one live replay: the one given, else a private bundled Redis 8 for the run.

A live replay writes the fleet snapshot, the autoscaler's history and its lease to Redis;
with no REDIS_URL it must not touch a platform's Redis by accident, so it starts its own
in a scratch directory and stops it (and removes the directory) when the run ends.
"""

import subprocess
import sys
import tempfile
from pathlib import Path

from foundation import embedded_redis


class PrivateRedis:
    """The given Redis URL, else a bundled Redis 8 from start() to stop(). start() raises
    embedded_redis.EmbeddedRedisError (after cleaning up) if it does not come up."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.process: subprocess.Popen[bytes] | None = None
        self.scratch: tempfile.TemporaryDirectory[str] | None = None

    def start(self) -> str:
        """The Redis URL to use, starting the private Redis if none was given."""
        if self.url:
            return self.url
        self.scratch = tempfile.TemporaryDirectory(prefix="sluice-replay-")
        port = embedded_redis.free_port()
        command = embedded_redis.redis_server_command(port, Path(self.scratch.name), False)
        # Its log goes to stderr: stdout is the report (and --json must parse).
        self.process = subprocess.Popen(command, stdout=sys.stderr, stderr=sys.stderr)
        url = f"redis://127.0.0.1:{port}/0"
        try:
            embedded_redis.wait_until_ready(url, self.process)
        except embedded_redis.EmbeddedRedisError:
            self.process.kill()
            self.scratch.cleanup()
            raise
        return url

    def stop(self) -> None:
        """Stop the private Redis, if one was started, and remove its directory."""
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=10)
        if self.scratch is not None:
            self.scratch.cleanup()
