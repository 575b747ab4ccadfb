"""Steps 5 to 7 of the pipeline for one admitted request: replay a cache hit, or share an
identical generation (coalesce), or route to a worker and stream from it.

A Completion is started (up to its first chunk, so failures before the first token are
errors the adapter can still answer with), streamed, and settled: settlement is an
explicit call (gateway/serving/settlement.py), made by the pipeline when start fails and
by the adapter after the stream, through `async with`.
"""

import asyncio
import hmac
import logging
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from contextlib import aclosing
from types import TracebackType
from typing import Any

from django.conf import settings

from caching import exact
from caching.cache_plan import CachePlan
from caching.coalesce import Coalescer, Item, SharedGeneration
from caching.outcome import Outcome
from caching.semantic import SemanticMatch
from foundation import metrics
from gateway.accounts.quotas import Reservation
from gateway.drain import drain
from gateway.serving import audit, settlement
from gateway.serving.admission import Target
from gateway.serving.audit import AuditJob
from gateway.serving.errors import rate_limit_headers
from inference.chat_request import ChatRequest
from inference.client import UpstreamError, count_prompt_tokens
from inference.reply import ReplyAssembler, carries_output, estimated_output_tokens
from inference.snapshot import WorkerView
from scaling.routing.dispatcher import Dispatcher, Lease, Priority
from scaling.routing.fair_queue import Tenant
from scaling.routing.prefix import route_context
from scaling.routing.router import RouteContext
from scaling.routing.streaming import stream_completion

logger = logging.getLogger(__name__)
Chunk = dict[str, Any]
# One per process: the dispatcher's in-flight counts and the coalescer's shared generations
# are this process's view.
dispatcher = Dispatcher()
coalescer = Coalescer()


def team_cache_salt(team_id: int) -> str:
    """vLLM's cache_salt for a team: prompts of different teams never share KV blocks, so
    one team cannot learn from time-to-first-token what another team's prompts start with.
    Keyed with SECRET_KEY so the salt of a team cannot be derived from its id."""
    digest = hmac.new(settings.SECRET_KEY.encode(), f"team:{team_id}".encode(), "sha256")
    return digest.hexdigest()[:32]


class Completion:
    """One chat completion after admission: its chunks, what they cost, how it ended."""

    def __init__(
        self,
        request_id: str,
        chat: ChatRequest,
        target: Target,
        reservation: Reservation,
        cache: CachePlan | None = None,
        received_at: float | None = None,
    ) -> None:
        self.request_id = request_id
        # perf_counter when the pipeline took the request, and how long since then it has
        # waited on a worker (a slot in the queue, the worker's tokens, a shared generation).
        self.received_at = time.perf_counter() if received_at is None else received_at
        self.worker_wait_s = 0.0
        self.chat = chat
        self.target = target
        self.deployment = target.deployment
        self.reservation = reservation
        self.cache = cache or CachePlan(Outcome.BYPASS)  # until the caches have been asked
        self.coalesced = False  # read another identical request's generation
        self.leader_request_id = ""  # the request whose generation it read
        # This request led a generation others read, and it ended whole though this
        # request's client left: its reply is kept as any whole reply (settlement).
        self.led_a_whole_shared_reply = False
        self.reply = ReplyAssembler()  # assembled only when the reply will be cached
        self.created = int(time.time())
        self.usage: dict[str, Any] | None = None
        self.cost_micros = 0  # what it was billed, once settled
        self.chunks_with_text = 0
        self.worker_url = ""
        self.dispatched_to: WorkerView | None = None  # the worker that took the request
        self.started_at = time.monotonic()
        self.ttft_s: float | None = None
        self.status = "cancelled"  # until the stream ends one way or the other
        self.settled = False
        # Set by an adapter that sends its whole reply at once: the settlement (billing, the
        # caches' count and store) then runs after the reply is out, as `after_reply`,
        # which the adapter releases and awaits after sending (a client that left, or a
        # view that failed, gets no reply: settled before the view returns).
        # The quota was reserved at admission, so for a moment the team's next request
        # sees the reservation where the usage will be.
        self.settle_after_reply = False
        self.after_reply: settlement.AfterReply | None = None
        self.shared: SharedGeneration | None = None  # set when this request leads one
        # Told when the request is held for a replica of a deployment scaled to zero (the
        # HTTP adapter then keeps a stream's connection alive: gateway/api/views.py).
        self.on_hold: Callable[[str], None] | None = None
        self._source: AsyncGenerator[Chunk, None] | None = None
        self._first: Chunk | None = None

    async def start(self) -> None:
        """Up to the first chunk: a hit replays, a miss coalesces or routes and generates.
        Raises the domain error (no worker, queue timeout, worker failure) before any byte
        has reached the client."""
        self._source = self._replayed() if self.cache.reply is not None else self._generated()
        try:
            self._first = await anext(self._source)
        except StopAsyncIteration:
            self._first = None
        except BaseException as exc:
            self.status = "failed" if isinstance(exc, Exception) else "cancelled"
            if isinstance(exc, UpstreamError) and not exc.before_first_token:
                # A whole reply's worker failed after it may have done the work (its
                # timeout, a reply over the size limit): billed the prompt it processed.
                self.worker_url = exc.worker_url
            await self._source.aclose()
            raise

    async def stream(self) -> AsyncIterator[Chunk]:
        """The chunks from the first on, with our id and the public model name. It ends when
        the worker has finished; settle() comes after, so a client can be told the reply is
        complete without waiting for the quota and ledger round trips."""
        assert self._source is not None, "start() first"
        try:
            async with aclosing(self._source) as chunks:
                if self._first is not None:
                    yield self._first
                async for chunk in chunks:
                    yield chunk
            self.status = "ok"
        except Exception:
            self.status = "failed"
            raise

    async def settle(self) -> None:
        """Step 8, exactly once however the request ended (done, failed, cancelled)."""
        if self.settled:
            return
        self.settled = True
        if self._source is not None:
            await self._source.aclose()  # a client gone mid-stream: stop the worker first
        if self.shared is not None and not self.shared.done:
            # This request started a generation others still read, then left: bill all of it
            # once it ends, in the background (the leaver is not kept waiting).
            settlement.in_background(self._settle_when_shared_ends())
            return
        await self._settle_after(self.shared)

    async def _settle_when_shared_ends(self) -> None:
        assert self.shared is not None
        await self.shared.finished.wait()
        await self._settle_after(self.shared)

    async def _settle_after(self, shared: SharedGeneration | None) -> None:
        if shared is not None:  # count what the generation made, not what this reader saw
            self.led_a_whole_shared_reply = shared.completed
            self.usage, self.chunks_with_text, self.reply = None, 0, ReplyAssembler()
            for worker_url, chunk in shared.items:
                self._observe(worker_url, chunk)
        await settlement.settle(self)
        plan = self.cache
        if plan.audit and self.status == "ok" and plan.hit and plan.reply:
            route, body = self._upstream()
            job = AuditJob(
                self.request_id,
                self.deployment,
                plan.hit.key,
                plan.reply,
                body,
                route,
                self.chat.upstream_path,
                (self.reservation.team_id, plan.hit_cell),
            )
            audit.schedule(dispatcher, job)
        elif self._reasked_fresh():
            assert plan.key is not None  # _reasked_fresh
            settlement.in_background(self._learn_from_reask(plan.key))
        elif plan.turned_down is not None and self._answered_fresh():
            settlement.in_background(self._compare_turned_down(plan.turned_down))

    async def _compare_turned_down(self, turned_down: SemanticMatch) -> None:
        """Audit the candidate the bound turned down with this fresh reply (after a
        non-streamed reply's settlement, as _learn_from_reask)."""
        if self.after_reply is not None:
            await asyncio.wait([self.after_reply.task])
        team_id = self.reservation.team_id
        await audit.compare_turned_down(self.request_id, team_id, turned_down, self.reply.text)

    def _answered_fresh(self) -> bool:
        """A complete reply generated for this request's miss."""
        return (
            self.cache.result == Outcome.MISS
            and not self.coalesced  # its leader's reply: compared by the leader, if drawn
            and self.status == "ok"
            and self.finish_reason is not None
        )

    async def _learn_from_reask(self, exact_key: str) -> None:
        """Compare with an earlier hit for this request (audit.learn_from_reask), once a
        non-streamed reply's settlement is done, which is after the reply went out: the
        comparison's Redis commands would otherwise run before the reply's own."""
        if self.after_reply is not None:
            await asyncio.wait([self.after_reply.task])
        await audit.learn_from_reask(self.request_id, exact_key, self.reply.text)

    def _reasked_fresh(self) -> bool:
        """A complete reply generated for this request because its caller bypassed the
        caches (a cache Redis failure's bypass has no key), deterministic: what a semantic
        hit for the same request could be compared with."""
        plan = self.cache
        return (
            plan.result == Outcome.BYPASS
            and plan.key is not None
            and self.status == "ok"
            and self.finish_reason is not None
            and not self.coalesced
            and exact.is_deterministic(self.chat)
        )

    async def __aenter__(self) -> "Completion":
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        # Shielded and held: a caller cancelled meanwhile (a client gone during the
        # worker's /tokenize, say) leaves it to finish, and a shutting-down loop waits.
        await asyncio.shield(settlement.in_background(self.settle()))

    @property
    def finish_reason(self) -> str | None:
        return self.reply.finish_reason

    # What the adapters show.
    @property
    def cache_result(self) -> Outcome:
        """For the caller, the usage record and counters: coalesced requests are marked."""
        return Outcome.COALESCED if self.coalesced else self.cache.result

    @property
    def served_without_generating(self) -> bool:
        return self.cache.reply is not None or self.coalesced

    def overhead_s(self) -> float:
        """Time in the gateway so far, less the time spent waiting on a worker."""
        return max(time.perf_counter() - self.received_at - self.worker_wait_s, 0.0)

    def response_headers(self) -> dict[str, str]:
        """Called once, as the response's headers go out (a stream's after its first
        chunk, a whole reply's at its end): the overhead is measured here."""
        overhead = self.overhead_s()
        metrics.labelled(metrics.gateway_overhead, self.deployment.name).observe(overhead)
        headers = {
            "x-sluice-overhead-ms": f"{overhead * 1000:.2f}",
            **rate_limit_headers(self.reservation.state),
            **self.target.headers(),
            "x-sluice-cache": self.cache.result,
        }
        if self.coalesced:
            headers["x-sluice-coalesced"] = "true"
        return headers

    def used_tokens(self) -> tuple[int, int]:
        """The reply's size as the worker reported it (a cache hit: as stored), else what
        was streamed so far with the admission estimate of the prompt."""
        if self.usage is not None:
            return _reported(self.usage)
        produced = self.chunks_with_text
        return (self.chat.estimated_prompt_tokens() if produced else 0), produced

    @property
    def on_spot(self) -> bool:
        """Served by a worker labelled spot: billed at the deployment's spot discount."""
        return self.dispatched_to is not None and self.dispatched_to.spot

    def cached_prompt_tokens(self) -> int:
        """How much of the prompt the worker read from its prefix cache, as it reported
        (vLLM's prompt_tokens_details, with --enable-prompt-tokens-details); a reply from
        Sluice's own caches reports its whole prompt (exact.usage)."""
        details = (self.usage or {}).get("prompt_tokens_details")
        cached = details.get("cached_tokens") if isinstance(details, dict) else None
        return cached if isinstance(cached, int) and cached >= 0 else 0

    async def billed_tokens(self) -> tuple[int, int]:
        """What the GPU did for this request, in (prompt, completion) tokens.

        Nothing for a cache hit or a coalesced reader (the leader pays for the generation),
        nor for a batch line's attempt that failed (the line is retried under another id, or
        its error is the line's answer: no part of it reaches the batch's owner);
        the worker's own usage when the stream got that far (a whole reply always has it;
        one its client left is billed its max_tokens, unless the process was shutting
        down or it is a batch line); nothing for a request that
        never left the queue, or whose worker refused or failed before its first chunk
        (the client got an error, not a reply). A request that reached a worker and ended
        before the usage chunk otherwise (the client left, the stream broke) had its prompt
        processed: it is counted by the worker's tokenizer (vLLM's /tokenize), with a token
        per streamed chunk."""
        if self.served_without_generating:
            return 0, 0
        if self.reservation.batch_id and self.status == "failed":
            return 0, 0  # a batch line's failed try: retried or reported as an error, never seen
        if self.usage is not None:
            return _reported(self.usage)
        if self.dispatched_to is None:
            return 0, 0
        if self.status == "failed" and not self.worker_url:
            return 0, 0  # the worker refused or failed before answering: nothing was served
        prompt = await self._counted_prompt(self.dispatched_to)
        if self.asks_whole_reply and self.status == "cancelled" and self._left_by_its_client:
            # Its client left while the worker made a whole reply, which cannot tell how
            # far it got: billed as reserved, max_tokens a choice (as OpenAI bills a
            # request abandoned mid-generation). A stream is billed what it streamed.
            return prompt, self.chat.max_tokens * self.chat.n
        return prompt, self.chunks_with_text

    @property
    def _left_by_its_client(self) -> bool:
        """A cancelled request was cut by its client, not by the platform: not by this
        process's shutdown (gateway/drain.py), and no batch line (a runner cancels its
        lines only when it stops; a batch's cancel lets the lines in flight finish)."""
        return not drain.draining and not self.reservation.batch_id

    async def _counted_prompt(self, worker: WorkerView) -> int:
        chat = self.chat
        try:
            return await count_prompt_tokens(
                worker.url,
                worker.upstream_model,
                chat.messages,
                chat.options.get("tools"),
                chat.text_prompt,
                self.deployment.worker_headers,
                chat_template_kwargs=chat.options.get("chat_template_kwargs"),
            )
        except UpstreamError as exc:
            # Billed anyway, on the upper-leaning estimate admission reserved; said loudly.
            metrics.labelled(metrics.prompt_tokens_estimated, self.deployment.name).inc()
            logger.warning(
                "request %s: prompt billed on the estimate, the worker could not count it: %s",
                self.request_id,
                exc,
            )
            return self.chat.estimated_prompt_tokens()

    # Where the chunks come from.
    async def _generated(self) -> AsyncGenerator[Chunk, None]:
        source = self._routed()
        if settings.CACHE_COALESCE_ENABLED and self.cache.result == Outcome.MISS and self.cache.key:
            # A whole reply comes at its end: no stream joins one (caching/coalesce.py).
            key = self.cache.key
            if self.asks_whole_reply:
                shared, leader = coalescer.join(f"{key}:whole", lambda: source, or_join=key)
            else:
                shared, leader = coalescer.join(key, lambda: source)
            if leader:
                self.shared = shared
                shared.led_by = self.request_id
            else:
                await source.aclose()  # never started: nothing reached the worker
                self.coalesced = True
                self.leader_request_id = shared.led_by
            source = shared.read()
        async with aclosing(source) as upstream:
            waiting_since = time.perf_counter()
            async for worker_url, chunk in upstream:
                self.worker_wait_s += time.perf_counter() - waiting_since
                self._observe(worker_url, chunk)
                yield {**chunk, "id": self.request_id, "model": self.deployment.name}
                waiting_since = time.perf_counter()

    def _upstream(self) -> tuple[RouteContext, dict[str, Any]]:
        """Where the routing policy should look, and the body the worker gets."""
        team_id = self.reservation.team_id
        route = route_context(
            self.deployment.name,
            self.deployment.routing_policy,
            self.chat.messages,
            self.chat.options.get("user"),
            scope=f"team:{team_id}",
        )
        body = self.chat.upstream_body()
        if self.deployment.sends_cache_salt:  # an extension other servers may refuse
            body = {**body, "cache_salt": team_cache_salt(team_id)}
        return route, body

    async def _routed(self) -> AsyncGenerator[Item, None]:
        """Step 6 and 7: the deployment's routing policy picks a worker; stream from it."""
        name, team_id = self.deployment.name, self.reservation.team_id
        route, body = self._upstream()
        limits = self.reservation.limits
        # Queued fairly among teams, by the weight and cap of the team's quota policy.
        tenant = Tenant(f"team:{team_id}", limits.queue_weight, limits.max_concurrent_requests)
        # A batch line waits behind every interactive request (and the batch runner only
        # sends lines while the fleet has spare capacity: gateway/batches/meter.py).
        priority = Priority.BATCH if self.reservation.batch_id else Priority.INTERACTIVE
        stream = stream_completion(
            dispatcher,
            name,
            body,
            priority,
            route=route,
            on_dispatch=self._dispatched,
            tenant=tenant,
            path=self.chat.upstream_path,
            headers=self.deployment.worker_headers,
            on_hold=self.on_hold,
            whole=self.asks_whole_reply,
            reply_timeout_s=settings.BATCH_LINE_REPLY_TIMEOUT_S
            if self.reservation.batch_id
            else None,
        )
        async with aclosing(stream) as upstream:
            async for lease, chunk in upstream:
                yield lease.worker.url, chunk

    @property
    def asks_whole_reply(self) -> bool:
        """Whether its worker is asked for the whole reply at once rather than a stream:
        the request allows it (ChatRequest.asks_whole_reply: not streamed, no logprobs).
        A batch line too: the batch allowance takes one as held from when it is sent
        (scaling/routing/batch_meter.py)."""
        return self.chat.asks_whole_reply

    def _dispatched(self, lease: Lease | None) -> None:
        # None: the worker tried failed before answering, and the request waits for another.
        self.dispatched_to = None if lease is None else lease.worker

    async def _replayed(self) -> AsyncGenerator[Chunk, None]:
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

    def _observe(self, worker_url: str, chunk: Chunk) -> None:
        self.worker_url = worker_url
        if chunk.get("usage"):
            self.usage = chunk["usage"]
        if self.cache.key is not None and not self.coalesced:
            self.reply.add(chunk)
        if carries_output(chunk):  # text, reasoning or a tool call's part
            if self.asks_whole_reply and not chunk.get("usage"):
                # A whole reply without the worker's usage (an OpenAI-compatible server
                # may omit it; vLLM never does): billed on an estimate of its size.
                self.chunks_with_text += estimated_output_tokens(chunk)
            else:
                self.chunks_with_text += 1
            # A whole reply's one chunk is its end: it has no time to first token.
            if self.ttft_s is None and not self.asks_whole_reply:
                self.ttft_s = time.monotonic() - self.started_at


def _reported(usage: dict[str, Any]) -> tuple[int, int]:
    return int(usage.get("prompt_tokens", 0)), int(usage.get("completion_tokens", 0))
