"""The load driver of a live replay: each request at its arrival time, each one timed.

The driver is open loop, as real clients are: a slow fleet does not slow the arrivals, so
an under-provisioned fleet shows as queueing and missed TTFT targets rather than as less
load. Every request goes through the production Dispatcher and stream_completion, and
ends with a time to first token or a named error.
"""

import asyncio
import logging
import time
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any

from inference.client import UpstreamError
from scaling.replay.live.load import arrivals
from scaling.replay.live.options import LiveOptions
from scaling.replay.traces import Demand
from scaling.routing.dispatcher import Dispatcher, NoHealthyWorker, QueueTimeout
from scaling.routing.streaming import stream_completion

logger = logging.getLogger(__name__)


@dataclass
class LiveRequest:
    at: float  # scheduled, wall seconds from the window's start
    ttft_s: float | None = None  # from the scheduled arrival to the first content token
    error: str = ""
    lag_s: float = 0.0  # how late the driver sent it (a loaded client shows here)


class LoadDriver:
    """Sends one window's requests to one deployment and keeps a LiveRequest for each
    request in the measured window (the lead-in's are sent but not kept)."""

    def __init__(
        self, demand: Demand, rate_scale: float, options: LiveOptions, deployment: str
    ) -> None:
        self.demand, self.rate_scale, self.options = demand, rate_scale, options
        self.deployment = deployment
        self.requests: list[LiveRequest] = []
        self.t0 = self.t_end = 0.0  # monotonic: the measured window
        self.wall_t0 = 0.0  # time.time() at t0 (for ScalingDecision.at)

    async def drive(self, dispatcher: Dispatcher, in_flight: set[asyncio.Task[None]]) -> None:
        """Send each request at its arrival time (open loop: a slow fleet does not slow
        the arrivals), the lead-in first; the measured window starts at t0."""
        times = arrivals(
            self.demand,
            self.rate_scale,
            self.options.speed,
            self.options.lead_in_s,
            self.options.seed,
        )
        lead = self.options.lead_in_s / self.options.speed
        self.t0 = time.monotonic() + lead
        self.wall_t0 = time.time() + lead
        self.t_end = self.t0 + self.demand.seconds / self.options.speed
        body_words = " ".join(["word"] * self.options.prompt_words)
        for index, at in enumerate(times.tolist()):
            delay = self.t0 + at - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            record = LiveRequest(at=at, lag_s=max(-delay, 0.0))
            if at >= 0:
                self.requests.append(record)
            body = {
                "messages": [{"role": "user", "content": f"request {index}: {body_words}"}],
                "max_tokens": self.options.tokens,
                "ignore_eos": True,
            }
            task = asyncio.create_task(self._request(dispatcher, body, record))
            in_flight.add(task)
            task.add_done_callback(in_flight.discard)
        await asyncio.sleep(max(self.t_end - time.monotonic(), 0.0))

    async def _request(
        self, dispatcher: Dispatcher, body: dict[str, Any], record: LiveRequest
    ) -> None:
        arrived = self.t0 + record.at
        try:
            async with aclosing(stream_completion(dispatcher, self.deployment, body)) as chunks:
                async for _lease, chunk in chunks:
                    if record.ttft_s is None and any(
                        c.get("delta", {}).get("content") for c in chunk.get("choices", [])
                    ):
                        record.ttft_s = time.monotonic() - arrived
            if record.ttft_s is None:
                record.error = "no_tokens"
        except QueueTimeout:
            record.error = "queue_timeout"
        except NoHealthyWorker:
            record.error = "no_worker"
        except UpstreamError as exc:
            record.error = "upstream_after_first_token" if record.ttft_s is not None else "upstream"
            logger.warning("live replay request failed: %s", exc)
        except asyncio.CancelledError:
            record.error = record.error or "cancelled"
            raise
