"""vLLM's sleep mode, simulated: `POST /sleep`, `POST /wake_up`, `GET /is_sleeping`.

vLLM started with `--enable-sleep-mode` (and `VLLM_SERVER_DEV_MODE=1`, which exposes these
endpoints) can offload its weights to host memory and drop its KV cache (level 1), freeing
the GPU memory while the process, its CUDA graphs and compiled kernels stay: waking it takes
seconds where a cold start takes minutes. The autoscaler keeps its warm pool that way
(docs/autoscaling.md, "Sleeping warm replicas"), and this is what its tests run against.

As in vLLM: /sleep aborts requests in flight (its default `mode=abort`) and forgets the
prefix cache; /wake_up answers once awake; /is_sleeping says `{"is_sleeping": bool}` and
stays true until the wake is done; /health still answers (the process is alive);
`vllm:engine_sleep_state` on /metrics says which state it is in. Unlike vLLM 0.32, which
accepts a request while asleep and holds it until woken, the simulator refuses generation
with 503 while asleep or waking: a request routed to a sleeping replica is a routing bug,
and here it fails loudly instead of waiting unseen.

The wake takes `wake_s` (`--wake-s`, or SLUICE_SIM_WAKE_S; divided by the time scale).
"""

import asyncio
from typing import Any

from aiohttp import web

from inference.sim.engine import Scheduler
from inference.sim.metrics import SimMetrics

DEFAULT_WAKE_S = 1.0
LEVELS = (0, 1, 2)  # 0 pauses scheduling only; 1 offloads weights; 2 discards them


class SleepMode:
    """One simulated engine's sleep state, and the generations it would abort."""

    def __init__(self, engine: Scheduler, metrics: SimMetrics, wake_s: float) -> None:
        self.engine, self.metrics, self.wake_s = engine, metrics, wake_s
        self.level: int | None = None  # None: awake
        self.waking = False
        self.generations: set[asyncio.Task[Any]] = set()  # chat requests being answered
        self._lock = asyncio.Lock()
        self.metrics.sleep_state(None)

    @property
    def sleeping(self) -> bool:
        """True while asleep and while waking, as vLLM's is_sleeping reports."""
        return self.level is not None

    async def sleep(self, level: int) -> None:
        async with self._lock:
            for task in list(self.generations):
                task.cancel()  # vLLM's mode=abort: the client's connection is closed
            self.generations.clear()
            if level >= 1:
                self.engine.forget_cache()
            self.level = level
            self.metrics.sleep_state(level)

    async def wake_up(self) -> None:
        async with self._lock:
            if self.level is None:
                return
            self.waking = True
            try:
                await asyncio.sleep(self.wake_s)
            finally:
                self.waking = False
            self.level = None
            self.metrics.sleep_state(None)


SLEEP: web.AppKey[SleepMode] = web.AppKey("sleep_mode", SleepMode)


def refusal() -> web.Response:
    """What a generation gets while the engine sleeps."""
    body = {
        "error": {
            "message": "the engine is sleeping (sleep mode); wake it with POST /wake_up",
            "type": "ServiceUnavailableError",
            "param": None,
            "code": 503,
        }
    }
    return web.json_response(body, status=503)


async def sleep(http: web.Request) -> web.Response:
    raw = http.query.get("level", "1")
    try:
        level = int(raw)
    except ValueError:
        level = -1
    if level not in LEVELS:
        body = {"error": {"message": f"level must be 0, 1 or 2, not {raw!r}", "code": 400}}
        return web.json_response(body, status=400)
    await http.app[SLEEP].sleep(level)
    return web.json_response({"status": "sleeping", "level": level})


async def wake_up(http: web.Request) -> web.Response:
    await http.app[SLEEP].wake_up()
    return web.json_response({"status": "awake", "tags": None})


async def is_sleeping(http: web.Request) -> web.Response:
    return web.json_response({"is_sleeping": http.app[SLEEP].sleeping})


def add_routes(app: web.Application, engine: Scheduler, metrics: SimMetrics, wake_s: float) -> None:
    app[SLEEP] = SleepMode(engine, metrics, wake_s)
    app.router.add_post("/sleep", sleep)
    app.router.add_post("/wake_up", wake_up)
    app.router.add_get("/is_sleeping", is_sleeping)
