"""A worker with fixed latency: every request gets the same time to first token and the same
gap between tokens, whatever the load (unbounded capacity).

Not a model of a GPU (engine.py is): a measuring stick. Anything a client sees beyond the
configured latency was added by what sits between them, such as the gateway or the
benchmark itself.
"""

import asyncio
import time

from inference.sim.engine import SimRequest
from inference.sim.metrics import SimMetrics
from inference.sim.profiles import Profile


class FixedLatencyEngine:
    def __init__(self, profile: Profile, metrics: SimMetrics, ttft_s: float, itl_s: float) -> None:
        self.profile = profile
        self.metrics = metrics
        self.ttft_s = ttft_s
        self.itl_s = itl_s
        self.running: set[SimRequest] = set()
        self._tasks: set[asyncio.Task[None]] = set()

    def submit(self, request: SimRequest) -> None:
        self.running.add(request)
        task = asyncio.create_task(self._generate(request))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        self._publish_gauges()

    def cancel(self, request: SimRequest) -> None:
        if request.finished:
            return
        request.finished = True
        self.running.discard(request)
        self.metrics.aborted()
        self._publish_gauges()

    def forget_cache(self) -> None:
        """Nothing cached: this engine models no KV cache."""

    async def run(self) -> None:
        await asyncio.Event().wait()  # nothing to schedule: each request times itself

    async def _generate(self, request: SimRequest) -> None:
        await asyncio.sleep(self.ttft_s)
        for index, token in enumerate(request.output):
            if request.finished:
                return
            if index == 0:
                self.metrics.first_token(time.monotonic() - request.arrived)
            else:
                await asyncio.sleep(self.itl_s)
            request.tokens.put_nowait(token)
            request.generated += 1
        request.finished = True
        request.tokens.put_nowait(None)
        self.running.discard(request)
        self.metrics.finished(request.prompt_len, request.generated)
        self._publish_gauges()

    def _publish_gauges(self) -> None:
        self.metrics.gauges(running=len(self.running), waiting=0, kv_usage=0.0)
