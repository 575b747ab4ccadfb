"""One chat completion's life after admission: stream from the fleet, count, settle once."""

import asyncio
import json
import logging
import time
from collections.abc import AsyncGenerator
from contextlib import aclosing
from dataclasses import asdict
from typing import Any

from django.conf import settings

from gateway.accounts.quotas import AdmissionUnavailable, Reservation, reconcile
from gateway.api import instruments
from gateway.api.chat_request import ChatRequest
from gateway.api.deployments import DeploymentInfo
from gateway.api.errors import ApiError
from gateway.cache import exact, planner
from gateway.cache.coalesce import Coalescer, Item
from gateway.cache.planner import CachePlan
from gateway.redis_clients import REDIS_FAILURES
from gateway.usage.ledger import UsageEvent, record_usage
from inference.client import UpstreamError, stream_completion
from inference.dispatch import Dispatcher, NoHealthyWorker, QueueTimeout
from scaling.prefix import route_context

logger = logging.getLogger(__name__)
dispatcher = Dispatcher()
coalescer = Coalescer()
# Yielded once the worker has finished, before settling: a client can be told the reply is
# complete without waiting for the quota and ledger round trips.
END_OF_STREAM: dict[str, Any] = {}


def upstream_api_error(exc: UpstreamError) -> ApiError:
    """What the client hears about a worker failure: no internal addresses (they are logged)."""
    logger.warning("upstream failure at %s: %s", exc.worker_url, exc)
    if exc.client_error:
        return ApiError(
            400,
            f"The model refused the request: {exc}".replace(exc.worker_url, ""),
            "invalid_request",
        )
    return ApiError(502, "The model worker failed; try again.", "upstream_error")


class CompletionRun:
    def __init__(
        self,
        request_id: str,
        chat: ChatRequest,
        deployment: DeploymentInfo,
        reservation: Reservation,
        cache: CachePlan | None = None,
    ) -> None:
        self.request_id = request_id
        self.cache = cache or CachePlan(exact.BYPASS)
        self.coalesced = False  # read another identical request's generation
        self._text: list[str] = []  # kept only when the reply will be cached
        self.finish_reason: str | None = None
        self.chat = chat
        self.deployment = deployment
        self.reservation = reservation
        self.created = int(time.time())
        self.usage: dict[str, int] | None = None
        self.chunks_with_text = 0
        self.worker_url = ""
        self.started_at = time.monotonic()
        self.ttft_s: float | None = None
        self.status = "cancelled"  # until the stream ends one way or the other
        self._settled = False

    async def chunks(self) -> AsyncGenerator[dict[str, Any], None]:
        """Chunks as the client sees them: our id and the public model name.

        However the request ends (done, failed, cancelled, abandoned), closing this
        generator settles the reservation exactly once.
        """
        source = self._replayed() if self.cache.reply is not None else self._generated()
        try:
            async with aclosing(source) as chunks:
                async for chunk in chunks:
                    yield chunk
            self.status = "ok"
            yield END_OF_STREAM
        except Exception:
            self.status = "failed"
            raise
        finally:
            await asyncio.shield(self.settle())

    async def _generated(self) -> AsyncGenerator[dict[str, Any], None]:
        source = self._upstream()
        if settings.CACHE_COALESCE_ENABLED and self.cache.result == exact.MISS and self.cache.key:
            shared, leader = coalescer.join(self.cache.key, lambda: source)
            if not leader:
                await source.aclose()  # never started: nothing reached the worker
                self.coalesced = True
            source = shared.read()
        async with aclosing(source) as upstream:
            async for worker_url, chunk in upstream:
                self._observe(worker_url, chunk)
                yield {**chunk, "id": self.request_id, "model": self.deployment.name}

    async def _upstream(self) -> AsyncGenerator[Item, None]:
        name = self.deployment.name
        route = route_context(
            name, self.deployment.routing_policy, self.chat.messages, self.chat.options.get("user")
        )
        stream = stream_completion(dispatcher, name, self.chat.upstream_body(), route=route)
        async with aclosing(stream) as upstream:
            async for lease, chunk in upstream:
                yield lease.worker.url, chunk

    async def _replayed(self) -> AsyncGenerator[dict[str, Any], None]:
        """A cache hit: the stored reply in the chunk shape a generation streams."""
        assert self.cache.reply is not None
        self.usage = exact.usage(self.cache.reply)  # what the reply is; billing is nil
        self.ttft_s = time.monotonic() - self.started_at
        for chunk in exact.replay_chunks(
            self.cache.reply,
            self.request_id,
            self.created,
            self.deployment.name,
            include_usage=True,
        ):
            yield chunk

    def _observe(self, worker_url: str, chunk: dict[str, Any]) -> None:
        self.worker_url = worker_url
        if chunk.get("usage"):
            self.usage = chunk["usage"]
        if self.cache.key is not None and not self.coalesced:
            for choice in chunk.get("choices", []):
                self._text.append((choice.get("delta") or {}).get("content") or "")
                self.finish_reason = choice.get("finish_reason") or self.finish_reason
        if any((c.get("delta") or {}).get("content") for c in chunk.get("choices", [])):
            self.chunks_with_text += 1
            if self.ttft_s is None:
                self.ttft_s = time.monotonic() - self.started_at

    async def first_chunk(self, chunks: AsyncGenerator[dict[str, Any], None]) -> dict[str, Any]:
        """Start generating; failures before the first token become HTTP errors."""
        try:
            return await anext(chunks)
        except NoHealthyWorker as exc:
            raise ApiError(
                503, f"No healthy worker for '{self.deployment.name}': {exc}.", "no_healthy_worker"
            ) from exc
        except QueueTimeout as exc:
            raise ApiError(
                503,
                f"All workers are busy: {exc}. Retry shortly.",
                "queue_timeout",
                headers={"Retry-After": "1"},
            ) from exc
        except UpstreamError as exc:
            raise upstream_api_error(exc) from exc
        except REDIS_FAILURES as exc:
            raise ApiError(
                503, "The fleet state is unreachable; try again shortly.", "service_unavailable"
            ) from exc

    def used_tokens(self) -> tuple[int, int]:
        """Real usage when the worker reported it; otherwise what was produced so far."""
        if self.usage is not None:
            return self.usage.get("prompt_tokens", 0), self.usage.get("completion_tokens", 0)
        produced = self.chunks_with_text
        return (self.chat.estimated_prompt_tokens() if produced else 0), produced

    def _observe_metrics(self, prompt: int, completion: int) -> None:
        model = self.deployment.name
        instruments.latency.labels(model).observe(time.monotonic() - self.started_at)
        if self.ttft_s is not None:
            instruments.ttft.labels(model).observe(self.ttft_s)
        instruments.tokens.labels(model, "prompt").inc(prompt)
        instruments.tokens.labels(model, "completion").inc(completion)

    def _usage_event(self, prompt: int, completion: int, cost: int) -> UsageEvent:
        return UsageEvent(
            request_id=self.request_id,
            team_id=self.reservation.team_id,
            api_key_id=self.reservation.key_id or "",
            model=self.deployment.name,
            prompt_tokens=prompt,
            completion_tokens=completion,
            status=self.status,
            latency_ms=int((time.monotonic() - self.started_at) * 1000),
            ttft_ms=None if self.ttft_s is None else int(self.ttft_s * 1000),
            worker=self.worker_url,
            cost_micros=cost,
            created_at=time.time(),
            cache_result=self.cache_result,
        )

    @property
    def cache_result(self) -> str:
        """For the usage record and counters: a coalesced request is marked as such."""
        return "coalesced" if self.coalesced else self.cache.result

    @property
    def served_without_generating(self) -> bool:
        return self.cache.reply is not None or self.coalesced

    async def settle(self) -> None:
        if self._settled:
            return
        self._settled = True
        # Cache hits and coalesced requests made the GPU do nothing: they bill nothing.
        prompt, completion = (0, 0) if self.served_without_generating else self.used_tokens()
        cost = self.deployment.cost_micros(prompt, completion)
        try:
            await reconcile(self.reservation, prompt + completion, cost)
        except AdmissionUnavailable:
            logger.error("request %s: reservation left fully charged", self.request_id)
        self._observe_metrics(prompt, completion)
        event = self._usage_event(prompt, completion, cost)
        try:
            await record_usage(event)
        except REDIS_FAILURES:
            # The log line carries the whole event, so it can still be replayed by hand.
            logger.error(
                "request %s: usage event not queued, Redis unreachable: %s",
                self.request_id,
                json.dumps(asdict(event)),
            )
        logger.info(
            "request %s team %s model %s worker %s prompt %d completion %d cache %s",
            self.request_id,
            self.reservation.team_id,
            self.deployment.name,
            self.worker_url or "-",
            prompt,
            completion,
            self.cache_result,
        )
        await self._count_cache_outcome()  # after billing: a slow cache Redis cannot delay it
        await self._keep_reply()

    async def _count_cache_outcome(self) -> None:
        model, result = self.deployment.name, self.cache_result
        instruments.cache_results.labels(model, result).inc()
        saved = saved_cost = 0
        if self.served_without_generating:
            prompt, completion = self.used_tokens()
            saved, saved_cost = prompt + completion, self.deployment.cost_micros(prompt, completion)
            instruments.cache_tokens_saved.labels(model).inc(saved)
            instruments.cache_cost_saved.labels(model).inc(saved_cost)
        await planner.settle(
            self.cache, self.request_id, self.reservation.team_id, result, saved, saved_cost
        )

    async def _keep_reply(self) -> None:
        """Cache a complete generated reply whose real token counts the worker reported."""
        if (
            self.cache.key is None
            or self.coalesced
            or self.status != "ok"
            or self.usage is None
            or self.finish_reason is None
        ):
            return
        prompt, completion = (
            self.usage.get("prompt_tokens", 0),
            self.usage.get("completion_tokens", 0),
        )
        reply = exact.CachedReply("".join(self._text), self.finish_reason, prompt, completion)
        await planner.keep(
            self.cache,
            reply,
            self.deployment.cost_micros(prompt, completion),
            self.request_id,
            self.reservation.team_id,
        )
