"""A batch runner's keeper (finished lines written, the hold renewed) lives through database
errors, and a line whose JSON cannot be decoded at any depth is a malformed line, not a
runner crash."""

import asyncio
import io
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import OperationalError

from gateway.accounts import actions as account_actions
from gateway.batches import progress, runner
from gateway.batches.input_file import MalformedLine, read_line
from gateway.batches.lines import LineResult
from gateway.batches.models import Batch, BatchLine
from gateway.batches.storage import file_storage
from inference.deployments import catalog

pytestmark = pytest.mark.unit


def _batch() -> Batch:
    now = datetime.now(UTC)
    return Batch(
        id="batch_keeper",
        team_id=1,
        api_key_id="k1",
        endpoint="/v1/chat/completions",
        input_file_id="file-1",
        status=Batch.Status.IN_PROGRESS,
        runner="runner-1",
        created_at=now,
        expires_at=now + timedelta(hours=1),
    )


def _saved_batch(batch_id: str, status: str, total: int = 0) -> Batch:
    """A batch of a new team, held by runner-1."""
    now = datetime.now(UTC)
    return Batch.objects.create(
        id=batch_id,
        team=account_actions.create_team("Acme"),
        api_key_id="k1",
        endpoint="/v1/chat/completions",
        input_file_id="file-1",
        status=status,
        runner="runner-1",
        total=total,
        created_at=now,
        expires_at=now + timedelta(hours=1),
    )


def test_the_keeper_lives_through_a_database_error_and_keeps_the_lines_it_could_not_write(
    monkeypatch,
):
    written: list[list[int]] = []
    failures = [OperationalError("server closed the connection unexpectedly")]

    def record_lines(batch_id: str, runner: str, rows: list[BatchLine]) -> bool:
        if failures:
            raise failures.pop()
        written.append([row.line_number for row in rows])
        return True

    monkeypatch.setattr(progress, "record_lines", record_lines)
    monkeypatch.setattr(progress, "renew", lambda batch_id, name: Batch.Status.IN_PROGRESS)
    monkeypatch.setattr(runner, "KEEP_EVERY_S", 0.01)
    keeping = runner.BatchRunner(_batch(), "runner-1")
    keeping.finished = [BatchLine(line_number=n) for n in (1, 2)]

    async def scenario() -> Any:
        keeper = asyncio.ensure_future(keeping._keep_and_renew())
        await asyncio.sleep(0.3)
        alive = not keeper.done()
        keeper.cancel()
        return alive

    assert asyncio.run(scenario()), "the keeper died on the database error"
    assert written == [[1, 2]]  # written once the database answered again, none lost
    assert keeping.status == Batch.Status.IN_PROGRESS


@pytest.mark.parametrize(
    "raw",
    [
        b'{"custom_id": "a", "body": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
        b'{"custom_id": "a", "body": {"n": ' + b"9" * 5_000 + b"}}",
    ],
    ids=["nested past the decoder's depth", "an integer of 5,000 digits"],
)
def test_a_line_the_decoder_refuses_at_any_depth_is_malformed(raw, settings):
    settings.BATCH_LINE_MAX_BYTES = len(raw) + 1
    with pytest.raises(MalformedLine):
        read_line(1, raw)


def test_lines_already_started_finish_and_are_kept_when_reading_the_next_fails(monkeypatch):
    kept: list[int] = []
    monkeypatch.setattr(progress, "finished_line_numbers", lambda batch_id: set())
    monkeypatch.setattr(progress, "billed_lines", lambda batch_id: {})
    monkeypatch.setattr(progress, "recorded_attempts", lambda batch_id: {})
    monkeypatch.setattr(progress, "renew", lambda batch_id, name: Batch.Status.IN_PROGRESS)

    def record_lines(batch_id: str, holder: str, rows: list[BatchLine]) -> bool:
        kept.extend(r.line_number for r in rows)
        return True

    monkeypatch.setattr(progress, "record_lines", record_lines)
    running = runner.BatchRunner(_batch(), "runner-1")

    async def one_line_then_a_database_error(lines: Any, done: set[int]) -> None:
        async def line() -> None:
            await asyncio.sleep(0.2)  # a generation under way
            running.finished.append(BatchLine(line_number=1))

        running.tasks.add(asyncio.ensure_future(line()))
        raise OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(running, "_run_lines", one_line_then_a_database_error)
    with pytest.raises(OperationalError):
        asyncio.run(running.run(io.BytesIO(b"")))
    assert kept == [1]


@pytest.mark.parametrize(
    "custom_id", ["\\ud800", "a\\u0000b"], ids=["an unpaired surrogate", "a NUL character"]
)
def test_a_custom_id_no_database_can_keep_makes_its_line_malformed(custom_id):
    raw = (
        b'{"custom_id": "' + custom_id.encode() + b'", "method": "POST", '
        b'"url": "/v1/chat/completions", "body": {"model": "m"}}'
    )
    with pytest.raises(MalformedLine, match="custom_id must be text"):
        read_line(1, raw)


@pytest.mark.django_db
def test_an_answer_quoting_what_no_database_keeps_is_kept_with_a_replacement_character():
    """A worker's reply (or an error quoting the request) with a NUL or an unpaired
    surrogate: PostgreSQL refused the row, and the keeper then kept no line after it."""
    batch = _saved_batch("batch_unstorable", Batch.Status.IN_PROGRESS)
    body = {"choices": [{"message": {"content": "a\x00b\ud800c"}}], "nested": ["\x00"]}
    row = runner._row(batch.id, 1, "one", "batch_req_1", LineResult(200, body))
    assert progress.record_lines(batch.id, "runner-1", [row])
    kept = BatchLine.objects.get(batch_id=batch.id, line_number=1)
    assert kept.body == {
        "choices": [{"message": {"content": "a\ufffdb\ufffdc"}}],
        "nested": ["\ufffd"],
    }


def test_a_runner_whose_hold_went_unrenewed_pauses_and_goes_on_once_it_is_renewed(
    monkeypatch, settings
):
    """A database away for over half of BATCH_RUNNER_STALE_S: no line starts, and none is
    given up either. Before, every line not yet started was reported `batch_expired` once
    the database was back, though the batch had hours left."""
    settings.BATCH_RUNNER_STALE_S = 0.4
    answers: list[Any] = [OperationalError("the database is away")] * 6
    answers.append(Batch.Status.IN_PROGRESS)

    def renew(batch_id: str, name: str) -> str:
        answer = answers.pop(0) if len(answers) > 1 else answers[0]
        if isinstance(answer, Exception):
            raise answer
        return str(answer)

    monkeypatch.setattr(progress, "renew", renew)
    monkeypatch.setattr(progress, "record_lines", lambda batch_id, runner, rows: True)
    monkeypatch.setattr(runner, "KEEP_EVERY_S", 0.05)
    monkeypatch.setattr(runner, "RENEW_EVERY_S", 0.05)
    running = runner.BatchRunner(_batch(), "runner-1")

    async def unknown_model(name: str) -> None:
        return None  # an unknown model: no meter to ask, the line may start at once

    monkeypatch.setattr(catalog, "get", unknown_model)

    async def scenario() -> list[tuple[bool, bool]]:
        keeper = asyncio.ensure_future(running._keep_and_renew())
        seen = []
        await asyncio.sleep(0.3)  # unrenewed past half of 0.4 s
        waiting = asyncio.ensure_future(running._wait_for_room("m", owed=False))
        await asyncio.sleep(0.05)
        seen.append((running.paused, waiting.done()))
        started = await asyncio.wait_for(waiting, 5)  # the database is back
        seen.append((running.paused, started))
        keeper.cancel()
        return seen

    assert asyncio.run(scenario()) == [(True, False), (False, True)]
    assert running.status == Batch.Status.IN_PROGRESS and not running.unrun


@pytest.mark.django_db
def test_lines_of_a_runner_that_lost_the_hold_are_left_to_its_holder_and_listed_once(
    settings, tmp_path
):
    """Runner 1 lost the batch to runner 2 (the sweep): what runner 1 finishes afterwards
    is not kept (runner 2 runs it; the ledger bills its request id once); what it kept
    before is listed once, in the output, not also as "not run" in the error file."""
    settings.BATCH_FILE_DIR = str(tmp_path)
    file_storage.cache_clear()
    batch = _saved_batch("batch_taken_over", Batch.Status.CANCELLING, total=3)
    answer = {"object": "chat.completion", "choices": []}
    line = runner._row(batch.id, 1, "one", "batch_req_1", LineResult(200, answer))
    assert progress.record_lines(batch.id, "runner-1", [line])
    Batch.objects.filter(id=batch.id).update(runner="runner-2")  # taken over
    late = runner._row(batch.id, 2, "two", "batch_req_2", LineResult(200, answer))
    assert not progress.record_lines(batch.id, "runner-1", [late])

    # Runner 2 never started lines 1 to 3: it reports them not run, but line 1 has its answer.
    not_started = {1: "one", 2: "two", 3: "three"}
    ended = progress.finish(batch.id, "runner-2", not_started, Batch.Status.CANCELLED)
    assert ended is not None and ended.status == Batch.Status.CANCELLED
    assert (ended.completed, ended.failed) == (1, 2)
    with file_storage().open(str(ended.output_file_id)) as output:
        answered = [json.loads(row)["custom_id"] for row in output]
    with file_storage().open(str(ended.error_file_id)) as errors:
        not_run = [json.loads(row)["custom_id"] for row in errors]
    assert (answered, not_run) == (["one"], ["two", "three"])


def test_lines_that_cannot_be_kept_do_not_stop_the_renewals_that_say_the_hold_is_lost(
    monkeypatch,
):
    """A group of lines the database keeps refusing: the renewals go on, so the runner
    learns the batch was handed to another runner (and stops) instead of pausing for ever."""

    def record_lines(batch_id: str, holder: str, rows: list[BatchLine]) -> bool:
        raise ValueError("a row no database keeps")

    monkeypatch.setattr(progress, "record_lines", record_lines)
    monkeypatch.setattr(progress, "renew", lambda batch_id, name: None)  # the hold was lost
    monkeypatch.setattr(runner, "KEEP_EVERY_S", 0.01)
    running = runner.BatchRunner(_batch(), "runner-1")
    running.finished = [BatchLine(line_number=1)]

    async def scenario() -> None:
        keeper = asyncio.ensure_future(running._keep_and_renew())
        await asyncio.sleep(1.2)  # past RENEW_EVERY_S
        keeper.cancel()

    asyncio.run(scenario())
    assert running.status is None  # the runner knows: it starts nothing more


@pytest.mark.django_db
def test_the_sweep_leaves_a_batch_whose_runner_renewed_after_it_was_read_as_orphaned():
    """The sweep reads the unheld batches, then marks them queued: a runner that renews in
    between (its database was slow, say) keeps its batch, and one still silent is queued."""
    stale = datetime.now(UTC) - timedelta(minutes=5)
    renewed = _saved_batch("batch_renewed", Batch.Status.IN_PROGRESS)
    renewed.pk = "batch_silent"
    renewed.save(force_insert=True)  # the same team's second batch, held by runner-1 too
    Batch.objects.filter(id__in=["batch_renewed", "batch_silent"]).update(heartbeat_at=stale)
    read = progress.orphans(stale + timedelta(seconds=1))
    assert sorted(read) == ["batch_renewed", "batch_silent"]
    assert progress.renew("batch_renewed", "runner-1") == Batch.Status.IN_PROGRESS
    assert progress.queue_orphans(read, stale + timedelta(seconds=1)) == ["batch_silent"]
    assert Batch.objects.get(id="batch_renewed").runner == "runner-1"
    assert Batch.objects.get(id="batch_silent").runner == progress.QUEUED
    assert progress.renew("batch_renewed", "runner-1") is not None  # the hold is still its
