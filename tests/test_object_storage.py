"""Batch files in object storage (gateway/batches/object_storage.py): the S3 backend against
a real S3 server (rclone's `serve s3`, tests/s3_server.py), and a live batch through the
official openai client whose files live there and not on the gateway's disk."""

import io
import json
import os
import traceback
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest
from django.core.exceptions import ImproperlyConfigured

from foundation.embedded_redis import free_port
from gateway.batches.object_storage import PART_BYTES, S3FileStorage, split_endpoint
from gateway.batches.storage import StorageUnavailable
from tests.batch_stack import Stack, batch_stack, chat_line, jsonl
from tests.s3_server import BUCKET, S3Server, s3_server

FILE_ID = "file-" + "0123456789abcdef01234567"
OTHER_ID = "file-" + "fedcba9876543210fedcba98"


class Unseekable(io.RawIOBase):
    """A stream that cannot say its length (a pipe, a socket), optionally failing after
    `fail_after` bytes as a dropped upload would."""

    def __init__(self, data: bytes, fail_after: int | None = None) -> None:
        self._data = io.BytesIO(data)
        self._fail_after = fail_after

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        if self._fail_after is not None and self._data.tell() >= self._fail_after:
            raise OSError("the client went away")
        chunk = self._data.read(len(buffer))
        buffer[: len(chunk)] = chunk
        return len(chunk)


def read_back(storage: S3FileStorage, file_id: str) -> bytes:
    with storage.open(file_id) as content:
        return content.read()


# Settings and what the backend refuses before any request (no server needed).


@pytest.mark.unit
@pytest.mark.parametrize(
    ("endpoint", "secure", "expected"),
    [
        ("s3.eu-west-1.amazonaws.com", True, ("s3.eu-west-1.amazonaws.com", True)),
        ("minio:9000", False, ("minio:9000", False)),
        ("https://acct.r2.cloudflarestorage.com", False, ("acct.r2.cloudflarestorage.com", True)),
        ("http://127.0.0.1:9000/", True, ("127.0.0.1:9000", False)),
    ],
)
def test_an_endpoint_is_a_host_with_the_secure_flag_or_a_url_whose_scheme_decides(
    endpoint, secure, expected
):
    assert split_endpoint(endpoint, secure) == expected


@pytest.mark.unit
@pytest.mark.parametrize(
    "endpoint",
    ["", "https://s3.example.com/my-bucket", "ftp://s3.example.com", "s3.example.com/bucket"],
)
def test_an_endpoint_with_a_path_or_another_scheme_is_refused_naming_the_setting(endpoint):
    with pytest.raises(ImproperlyConfigured, match="BATCH_S3_ENDPOINT"):
        split_endpoint(endpoint, True)


@pytest.mark.unit
@pytest.mark.parametrize(
    "endpoint", ["https://AKIAEXAMPLE:hunter2-secret@s3.example.com", "AKIA:hunter2-secret@minio"]
)
def test_credentials_in_the_endpoint_are_refused_without_repeating_them(endpoint):
    with pytest.raises(ImproperlyConfigured) as refused:
        split_endpoint(endpoint, True)
    assert "BATCH_S3_SECRET_KEY" in str(refused.value)
    assert "hunter2-secret" not in str(refused.value)


@pytest.mark.unit
def test_the_backend_built_from_settings_says_which_setting_is_missing(settings):
    settings.BATCH_S3_ENDPOINT = "https://s3.example.com"
    settings.BATCH_S3_ACCESS_KEY, settings.BATCH_S3_SECRET_KEY = "AKIAEXAMPLE", "s3cr3t-key"
    settings.BATCH_S3_BUCKET = ""
    with pytest.raises(ImproperlyConfigured, match="BATCH_S3_BUCKET"):
        S3FileStorage()
    settings.BATCH_S3_BUCKET, settings.BATCH_S3_SECRET_KEY = "batch-files", ""
    with pytest.raises(ImproperlyConfigured, match="BATCH_S3_SECRET_KEY"):
        S3FileStorage()

    settings.BATCH_S3_SECRET_KEY = "s3cr3t-key"
    settings.BATCH_S3_PREFIX = "/team-a/files"
    storage = S3FileStorage()
    assert (storage.endpoint, storage.bucket) == ("https://s3.example.com", "batch-files")
    assert storage.key(FILE_ID) == f"team-a/files/{FILE_ID}"


@pytest.mark.unit
def test_the_secret_key_is_in_no_attribute_or_repr_of_the_backend():
    secret = "wJalrXUtnFEMI-K7MDENG-bPxRfiCYEXAMPLEKEY"
    storage = S3FileStorage("s3.example.com", "batch-files", "AKIAEXAMPLE", secret)
    assert secret not in repr(storage)
    assert all(secret not in repr(value) for value in vars(storage).values())
    assert "s3.example.com" in repr(storage) and "batch-files" in repr(storage)


@pytest.mark.unit
@pytest.mark.parametrize("file_id", ["../../etc/passwd", "file-x/../../other", "", FILE_ID + "/"])
def test_a_string_that_is_not_a_file_id_never_becomes_an_object_key(file_id):
    # Nothing listens at this endpoint: a request would fail otherwise than with ValueError.
    storage = S3FileStorage("127.0.0.1:9", "batch-files", "AKIAEXAMPLE", "secret", secure=False)
    with pytest.raises(ValueError, match="not a file id"):
        storage.save(file_id, io.BytesIO(b"x"))
    with pytest.raises(ValueError, match="not a file id"), storage.open(file_id):
        pass
    with pytest.raises(ValueError, match="not a file id"):
        storage.delete(file_id)


# The backend against a real S3 server.


@pytest.fixture
def server(tmp_path: Path) -> Iterator[S3Server]:
    yield from s3_server(tmp_path / "s3")


@pytest.mark.live
def test_saved_bytes_are_one_object_under_the_prefix_and_open_returns_them(server):
    storage = server.storage()
    content = jsonl([chat_line("a", "What is S3?"), chat_line("b", "And R2?")])
    storage.save(FILE_ID, io.BytesIO(content))

    assert read_back(storage, FILE_ID) == content
    assert server.object_path(FILE_ID).read_bytes() == content


@pytest.mark.live
def test_a_file_of_several_parts_comes_back_whole_with_or_without_a_known_length(server):
    storage = server.storage()
    content = os.urandom(PART_BYTES + 123_457)  # two parts either way

    storage.save(FILE_ID, io.BytesIO(content))  # seekable: the length is known
    storage.save(OTHER_ID, Unseekable(content))  # a stream: parts until it ends

    assert read_back(storage, FILE_ID) == content
    assert read_back(storage, OTHER_ID) == content
    assert server.object_path(OTHER_ID).stat().st_size == len(content)


@pytest.mark.live
def test_an_upload_that_fails_part_way_leaves_the_object_as_it_was(server):
    storage = server.storage()
    storage.save(FILE_ID, io.BytesIO(b"the first version\n"))
    replacement = os.urandom(PART_BYTES + 1000)

    with pytest.raises(OSError, match="went away"):
        storage.save(FILE_ID, Unseekable(replacement, fail_after=PART_BYTES + 500))

    assert read_back(storage, FILE_ID) == b"the first version\n"


@pytest.mark.live
def test_a_deleted_or_never_saved_file_is_not_found_and_deleting_it_again_is_fine(server):
    storage = server.storage()
    storage.save(FILE_ID, io.BytesIO(b"short-lived\n"))

    storage.delete(FILE_ID)
    storage.delete(FILE_ID)  # S3 deletes are idempotent, and so is ours

    assert not server.object_path(FILE_ID).exists()
    for file_id in (FILE_ID, OTHER_ID):
        with pytest.raises(FileNotFoundError, match=file_id), storage.open(file_id):
            pass


def assert_secret_free(error: BaseException, *secrets: str) -> None:
    """Neither the error's message nor anything chained to it (what a log would print)."""
    printed = "".join(traceback.format_exception(error))
    for secret in secrets:
        assert secret not in printed


@pytest.mark.live
def test_a_wrong_secret_is_a_clear_error_naming_the_storage_and_no_secret(server):
    wrong = "not-the-secret-" + server.secret_key[:10]
    storage = server.storage(secret_key=wrong)

    with pytest.raises(StorageUnavailable) as refused:
        storage.save(FILE_ID, io.BytesIO(b"x\n"))

    message = str(refused.value)
    assert "SignatureDoesNotMatch" in message and "BATCH_S3_SECRET_KEY" in message
    assert server.endpoint in message and BUCKET in message
    assert_secret_free(refused.value, wrong, server.secret_key)
    assert not server.object_path(FILE_ID).exists()


@pytest.mark.live
def test_a_missing_bucket_is_a_clear_error_not_a_missing_file(server):
    storage = server.storage(bucket="no-such-bucket")
    with pytest.raises(StorageUnavailable, match=r"bucket does not exist.*no-such-bucket"):
        storage.save(FILE_ID, io.BytesIO(b"x\n"))
    with pytest.raises(StorageUnavailable, match="bucket does not exist"), storage.open(FILE_ID):
        pass


@pytest.mark.live
def test_storage_that_does_not_answer_is_an_error_naming_endpoint_and_bucket(server):
    endpoint = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    storage = server.storage(endpoint=endpoint)
    with pytest.raises(StorageUnavailable) as unreachable, storage.open(FILE_ID):
        pass
    message = str(unreachable.value)
    assert endpoint in message and BUCKET in message
    assert "Connection refused" in message or "NewConnectionError" in message
    assert_secret_free(unreachable.value, server.secret_key)


# A live batch whose files live in the bucket.


@pytest.fixture
def s3_stack(redis_url: str, tmp_path: Path, server: S3Server) -> Iterator[Stack]:
    yield from batch_stack(redis_url, tmp_path, env=server.env())


def local_files(tmp_path: Path) -> list[Path]:
    """What the stack's BATCH_FILE_DIR holds (tests/batch_stack.py: tmp_path / "files")."""
    files = tmp_path / "files"
    return sorted(files.rglob("*")) if files.exists() else []


@pytest.mark.live
@pytest.mark.django_db(transaction=True)
def test_a_batch_reads_and_writes_its_files_in_the_bucket_not_on_local_disk(
    s3_stack, server, tmp_path
):
    lines = [chat_line(f"s3-{n}", f"Object storage question {n}") for n in range(5)]
    input_id = s3_stack.upload(jsonl(lines))
    assert server.object_path(input_id).read_bytes() == jsonl(lines)

    batch = s3_stack.client.batches.create(
        input_file_id=input_id, endpoint="/v1/chat/completions", completion_window="24h"
    )
    s3_stack.start_worker()
    batch = s3_stack.wait_for(batch.id, {"completed", "failed", "expired", "cancelled"})
    assert batch.status == "completed", batch.errors

    output = s3_stack.client.files.content(batch.output_file_id).content
    answered = [json.loads(line) for line in output.splitlines()]
    assert sorted(x["custom_id"] for x in answered) == sorted(x["custom_id"] for x in lines)
    assert all(x["response"]["status_code"] == 200 for x in answered)
    assert server.object_path(batch.output_file_id).read_bytes() == output
    assert local_files(tmp_path) == []

    for file_id in (input_id, batch.output_file_id):
        assert s3_stack.client.files.delete(file_id).deleted
        assert not server.object_path(file_id).exists()
    with pytest.raises(openai.NotFoundError):
        s3_stack.client.files.content(input_id)


@pytest.mark.live
@pytest.mark.django_db(transaction=True)
def test_storage_out_of_reach_is_a_503_and_a_failed_delete_keeps_the_file(s3_stack, server):
    input_id = s3_stack.upload(jsonl([chat_line("down", "Is the bucket there?")]))
    server.stop()

    for call in (s3_stack.client.files.content, s3_stack.client.files.delete):
        with pytest.raises(openai.InternalServerError) as unavailable:
            call(input_id)
        assert unavailable.value.status_code == 503
        assert unavailable.value.code == "storage_unavailable"
        assert server.endpoint not in unavailable.value.message  # the log has it, not clients
    assert s3_stack.client.files.retrieve(input_id).id == input_id  # delete can be retried
