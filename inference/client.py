"""Stream chat completions from vLLM workers over keep-alive connections per event loop
(inference/worker_http.py), or, for a request the client does not stream, ask for the
whole reply (`whole_from_worker`).

A stream's timeouts: connect, first token, and idle between chunks. A failure before the first
token is retried on another worker (nothing has reached the client yet); a failure after
it is reported, never retried, since a second generation would not continue the first.
Closing the stream (client gone, generator closed) closes the upstream connection, and
vLLM aborts a request whose connection closes.
"""

import asyncio
import logging
from collections.abc import AsyncGenerator, Mapping
from typing import Any

import orjson
from django.conf import settings

from foundation.json_bytes import json_bytes
from inference import worker_http
from inference.chat_request import CHAT_PATH, TEXT_PATH
from inference.reply import as_one_chunk
from inference.text_completion import as_chat_chunk
from inference.worker_http import AnswerTooLarge, ProtocolError, WorkerResponse

logger = logging.getLogger(__name__)


PLATFORM_REFUSALS = frozenset({401, 403, 429})  # the worker refused us, not the request


class UpstreamError(Exception):
    """A worker failed. `status` is its HTTP status when it answered with an error."""

    def __init__(
        self, message: str, worker_url: str, before_first_token: bool, status: int | None = None
    ) -> None:
        super().__init__(message)
        self.worker_url = worker_url
        self.before_first_token = before_first_token
        self.status = status

    @property
    def client_error(self) -> bool:
        """The request itself was refused (vLLM's 4xx): another worker would refuse it too.
        Not a refusal of the platform's own key (401, 403: the deployment's api_key_env is
        wrong or unset) nor a worker's rate limit (429): those are the platform's failures,
        not the client's request, and another worker may take it."""
        return self.status is not None and 400 <= self.status < 500 and not self.platform_refused

    @property
    def platform_refused(self) -> bool:
        return self.status in PLATFORM_REFUSALS

    @property
    def retryable(self) -> bool:
        return self.before_first_token and not self.client_error


# What a worker's failure can raise from the connection: refused, reset or closed
# (OSError), an answer this client cannot read (ProtocolError), JSON that is not (ValueError).
TRANSPORT_ERRORS = (OSError, ProtocolError, ValueError)
MAX_ERROR_DETAIL_BYTES = 64 * 1024


async def post_json(
    url: str, path: str, payload: Any, headers: Mapping[str, str] | None = None
) -> WorkerResponse:
    """POST a JSON payload to a worker; the answer's status and headers, its body to read."""
    return await worker_http.post(
        url, path, json_bytes(payload), headers, settings.UPSTREAM_CONNECT_TIMEOUT_S
    )


async def refused_unless_ok(response: WorkerResponse, url: str) -> None:
    """UpstreamError (retryable unless the request itself was refused) for an answer other
    than 200, with the start of its body."""
    if response.status != 200:
        detail = await error_detail(response)
        raise UpstreamError(
            f"worker answered {response.status}: {detail}", url, True, status=response.status
        )


async def error_detail(response: WorkerResponse) -> str:
    """The start of a worker's error answer, for the log and the client (empty if it cannot
    be read: the status is what matters)."""
    try:
        return (await response.read_all(MAX_ERROR_DETAIL_BYTES)).decode(errors="replace")[:500]
    except (OSError, ProtocolError):
        return ""


async def close_http_session() -> None:
    """Close this loop's worker connections (process shutdown, the end of a test's loop)."""
    worker_http.close_pool()


Chunk = dict[str, Any]


MAX_EVENT_BYTES = 8 * 1024 * 1024  # one SSE event from a worker (a chunk with logprobs is KBs)


async def _chunks(response: WorkerResponse, url: str) -> AsyncGenerator[Chunk, None]:
    """Parse an SSE body into chunk dicts; idle timeout between reads; stop at [DONE].

    Reads whatever the socket has (an event, usually whole, per read) and splits lines
    itself: a readline per line cost two reads and two timeouts per event (an event is its
    data line and a blank one), the largest share of a streamed chunk's gateway CPU. orjson
    parses the data (several times faster than json; NaN is refused, as vLLM never sends)."""
    # The first read waits as long as _open's first-token timeout lets it (a long prefill,
    # or a queue on the worker, can outlast the idle timeout); the idle timeout is for the
    # gaps after it.
    idle: float | None = None
    idle_after_first = settings.UPSTREAM_IDLE_TIMEOUT_S  # once: a setting read is a lookup
    pending = b""
    while True:
        try:
            data = await response.read(idle)
        except TimeoutError:
            raise UpstreamError("worker stopped sending (idle timeout)", url, False) from None
        if not data:
            raise UpstreamError("worker closed the stream before [DONE]", url, False)
        idle = idle_after_first
        lines = (pending + data).split(b"\n") if pending else data.split(b"\n")
        pending = lines.pop()  # the part after the last newline: an unfinished line
        if len(pending) > MAX_EVENT_BYTES:
            raise UpstreamError("worker sent an event over the size limit", url, False)
        for line in lines:
            if not line.startswith(b"data:"):
                continue  # blank separators, comments, event: and id: fields
            payload = line[5:].strip()
            if payload == b"[DONE]":
                return
            event = orjson.loads(payload)
            if type(event) is not dict:
                raise UpstreamError("worker sent an event that is not an object", url, False)
            if event.get("error") is not None or event.get("object") == "error":
                raise _error_event(event, url)
            yield event


def _error_event(event: Chunk, url: str) -> UpstreamError:
    """vLLM reports a failure after its 200 (a parser's exception, an engine error) as
    an event, `{"error": {"message", "type", "code"}}` (older releases: the same fields
    with `"object": "error"`), then [DONE]. Read as a chunk it would reach the client
    with the worker's own words, or end a text completion with no finish_reason and no
    error, and be billed as a success; as an UpstreamError it takes the failure's path
    (mid-stream an error chunk; as the first event, retried on another worker). Its code
    is logged, not read as an HTTP status: vLLM tags whatever failed in its generator 400
    BadRequestError, an engine's fault included, which the request cannot be blamed for
    (what the request gets wrong it refuses before its 200)."""
    error = event.get("error")
    detail = error if isinstance(error, dict) else event
    message = str(detail.get("message", ""))[:500]
    code = detail.get("code")
    return UpstreamError(f"worker sent an error event (code {code}): {message}", url, False)


async def _open(
    url: str, payload: dict[str, Any], path: str, headers: dict[str, str] | None
) -> tuple[WorkerResponse, Chunk, AsyncGenerator[Chunk, None]]:
    """POST and wait for the first chunk, all within the first-token timeout."""
    response = None
    try:
        async with asyncio.timeout(settings.UPSTREAM_FIRST_TOKEN_TIMEOUT_S):
            response = await post_json(url, path, payload, headers)
            await refused_unless_ok(response, url)
            chunks = _chunks(response, url)
            if path == TEXT_PATH:  # read on as chat deltas: one pipeline for both
                chunks = _as_chat_chunks(chunks)
            return response, await anext(chunks), chunks
    except BaseException as exc:
        if response is not None:
            response.close()
        if isinstance(exc, UpstreamError):
            if exc.before_first_token:
                raise
            # The stream's own failure (closed, too large), before its first chunk: nothing
            # reached the client, so another worker may still answer.
            raise UpstreamError(str(exc), url, True, status=exc.status) from exc
        if isinstance(exc, TimeoutError):
            raise UpstreamError("no first token in time", url, True) from None
        if isinstance(exc, (*TRANSPORT_ERRORS, StopAsyncIteration)):
            raise UpstreamError(
                f"worker failed before the first token: {exc!r}", url, True
            ) from exc
        raise


async def _as_chat_chunks(chunks: AsyncGenerator[Chunk, None]) -> AsyncGenerator[Chunk, None]:
    async for chunk in chunks:
        yield as_chat_chunk(chunk)


async def stream_from_worker(
    url: str,
    upstream_model: str,
    body: dict[str, Any],
    path: str = CHAT_PATH,
    headers: dict[str, str] | None = None,
) -> AsyncGenerator[Chunk, None]:
    """Stream one request from one worker (its own model name replaces ours), from its chat
    endpoint or, for a text completion, its /v1/completions (inference/text_completion.py),
    whose chunks come out as chat chunks. headers: the deployment's (its workers' API key:
    inference/worker_auth.py)."""
    payload = {**body, "model": upstream_model, "stream": True}
    response, first, chunks = await _open(url, payload, path, headers)
    finished = False
    try:
        yield first
        try:
            async for chunk in chunks:
                yield chunk
        except TRANSPORT_ERRORS as exc:
            raise UpstreamError(f"stream broke: {exc!r}", url, False) from exc
        finished = True
    finally:
        if finished:
            response.release()  # back to the pool: no new TCP connection per request
        else:
            response.close()  # mid-stream: drops the connection, so vLLM aborts the request


# A whole reply: every choice's message with its logprobs (n choices, KBs of logprobs a token).
MAX_WHOLE_REPLY_BYTES = 64 * 1024 * 1024


async def whole_from_worker(
    url: str,
    upstream_model: str,
    body: dict[str, Any],
    path: str = CHAT_PATH,
    headers: dict[str, str] | None = None,
    timeout_s: float | None = None,
) -> AsyncGenerator[Chunk, None]:
    """Ask one worker for a whole reply, not a stream, and yield it as one chunk (a text
    completion's too, as a chat chunk): what a request the client did not stream is asked.
    timeout_s: for all of it (default UPSTREAM_REPLY_TIMEOUT_S).

    A streamed reply costs this process tens of microseconds of CPU per token in reads,
    parsing and chunk handling (docs/scaling.md, "Tokens relayed"), and the worker its
    SSE per token; a whole reply costs one read and one parse. What it gives up: there is
    no first token to time or to bound, so the worker gets UPSTREAM_REPLY_TIMEOUT_S for all
    of it, and a failure is retried on another worker whenever it comes (nothing has
    reached the client) except that timeout and a reply over MAX_WHOLE_REPLY_BYTES (the
    worker may have generated all of it; another would do it again). A request asking
    logprobs is streamed instead (ChatRequest.asks_whole_reply): they make a reply large."""
    payload = {key: value for key, value in body.items() if key != "stream_options"}
    payload.update(model=upstream_model, stream=False)  # vLLM refuses stream_options here
    response = None
    try:
        if timeout_s is None:
            timeout_s = settings.UPSTREAM_REPLY_TIMEOUT_S
        async with asyncio.timeout(timeout_s):
            response = await post_json(url, path, payload, headers)
            await refused_unless_ok(response, url)
            raw = await response.read_all(MAX_WHOLE_REPLY_BYTES)  # released to the pool
        reply = orjson.loads(raw)
    except BaseException as exc:
        if response is not None:
            response.close()  # a no-op once read; else drops it, so vLLM aborts the request
        if isinstance(exc, UpstreamError):
            raise
        if isinstance(exc, TimeoutError):
            raise UpstreamError("no whole reply in time", url, False) from None
        if isinstance(exc, AnswerTooLarge):  # generated already: another worker would again
            raise UpstreamError(str(exc), url, False) from exc
        if isinstance(exc, TRANSPORT_ERRORS):
            raise UpstreamError(f"worker failed before its reply: {exc!r}", url, True) from exc
        raise
    if not isinstance(reply, dict):
        raise UpstreamError("worker's reply is not a JSON object", url, True)
    yield as_chat_chunk(reply) if path == TEXT_PATH else as_one_chunk(reply)


MAX_TOKENIZE_ANSWER_BYTES = 32 * 1024 * 1024  # the count, and every token id of a long prompt


async def count_prompt_tokens(
    url: str,
    upstream_model: str,
    messages: list[Any],
    tools: list[Any] | None = None,
    text_prompt: str | None = None,
    headers: dict[str, str] | None = None,
    timeout_s: float | None = None,
    chat_template_kwargs: dict[str, Any] | None = None,
) -> int:
    """The prompt's length in the worker's own tokens, chat template included (vLLM's
    /tokenize): what a request that left before its usage chunk is billed for its prompt,
    and, for a model whose tokenizer is not on this host, what admission reserves for it.
    A text completion's prompt is counted as it is (no chat template)."""
    payload: dict[str, Any] = {"model": upstream_model}
    if text_prompt is not None:
        payload["prompt"] = text_prompt
    else:
        payload.update(messages=messages, add_generation_prompt=True)
    if tools:
        payload["tools"] = tools
    if chat_template_kwargs and text_prompt is None:  # e.g. enable_thinking: another prompt
        payload["chat_template_kwargs"] = chat_template_kwargs
    total = settings.UPSTREAM_CONNECT_TIMEOUT_S + 2 if timeout_s is None else timeout_s
    try:
        async with asyncio.timeout(total):
            reply = await post_json(url, "/tokenize", payload, headers)
            if reply.status != 200:
                reply.close()
                # Only the status: a worker's validation error quotes the prompt it refused,
                # which must not reach the logs.
                raise UpstreamError(
                    f"tokenize answered {reply.status}", url, False, status=reply.status
                )
            answer = orjson.loads(await reply.read_all(MAX_TOKENIZE_ANSWER_BYTES))
            count = answer.get("count") if isinstance(answer, dict) else None
    except TRANSPORT_ERRORS as exc:  # TimeoutError is an OSError
        raise UpstreamError(f"tokenize failed: {exc!r}", url, False) from exc
    if not isinstance(count, int) or count < 0:
        raise UpstreamError(f"tokenize gave no count: {count!r}", url, False)
    return count
