"""A generated reply kept in the caches, the outcome counted, and a false hit taken out of
service (the lookup side, which decides what answers a request: caching/cache_plan.py).

A reply is kept in the exact cache under its request's key and, for a question, in the
semantic cache with the probe vector (and MiniLM's, when the lookup made one); the note of
which entries answered a request lets its caller report the reply as wrong.
"""

import asyncio
import json
import logging
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any

from redis.exceptions import NoScriptError

from caching import eviction, exact, pending_stores, semantic, stats
from caching.cache_plan import CachePlan, EntryRef, namespace
from caching.exact import CachedReply, CacheUnavailable
from caching.outcome import Outcome
from caching.semantic_keys import SemanticSlot
from foundation.json_bytes import json_bytes
from foundation.redis_batch import in_order
from foundation.redis_clients import (
    REDIS_FAILURES,
    async_cache_redis,
    async_cache_redis_batch,
)

logger = logging.getLogger(__name__)
SERVED_PREFIX = "sluice:cache:served:"  # request id -> the entry that answered it
SERVED_TTL_S = 24 * 3600  # the longest a reply can be reported as a false hit
# A deterministic semantic hit's exact key -> the entry that answered it: a re-ask within
# the window that bypasses the caches is compared with it (gateway/serving/audit.py).
REASK_PREFIX = "sluice:cache:reask:"
REASK_WINDOW_S = 600
# A request whose re-ask was compared: asked again, it is not counted again (agreeing on
# one question again and again is not new evidence). Kept as long as an entry can live.
REASKED_PREFIX = "sluice:cache:reasked:"


async def keep(
    plan: CachePlan, reply: CachedReply, cost_micros: int, request_id: str, team_id: int
) -> None:
    slot = await keeping_slot(plan)
    await send_keep(plan, slot, reply, cost_micros, request_id, team_id)


async def keeping_slot(plan: CachePlan) -> SemanticSlot | None:
    """The plan's semantic slot, probed (about 30 us, unless the lookup probed it), for
    send_keep; None if the reply has no place in the semantic cache."""
    return None if plan.slot is None else await semantic.probed(plan.slot)


def send_keep(
    plan: CachePlan,
    slot: SemanticSlot | None,
    reply: CachedReply,
    cost_micros: int,
    request_id: str,
    team_id: int,
) -> Awaitable[None]:
    """Keep a complete generated reply in each cache the plan names (slot: keeping_slot's).
    The exact entry, the semantic one and the note of who answered are in the cache Redis
    batch of this event-loop turn when this returns (one round trip): a lookup this
    process makes after runs after them, on the same connection (await the result: it
    logs what failed).
    Nothing is embedded here: the semantic entry goes in with its probe vector, and with
    MiniLM's if the lookup made one."""
    policy = plan.policy
    if policy is None or plan.key is None:
        return in_order()
    encoded = exact.encode(reply)
    if len(encoded) > policy.max_entry_bytes:
        return in_order()
    # What regenerating it would cost: money when the model is priced, else tokens.
    cost = cost_micros or reply.prompt_tokens + reply.completion_tokens
    writes: list[Awaitable[None]] = []
    if plan.store_exact:
        budget = eviction.Budget(namespace("exact", team_id), policy.memory_budget_bytes)
        ttl_s = policy.ttl_for(policy.exact_ttl_s, plan.ttl_s)
        writes.append(_keep_exact(budget, plan.key, encoded, ttl_s, cost, request_id))
    if slot is not None:
        budget = eviction.Budget(namespace("semantic", team_id), policy.memory_budget_bytes)
        ttl_s = policy.ttl_for(policy.semantic_ttl_s, plan.ttl_s)
        writes.append(semantic.store_submitted(slot, reply, budget, ttl_s, cost))
    if not writes:
        return in_order()
    writes.append(_note_served(request_id, team_id, plan.own, served_ttl_s(plan)))
    return in_order(*writes)


def _keep_exact(
    budget: eviction.Budget, key: str, encoded: str, ttl_s: int, cost: int, request_id: str
) -> Awaitable[None]:
    batch = async_cache_redis_batch()
    return _kept_exact(
        eviction.admit_in_batch(batch, budget, key, encoded, ttl_s, cost), request_id
    )


async def _kept_exact(admitting: Awaitable[eviction.Admission], request_id: str) -> None:
    try:
        await admitting
    except REDIS_FAILURES as exc:
        logger.warning("exact cache: reply of %s not stored: %s", request_id, exc)


def settle_submitted(
    plan: CachePlan,
    request_id: str,
    team_id: int,
    result: Outcome,
    tokens_saved: int,
    cost_saved_micros: int,
) -> Awaitable[None]:
    """In the cache Redis batch of this event-loop turn when this returns: count the
    outcome for the team; for a hit, raise its entry's GDSF value and note which entries
    answered (for false-hit reports). Requests the caches never considered (sampled ones)
    are not counted. Await the result: it logs what failed."""
    if plan.key is None and plan.hit is None:
        return in_order()
    batch = async_cache_redis_batch()
    sent = [
        batch.submit(*c)
        for c in stats.count_commands(team_id, result, tokens_saved, cost_saved_micros)
    ]
    hit = None
    if plan.hit is not None:
        hit = batch.submit(*eviction.hit_command(plan.hit.namespace, plan.hit.key))
        # A semantic hit from the request's own question (its exact entry gone, or only
        # spaces differ) is wrong for that very question: a report removes it, as a miss's.
        own_question = plan.hit in plan.own
        semantic_hit = (
            plan.hit.key if plan.result == Outcome.HIT_SEMANTIC and not own_question else None
        )
        record = _served_record(team_id, (plan.hit, *plan.own), semantic_hit)
        note = ("SET", SERVED_PREFIX + request_id, record, "EX", served_ttl_s(plan))
        sent.append(batch.submit(*note))
        if semantic_hit is not None and plan.reask_key is not None:
            marker = REASK_PREFIX + plan.reask_key.removeprefix(exact.KEY_PREFIX)
            sent.append(batch.submit("SET", marker, semantic_hit, "EX", REASK_WINDOW_S))
    return _settled(plan, request_id, [*sent, *([hit] if hit else [])])


@dataclass(frozen=True)
class ReaskedHit:
    entry_key: str  # the semantic entry that answered the request
    content: str  # its reply
    first: bool  # False: this request was compared with an entry before (not counted again)


async def reasked_hit(exact_key: str) -> ReaskedHit | None:
    """The semantic entry that answered this very request (same team, deployment revision,
    messages and options: the exact key) in the last REASK_WINDOW_S, with its reply, or
    None; the note is taken, so one hit is compared once. None too when the entry is gone
    (expired, evicted, or the team's cache cleared) or holds no reply text."""
    batch = async_cache_redis_batch()
    hashed = exact_key.removeprefix(exact.KEY_PREFIX)
    try:
        await pending_stores.wait_for_stores_of(exact_key)  # the hit's note, if still to come
        entry_key = await batch.execute("GETDEL", REASK_PREFIX + hashed)
        if entry_key is None:
            return None
        raw = await batch.execute("GET", entry_key)
        if raw is None:
            return None
        first = batch.submit("SET", REASKED_PREFIX + hashed, 1, "NX", "EX", semantic.REPORTED_TTL_S)
        first_time = await first
    except REDIS_FAILURES as exc:
        raise CacheUnavailable(str(exc)) from exc
    reply = json.loads(raw).get("reply")
    content = reply.get("content") if isinstance(reply, dict) else None
    if not isinstance(content, str):
        return None
    return ReaskedHit(str(entry_key), content, first_time is not None)


async def _settled(plan: CachePlan, request_id: str, sent: "list[asyncio.Future[Any]]") -> None:
    replies = await asyncio.gather(*sent, return_exceptions=True)
    failed = [reply for reply in replies if isinstance(reply, BaseException)]
    try:
        if plan.hit is not None and isinstance(replies[-1], NoScriptError):
            failed.pop()  # a restarted Redis forgot the script: this loads it
            await eviction.record_hit(async_cache_redis(), plan.hit.namespace, plan.hit.key)
        if failed:
            raise failed[0]
    except REDIS_FAILURES as exc:
        logger.warning("cache: outcome of %s not counted: %s", request_id, exc)


def note_shared_reply(
    plan: CachePlan, request_id: str, team_id: int, leader_request_id: str
) -> Awaitable[None]:
    """A reader of another identical request's generation got that request's reply:
    noted as the same, so its caller can report it as a false hit. The report reads the
    leader's note, which exists only where the leader's reply was kept."""
    if plan.policy is None or plan.key is None:
        return in_order()
    record = json_bytes({"team": team_id, "same_as": leader_request_id})
    served = ("SET", SERVED_PREFIX + request_id, record, "EX", served_ttl_s(plan))
    return _noted(async_cache_redis_batch().submit(*served), request_id)


def served_ttl_s(plan: CachePlan) -> int:
    """How long the note of which entries answered a request is kept: as long as those
    entries can live under the team's policy (its TTLs, or the request's own), at most a
    day. A report after the entries expired would take nothing out of service, and the
    notes are in no team's memory budget: one per cached or stored request, about 400
    bytes, so a day of them at the default hour's TTL was 24 times what could be used."""
    policy = plan.policy
    if policy is None:
        return SERVED_TTL_S
    longest = max(policy.exact_ttl_s, policy.semantic_ttl_s, plan.ttl_s or 0)
    return max(1, min(SERVED_TTL_S, longest, policy.max_age_s))


def _note_served(
    request_id: str, team_id: int, entries: tuple[EntryRef, ...], ttl_s: int
) -> Awaitable[None]:
    """Which entries hold the reply a request got, so its caller can report it as wrong."""
    record = _served_record(team_id, entries)
    served = ("SET", SERVED_PREFIX + request_id, record, "EX", ttl_s)
    return _noted(async_cache_redis_batch().submit(*served), request_id)


async def _noted(sent: "asyncio.Future[Any]", request_id: str) -> None:
    try:
        await sent
    except REDIS_FAILURES as exc:
        logger.warning("cache: entries that answered %s not noted: %s", request_id, exc)


def _served_record(
    team_id: int, entries: tuple[EntryRef, ...], semantic_hit: str | None = None
) -> bytes:
    record = {"team": team_id, "entries": [[e.namespace, e.key] for e in entries]}
    return json_bytes(record | ({"semantic_hit": semantic_hit} if semantic_hit else {}))


async def _served_note(request_id: str, team_id: int) -> dict[str, Any] | None:
    """The note of which entries answered this team's request; None if there is none (or
    it answered another team). Read through the batch, behind the note of a reply this
    process has just sent (its settlement, after the reply, goes at once: pending_stores)."""
    await pending_stores.wait_for_stores_of(served_key(request_id))
    raw = await async_cache_redis_batch().execute("GET", served_key(request_id))
    served: dict[str, Any] | None = None if raw is None else json.loads(raw)
    return served if served is not None and served.get("team") == team_id else None


def served_key(request_id: str) -> str:
    """The note of which entries answered a request (for its false-hit report)."""
    return SERVED_PREFIX + request_id


async def report_false_hit(request_id: str, team_id: int) -> bool:
    """Take the reply that answered this team's request out of service; False if there is
    none (or it answered another team: no way to probe other teams' requests). A reply
    generated for the request, or an exact hit, is wrong for its own question: removed.
    A semantic hit's entry is right for its own question but answered another: it is
    marked and never answers another question again (caching/semantic.py)."""
    client = async_cache_redis()
    try:
        served = await _served_note(request_id, team_id)
        notes = [served_key(request_id)]
        if served is not None and "same_as" in served:  # a coalesced reader's: its leader's
            notes.append(served_key(served["same_as"]))
            served = await _served_note(served["same_as"], team_id)
        if served is None:
            return False
        for entry_namespace, key in served["entries"]:
            if key == served.get("semantic_hit"):
                await semantic.mark_reported(client, key)
            else:
                await eviction.forget(client, entry_namespace, key)
        await client.delete(*notes)
    except REDIS_FAILURES as exc:
        raise CacheUnavailable(str(exc)) from exc
    await stats.count_false_hit(team_id)
    logger.info(
        "cache: team %s reported %s as a false hit; its entries are out of service",
        team_id,
        request_id,
    )
    return True
