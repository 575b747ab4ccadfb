"""OpenAI's Batch API through a live gateway, with the official openai client, simulator
workers and a real Celery worker running the batches: every line answered exactly once
(in the output or error file, and in the usage ledger), malformed lines reported with their
line numbers, cancel and expiry, team isolation, refusals at creation, the batch discount,
and a Celery worker SIGKILLed mid-batch that a second one finishes without a duplicate."""

import asyncio
import http.client
from datetime import timedelta
from pathlib import Path
from typing import Any

import openai
import pytest
from django.utils import timezone

from gateway.accounts import actions
from gateway.batches.input_file import CHAT, LineRequest
from gateway.batches.lines import attempt_ids, line_request_id, run_line
from gateway.batches.models import Batch, BatchLine
from gateway.serving.admission import BatchKeyCredential
from gateway.usage.ledger import ingest
from gateway.usage.models import UsageRecord
from inference.client import close_http_session
from tests.batch_stack import PRICE_IN, PRICE_OUT, TEAM_STORAGE, Stack, chat_line, jsonl
from tests.waiting import wait_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.live]


def test_a_batch_answers_each_custom_id_once_and_reports_malformed_lines_by_number(stack):
    good = [chat_line(f"q{n}", f"Batch question number {n}") for n in range(8)]
    lines: list[Any] = [
        *good[:4],
        b"this is not json",
        chat_line("q0", "a second line with the custom_id q0"),
        {"custom_id": "no-body", "method": "POST", "url": "/v1/chat/completions"},
        chat_line("bad-messages", "x") | {"body": {"model": "small-model", "messages": "hi"}},
        *good[4:],
    ]
    stack.start_worker()
    batch = stack.wait_for(stack.submit(lines), {"completed"})

    # Eight answers although the team may send 2 requests a minute: batch lines are not
    # held to the minute limits.
    assert batch.request_counts.total == 12
    assert (batch.request_counts.completed, batch.request_counts.failed) == (8, 4)
    for _ in range(2):  # and they did not use the team's interactive minute either
        stack.client.chat.completions.create(
            model="small-model", messages=[{"role": "user", "content": "hi"}], max_tokens=2
        )
    output = stack.read(batch.output_file_id)
    assert sorted(line["custom_id"] for line in output) == sorted(f"q{n}" for n in range(8))
    for line in output:
        assert line["response"]["status_code"] == 200
        assert line["response"]["body"]["choices"][0]["message"]["content"]
        assert line["response"]["body"]["object"] == "chat.completion"
    errors = {
        line["error"]["line"] if line["error"] else line["custom_id"]: line
        for line in stack.read(batch.error_file_id)
    }
    assert set(errors) == {5, 6, 7, "bad-messages"}
    assert "not JSON" in errors[5]["error"]["message"]
    assert "custom_id 'q0' was used by an earlier line" in errors[6]["error"]["message"]
    assert "body must be a JSON object" in errors[7]["error"]["message"]
    refused = errors["bad-messages"]["response"]
    assert refused["status_code"] == 400 and refused["body"]["error"]["param"] == "messages"

    # The ledger holds each answered line once, at half the price (the default discount).
    ingest("test")
    records = UsageRecord.objects.filter(batch_id=batch.id, status="ok")
    assert records.count() == 8
    assert {r.request_id for r in records} == {line["response"]["request_id"] for line in output}
    for record in records:
        full = record.prompt_tokens * PRICE_IN + record.completion_tokens * PRICE_OUT
        assert record.cost_micros == int(full / 2)
    assert stack.client.batches.retrieve(batch.id).usage.total_tokens == sum(
        r.prompt_tokens + r.completion_tokens for r in records
    )


def test_cancel_stops_new_lines_and_reports_the_rest(stack):
    stack.start_worker()
    batch_id = stack.submit([chat_line(f"c{n}", f"Cancel me {n}") for n in range(400)])
    wait_until(
        lambda: BatchLine.objects.filter(batch_id=batch_id).count() >= 5, 30, "some lines to finish"
    )
    assert stack.client.batches.cancel(batch_id).status == "cancelling"
    batch = stack.wait_for(batch_id, {"cancelled"})

    answered = stack.read(batch.output_file_id)
    not_run = [
        x for x in stack.read(batch.error_file_id) if x["error"]["code"] == "batch_cancelled"
    ]
    assert 5 <= len(answered) < 400
    assert len(answered) + len(not_run) == 400  # nothing lost: every line is in one file
    assert batch.request_counts.completed == len(answered)


def test_lines_billed_by_a_dead_runner_are_answered_even_when_the_batch_is_cancelled(stack):
    """A runner killed after lines settled (billed) but before their rows were kept: when
    the batch is then cancelled, the next runner still runs those lines (under the request
    id they were billed under), so they are answered, not reported cancelled, and billed
    once; the others are reported cancelled (the chaos run found the first kind reported
    `batch_cancelled`)."""
    questions = [chat_line(f"d{n}", f"Dead runner question {n}") for n in range(6)]
    batch_id = stack.submit(questions)
    batch = Batch.objects.get(id=batch_id)
    credential = BatchKeyCredential(batch.api_key_id, batch.team_id, batch_id)

    async def bill_without_keeping(number: int) -> None:  # what the dead runner did
        line = LineRequest(number, f"d{number - 1}", CHAT, questions[number - 1]["body"])
        result = await run_line(line, credential, attempt_ids(line_request_id(batch_id, number)))
        assert result.status_code == 200
        await close_http_session()

    for number in (2, 5):
        asyncio.run(bill_without_keeping(number))
    ingest("test")
    answered_before = answering_records(batch_id)
    assert sorted(answered_before) == [2, 5]
    assert stack.client.batches.cancel(batch_id).status == "cancelling"

    stack.start_worker()
    stack.sweep()
    batch = stack.wait_for(batch_id, {"cancelled"})

    answered = stack.read(batch.output_file_id)
    cancelled = stack.read(batch.error_file_id)
    assert sorted(x["custom_id"] for x in answered) == ["d1", "d4"]
    assert sorted(x["custom_id"] for x in cancelled) == ["d0", "d2", "d3", "d5"]
    assert {x["error"]["code"] for x in cancelled} == {"batch_cancelled"}
    ingest("test")
    assert answering_records(batch_id) == answered_before  # billed once: the same records


def answering_records(batch_id: str) -> dict[int, str]:
    """Line number -> the request id of its usage record with generated tokens (the
    in-process pipeline may have retried a line once, under `_r2`, before a worker was
    routable to it: that first attempt billed nothing)."""
    found: dict[int, str] = {}
    records = UsageRecord.objects.filter(batch_id=batch_id, completion_tokens__gt=0)
    for request_id in records.values_list("request_id", flat=True):
        number = int(request_id.split("_")[3])
        assert number not in found, f"line {number} billed twice: {request_id}"
        found[number] = request_id
    return found


def test_a_line_whose_failed_attempt_is_in_the_ledger_is_rerun_under_a_new_id(stack):
    """A dead runner's first attempt at line 1 failed (recorded, nothing billed): the next
    runner's answer under that same id was dropped by the ledger (it keeps the first record
    of an id), so the line was answered and never billed."""
    batch_id = stack.submit([chat_line("one", "First question"), chat_line("two", "Second")])
    failed_first_try = line_request_id(batch_id, 1)
    team = Batch.objects.get(id=batch_id).team
    UsageRecord.objects.create(
        request_id=failed_first_try,
        team=team,
        model="small-model",
        status="failed",
        batch_id=batch_id,
        created_at=timezone.now(),
    )
    stack.start_worker()
    batch = stack.wait_for(batch_id, {"completed"})
    answers = {line["custom_id"]: line["response"] for line in stack.read(batch.output_file_id)}
    assert answers["one"]["request_id"] == f"{failed_first_try}_r2"
    assert answers["two"]["request_id"] == line_request_id(batch_id, 2)
    ingest("test")
    billed = UsageRecord.objects.get(request_id=answers["one"]["request_id"])
    assert billed.status == "ok" and billed.completion_tokens > 0


def test_a_batch_past_its_window_expires_with_every_line_reported(stack):
    batch_id = stack.submit([chat_line(f"e{n}", f"Expire {n}") for n in range(5)])
    Batch.objects.filter(id=batch_id).update(expires_at=timezone.now() - timedelta(seconds=1))
    stack.start_worker()
    batch = stack.wait_for(batch_id, {"expired"})

    assert batch.output_file_id is None
    expired = stack.read(batch.error_file_id)
    assert [x["custom_id"] for x in expired] == [f"e{n}" for n in range(5)]
    assert {x["error"]["code"] for x in expired} == {"batch_expired"}


def kill_mid_batch(stack: Stack, batch_id: str, total: int) -> None:
    """SIGKILL the Celery worker once between 10 and total - 20 lines are kept."""

    def caught() -> bool:
        done = BatchLine.objects.filter(batch_id=batch_id).count()
        if 10 <= done < total - 20:
            stack.kill_worker()
            return True
        return False

    wait_until(caught, 60, "the worker to be caught mid-batch", poll_s=0.02)


def resume(stack: Stack, batch_id: str) -> None:
    """A new worker, and the sweep once the dead runner's hold is stale."""
    stack.start_worker()
    wait_until(
        lambda: Batch.objects.filter(
            id=batch_id, heartbeat_at__lt=timezone.now() - timedelta(seconds=2)
        ).exists(),
        10,
        "the dead runner's hold to go stale",
    )
    stack.sweep()


def test_a_celery_worker_killed_mid_batch_is_resumed_without_duplicates(stack):
    stack.start_worker()
    total = 150
    batch_id = stack.submit([chat_line(f"k{n}", f"Resume question {n}") for n in range(total)])

    kill_mid_batch(stack, batch_id, total)
    kept_at_kill = BatchLine.objects.filter(batch_id=batch_id).count()
    assert Batch.objects.get(id=batch_id).status == "in_progress"

    resume(stack, batch_id)
    batch = stack.wait_for(batch_id, {"completed"})

    output = stack.read(batch.output_file_id)
    custom_ids = [line["custom_id"] for line in output]
    assert sorted(custom_ids) == sorted(f"k{n}" for n in range(total))  # each exactly once
    assert batch.error_file_id is None
    assert kept_at_kill < total
    ingest("test")
    records = UsageRecord.objects.filter(batch_id=batch_id)
    assert records.count() == total
    assert records.values("request_id").distinct().count() == total


def test_a_batch_whose_input_is_deleted_before_it_resumes_keeps_the_lines_it_finished(stack):
    """Its runner died, then its input file was deleted (or expired) before the next one
    resumed it: the batch fails, and the lines already answered (and billed) are in its
    output file. Before, they were lost with the input."""
    stack.start_worker()
    total = 150
    batch_id = stack.submit([chat_line(f"d{n}", f"Delete question {n}") for n in range(total)])

    kill_mid_batch(stack, batch_id, total)
    kept = set(BatchLine.objects.filter(batch_id=batch_id).values_list("custom_id", flat=True))
    stack.client.files.delete(Batch.objects.get(id=batch_id).input_file_id)

    resume(stack, batch_id)
    batch = stack.wait_for(batch_id, {"failed", "completed"})

    assert batch.status == "failed"
    assert batch.errors is not None and batch.errors.data
    assert batch.errors.data[0].code == "missing_file"
    answered = {line["custom_id"] for line in stack.read(batch.output_file_id)}
    assert answered == kept and len(kept) >= 10
    assert batch.request_counts is not None and batch.request_counts.completed == len(kept)


def test_files_and_batches_are_invisible_to_other_teams(stack):
    file_id = stack.upload(jsonl([chat_line("a", "hello")]))
    batch_id = stack.client.batches.create(
        input_file_id=file_id, endpoint="/v1/chat/completions", completion_window="24h"
    ).id
    other_team = actions.create_team("Other")
    other = openai.OpenAI(
        base_url=f"{stack.gateway.url}/v1",
        api_key=actions.issue_api_key(other_team).plaintext,
        max_retries=0,
    )
    with pytest.raises(openai.NotFoundError):
        other.files.retrieve(file_id)
    with pytest.raises(openai.NotFoundError):
        other.files.content(file_id)
    with pytest.raises(openai.NotFoundError):
        other.files.delete(file_id)
    with pytest.raises(openai.NotFoundError):
        other.batches.retrieve(batch_id)
    with pytest.raises(openai.NotFoundError):
        other.batches.cancel(batch_id)
    with pytest.raises(openai.NotFoundError):
        other.batches.create(
            input_file_id=file_id, endpoint="/v1/chat/completions", completion_window="24h"
        )
    assert other.files.list().data == []
    assert other.batches.list().data == []
    with pytest.raises(openai.BadRequestError) as paging:  # its id is no cursor of theirs
        other.batches.list(after=batch_id)
    assert paging.value.param == "after"
    assert [f.id for f in stack.client.files.list().data] == [file_id]
    assert [b.id for b in stack.client.batches.list().data] == [batch_id]


def test_bad_files_and_batches_are_refused_at_creation(stack):
    with pytest.raises(openai.BadRequestError, match="no well-formed batch line"):
        stack.upload(b"id,question\n1,hello\n")
    with pytest.raises(openai.BadRequestError, match="not UTF-8"):
        stack.upload(b"\xff\xfe" + jsonl([chat_line("a", "hello")]))
    with pytest.raises(openai.APIStatusError) as too_large:
        stack.upload(jsonl([chat_line(f"big{n}", "x" * 1000) for n in range(200)]))
    assert too_large.value.status_code == 413

    unknown = stack.upload(jsonl([chat_line("a", "hello", model="no-such-model")]))
    with pytest.raises(openai.NotFoundError, match="no-such-model"):
        stack.client.batches.create(
            input_file_id=unknown, endpoint="/v1/chat/completions", completion_window="24h"
        )
    good = stack.upload(jsonl([chat_line("a", "hello")]))
    deep = http.client.HTTPConnection("127.0.0.1", stack.gateway.port, timeout=10)
    deep.request("POST", "/v1/batches", b"[" * 100_000, {"Authorization": f"Bearer {stack.key}"})
    refused = deep.getresponse()
    assert refused.status == 400 and b"nests too deep" in refused.read()
    with pytest.raises(openai.BadRequestError, match="completion_window"):
        stack.client.batches.create(
            input_file_id=good,
            endpoint="/v1/chat/completions",
            completion_window="1h",
        )
    with pytest.raises(openai.NotFoundError):
        stack.client.batches.create(
            input_file_id="file-000000000000000000000000",
            endpoint="/v1/chat/completions",
            completion_window="24h",
        )

    # The team's queue of unfinished batches is bounded in tokens (prompt + max_tokens).
    actions.update_quota_policy(stack.team, max_batch_queue_tokens=30)
    with pytest.raises(openai.RateLimitError, match="enqueued batch tokens"):
        stack.client.batches.create(
            input_file_id=stack.upload(jsonl([chat_line(f"t{n}", "hello") for n in range(5)])),
            endpoint="/v1/chat/completions",
            completion_window="24h",
        )
    assert not Batch.objects.exists()


def test_a_teams_files_are_bounded_and_deleting_a_file_removes_it(stack):
    file_id = stack.upload(jsonl([chat_line("a", "hello")]))
    big = jsonl([chat_line(f"big{n}", "x" * 1000) for n in range(100)])  # about 110 KB
    while True:
        try:
            stack.upload(big)
        except openai.APIStatusError as refused:
            assert refused.status_code == 413
            assert "Delete files it no longer needs" in refused.message
            break
    assert sum(f.bytes for f in stack.client.files.list().data) <= TEAM_STORAGE
    assert stack.client.files.delete(file_id).deleted is True
    with pytest.raises(openai.NotFoundError):
        stack.client.files.retrieve(file_id)
    assert file_id not in {p.name for p in Path(stack.env["BATCH_FILE_DIR"]).glob("file-*")}
    stack.upload(jsonl([chat_line("b", "hello")]))  # room again


def test_an_embeddings_batch_runs_on_the_built_in_model(stack):
    texts = [f"How do I rotate the API key of team {n}?" for n in range(6)]
    lines = [
        {
            "custom_id": f"v{n}",
            "method": "POST",
            "url": "/v1/embeddings",
            "body": {"model": "all-minilm-l6-v2", "input": text, "encoding_format": "float"},
        }
        for n, text in enumerate(texts)
    ]
    lines.append(chat_line("chat-in-an-embeddings-batch", "hello"))
    stack.start_worker()
    created = stack.client.batches.create(
        input_file_id=stack.upload(jsonl(lines)),
        endpoint="/v1/embeddings",
        completion_window="24h",
    )
    batch = stack.wait_for(created.id, {"completed"})

    output = {
        line["custom_id"]: line["response"]["body"] for line in stack.read(batch.output_file_id)
    }
    assert sorted(output) == [f"v{n}" for n in range(6)]
    for body in output.values():
        vector = body["data"][0]["embedding"]
        assert len(vector) == 384
        assert abs(sum(x * x for x in vector) - 1.0) < 1e-3  # the model's unit vectors
        assert body["usage"]["prompt_tokens"] > 0
    (wrong,) = stack.read(batch.error_file_id)
    assert wrong["custom_id"] == "chat-in-an-embeddings-batch"
    assert "/v1/embeddings" in wrong["error"]["message"]


def test_a_batch_whose_lines_do_not_fit_its_endpoint_is_refused(stack):
    chat_only = stack.upload(jsonl([chat_line("a", "hello")]))
    with pytest.raises(openai.BadRequestError, match="no well-formed line for /v1/embeddings"):
        stack.client.batches.create(
            input_file_id=chat_only, endpoint="/v1/embeddings", completion_window="24h"
        )
    body = {"model": "small-model", "input": "hello"}
    line = {"custom_id": "a", "method": "POST", "url": "/v1/embeddings", "body": body}
    with pytest.raises(openai.BadRequestError, match="does not serve /v1/embeddings"):
        stack.client.batches.create(
            input_file_id=stack.upload(jsonl([line])),
            endpoint="/v1/embeddings",
            completion_window="24h",
        )
