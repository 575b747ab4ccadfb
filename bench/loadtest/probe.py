"""One timed chat completion against any OpenAI-compatible endpoint."""

import json
import time
from dataclasses import dataclass
from typing import Any

import aiohttp


@dataclass(frozen=True)
class Endpoint:
    url: str  # the API base, e.g. http://127.0.0.1:8000/v1
    api_key: str = ""
    model: str = ""
    label: str = ""

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}


@dataclass(frozen=True)
class Outcome:
    """What one request did. error is None on success, else its kind: http_<status>,
    timeout, connect or broken_stream."""

    latency_s: float
    ttft_s: float | None
    output_tokens: int
    error: str | None = None
    cache: str | None = None  # the x-sluice-cache header, when the endpoint sends one

    @property
    def time_per_output_token_s(self) -> float | None:
        if self.ttft_s is None or self.output_tokens < 2:
            return None
        return (self.latency_s - self.ttft_s) / (self.output_tokens - 1)


class BrokenStream(Exception):
    pass


async def _read_stream(
    response: aiohttp.ClientResponse, started: float
) -> tuple[float | None, int]:
    ttft, content_chunks, usage_tokens, done = None, 0, None, False
    async for raw in response.content:
        line = raw.strip()
        if not line.startswith(b"data:"):
            continue
        payload = line[5:].strip()
        if payload == b"[DONE]":
            done = True
            break
        chunk = json.loads(payload)
        if "error" in chunk:
            raise BrokenStream(str(chunk["error"]))
        if chunk.get("usage"):
            usage_tokens = chunk["usage"].get("completion_tokens")
        if any((c.get("delta") or {}).get("content") for c in chunk.get("choices", [])):
            content_chunks += 1
            if ttft is None:
                ttft = time.perf_counter() - started
    if not done:
        raise BrokenStream("the stream ended without [DONE]")
    return ttft, usage_tokens if usage_tokens is not None else content_chunks


async def _read_body(response: aiohttp.ClientResponse) -> int:
    body = await response.json()
    return int((body.get("usage") or {}).get("completion_tokens") or 0)


async def send(
    session: aiohttp.ClientSession, endpoint: Endpoint, body: dict[str, Any], stream: bool
) -> Outcome:
    payload = {**body, "model": endpoint.model or body.get("model"), "stream": stream}
    if stream:
        payload["stream_options"] = {"include_usage": True}
    started = time.perf_counter()

    def outcome(
        ttft: float | None, tokens: int, error: str | None = None, cache: str | None = None
    ) -> Outcome:
        return Outcome(time.perf_counter() - started, ttft, tokens, error, cache)

    try:
        async with session.post(
            f"{endpoint.url}/chat/completions", json=payload, headers=endpoint.headers()
        ) as response:
            cache = response.headers.get("x-sluice-cache")
            if response.status != 200:
                await response.read()
                return outcome(None, 0, f"http_{response.status}", cache)
            if stream:
                ttft, tokens = await _read_stream(response, started)
            else:
                tokens = await _read_body(response)
                ttft = time.perf_counter() - started  # the whole reply arrives at once
            return outcome(ttft, tokens, None, cache)
    except TimeoutError:
        return outcome(None, 0, "timeout")
    except (BrokenStream, aiohttp.ClientPayloadError, json.JSONDecodeError):
        return outcome(None, 0, "broken_stream")
    except aiohttp.ClientError:
        return outcome(None, 0, "connect")
