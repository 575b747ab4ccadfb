"""Continuous batching, the way vLLM schedules one GPU.

Each step: admit waiting requests while there are free sequence slots and KV blocks;
give prefill chunks to new requests within the step's token budget; every prefilled
request decodes one token. The step lasts what the profile says that work costs. Computed
prompt blocks are shared and stay cached (kv.py), so a request sharing leading blocks
skips their prefill and their memory, as with --enable-prefix-caching.
"""

import asyncio
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Protocol

from inference.sim.kv import KVBlocks
from inference.sim.metrics import SimMetrics
from inference.sim.profiles import Profile

_DONE = None


@dataclass(eq=False)
class SimRequest:
    prompt: list[str]
    output: list[str]
    arrived: float = field(default_factory=time.monotonic)
    submitted_clock: float = 0.0
    first_token_clock: float | None = None
    tokens: "asyncio.Queue[str | None]" = field(default_factory=asyncio.Queue)
    block_hashes: list[int] = field(default_factory=list)
    cache_salt: str = ""  # vLLM's per-request salt: blocks match only under the same salt
    shared_blocks: list[int] = field(default_factory=list)  # KV blocks shared with others
    private_blocks: int = 0  # KV blocks its own
    cached_tokens: int = 0
    prefilled: int = 0
    generated: int = 0
    finished: bool = False

    @property
    def prompt_len(self) -> int:
        return len(self.prompt)

    @property
    def context_len(self) -> int:
        return self.prompt_len + self.generated


class Scheduler(Protocol):
    """What the HTTP surface needs of an engine (Engine, or FixedLatencyEngine)."""

    profile: Profile
    metrics: SimMetrics

    def submit(self, request: SimRequest) -> None: ...

    def cancel(self, request: SimRequest) -> None: ...

    def forget_cache(self) -> None: ...

    async def run(self) -> None: ...


def block_hashes(tokens: list[str], block_size: int, salt: str = "") -> list[int]:
    """Chained hashes of full blocks: a block matches only if everything before it does,
    and the salt (vLLM's cache_salt) goes into the first, as vLLM does."""
    hashes, previous = [], hash(salt) if salt else 0
    for start in range(0, len(tokens) - block_size + 1, block_size):
        previous = hash((previous, *tokens[start : start + block_size]))
        hashes.append(previous)
    return hashes


class Engine:
    def __init__(self, profile: Profile, metrics: SimMetrics, time_scale: float = 1.0) -> None:
        self.profile = profile
        self.metrics = metrics
        self.time_scale = time_scale
        self.total_blocks = profile.kv_capacity_tokens // profile.block_size
        self.waiting: deque[SimRequest] = deque()
        self.running: list[SimRequest] = []
        self.kv = KVBlocks(self.total_blocks)
        self._wake = asyncio.Event()
        # Simulated seconds of GPU work so far: measurements that must not depend on how
        # busy the host is (tests, replay) read this instead of the wall clock.
        self.clock = 0.0

    def submit(self, request: SimRequest) -> None:
        request.block_hashes = block_hashes(
            request.prompt, self.profile.block_size, request.cache_salt
        )
        request.submitted_clock = self.clock
        self.waiting.append(request)
        self._publish_gauges()
        self._wake.set()

    def cancel(self, request: SimRequest) -> None:
        if request.finished:
            return
        request.finished = True
        if request in self.running:
            self._release(request)
            self.metrics.aborted()
        elif request in self.waiting:
            self.waiting.remove(request)
            self.metrics.aborted()
        self._publish_gauges()

    def forget_cache(self) -> None:
        """Drop the cached prompt blocks no request holds (sleep mode discards the KV cache;
        by then every request was aborted)."""
        self.kv.evictable.clear()
        self._publish_gauges()

    def blocks_needed(self, request: SimRequest) -> int:
        tokens = request.prompt_len + len(request.output)
        return -(-tokens // self.profile.block_size)

    def blocks_in_use(self) -> int:
        return self.kv.in_use()

    async def run(self) -> None:
        while True:
            if not self.running and not self.waiting:
                self._wake.clear()
                await self._wake.wait()
            self._admit()
            await self._step()

    def _admit(self) -> None:
        while self.waiting and len(self.running) < self.profile.max_num_seqs:
            request = self.waiting[0]
            hits = request.block_hashes[: self.kv.cached_prefix(request.block_hashes)]
            private = self.blocks_needed(request) - len(hits)
            if not self.kv.admit(hits, private):
                break  # head-of-line waits for memory, as vLLM's FCFS scheduler does
            self.waiting.popleft()
            request.shared_blocks, request.private_blocks = list(hits), private
            # vLLM always recomputes at least the last prompt token to produce logits.
            request.cached_tokens = min(len(hits) * self.profile.block_size, request.prompt_len - 1)
            request.prefilled = request.cached_tokens
            self.metrics.prefix_lookup(request.prompt_len, request.cached_tokens)
            self.running.append(request)
        self._publish_gauges()

    async def _step(self) -> None:
        decoding = [r for r in self.running if r.prefilled >= r.prompt_len]
        budget = self.profile.max_num_batched_tokens - len(decoding)
        chunks: list[tuple[SimRequest, int]] = []
        for request in self.running:
            if request.prefilled < request.prompt_len and budget > 0:
                chunk = min(request.prompt_len - request.prefilled, budget)
                chunks.append((request, chunk))
                budget -= chunk
        seconds = self.profile.step_seconds(
            decode_context_tokens=sum(r.context_len for r in decoding),
            decode_seqs=len(decoding),
            prefill_tokens=sum(chunk for _, chunk in chunks),
        )
        await asyncio.sleep(seconds / self.time_scale)
        self.clock += seconds
        for request, chunk in chunks:
            request.prefilled += chunk
            if request.prefilled >= request.prompt_len and not request.finished:
                self._remember_prefix(request)
                self._emit(request)
        for request in decoding:
            if not request.finished:
                self._emit(request)

    def _remember_prefix(self, request: SimRequest) -> None:
        request.private_blocks -= self.kv.share(request.block_hashes, request.shared_blocks)

    def _release(self, request: SimRequest) -> None:
        self.running.remove(request)
        self.kv.release(request.shared_blocks, request.private_blocks)
        request.shared_blocks, request.private_blocks = [], 0

    def _emit(self, request: SimRequest) -> None:
        if request.generated == 0:
            request.first_token_clock = self.clock
            self.metrics.first_token((time.monotonic() - request.arrived) * self.time_scale)
        request.tokens.put_nowait(request.output[request.generated])
        request.generated += 1
        if request.generated >= len(request.output):
            request.finished = True
            request.tokens.put_nowait(_DONE)
            self._release(request)
            self.metrics.finished(request.prompt_len, request.generated)
            self._publish_gauges()

    def _publish_gauges(self) -> None:
        self.metrics.gauges(
            running=len(self.running),
            waiting=len(self.waiting),
            kv_usage=self.blocks_in_use() / self.total_blocks if self.total_blocks else 0.0,
        )
