"""A file upload may send more than any other request, but only a POST to /v1/files with a
key the files endpoints accept: the body is received in full before a view checks who sent
it, so before, anyone (no key at all) could make the gateway spool 100 MB bodies to disk,
on any method and any path under /v1/files."""

import http.client
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from gateway.accounts import actions
from tests.batch_stack import chat_line, jsonl
from tests.live import LiveGateway

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.live]
REQUEST_LIMIT = 64 * 1024


@pytest.fixture
def gateway(redis_url: str, tmp_path: Path) -> Iterator[tuple[LiveGateway, str]]:
    team = actions.create_team("Acme")
    key = actions.issue_api_key(team).plaintext
    served = LiveGateway(
        redis_url,
        MAX_REQUEST_BODY_BYTES=str(REQUEST_LIMIT),
        BATCH_FILE_MAX_BYTES=str(1024 * 1024),
        BATCH_FILE_DIR=str(tmp_path / "files"),
    )
    try:
        yield served, key
    finally:
        served.stop()


def post(port: int, path: str, body: bytes, key: str | None, method: str = "POST") -> Any:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    headers = {"Content-Type": "application/octet-stream"}
    if key is not None:
        headers["Authorization"] = f"Bearer {key}"
    connection.request(method, path, body=body, headers=headers)
    response = connection.getresponse()
    return response.status, json.loads(response.read() or b"null")


def test_only_a_keyed_upload_may_send_more_than_a_request(gateway: Any) -> None:
    served, key = gateway
    content = jsonl([chat_line(f"c{n}", "y" * 700) for n in range(200)])  # about 160 KB
    assert REQUEST_LIMIT < len(content) < 1024 * 1024

    client = openai.OpenAI(base_url=f"{served.url}/v1", api_key=key, max_retries=0)
    kept = client.files.create(file=("batch.jsonl", io.BytesIO(content)), purpose="batch")
    assert kept.bytes == len(content)

    for path, method, sender in [
        ("/v1/files", "POST", None),  # no key
        ("/v1/files", "POST", "sk-sluice-not-a-key"),
        ("/v1/files/file-x", "POST", key),  # not the upload endpoint
        ("/v1/files", "PUT", key),
    ]:
        status, body = post(served.port, path, content, sender, method)
        assert status == 413, (path, method, sender, status, body)
        assert body["error"]["code"] == "request_too_large"
    status, body = post(served.port, "/v1/files", b"{}", None)  # small: the view says why
    assert status == 401 and body["error"]["code"] == "invalid_api_key"
