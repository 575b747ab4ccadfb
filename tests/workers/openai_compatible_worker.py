"""Child process: an OpenAI-compatible chat server that is not vLLM, the way a hosted API
or llama.cpp's server looks to a gateway: GET /v1/models and POST /v1/chat/completions
(streamed, with usage when asked), no /health and no /metrics, and, like OpenAI's own API,
a 400 for a request field it does not know (vLLM's cache_salt, say). With --api-key, every
route wants that bearer token (a 401 without it), as a hosted API does; GET /ready (for
the test harness) answers without one.

With --sglang-metrics it serves GET /metrics as SGLang does (`--enable-metrics`): 3
running, 2 queued, a quarter of its KV pool in use. With --health it is SGLang: GET
/health (200 once loaded), and requests must carry cache_salt (SGLang keeps teams' prefixes
apart with it) and may carry top_k.

Usage: openai_compatible_worker.py --port N [--model NAME] [--api-key KEY] [--sglang-metrics]
       [--health]
"""

import argparse
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

MODEL: web.AppKey[str] = web.AppKey("model", str)
API_KEY: web.AppKey[str] = web.AppKey("api_key", str)
SGLANG: web.AppKey[bool] = web.AppKey("sglang", bool)
WORDS = ["Hello", " from", " a", " plain", " server."]
KNOWN = {
    "model",
    "messages",
    "max_tokens",
    "max_completion_tokens",
    "temperature",
    "top_p",
    "stream",
    "stream_options",
    "stop",
    "seed",
    "n",
    "user",
    "presence_penalty",
    "frequency_penalty",
    "logprobs",
    "top_logprobs",
    "tools",
    "tool_choice",
    "response_format",
}


def _error(status: int, message: str) -> web.Response:
    body = {"error": {"message": message, "type": "invalid_request_error", "param": None}}
    return web.json_response(body, status=status)


async def models(request: web.Request) -> web.Response:
    model = {"id": request.app[MODEL], "object": "model", "created": 0, "owned_by": "me"}
    return web.json_response({"object": "list", "data": [model]})


async def completions(request: web.Request) -> web.StreamResponse:
    body: Any = await request.json()
    sglang = request.app[SGLANG]
    unknown = sorted(set(body) - KNOWN - ({"cache_salt", "top_k"} if sglang else set()))
    if sglang and not body.get("cache_salt"):  # teams must not share its radix cache
        return _error(400, "this stand-in wants the gateway's cache_salt, as SGLang takes it")
    if unknown:
        return _error(400, f"Unrecognized request argument supplied: {', '.join(unknown)}")
    if body.get("model") != request.app[MODEL]:
        return _error(404, f"The model `{body.get('model')}` does not exist")
    words = WORDS[: max(1, int(body.get("max_tokens") or len(WORDS)))]
    prompt = sum(len(str(m.get("content", "")).split()) for m in body["messages"])
    usage = {
        "prompt_tokens": prompt,
        "completion_tokens": len(words),
        "total_tokens": prompt + len(words),
    }
    created, reply_id = int(time.time()), "plain-1"
    if not body.get("stream"):
        message = {"role": "assistant", "content": "".join(words)}
        choice = {"index": 0, "message": message, "finish_reason": "stop"}
        reply = {"id": reply_id, "object": "chat.completion", "created": created}
        return web.json_response({**reply, "choices": [choice], "usage": usage})
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)

    async def send(delta: dict[str, Any], finish: str | None = None) -> None:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        chunk = {"id": reply_id, "object": "chat.completion.chunk", "created": created}
        await response.write(f"data: {json.dumps({**chunk, 'choices': [choice]})}\n\n".encode())

    await send({"role": "assistant", "content": ""})
    for word in words:
        await send({"content": word})
    await send({}, "stop")
    if (body.get("stream_options") or {}).get("include_usage"):
        chunk = {"id": reply_id, "object": "chat.completion.chunk", "created": created}
        await response.write(
            f"data: {json.dumps({**chunk, 'choices': [], 'usage': usage})}\n\n".encode()
        )
    await response.write(b"data: [DONE]\n\n")
    return response


@web.middleware
async def key_required(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    key = request.app[API_KEY]
    if request.path == "/ready":  # the test harness's: answered with or without a key
        return web.Response(text="ok")
    if key and request.headers.get("Authorization") != f"Bearer {key}":
        return _error(401, "Incorrect API key provided.")
    return await handler(request)


SGLANG_METRICS = """\
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{model_name="plain-upstream"} 3.0
# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{model_name="plain-upstream"} 2.0
# TYPE sglang:token_usage gauge
sglang:token_usage{model_name="plain-upstream"} 0.25
"""


async def sglang_metrics(request: web.Request) -> web.Response:
    return web.Response(text=SGLANG_METRICS, content_type="text/plain")


async def health(request: web.Request) -> web.Response:
    """SGLang's /health: 200 with an empty body once the model is loaded."""
    return web.Response(status=200)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--model", default="plain-upstream")
    parser.add_argument("--api-key", default="")
    parser.add_argument("--sglang-metrics", action="store_true")
    parser.add_argument("--health", action="store_true", help="serve GET /health, as SGLang")
    args = parser.parse_args()
    app = web.Application(middlewares=[key_required])
    app[MODEL] = args.model
    app[API_KEY] = args.api_key
    app[SGLANG] = args.health
    app.router.add_get("/v1/models", models)
    app.router.add_post("/v1/chat/completions", completions)
    if args.sglang_metrics:
        app.router.add_get("/metrics", sglang_metrics)
    if args.health:
        app.router.add_get("/health", health)
    web.run_app(app, host="127.0.0.1", port=args.port, print=None)


if __name__ == "__main__":
    main()
