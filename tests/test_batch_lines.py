"""A batch line's retries: each attempt has a request id of its own."""

import asyncio

import pytest

from gateway.batches import lines
from gateway.batches.input_file import CHAT, LineRequest

pytestmark = pytest.mark.unit


def test_a_retried_batch_line_gets_a_request_id_per_attempt(monkeypatch):
    """The ledger keeps the first record of a request id: a retry under the line's own id
    would leave the line billed as its failed first try."""
    seen: list[str] = []
    answers = [lines.LineResult(503, {}), lines.LineResult(502, {}), lines.LineResult(200, {})]

    async def once(line: LineRequest, credential: object, request_id: str) -> lines.LineResult:
        seen.append(request_id)
        return answers[len(seen) - 1]

    monkeypatch.setattr(lines, "_run_once", once)
    monkeypatch.setattr(lines, "RETRY_PAUSE_S", 0.0)
    line = LineRequest(7, "q7", CHAT, {"model": "m"})
    result = asyncio.run(lines.run_line(line, None, "batch_req_abc_7"))  # type: ignore[arg-type]
    assert seen == ["batch_req_abc_7", "batch_req_abc_7_r2", "batch_req_abc_7_r3"]
    assert (result.status_code, result.request_id) == (200, "batch_req_abc_7_r3")
