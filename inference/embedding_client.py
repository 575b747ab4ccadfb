"""Ask one embedding worker (vLLM with a pooling model, or any OpenAI-compatible server)
for a request's vectors, over the worker connections of inference/client.py.

Embeddings come back in one answer: a failure at any point is "before the first token"
(nothing has reached the client), so the caller may retry it on another worker unless the
worker refused the request itself (a 4xx, which another worker would refuse too).
"""

import asyncio
from typing import Any

import orjson
from django.conf import settings

from inference.client import TRANSPORT_ERRORS, UpstreamError, error_detail, post_json

__all__ = ["UpstreamError", "WorkerEmbeddings", "embed_on_worker"]


# One vector as JSON text: 8,192 dimensions at 20 characters each is 160 KB; base64 is less.
MAX_VECTOR_JSON_BYTES = 1024 * 1024


class WorkerEmbeddings:
    """A worker's answer, checked: one vector (a float list or base64) per input, in
    order, and the prompt tokens it counted."""

    def __init__(self, vectors: list[list[float] | str], prompt_tokens: int) -> None:
        self.vectors = vectors
        self.prompt_tokens = prompt_tokens


async def embed_on_worker(
    url: str,
    upstream_model: str,
    body: dict[str, Any],
    count: int,
    headers: dict[str, str] | None = None,
) -> WorkerEmbeddings:
    """POST {url}/v1/embeddings with the worker's own model name; `count` inputs; headers:
    the deployment's (its workers' API key)."""
    payload = {**body, "model": upstream_model}
    try:
        async with asyncio.timeout(settings.UPSTREAM_FIRST_TOKEN_TIMEOUT_S):
            r = await post_json(url, "/v1/embeddings", payload, headers)
            if r.status != 200:
                detail = await error_detail(r)
                raise UpstreamError(f"worker answered {r.status}: {detail}", url, True, r.status)
            answer = orjson.loads(await r.read_all((count + 1) * MAX_VECTOR_JSON_BYTES))
    except TRANSPORT_ERRORS as exc:  # TimeoutError is an OSError
        raise UpstreamError(f"embedding request failed: {exc!r}", url, True) from exc
    return _checked(answer, count, url)


def _checked(answer: Any, count: int, url: str) -> WorkerEmbeddings:
    data = answer.get("data") if isinstance(answer, dict) else None
    usage = answer.get("usage") if isinstance(answer, dict) else None
    prompt = _count_of(usage.get("prompt_tokens") if isinstance(usage, dict) else None)
    if not isinstance(data, list) or len(data) != count or prompt is None:
        raise UpstreamError(f"worker sent no usable embeddings for {count} input(s)", url, True)
    vectors: list[list[float] | str | None] = [None] * count
    for item in data:
        index = _count_of(item.get("index") if isinstance(item, dict) else None)
        vector = item.get("embedding") if isinstance(item, dict) else None
        if index is None or index >= count or not isinstance(vector, list | str):
            raise UpstreamError("worker sent a malformed embedding", url, True)
        vectors[index] = vector
    if any(vector is None for vector in vectors):
        raise UpstreamError("worker sent the same index twice", url, True)
    return WorkerEmbeddings([v for v in vectors if v is not None], prompt)


def _count_of(value: Any) -> int | None:
    """A non-negative integer, or None for anything else."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return None
