"""Step 8 of the pipeline: settle a finished request, once, however it ended.

Billing is one round trip to the primary Redis (the quota reservation is reconciled to
real usage, giving back what was reserved for max_tokens, and the usage event is queued on
a Redis stream that Celery bulk-writes to the ledger, idempotently). The cache's part (count
the outcome, keep the reply) is one round trip to the cache Redis, sent in the same
event-loop turn: the two travel side by side, so a miss settles in the time of one round
trip, and a slow or dead cache Redis can never delay or lose billing (each has its own
connection, and the cache's failures are logged, never raised).

A non-streamed API reply does not wait for any of it (AfterReply): it is settled once the
reply is out, when a request of this process has next called its worker, or a few ms
after the reply (foundation/worker_wait.py). A lookup this process makes meanwhile of what
the settlement writes has it go at once and queues behind its commands (the same request
asked again at once, a question in the same context, a false-hit report:
caching/pending_stores.py): it finds the reply kept. Another process, or a reader on
another connection (the dashboard), sees them a few ms after the reply.
"""

import asyncio
import json
import logging
import time
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import asdict
from typing import TYPE_CHECKING

from caching import exact, pending_stores, responses
from caching.semantic_keys import SemanticSlot
from foundation import held_tasks, metrics, worker_wait
from foundation.redis_batch import in_order
from foundation.redis_clients import REDIS_FAILURES, async_redis_batch
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


# Admitted requests of each event loop whose settlement has not begun (the pipeline counts
# each in, settle() out; a loop runs in one thread, so no lock). A reply settled while no
# other is in flight waits for the next worker call (AfterReply): the process is otherwise
# idle, and a request that arrives next is spared the work. One settled beside others goes
# at once, its round trips in the same batches as theirs: under load every request's work
# overlaps anyway, and waiting split the batches (6 to 15% more gateway CPU per request at
# c=64, docs/benchmarks.md).
_unsettled: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, int]" = (
    weakref.WeakKeyDictionary()
)


def admitted() -> None:
    loop = asyncio.get_running_loop()
    _unsettled[loop] = _unsettled.get(loop, 0) + 1


def in_flight() -> int:
    """Admitted requests of the running loop, not yet settling."""
    return _unsettled.get(asyncio.get_running_loop(), 0)


async def settle(run: "Completion") -> None:
    """Settle now, or (a non-streamed API reply: run.settle_after_reply) once the reply is
    out, as run.after_reply, which the adapter releases and awaits after sending."""
    loop = asyncio.get_running_loop()
    _unsettled[loop] = _unsettled.get(loop, 0) - 1
    ended_at = time.monotonic()
    if not run.settle_after_reply or run.status == "cancelled":
        await _settle(run, ended_at)
        return
    # A lookup of what the settlement writes, made before it is sent, has it go at once and
    # waits for it (caching/pending_stores.py): a client asking again finds the reply kept.
    keys = _written_keys(run)
    pending = pending_stores.register(*keys) if keys else None
    at_next_worker_call = in_flight() <= 0
    run.after_reply = AfterReply(
        lambda: _settle(run, ended_at, pending), pending, at_next_worker_call
    )


def _written_keys(run: "Completion") -> tuple[str, ...]:
    """What the caches' part of the settlement writes that this process may look up: the
    entries of a kept reply (the exact key, the context's vector set), the note of which
    entries answered (responses.served_key) and a semantic hit's note for a re-ask of its
    request (under its exact key)."""
    plan = run.cache
    if plan.key is None and plan.hit is None:
        return ()  # the caches never considered it
    keys = [responses.served_key(run.request_id)]
    if plan.key is not None:
        keys.append(plan.key)
    if plan.reask_key is not None:
        keys.append(plan.reask_key)
    if plan.slot is not None and _keeps_reply(run):
        keys.append(plan.slot.set_key)
    return tuple(keys)


async def _settle(
    run: "Completion", ended_at: float, pending: pending_stores.PendingStore | None = None
) -> None:
    """pending: the cache writes lookups may wait for, told when they are in the batch,
    and when they are answered."""
    try:
        await _settle_sent(run, ended_at, pending)
    finally:
        if pending is not None:
            pending.done()


async def _settle_sent(
    run: "Completion", ended_at: float, pending: pending_stores.PendingStore | None
) -> None:
    prompt, completion = await run.billed_tokens()
    cost = run.cost_micros = run.deployment.cost_micros(
        prompt, completion, bool(run.reservation.batch_id), run.cached_prompt_tokens(), run.on_spot
    )
    _observe_metrics(run, prompt, completion, ended_at)
    event = _usage_event(run, prompt, completion, cost, ended_at)
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
    if run.cache.key is None and run.cache.hit is None:
        # The caches never considered it (a sampled request): nothing to count or keep
        # there, and no task each for gather() to make.
        metrics.labelled(metrics.cache_results, run.deployment.name, run.cache_result).inc()
    else:
        # Its commands are queued in the cache Redis batch from here on: a client that
        # asks again at once, in this process, finds the reply kept and its hit counted.
        slot = await responses.keeping_slot(run.cache) if _keeps_reply(run) else None
        cache_part = _send_cache_part(run, slot)
    if pending is not None:
        pending.in_batch()
    if cache_part is None:
        await charge
    else:
        await asyncio.gather(charge, cache_part)  # billing's round trip beside the caches'


class AfterReply:
    """A non-streamed reply's settlement, all of it after the reply has gone out (its
    usage counted, its cost, billing, the caches' count and store). It is a task from the
    start, so nothing drops it. Once told the reply is out (reply_sent), it waits, if no
    other request is in flight (in_flight), for the next moment a request of this process
    has called its worker, a few ms at the latest (foundation/worker_wait.py); it goes at
    once when a lookup needs its writes (pending); after REPLY_WAIT_S if no one tells it.
    On a shared core, work done before the reply delays it (the settlement was a fifth of
    a temperature-0 miss's gateway CPU, the caches' store with its probe vector most of
    it), and work done right after it, with Redis woken for its scripts, lands in the CPU
    burst of the next request of a client that asks again at once; at the worker call, it
    runs while that request waits."""

    REPLY_WAIT_S = 5.0

    def __init__(
        self,
        work: Callable[[], Awaitable[None]],
        pending: pending_stores.PendingStore | None = None,
        at_next_worker_call: bool = True,
    ) -> None:
        """at_next_worker_call: False to go as soon as the reply is out."""
        self._go: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._at_next_worker_call = at_next_worker_call
        if pending is not None:  # a lookup that needs its writes does not wait for the reply
            pending.when_wanted = self._release
        self.task = in_background(self._after_reply(work))

    def reply_sent(self) -> None:
        if self._at_next_worker_call:
            worker_wait.at_next_moment(self._release)
        else:
            self._release()

    def _release(self) -> None:
        if not self._go.done():
            self._go.set_result(None)

    async def _after_reply(self, work: Callable[[], Awaitable[None]]) -> None:
        try:
            async with asyncio.timeout(self.REPLY_WAIT_S):
                await self._go
        except TimeoutError:
            pass  # a reply that never reached an API handler (a test's client, say)
        except asyncio.CancelledError:
            await work()  # the process is stopping: settle now
            raise
        await work()


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


def _observe_metrics(run: "Completion", prompt: int, completion: int, ended_at: float) -> None:
    model = run.deployment.name
    metrics.labelled(metrics.latency, model).observe(ended_at - run.started_at)
    if run.ttft_s is not None:
        metrics.labelled(metrics.ttft, model).observe(run.ttft_s)
    metrics.labelled(metrics.tokens, model, "prompt").inc(prompt)
    metrics.labelled(metrics.tokens, model, "completion").inc(completion)


def _usage_event(
    run: "Completion", prompt: int, completion: int, cost: int, ended_at: float
) -> UsageEvent:
    return UsageEvent(
        request_id=run.request_id,
        team_id=run.reservation.team_id,
        api_key_id=run.reservation.key_id or "",
        model=run.deployment.name,
        prompt_tokens=prompt,
        completion_tokens=completion,
        status=run.status,
        latency_ms=int((ended_at - run.started_at) * 1000),
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
    noted = None
    if run.coalesced and run.status == "ok" and run.leader_request_id:
        # Its reply is its leader's: a report of it is a report of the leader's.
        team_id = run.reservation.team_id
        noted = responses.note_shared_reply(
            run.cache, run.request_id, team_id, run.leader_request_id
        )
    return in_order(counted, kept, noted)


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
    """A complete generated reply whose real token counts the worker reported is kept
    (also one that others read to its end after this request's client left)."""
    return not (
        run.cache.key is None
        or run.coalesced
        or (run.status != "ok" and not run.led_a_whole_shared_reply)
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
