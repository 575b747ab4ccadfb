"""One chat completion's life after admission: stream from the fleet, count, settle once."""

import asyncio
import logging
import time
from collections.abc import AsyncGenerator
from contextlib import aclosing
from typing import Any

from gateway.accounts.quotas import AdmissionUnavailable, Reservation, reconcile
from gateway.api.chat_request import ChatRequest
from gateway.api.deployments import DeploymentInfo
from gateway.api.errors import ApiError
from gateway.redis_clients import REDIS_FAILURES
from inference.client import UpstreamError, stream_completion
from inference.dispatch import Dispatcher, NoHealthyWorker, QueueTimeout

logger = logging.getLogger(__name__)
dispatcher = Dispatcher()


def upstream_api_error(exc: UpstreamError) -> ApiError:
    """What the client hears about a worker failure: no internal addresses (they are logged)."""
    logger.warning("upstream failure at %s: %s", exc.worker_url, exc)
    if exc.client_error:
        return ApiError(400, f"The model refused the request: {exc}".replace(exc.worker_url, ""),
                        "invalid_request")  # fmt: skip
    return ApiError(502, "The model worker failed; try again.", "upstream_error")


class CompletionRun:
    def __init__(self, request_id: str, chat: ChatRequest, deployment: DeploymentInfo,
                 reservation: Reservation) -> None:  # fmt: skip
        self.request_id = request_id
        self.chat = chat
        self.deployment = deployment
        self.reservation = reservation
        self.created = int(time.time())
        self.usage: dict[str, int] | None = None
        self.chunks_with_text = 0
        self.worker_url = ""
        self._settled = False

    async def chunks(self) -> AsyncGenerator[dict[str, Any], None]:
        """Chunks as the client sees them: our id and the public model name.

        However the request ends (done, failed, cancelled, abandoned), closing this
        generator settles the reservation exactly once.
        """
        stream = stream_completion(dispatcher, self.deployment.name, self.chat.upstream_body())
        try:
            async with aclosing(stream) as upstream:
                async for lease, chunk in upstream:
                    self.worker_url = lease.worker.url
                    if chunk.get("usage"):
                        self.usage = chunk["usage"]
                    if any((c.get("delta") or {}).get("content") for c in chunk.get("choices", [])):
                        self.chunks_with_text += 1
                    yield {**chunk, "id": self.request_id, "model": self.deployment.name}
        finally:
            await asyncio.shield(self.settle())

    async def first_chunk(self, chunks: AsyncGenerator[dict[str, Any], None]) -> dict[str, Any]:
        """Start generating; failures before the first token become HTTP errors."""
        try:
            return await anext(chunks)
        except NoHealthyWorker as exc:
            raise ApiError(503, f"No healthy worker for '{self.deployment.name}': {exc}.",
                           "no_healthy_worker") from exc  # fmt: skip
        except QueueTimeout as exc:
            raise ApiError(503, f"All workers are busy: {exc}. Retry shortly.", "queue_timeout",
                           headers={"Retry-After": "1"}) from exc  # fmt: skip
        except UpstreamError as exc:
            raise upstream_api_error(exc) from exc
        except REDIS_FAILURES as exc:
            raise ApiError(503, "The fleet state is unreachable; try again shortly.",
                           "service_unavailable") from exc  # fmt: skip

    def used_tokens(self) -> tuple[int, int]:
        """Real usage when the worker reported it; otherwise what was produced so far."""
        if self.usage is not None:
            return self.usage.get("prompt_tokens", 0), self.usage.get("completion_tokens", 0)
        produced = self.chunks_with_text
        return (self.chat.estimated_prompt_tokens() if produced else 0), produced

    async def settle(self) -> None:
        if self._settled:
            return
        self._settled = True
        prompt, completion = self.used_tokens()
        try:
            await reconcile(self.reservation, prompt + completion,
                            self.deployment.cost_micros(prompt, completion))  # fmt: skip
        except AdmissionUnavailable:
            logger.error("request %s: reservation left fully charged", self.request_id)
        logger.info("request %s team %s model %s worker %s prompt %d completion %d",
                    self.request_id, self.reservation.team_id, self.deployment.name,
                    self.worker_url or "-", prompt, completion)  # fmt: skip
