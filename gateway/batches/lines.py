"""One batch line through the same pipeline as an interactive request (keys, quotas,
caches, routing, the ledger): the batch adapter, as gateway/api/views.py is the HTTP one.

A line's request id is derived from its batch and line number, so a line run twice (its
runner died before the answer was kept) is one record in the usage ledger, which skips
request ids it has already written.
"""

import asyncio
import logging
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field, replace
from itertools import count, islice
from typing import Any

from caching.exact import CacheDirectives
from gateway.batches.input_file import GENERATION_ENDPOINTS, TEXT, LineRequest, parse_generation
from gateway.serving.admission import BatchKeyCredential
from gateway.serving.chat_body import collect_reply, collect_text_reply
from gateway.serving.embeddings import create_embeddings
from gateway.serving.errors import DOMAIN_ERRORS, ApiError, api_error
from gateway.serving.pipeline import open_completion
from inference.chat_request import InvalidRequest
from inference.embedding_request import parse_embedding_request

logger = logging.getLogger(__name__)
RETRYABLE_STATUSES = {502, 503}  # no worker, queue timeout, a worker that failed
ATTEMPTS = 3
RETRY_PAUSE_S = 2.0


@dataclass(frozen=True)
class LineResult:
    status_code: int  # 200, the error's HTTP status, or 0 for a line that was malformed
    body: dict[str, Any] | None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_micros: int = 0
    request_id: str = ""  # the attempt that gave this answer
    # The x-sluice-* headers an HTTP reply would carry: what admission changed in the
    # request (max_tokens clamped, turns trimmed, the prompt compressed) is never silent.
    headers: dict[str, str] = field(default_factory=dict)


def line_request_id(batch_id: str, line_number: int) -> str:
    return f"batch_req_{batch_id.removeprefix('batch_')}_{line_number}"


def attempt_ids(
    request_id: str, recorded: Collection[str] = (), billed: str | None = None
) -> list[str]:
    """The request ids a line's ATTEMPTS go out under. The ledger keeps the first record
    of a request id, so:
    - a line an earlier runner billed but never kept (`billed`, its id) goes out under
      that id every time: it is billed once, whatever its attempts now (a new id for a
      retry billed it twice);
    - any other line under ids the ledger has not seen (`recorded`: every id it holds for
      the line): the line's own (`request_id`), then `_r2`, `_r3` and on. A retry under
      the same id left the line billed as its failed first try (the chaos run found it),
      and so did a rerun under the id of a dead runner's failed attempt."""
    if billed is not None:
        return [billed] * ATTEMPTS
    candidates = (request_id if n == 1 else f"{request_id}_r{n}" for n in count(1))
    return list(islice((c for c in candidates if c not in recorded), ATTEMPTS))


async def run_line(
    line: LineRequest, credential: BatchKeyCredential, attempts: Sequence[str]
) -> LineResult:
    """The line's answer; a worker-side failure (502/503) is tried again under the next
    of `attempts` (attempt_ids), after a pause, until the last one's answer is the line's."""
    for attempt, attempt_id in enumerate(attempts, 1):
        result = replace(await _run_once(line, credential, attempt_id), request_id=attempt_id)
        if result.status_code not in RETRYABLE_STATUSES or attempt == len(attempts):
            return result
        logger.info("batch line %s: %s, retrying", attempt_id, result.status_code)
        await asyncio.sleep(RETRY_PAUSE_S * attempt)
    raise AssertionError("unreachable")


async def _run_once(
    line: LineRequest, credential: BatchKeyCredential, request_id: str
) -> LineResult:
    try:
        if line.url in GENERATION_ENDPOINTS:
            return await _chat(line, credential, request_id)
        return await _embeddings(line, credential, request_id)
    except DOMAIN_ERRORS as exc:
        return _refused(api_error(exc))


async def _chat(line: LineRequest, credential: BatchKeyCredential, request_id: str) -> LineResult:
    """A chat or text completion line (the same pipeline; the reply in its endpoint's shape)."""

    def read() -> Any:
        chat = parse_generation(line)
        if chat.stream:
            raise InvalidRequest("A batch line cannot stream: leave stream unset.", "stream")
        return chat

    run = await open_completion(credential, read, CacheDirectives(), request_id)
    async with run:
        body = await (collect_text_reply(run) if line.url == TEXT else collect_reply(run))
    usage = body["usage"]
    return LineResult(
        200,
        body,
        usage["prompt_tokens"],
        usage["completion_tokens"],
        run.cost_micros,
        headers=run.target.headers(),
    )


async def _embeddings(
    line: LineRequest, credential: BatchKeyCredential, request_id: str
) -> LineResult:
    result = await create_embeddings(
        credential, lambda: parse_embedding_request(line.encoded_body()), request_id
    )
    run = result.run
    cost = run.deployment.cost_micros(run.used_tokens, 0, batch=True, spot=run.on_spot)
    return LineResult(200, result.body(), run.used_tokens, 0, cost)


def _refused(error: ApiError) -> LineResult:
    return LineResult(error.status, error.body())
