"""Step 8 of the pipeline: settle a finished request, once, however it ended.

Billing is one round trip to the primary Redis (the quota reservation is reconciled to
real usage, giving back what was reserved for max_tokens, and the usage event is queued on
a Redis stream that Celery bulk-writes to the ledger, idempotently). The cache's part (count
the outcome, keep the reply) is one round trip to the cache Redis, sent in the same
event-loop turn: the two travel side by side, so a miss settles in the time of one round
trip, and a slow or dead cache Redis can never delay or lose billing (each has its own
connection, and the cache's failures are logged, never raised).

A non-streamed API reply does not wait for either (AfterReply): both go out once the reply
has. The caches' commands are queued in their batch before the reply, held until it is
out, so whatever this process looks up afterwards (an identical question asked again at
once, a false-hit report) runs after them on the same connection. Another process, or a
reader on another connection (the dashboard), sees them a round trip after the reply.
"""

import asyncio
import json
import logging
import time
from collections.abc import Awaitable
from contextlib import nullcontext
from dataclasses import asdict
from typing import TYPE_CHECKING

from caching import exact, responses
from caching.semantic_keys import SemanticSlot
from foundation import held_tasks, metrics
from foundation.redis_batch import in_order
from foundation.redis_clients import REDIS_FAILURES, async_cache_redis_batch, async_redis_batch
from gateway.accounts.quotas import (
    AdmissionUnavailable,
    Reservation,
    reconcile,
    reconcile_command,
)
from gateway.usage.ledger import UsageEvent, record_usage, usage_command

if TYPE_CHECKING:
    from gateway.serving.completion import Completion

logger = logging.getLogger(__name__)
# A usage event Redis refused is queued again after these pauses (31 s in all).
REQUEUE_PAUSES_S = (0.5, 1.0, 2.0, 4.0, 8.0, 16.0)


async def settle(run: "Completion") -> None:
    prompt, completion = await run.billed_tokens()
    cost = run.cost_micros = run.deployment.cost_micros(
        prompt, completion, bool(run.reservation.batch_id), run.cached_prompt_tokens(), run.on_spot
    )
    _observe_metrics(run, prompt, completion)
    event = _usage_event(run, prompt, completion, cost)
    charge = bill(run.reservation, prompt + completion, cost, event)
    # Every request is in the usage ledger; the log tells the ones that did not end well
    # (a line per completed request costs measurable CPU at thousands a second).
    logger.log(
        logging.DEBUG if run.status == "ok" else logging.INFO,
        "request %s team %s model %s worker %s prompt %d completion %d cache %s status %s",
        run.request_id,
        run.reservation.team_id,
        run.deployment.name,
        run.worker_url or "-",
        prompt,
        completion,
        run.cache_result,
        run.status,
    )
    cache_part: Awaitable[None] | None = None
    after_reply = run.settle_after_reply and run.status != "cancelled"
    if run.cache.key is None and run.cache.hit is None:
        # The caches never considered it (a sampled request): nothing to count or keep
        # there, and no task each for gather() to make.
        metrics.labelled(metrics.cache_results, run.deployment.name, run.cache_result).inc()
    else:
        # Its commands are queued in the cache Redis batch from here on: a client that
        # asks again at once, in this process, finds the reply kept and its hit counted.
        slot = await responses.keeping_slot(run.cache) if _keeps_reply(run) else None
        batch = async_cache_redis_batch()
        with batch.holding() if after_reply else nullcontext():
            cache_part = _send_cache_part(run, slot)
    if after_reply:
        # Finished once the reply is out, awaited by the adapter then
        # (gateway/api_handler.py). A client that left gets no reply: its settlement is
        # awaited here, as any other's.
        run.after_reply = AfterReply(charge, cache_part)
    elif cache_part is None:
        await charge
    else:
        await asyncio.gather(charge, cache_part)  # billing's round trip beside the caches'


class AfterReply:
    """A non-streamed reply's settlement, finished after the reply has gone out. It is a
    task from the start, so nothing drops it. Its round trips go out once it is told the
    reply is out (reply_sent), or after REPLY_WAIT_S if no one tells it: the caches'
    commands were queued in their batch, held (foundation/redis_batch.py), so a lookup
    made after them still runs after them; billing's are sent then. On a shared core,
    Redis woken before the reply runs its scripts ahead of it: the billing cost a lone
    request 60 to 160 us that way, the caches' store with its two GDSF scripts about
    1.4 ms when the reply waited for its answers."""

    REPLY_WAIT_S = 5.0

    def __init__(self, charge: Awaitable[None], cache_part: Awaitable[None] | None = None) -> None:
        self._sent = asyncio.Event()
        self._holding_cache = cache_part is not None
        self.task = in_background(self._after_reply(charge, cache_part))

    def reply_sent(self) -> None:
        self._send_held()
        self._sent.set()

    def _send_held(self) -> None:
        if self._holding_cache:
            self._holding_cache = False
            async_cache_redis_batch().send_held()

    async def _after_reply(
        self, charge: Awaitable[None], cache_part: Awaitable[None] | None
    ) -> None:
        try:
            async with asyncio.timeout(self.REPLY_WAIT_S):
                await self._sent.wait()
        except TimeoutError:
            pass  # a reply that never reached an API handler (a test's client, say)
        except asyncio.CancelledError:
            self._send_held()
            await in_order(charge, cache_part)  # the process is stopping: settle now
            raise
        self._send_held()
        await in_order(charge, cache_part)


def in_background(work: Awaitable[None]) -> "asyncio.Task[None]":
    """Settlement work that outlives the request that started it, held until done
    (foundation/held_tasks.py)."""
    return held_tasks.hold(work)


async def finish_background(timeout_s: float) -> None:
    """Before this event loop ends (a server shutting down, a batch run returning): wait
    for the bills, usage events and admission give-backs still on their way, so none is
    cut off unlogged; what is still running after timeout_s is cancelled, and a usage
    event cut off so logs its whole record."""
    await held_tasks.finish(timeout_s)


async def bill(reservation: Reservation, used_tokens: int, cost: int, event: UsageEvent) -> None:
    """Reconcile the reservation and queue the usage event in one round trip; each is
    retried on its own if the pipeline could not do it (a Redis restart forgot the
    reconcile script, say), and each failure is logged with what it leaves behind. A retry
    is safe where the first try ran after all (a timeout whose command Redis ran): the
    reconcile applies once per reservation, and the ledger keeps one record per request."""
    batch = async_redis_batch()  # with other requests' admissions and settlements
    reconciling = batch.submit(*reconcile_command(reservation, used_tokens, cost))
    queueing = batch.submit(*usage_command(event))
    reconciled, queued = await _outcome(reconciling), await _outcome(queueing)
    if isinstance(reconciled, Exception):
        try:
            await reconcile(reservation, used_tokens, cost)
        except AdmissionUnavailable:
            logger.error("request %s: reservation left fully charged", event.request_id)
    if isinstance(queued, Exception):
        try:
            await record_usage(event)
        except REDIS_FAILURES:
            # Redis restarting (a failover, an AOF replay) is back within seconds: keep the
            # event and try again in the background rather than lose it (the chaos run lost
            # one this way). The client is not kept waiting.
            in_background(_queue_later(event))


async def _queue_later(event: UsageEvent) -> None:
    try:
        for pause_s in REQUEUE_PAUSES_S:
            await asyncio.sleep(pause_s)
            try:
                await record_usage(event)
            except REDIS_FAILURES:
                continue
            logger.warning(
                "request %s: usage event queued late, after a Redis outage", event.request_id
            )
            return
    except asyncio.CancelledError:
        _log_lost(event, "the process stopped before Redis was back")
        raise
    _log_lost(event, f"Redis unreachable for {sum(REQUEUE_PAUSES_S):g} s")


def _log_lost(event: UsageEvent, why: str) -> None:
    # The log line carries the whole event, so it can still be replayed by hand.
    logger.error(
        "request %s: usage event not queued, %s: %s",
        event.request_id,
        why,
        json.dumps(asdict(event)),
    )


async def _outcome(reply: "asyncio.Future[object]") -> object:
    try:
        return await reply
    except Exception as exc:
        return exc


def _observe_metrics(run: "Completion", prompt: int, completion: int) -> None:
    model = run.deployment.name
    metrics.labelled(metrics.latency, model).observe(time.monotonic() - run.started_at)
    if run.ttft_s is not None:
        metrics.labelled(metrics.ttft, model).observe(run.ttft_s)
    metrics.labelled(metrics.tokens, model, "prompt").inc(prompt)
    metrics.labelled(metrics.tokens, model, "completion").inc(completion)


def _usage_event(run: "Completion", prompt: int, completion: int, cost: int) -> UsageEvent:
    return UsageEvent(
        request_id=run.request_id,
        team_id=run.reservation.team_id,
        api_key_id=run.reservation.key_id or "",
        model=run.deployment.name,
        prompt_tokens=prompt,
        completion_tokens=completion,
        status=run.status,
        latency_ms=int((time.monotonic() - run.started_at) * 1000),
        ttft_ms=None if run.ttft_s is None else int(run.ttft_s * 1000),
        worker=run.worker_url,
        cost_micros=cost,
        created_at=time.time(),
        cache_result=run.cache_result,
        batch_id=run.reservation.batch_id,
    )


def _send_cache_part(run: "Completion", slot: SemanticSlot | None) -> Awaitable[None]:
    """Count the outcome and keep a generated reply (slot: responses.keeping_slot's):
    every command in this turn's cache Redis batch when this returns. Awaiting the result
    only waits for their replies."""
    counted = _count_cache_outcome(run)
    kept = _send_keep_reply(run, slot) if _keeps_reply(run) else None
    return in_order(counted, kept)


def _count_cache_outcome(run: "Completion") -> Awaitable[None]:
    model, result = run.deployment.name, run.cache_result
    metrics.labelled(metrics.cache_results, model, result).inc()
    saved = saved_cost = 0
    if run.served_without_generating:
        prompt, completion = run.used_tokens()
        batch = bool(run.reservation.batch_id)
        saved, saved_cost = (
            prompt + completion,
            run.deployment.cost_micros(prompt, completion, batch),
        )
        metrics.labelled(metrics.cache_tokens_saved, model).inc(saved)
        metrics.labelled(metrics.cache_cost_saved, model).inc(saved_cost)
    team_id = run.reservation.team_id
    return responses.settle_submitted(run.cache, run.request_id, team_id, result, saved, saved_cost)


def _keeps_reply(run: "Completion") -> bool:
    """A complete generated reply whose real token counts the worker reported is kept."""
    return not (
        run.cache.key is None
        or run.coalesced
        or run.status != "ok"
        or run.usage is None
        or run.finish_reason is None
    )


def _send_keep_reply(run: "Completion", slot: SemanticSlot | None) -> Awaitable[None]:
    assert run.usage is not None  # _keeps_reply
    prompt = run.usage.get("prompt_tokens", 0)
    completion = run.usage.get("completion_tokens", 0)
    reply = exact.CachedReply.assembled(run.reply, prompt, completion)
    cost = run.deployment.cost_micros(prompt, completion)
    team_id = run.reservation.team_id
    return responses.send_keep(run.cache, slot, reply, cost, run.request_id, team_id)
