"""Batch files in an S3-compatible bucket (AWS S3, MinIO, Cloudflare R2, Ceph RGW, rclone's
S3 server), for installs whose gateways and Celery workers run on several machines and so
share no disk. BATCH_FILE_STORAGE=gateway.batches.object_storage.S3FileStorage selects it;
the BATCH_S3_* settings say where (docs/batches.md, "Storage backends").

Each file is one object, `<BATCH_S3_PREFIX><file id>`. The bucket must exist: Sluice never
creates one (the bucket's policy, encryption and lifecycle are the operator's choice, and a
key scoped to one bucket usually may not create buckets); a missing one is a clear error at
first use. The secret key goes to the client and nowhere else: not into an attribute, a
repr, a log line or an error message."""

import contextlib
import logging
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, BinaryIO, cast
from urllib.parse import urlsplit

import certifi
import urllib3
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.views.decorators.debug import sensitive_variables
from minio import Minio
from minio.error import InvalidResponseError, MinioException, S3Error

from gateway.batches.storage import FileStorage, StorageUnavailable, checked_file_id

logger = logging.getLogger(__name__)

# Uploads of unknown length go up in parts of this size (each held in memory while it is
# sent); known lengths above it too. S3 allows 5 MiB to 5 GiB.
PART_BYTES = 10 * 1024 * 1024
# A download is copied to a temporary file: in memory up to this, on disk beyond it.
SPOOL_BYTES = 8 * 1024 * 1024
COPY_BYTES = 1024 * 1024
CONNECT_TIMEOUT_S = 10.0
READ_TIMEOUT_S = 60.0  # between two reads of one response, not for the whole transfer
# The S3 error codes that mean "not there" for an object, and for its bucket.
MISSING_OBJECT = {"NoSuchKey", "NoSuchObject", "NotFound"}
MISSING_BUCKET = "NoSuchBucket"
REFUSED = {"AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "InvalidToken"}
# Some servers (rclone's) send their XML errors as text/xml, which the minio client does
# not parse: the code is read from the body it quotes.
_QUOTED_CODE = re.compile(r"<Code>([^<]+)</Code>")


class S3FileStorage(FileStorage):
    """One object per file. A PUT replaces an object whole or not at all (multipart uploads
    too, on completion), so a reader never sees half a file; open downloads the object to a
    temporary file first, because the batch runner holds its input open for the whole
    batch and an HTTP response held open that long is fragile (idle timeouts, restarts).

    Arguments default to the BATCH_S3_* settings; tests pass their own."""

    @sensitive_variables("access_key", "secret_key")  # kept off DEBUG's error page
    def __init__(
        self,
        endpoint: str | None = None,
        bucket: str | None = None,
        access_key: str | None = None,
        secret_key: str | None = None,
        region: str | None = None,
        secure: bool | None = None,
        prefix: str | None = None,
    ) -> None:
        host, self.secure = split_endpoint(
            settings.BATCH_S3_ENDPOINT if endpoint is None else endpoint,
            settings.BATCH_S3_SECURE if secure is None else secure,
        )
        self.endpoint = f"{'https' if self.secure else 'http'}://{host}"
        self.bucket = settings.BATCH_S3_BUCKET if bucket is None else bucket
        if not self.bucket:
            raise ImproperlyConfigured("BATCH_S3_BUCKET is not set (the bucket's name).")
        access_key = settings.BATCH_S3_ACCESS_KEY if access_key is None else access_key
        secret_key = settings.BATCH_S3_SECRET_KEY if secret_key is None else secret_key
        if not (access_key and secret_key):
            raise ImproperlyConfigured("Set BATCH_S3_ACCESS_KEY and BATCH_S3_SECRET_KEY.")
        self.prefix = normal_prefix(settings.BATCH_S3_PREFIX if prefix is None else prefix)
        self.client = Minio(
            host,
            access_key=access_key,
            secret_key=secret_key,
            secure=self.secure,
            region=(settings.BATCH_S3_REGION if region is None else region) or None,
            http_client=_http_client(),
        )

    def __repr__(self) -> str:
        return f"S3FileStorage({self.where})"

    @property
    def where(self) -> str:
        """What an error or a log line may say about the storage."""
        return f"endpoint {self.endpoint}, bucket {self.bucket!r}, prefix {self.prefix!r}"

    def key(self, file_id: str) -> str:
        return self.prefix + checked_file_id(file_id)

    def save(self, file_id: str, content: IO[bytes]) -> None:
        key = self.key(file_id)
        with self._failures(file_id):
            self.client.put_object(
                self.bucket,
                key,
                cast(BinaryIO, content),  # it only reads; IO[bytes] is the interface's type
                _remaining(content),
                content_type="application/jsonl",
                part_size=PART_BYTES,
            )

    @contextmanager
    def open(self, file_id: str) -> Iterator[IO[bytes]]:
        key = self.key(file_id)
        copy = tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES)  # noqa: SIM115
        try:
            with self._failures(file_id):
                response = self.client.get_object(self.bucket, key)
                try:  # urllib3 raises if the body ends before its Content-Length
                    shutil.copyfileobj(response, copy, COPY_BYTES)
                finally:
                    response.close()
                    response.release_conn()
            copy.seek(0)
            yield copy
        finally:
            copy.close()

    def delete(self, file_id: str) -> None:
        key = self.key(file_id)
        # S3 answers a missing key's DELETE with 204; a store that says 404 means the same.
        with contextlib.suppress(FileNotFoundError), self._failures(file_id):
            self.client.remove_object(self.bucket, key)

    @contextmanager
    def _failures(self, file_id: str) -> Iterator[None]:
        """The client's errors as the storage interface's: FileNotFoundError for a missing
        object, StorageUnavailable for the rest, naming the storage and never a secret
        (the client's own errors hold none: the secret only signs requests)."""
        try:
            yield
        except (MinioException, urllib3.exceptions.HTTPError) as exc:
            code = _error_code(exc)
            if code in MISSING_OBJECT:
                raise FileNotFoundError(f"{file_id} is not in the bucket ({self.where})") from None
            if code == MISSING_BUCKET:
                raise StorageUnavailable(
                    f"The bucket does not exist ({self.where}); create it: Sluice does not."
                ) from exc
            if code in REFUSED:
                raise StorageUnavailable(
                    f"Object storage refused access to {file_id}: {code}; check "
                    f"BATCH_S3_ACCESS_KEY, BATCH_S3_SECRET_KEY and the key's permissions on "
                    f"the bucket ({self.where})"
                ) from exc
            failure = code or f"{type(exc).__name__}: {_reason(exc)}"
            raise StorageUnavailable(
                f"Object storage failed on {file_id} ({self.where}): {failure}"
            ) from exc


def split_endpoint(endpoint: str, secure: bool) -> tuple[str, bool]:
    """host[:port] and whether to use https: a URL's scheme says so, a bare host takes
    `secure`. A URL may not carry a path (the SDK addresses buckets itself) or credentials
    (an endpoint is shown in errors and logs)."""
    endpoint = endpoint.strip()
    if not endpoint:
        raise ImproperlyConfigured("BATCH_S3_ENDPOINT is not set (host:port or a URL).")
    if "@" in endpoint:  # user:password@host: not repeated in the error
        raise ImproperlyConfigured(
            "BATCH_S3_ENDPOINT carries credentials; use BATCH_S3_ACCESS_KEY and "
            "BATCH_S3_SECRET_KEY instead."
        )
    if "://" not in endpoint:
        if "/" in endpoint:
            raise ImproperlyConfigured(f"BATCH_S3_ENDPOINT={endpoint!r} is not host[:port].")
        return endpoint, secure
    parts = urlsplit(endpoint)
    if parts.scheme not in {"http", "https"} or not parts.hostname:
        raise ImproperlyConfigured(f"BATCH_S3_ENDPOINT={endpoint!r} is not an http(s) URL.")
    if parts.path.strip("/") or parts.query or parts.fragment:
        raise ImproperlyConfigured(
            f"BATCH_S3_ENDPOINT={endpoint!r} has a path; give the server only "
            "(the bucket is BATCH_S3_BUCKET, a folder in it BATCH_S3_PREFIX)."
        )
    return parts.netloc, parts.scheme == "https"


def normal_prefix(prefix: str) -> str:
    """No leading slash (S3 keys have none), one trailing slash unless empty."""
    prefix = prefix.strip().strip("/")
    return f"{prefix}/" if prefix else ""


def _http_client() -> urllib3.PoolManager:
    """The SDK's default, with timeouts that fail in seconds rather than five minutes and
    fewer retries, so an unreachable store is reported while the caller still waits."""
    return urllib3.PoolManager(
        timeout=urllib3.Timeout(connect=CONNECT_TIMEOUT_S, read=READ_TIMEOUT_S),
        maxsize=10,
        cert_reqs="CERT_REQUIRED",
        ca_certs=os.environ.get("SSL_CERT_FILE") or certifi.where(),
        retries=urllib3.Retry(total=3, backoff_factor=0.2, status_forcelist=[500, 502, 503, 504]),
    )


def _remaining(content: IO[bytes]) -> int:
    """Bytes left to read in content, or -1 when it cannot say (a pipe): then the upload
    goes in parts of PART_BYTES until the stream ends."""
    try:
        if not content.seekable():
            return -1
        here = content.tell()
        end = content.seek(0, os.SEEK_END)
        content.seek(here)
    except (AttributeError, OSError, ValueError):
        return -1
    return end - here


def _error_code(exc: Exception) -> str | None:
    if isinstance(exc, S3Error):
        return exc.code
    if isinstance(exc, InvalidResponseError):
        quoted = _QUOTED_CODE.search(str(exc))
        return quoted.group(1).strip() if quoted else None
    return None


def _reason(exc: Exception) -> str:
    """urllib3's MaxRetryError wraps the error that counts (refused, timed out, TLS)."""
    inner = getattr(exc, "reason", None)
    return str(inner or exc)[:300]
