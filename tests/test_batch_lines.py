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
    attempts = lines.attempt_ids("batch_req_abc_7")
    result = asyncio.run(lines.run_line(line, None, attempts))  # type: ignore[arg-type]
    assert seen == ["batch_req_abc_7", "batch_req_abc_7_r2", "batch_req_abc_7_r3"]
    assert (result.status_code, result.request_id) == (200, "batch_req_abc_7_r3")


def test_a_line_billed_by_a_dead_runner_goes_out_under_its_billed_id_every_attempt():
    """Its rerun, retried, must not bill it a second time under a new id."""
    billed = "batch_req_abc_7_r2"
    assert (
        lines.attempt_ids("batch_req_abc_7", {"batch_req_abc_7", billed}, billed)
        == [billed] * lines.ATTEMPTS
    )


def test_a_line_rerun_skips_the_ids_of_attempts_already_in_the_ledger():
    """A dead runner's failed first attempt (recorded, nothing billed): the rerun's answer
    under the same id would be dropped by the ledger, and the line never billed."""
    assert lines.attempt_ids("batch_req_abc_7", {"batch_req_abc_7", "batch_req_abc_7_r3"}) == [
        "batch_req_abc_7_r2",
        "batch_req_abc_7_r4",
        "batch_req_abc_7_r5",
    ]
