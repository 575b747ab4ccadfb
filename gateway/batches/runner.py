"""Run a batch: every line of its input file through the pipeline, at batch priority,
while the fleet has room, until all have an answer, the batch is cancelled, or its window
ends; then its output and error files.

Resumable by construction: a finished line is a row (gateway/batches/progress.py), kept in
small groups as lines finish; a runner that dies loses at most the group it had not kept
yet, and the next runner (the sweep starts one once the hold goes stale) skips every line
that has a row. A line run twice has one usage record (its request id is derived from its
batch and number), and one line in the output (one row per line number).

A line the dead runner billed but never kept is run again even when the batch is being
cancelled or has expired, under the request id it was billed under: its answer is owed
(the chaos run found such lines reported `batch_cancelled` although they were billed), and
the ledger keeps one record per request id, so it is billed once.
"""

import asyncio
import logging
import time
from collections.abc import Iterator
from contextlib import ExitStack, suppress
from typing import IO

from django.conf import settings
from django.db import DatabaseError
from django.utils import timezone

from foundation.db import database_read, database_work_aside
from foundation.redis_clients import REDIS_FAILURES
from foundation.text import storable
from gateway.batches import progress
from gateway.batches.input_file import (
    GENERATION_ENDPOINTS,
    LineRequest,
    MalformedLine,
    parse_generation,
    raw_lines,
    read_line,
)
from gateway.batches.lines import LineResult, attempt_ids, line_request_id, run_line
from gateway.batches.models import Batch, BatchLine
from gateway.batches.storage import file_storage
from gateway.serving import settlement
from gateway.serving.admission import BatchKeyCredential, choose_target
from gateway.serving.errors import DOMAIN_ERRORS
from inference.client import close_http_session
from inference.deployments import catalog
from scaling.routing.batch_meter import BatchMeter, OwnLine
from scaling.routing.tiers import AUTO_MODEL

logger = logging.getLogger(__name__)
Status = Batch.Status
RENEW_EVERY_S = 1.0  # also how soon a cancel is seen
KEEP_EVERY_S = 0.5  # finished lines are kept at least this often
KEEP_AT_MOST = 200  # and in groups of at most this many
# A runner with no room asks the meter again when one of its lines ends, or after this
# (the fleet snapshot's own refresh: interactive load may have fallen).
WAIT_FOR_ROOM_S = 0.2


class BatchRunner:
    def __init__(self, batch: Batch, runner: str) -> None:
        self.batch = batch
        self.runner = runner
        self.credential = BatchKeyCredential(batch.api_key_id, batch.team_id, batch.id)
        self.meter = BatchMeter()
        # As last read: cancelling, or None (the hold was lost), stops new lines.
        self.status: str | None = batch.status
        # The hold went unrenewed for half of BATCH_RUNNER_STALE_S (the database away): no
        # line starts until a renewal says whether it is still ours. Not an end: the lines
        # not started stay for this runner (or the next), never reported as not run.
        self.paused = False
        self.finished: list[BatchLine] = []
        self.unrun: dict[int, str] = {}  # line number -> custom_id of lines not started
        self.owed: dict[int, str] = {}  # billed, never kept: line number -> its request id
        self.recorded: dict[int, set[str]] = {}  # line number -> its ids in the ledger
        self.tasks: set[asyncio.Task[None]] = set()
        self.line_ended = asyncio.Event()

    @property
    def stopping(self) -> bool:
        return self.status != Status.IN_PROGRESS or timezone.now() >= self.batch.expires_at

    async def run(self, content: IO[bytes]) -> None:
        """Run the lines of `content` (the batch's input file, opened by run_batch) that no
        earlier runner finished."""
        # Renewing from the start: reading what earlier runners billed moves the usage
        # stream into the ledger first, which takes long after an outage, and a hold left
        # unrenewed meanwhile is handed to a second runner.
        keeper = asyncio.create_task(self._keep_and_renew())
        try:
            done = await database_read(progress.finished_line_numbers)(self.batch.id)
            billed = await database_work_aside(progress.billed_lines)(self.batch.id)
            self.recorded = await database_work_aside(progress.recorded_attempts)(self.batch.id)
            self.owed = {number: rid for number, rid in billed.items() if number not in done}
            if self.owed:
                logger.info(
                    "batch %s: %d line(s) billed but not kept by an earlier runner; run again",
                    self.batch.id,
                    len(self.owed),
                )
            await self._run_lines(_lines(content), done)
        finally:
            # Every line started runs to its end and is kept, also when reading the next
            # failed (a database error, say): cut off by the loop's end, a line is billed
            # and never kept, and the next runner runs it again.
            await asyncio.gather(*self.tasks, return_exceptions=True)
            await self.meter.close()  # a replica asked for is no longer waited for
            keeper.cancel()
            with suppress(asyncio.CancelledError):
                await keeper
            await self._keep()
        if self.status is None:
            return  # the hold was lost: whoever holds it now finishes it
        await database_read(progress.finish)(self.batch.id, self.runner, self.unrun, self._end())

    def _end(self) -> Status:
        if self.status == Status.CANCELLING:
            return Status.CANCELLED
        if self.unrun:
            return Status.EXPIRED
        return Status.COMPLETED

    async def _run_lines(
        self, lines: Iterator[tuple[int, LineRequest | MalformedLine]], done: set[int]
    ) -> None:
        seen: set[str] = set()
        for number, line in lines:
            custom_id = "" if isinstance(line, MalformedLine) else line.custom_id
            duplicate = bool(custom_id) and custom_id in seen
            seen.add(custom_id)
            if number in done:
                continue
            if not isinstance(line, MalformedLine) and line.url != self.batch.endpoint:
                line = MalformedLine(f"url must be the batch's endpoint, {self.batch.endpoint}")
            if isinstance(line, MalformedLine) or duplicate:
                why = (
                    f"custom_id {custom_id!r} was used by an earlier line"
                    if duplicate
                    else str(line)
                )
                self._malformed(number, custom_id, why)
                continue
            model = await self.metered_model(line)
            if not await self._wait_for_room(model, owed=number in self.owed):
                self.unrun[number] = line.custom_id
                continue
            # Counted as started now, before the task first runs: the meter's next answer
            # must see it.
            started = self.meter.started_line(model)
            task = asyncio.create_task(self._run(line, model, started))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)

    async def metered_model(self, line: LineRequest) -> str:
        """The deployment whose spare capacity meters the line: the one it names or, for
        model "auto", the one admission will choose for it (a batch-tier deployment first).
        A line admission would refuse is metered by its own name (it will not wait)."""
        model = str(line.body["model"])
        if model != AUTO_MODEL or line.url not in GENERATION_ENDPOINTS:
            return model
        try:
            caller = await self.credential.authorize()
            target = await choose_target(caller, parse_generation(line))
        except DOMAIN_ERRORS:
            return model
        return target.deployment.name

    async def _wait_for_room(self, model: str, owed: bool) -> bool:
        """Until the line may start (True) or must not (False: the batch stopped, or its
        hold was lost). An owed line (billed by a dead runner, never kept) starts whatever
        the meter says, even once the batch stops (the module docstring says why). No line
        starts while the runner is paused."""
        deployment = await catalog.get(model)
        in_process = deployment is not None and deployment.in_process
        while self.status is not None:
            if not self.paused:
                if owed:
                    return True
                if self.stopping:
                    return False
                try:
                    if deployment is None or await self.meter.may_start(model, in_process):
                        return True  # an unknown model: the pipeline's refusal is the answer
                except REDIS_FAILURES as exc:  # the fleet snapshot is unreadable (a restart)
                    logger.warning("batch %s: no fleet snapshot (%s); waiting", self.batch.id, exc)
            self.line_ended.clear()
            with suppress(TimeoutError):
                await asyncio.wait_for(self.line_ended.wait(), WAIT_FOR_ROOM_S)
        return False

    async def _run(self, line: LineRequest, model: str, started: OwnLine) -> None:
        number = line.line_number
        attempts = attempt_ids(
            line_request_id(self.batch.id, number),
            self.recorded.get(number, ()),
            self.owed.get(number),
        )
        request_id = attempts[0]
        try:
            result = await run_line(line, self.credential, attempts)
        except Exception:
            logger.exception(
                "batch %s line %d failed unexpectedly", self.batch.id, line.line_number
            )
            result = LineResult(
                500,
                {
                    "error": {
                        "message": "The line failed in the gateway.",
                        "type": "api_error",
                        "param": None,
                        "code": "internal_error",
                    }
                },
                request_id=request_id,
            )
        finally:
            self.meter.finished_line(model, started)
            self.line_ended.set()
        self.finished.append(
            _row(self.batch.id, line.line_number, line.custom_id, result.request_id, result)
        )

    def _malformed(self, number: int, custom_id: str, why: str) -> None:
        error = {"code": "invalid_request", "message": f"Line {number}: {why}."}
        request_id = line_request_id(self.batch.id, number)
        self.finished.append(
            _row(self.batch.id, number, custom_id, request_id, LineResult(0, None), error)
        )

    async def _keep_and_renew(self) -> None:
        """Keep finished lines and renew the hold, each through any error of its own: a
        keeper that died on one (a failover) left the runner starting lines on a hold
        nobody renewed, which the sweep then handed to a second runner running the same
        lines; and lines that cannot be kept must not stop the renewals, which alone tell
        the runner whether the batch is still its own."""
        renewed = time.monotonic()
        while True:
            await asyncio.sleep(KEEP_EVERY_S)
            try:
                await self._keep()
            except Exception as exc:  # a database error, or a bug: the keeper lives on
                self._said("keeping finished lines", exc)
            if time.monotonic() - renewed >= RENEW_EVERY_S or self.stopping or self.paused:
                try:
                    self.status = await database_read(progress.renew)(self.batch.id, self.runner)
                except Exception as exc:
                    self._said("renewing the hold", exc)
                else:
                    renewed = time.monotonic()
                    if self.paused:
                        logger.info("batch %s: hold renewed, lines start again", self.batch.id)
                    self.paused = False
            unrenewed_s = time.monotonic() - renewed
            if unrenewed_s > settings.BATCH_RUNNER_STALE_S / 2 and not self.paused:
                # Another runner may be given the batch soon: start no more lines until a
                # renewal says whether the hold is still ours.
                logger.error(
                    "batch %s: hold not renewed for %.0f s, no new lines",
                    self.batch.id,
                    unrenewed_s,
                )
                self.paused = True

    def _said(self, doing: str, exc: Exception) -> None:
        logger.warning(
            "batch %s: error %s: %s",
            self.batch.id,
            doing,
            exc,
            exc_info=not isinstance(exc, DatabaseError),
        )

    async def _keep(self) -> None:
        """Write finished lines; a group is dropped from memory only once it is written."""
        while self.finished:
            group = self.finished[:KEEP_AT_MOST]
            if not await database_read(progress.record_lines)(self.batch.id, self.runner, group):
                logger.warning(
                    "batch %s: hold lost; %d finished line(s) left to its holder",
                    self.batch.id,
                    len(group),
                )
                self.status = None  # start no more lines: they are the holder's now
            self.finished = self.finished[len(group) :]  # lines finished meanwhile stay


def _lines(content: IO[bytes]) -> Iterator[tuple[int, LineRequest | MalformedLine]]:
    for number, raw in raw_lines(content):
        try:
            yield number, read_line(number, raw)
        except MalformedLine as exc:
            yield number, exc


def _row(
    batch_id: str,
    number: int,
    custom_id: str,
    request_id: str,
    result: LineResult,
    error: dict[str, str] | None = None,
) -> BatchLine:
    return BatchLine(  # storable: a reply or error quoting a NUL would stop the keeper
        batch_id=batch_id,
        line_number=number,
        custom_id=custom_id,
        request_id=request_id,
        status_code=result.status_code,
        body=storable(result.body),
        error=storable(error),
        prompt_tokens=result.prompt_tokens,
        completion_tokens=result.completion_tokens,
        cost_micros=result.cost_micros,
        headers=storable(result.headers),
        finished_at=timezone.now(),
    )


async def run_batch(batch_id: str, runner: str) -> None:
    """Hold the batch and run it to its end; nothing if another runner holds it."""
    batch = await database_read(progress.claim)(batch_id, runner)
    if batch is None:
        return
    if batch.status == Status.FINALIZING:
        batch.status = Status.IN_PROGRESS  # a runner died while finalizing: finish again
    # Opened once, off the event loop: object storage downloads the whole file here
    # (gateway/batches/object_storage.py), which must not stall the loop's other tasks.
    with ExitStack() as opened:
        opening = file_storage().open(batch.input_file_id)
        renewing: asyncio.Task[bool] = asyncio.create_task(_renew_hold(batch_id, runner))
        try:
            content: IO[bytes] | None = await asyncio.to_thread(opened.enter_context, opening)
        except (FileNotFoundError, ValueError):
            content = None
        finally:
            renewing.cancel()  # before fail: its hold for writing files must not be undone
        if renewing.done() and not renewing.cancelled() and renewing.result() is False:
            logger.warning("batch %s: hold lost while its input was opened", batch_id)
            return  # whoever holds it now runs it
        if content is None:
            message = "The input file was deleted."
            await database_read(progress.fail)(batch_id, runner, "missing_file", message)
            return
        try:
            await BatchRunner(batch, runner).run(content)
        finally:
            # Lines' usage events queued again after a Redis outage: the loop ends with
            # this run, and a line counted finished must not lose its usage unlogged.
            await settlement.finish_background(sum(settlement.REQUEUE_PAUSES_S) + 5)
            await close_http_session()  # its connections belong to this event loop


async def _renew_hold(batch_id: str, runner: str) -> bool:
    """Renew the hold until cancelled (while the input file is opened: object storage
    downloads it whole, which can outlast BATCH_RUNNER_STALE_S), or until a renewal finds
    it lost (returns False); errors are logged."""
    while True:
        await asyncio.sleep(RENEW_EVERY_S)
        try:
            if await database_read(progress.renew)(batch_id, runner) is None:
                return False
        except Exception as exc:
            logger.warning("batch %s: hold not renewed while opening its input: %s", batch_id, exc)
