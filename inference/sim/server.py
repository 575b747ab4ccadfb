"""The simulator's OpenAI-compatible HTTP surface (the subset the gateway uses)."""

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

from aiohttp import web

from inference.reply import ReplyAssembler
from inference.sim.engine import Engine, Scheduler, SimRequest
from inference.sim.fixed import FixedLatencyEngine
from inference.sim.metrics import SimMetrics
from inference.sim.profiles import Profile
from inference.sim.replies import Reply, logprobs, reply_for, text_logprobs
from inference.sim.sleep import DEFAULT_WAKE_S, SLEEP, add_routes, refusal
from inference.sim.text import prompt_tokens
from inference.text_completion import DEFAULT_MAX_TOKENS, TEXT_PATH, text_chunk

ENGINE: web.AppKey[Scheduler] = web.AppKey("engine")
MODEL = web.AppKey("model", str)
# A test hook: the reply to a conversation whose last message has this exact text.
SCRIPTED: web.AppKey[dict[str, str]] = web.AppKey("scripted")


def _error(status: int, message: str) -> web.Response:
    body = {"error": {"message": message, "type": "BadRequestError", "param": None, "code": status}}
    return web.json_response(body, status=status)


# What an image part counts for in the prompt (vLLM's count depends on the model's vision
# encoder; this is a stand-in of about that size).
IMAGE_TOKENS = 64
# The context window the simulator reports (/v1/models, /tokenize), as vLLM's max_model_len.
SIM_MAX_MODEL_LEN = 32768


def _flat_messages(messages: Any, tools: Any = None) -> list[dict[str, str]] | None:
    """Messages with string content, as the simulated tokenizer reads them: text parts
    joined, each image part a run of IMAGE_TOKENS placeholders, an assistant's tool calls
    as their JSON, and the tools offered (as a chat template renders them) first. None if
    malformed."""
    if not isinstance(messages, list):
        return None
    flat = []
    for message in messages:
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            return None
        content = message.get("content")
        if isinstance(content, list):
            pieces = []
            for part in content:
                if not isinstance(part, dict):
                    return None
                if part.get("type") == "text" and isinstance(part.get("text"), str):
                    pieces.append(part["text"])
                elif part.get("type") == "image_url":
                    pieces.append(" ".join(["<image>"] * IMAGE_TOKENS))
                else:
                    return None
            content = " ".join(pieces)
        if content is None and message.get("tool_calls"):
            content = ""
        if not isinstance(content, str):
            return None
        if message.get("tool_calls"):
            content = f"{content} {json.dumps(message['tool_calls'])}".strip()
        flat.append({"role": message["role"], "content": content})
    if tools:
        flat.insert(0, {"role": "tools", "content": json.dumps(tools)})
    return flat


def _parse(body: Any, model: str) -> tuple[SimRequest, dict[str, Any]] | str:
    if not isinstance(body, dict):
        return "body must be a JSON object"
    messages = _flat_messages(body.get("messages"), body.get("tools"))
    if not messages:
        return "messages must be a non-empty list of {role, content} (text or image parts)"
    if body.get("model") != model:
        return f"The model `{body.get('model')}` does not exist."
    max_tokens = body.get("max_tokens") or body.get("max_completion_tokens") or 256
    if not isinstance(max_tokens, int) or max_tokens < 1:
        return "max_tokens must be a positive integer"
    prompt = prompt_tokens(messages)
    n = 1 if body.get("n") is None else body["n"]
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        return "n must be a positive integer"
    salt = body.get("cache_salt")
    if salt is not None and (not isinstance(salt, str) or not salt):
        return "cache_salt must be a non-empty string"
    request = SimRequest(prompt=prompt, output=[], cache_salt=salt or "")
    return request, {"max_tokens": max_tokens, **body, "n": n, "messages": messages}


def _as_chat_body(body: Any, path: str) -> Any:
    """A text completion's body as the chat body the simulator reads: its prompt (a string,
    or an array of one) as one user message; OpenAI's default of 16 tokens."""
    if path != TEXT_PATH or not isinstance(body, dict):
        return body
    prompt = body.get("prompt")
    prompt = prompt[0] if isinstance(prompt, list) and len(prompt) == 1 else prompt
    rest = {k: v for k, v in body.items() if k != "prompt"}
    return {
        "max_tokens": DEFAULT_MAX_TOKENS,
        **rest,
        "messages": [{"role": "user", "content": prompt}],
    }


def _chunk(
    request_id: str,
    created: int,
    model: str,
    delta: dict[str, Any],
    finish: str | None = None,
    token_logprobs: dict[str, Any] | None = None,
    index: int = 0,
) -> dict[str, Any]:
    choice: dict[str, Any] = {"index": index, "delta": delta, "finish_reason": finish}
    if token_logprobs is not None:  # in the endpoint's shape already (_logprobs_for)
        choice["logprobs"] = token_logprobs
    payload = {
        "id": request_id,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "choices": [choice],
    }
    return payload


def _logprobs_for(
    options: dict[str, Any], token: str, position: int, offset: int, text: bool
) -> dict[str, Any] | None:
    """A choice's logprobs for one token when asked: chat's `{content: [entry]}` for
    `logprobs: true`, a text completion's legacy lists for its integer `logprobs`
    (`offset`: where the token starts in the choice's text)."""
    asked = options.get("logprobs")
    if text and type(asked) is int:
        return text_logprobs(token, position, offset, asked)
    if text or asked is not True:
        return None
    return {"content": [logprobs(token, position, int(options.get("top_logprobs") or 0))]}


def _usage(requests: list[SimRequest]) -> dict[str, Any]:
    """As vLLM reports it with --enable-prompt-tokens-details: the prompt's tokens read from
    the prefix cache in prompt_tokens_details. With n choices, as vLLM counts them: the
    prompt once, completion_tokens summed over the choices."""
    first, generated = requests[0], sum(request.generated for request in requests)
    return {
        "prompt_tokens": first.prompt_len,
        "completion_tokens": generated,
        "total_tokens": first.prompt_len + generated,
        "prompt_tokens_details": {"cached_tokens": first.cached_tokens},
    }


async def _interleaved(requests: list[SimRequest]) -> AsyncIterator[tuple[int, str | None]]:
    """Each choice's tokens in turn as (index, token), and (index, None) when that choice
    ends: round robin, as each engine step decodes a token of every running sequence."""
    running = list(range(len(requests)))
    while running:
        for index in list(running):
            token = await requests[index].tokens.get()
            yield index, token
            if token is None:
                running.remove(index)


def _reply_fields(reply: ReplyAssembler, text: bool) -> dict[str, Any]:
    if text:  # a text completion's choice (logprobs in the legacy shape, when asked)
        return {"text": reply.text, "logprobs": reply.logprobs()}
    return {"message": reply.message(), "logprobs": reply.logprobs()}


def _finish_reason(request: SimRequest, max_tokens: int, reply: Reply) -> str:
    if request.generated >= max_tokens:
        return "length"
    return "tool_calls" if reply.calls else "stop"


async def chat_completions(http: web.Request) -> web.StreamResponse:
    sleep_mode = http.app[SLEEP]
    if sleep_mode.sleeping:
        return refusal()
    task = asyncio.current_task()
    if task is None:  # pragma: no cover - aiohttp runs every handler in a task
        return await _chat_completions(http)
    sleep_mode.generations.add(task)  # what a /sleep aborts
    try:
        return await _chat_completions(http)
    finally:
        sleep_mode.generations.discard(task)


async def _chat_completions(http: web.Request) -> web.StreamResponse:
    engine, model = http.app[ENGINE], http.app[MODEL]
    try:
        body = _as_chat_body(await http.json(), http.path)
    except json.JSONDecodeError:
        return _error(400, "body is not valid JSON")
    parsed = _parse(body, model)
    if isinstance(parsed, str):
        return _error(404 if "does not exist" in parsed else 400, parsed)
    request, options = parsed
    text = http.path == TEXT_PATH  # a text completion: the prompt read as one user message
    scripted = http.app[SCRIPTED].get(options["messages"][-1]["content"])
    requests, replies = [], []
    for choice in range(options["n"]):  # a sequence each, the prompt shared (prefix cache)
        reply = reply_for(
            options,
            options["messages"],
            request.prompt,
            options["max_tokens"],
            engine.profile.mean_output_tokens,
            scripted,
            choice,
        )
        sequence = (
            request
            if not choice
            else SimRequest(prompt=request.prompt, output=[], cache_salt=request.cache_salt)
        )
        sequence.output = [piece.token for piece in reply.pieces]
        engine.submit(sequence)
        requests.append(sequence)
        replies.append(reply)
    request_id, created = f"chatcmpl-{uuid.uuid4().hex}", int(time.time())
    try:
        if options.get("stream"):
            return await _stream(
                http, requests, replies, options, (request_id, created, model), text
            )
        assembled = [ReplyAssembler(index) for index in range(len(requests))]
        positions = [0] * len(requests)
        async for index, token in _interleaved(requests):
            if token is None:
                continue
            piece = replies[index].pieces[positions[index]]
            offset = len(assembled[index].text)
            lp = _logprobs_for(options, token, positions[index], offset, text)
            logprobs_part = {"logprobs": lp} if lp is not None else {}
            choice_part = {"index": index, "delta": piece.delta, **logprobs_part}
            assembled[index].add({"choices": [choice_part]})
            positions[index] += 1
    finally:
        for sequence in requests:  # no-op when finished; frees the slot when the client left
            engine.cancel(sequence)
    choices = [
        {
            "index": index,
            **_reply_fields(assembled[index], text),
            "finish_reason": _finish_reason(requests[index], options["max_tokens"], reply),
        }
        for index, reply in enumerate(replies)
    ]
    return web.json_response(
        {
            "id": request_id,
            "object": "text_completion" if text else "chat.completion",
            "created": created,
            "model": model,
            "choices": choices,
            "usage": _usage(requests),
        }
    )


async def _stream(
    http: web.Request,
    requests: list[SimRequest],
    replies: list[Reply],
    options: dict[str, Any],
    stream_id: tuple[str, int, str],
    text: bool = False,
) -> web.StreamResponse:
    """Chat chunks, or for a text completion the same as text chunks (as vLLM's)."""
    response = web.StreamResponse(
        headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
    )
    await response.prepare(http)

    async def send(payload: dict[str, Any]) -> None:
        shown = text_chunk(payload, include_usage=True) if text else payload
        if shown is not None:
            await response.write(f"data: {json.dumps(shown)}\n\n".encode())

    for index in range(len(requests)):  # vLLM opens every choice with its role
        await send(_chunk(*stream_id, {"role": "assistant", "content": ""}, index=index))
    positions, offsets = [0] * len(requests), [0] * len(requests)
    async for index, token in _interleaved(requests):
        if token is None:
            finish = _finish_reason(requests[index], options["max_tokens"], replies[index])
            await send(_chunk(*stream_id, {}, finish, index=index))
            continue
        delta = replies[index].pieces[positions[index]].delta
        lp = _logprobs_for(options, token, positions[index], offsets[index], text)
        await send(_chunk(*stream_id, delta, None, lp, index))
        positions[index] += 1
        offsets[index] += len(delta.get("content") or "")
    if (options.get("stream_options") or {}).get("include_usage"):
        await send({**_chunk(*stream_id, {}), "choices": [], "usage": _usage(requests)})
    await response.write(b"data: [DONE]\n\n")
    await response.write_eof()
    return response


async def tokenize(http: web.Request) -> web.Response:
    """vLLM's /tokenize for chat messages: the gateway counts an aborted request's prompt
    here, with the same tokenizer the worker bills with."""
    try:
        body = await http.json()
    except json.JSONDecodeError:
        return _error(400, "body is not valid JSON")
    if not isinstance(body, dict):
        return _error(400, "body must be a JSON object")
    if isinstance(body.get("prompt"), str):  # a text completion's prompt, as it bills it
        body = _as_chat_body(body, TEXT_PATH)
    messages = _flat_messages(body.get("messages"), body.get("tools"))
    if messages is None:
        return _error(400, "messages must be a list of {role, content} (text or image parts)")
    if body.get("model") != http.app[MODEL]:
        return _error(404, f"The model `{body.get('model')}` does not exist.")
    count = len(prompt_tokens(messages))
    http.app[ENGINE].metrics.tokenize_requests.labels(http.app[MODEL]).inc()
    return web.json_response({"count": count, "max_model_len": SIM_MAX_MODEL_LEN, "tokens": []})


async def models(http: web.Request) -> web.Response:
    model = http.app[MODEL]
    return web.json_response(
        {
            "object": "list",
            "data": [
                {
                    "id": model,
                    "object": "model",
                    "created": 0,
                    "owned_by": "sluice-sim",
                    "max_model_len": SIM_MAX_MODEL_LEN,  # as vLLM reports its context window
                }
            ],
        }
    )


async def health(http: web.Request) -> web.Response:
    return web.Response(status=200)


async def metrics(http: web.Request) -> web.Response:
    return web.Response(
        body=http.app[ENGINE].metrics.render(), content_type="text/plain", charset="utf-8"
    )


def build_app(
    profile: Profile,
    model: str | None = None,
    time_scale: float = 1.0,
    fixed_latency: tuple[float, float] | None = None,
    scripted_replies: dict[str, str] | None = None,
    wake_s: float = DEFAULT_WAKE_S,
) -> web.Application:
    """fixed_latency: (TTFT, inter-token) seconds for a FixedLatencyEngine instead of the
    batching model. scripted_replies: last message's text -> the reply to send instead of
    the deterministic words (a test hook: markdown or markup through the real gateway).
    wake_s: how long POST /wake_up takes from sleep mode (inference/sim/sleep.py), in
    simulated seconds (divided by time_scale)."""
    app = web.Application(client_max_size=4 * 1024 * 1024)
    name = model or profile.model
    app[MODEL] = name
    app[SCRIPTED] = dict(scripted_replies or {})
    if fixed_latency is None:
        app[ENGINE] = Engine(profile, SimMetrics(name), time_scale)
    else:
        app[ENGINE] = FixedLatencyEngine(profile, SimMetrics(name), *fixed_latency)

    async def run_engine(app: web.Application) -> Any:
        task = asyncio.create_task(app[ENGINE].run())
        yield
        task.cancel()

    app.cleanup_ctx.append(run_engine)
    add_routes(app, app[ENGINE], app[ENGINE].metrics, wake_s / time_scale)
    app.router.add_post("/v1/chat/completions", chat_completions)
    app.router.add_post(TEXT_PATH, chat_completions)
    app.router.add_post("/tokenize", tokenize)
    app.router.add_get("/v1/models", models)
    app.router.add_get("/health", health)
    app.router.add_get("/metrics", metrics)
    return app
