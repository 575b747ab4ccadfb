"""One decision per request: which cache answers it, and where its reply will be kept.

Order: the exact cache (one GET), then the semantic cache (nearest neighbours in the
context's vector set by probe vector, verify, then MiniLM's cosine for the candidates
verification accepted: caching/semantic.py). The GET travels with an EXISTS of the
question's context set (one round trip): a context with no entry cannot answer, so its
question is neither probed nor searched for, only probed when its reply is kept (keep());
a question the lookup embedded is stored with that vector, never embedded twice. A failing
cache Redis never fails a request: it goes to the model and the response says `bypass`
(and the log why); a missing embedding model makes every semantic lookup a miss (logged
when it failed to load).
"""

import asyncio
import json
import logging
import random
import time
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any

from redis.exceptions import NoScriptError

from caching import eviction, exact, semantic, semantic_keys, stats
from caching.exact import CacheDirectives, CachedReply, CacheUnavailable
from caching.outcome import Outcome
from caching.policy import CacheSettings, policy_for_team
from caching.semantic import SemanticMatch, SemanticUnavailable
from caching.semantic_keys import ENTRY_PREFIX, SemanticSlot
from foundation import metrics
from foundation.json_bytes import json_bytes
from foundation.redis_clients import (
    REDIS_FAILURES,
    RedisUnavailable,
    async_cache_redis,
    async_cache_redis_batch,
)
from inference.chat_request import ChatRequest
from inference.deployments import DeploymentInfo

logger = logging.getLogger(__name__)
SERVED_PREFIX = "sluice:cache:served:"  # request id -> the entry that answered it
SERVED_TTL_S = 24 * 3600  # how long a reply can be reported as a false hit


@dataclass(frozen=True)
class EntryRef:
    namespace: str
    key: str


def namespace(kind: str, team_id: int) -> str:
    return f"{kind}:{team_id}"


@dataclass(frozen=True)
class CachePlan:
    """result is what the caller is told; reply and hit are set on a hit. On a miss,
    key (the exact key, also what identical requests coalesce on) and slot say where the
    reply goes, if store allows; the slot has the lookup's probe and MiniLM vectors where
    the lookup made them (keep() probes it if not; it never runs MiniLM)."""

    result: Outcome
    reply: CachedReply | None = None
    hit: EntryRef | None = None
    own: tuple[EntryRef, ...] = ()  # where this very request's reply is (or will be) kept
    key: str | None = None
    slot: SemanticSlot | None = None
    store_exact: bool = False
    ttl_s: int | None = None
    policy: CacheSettings | None = None
    audit: bool = False  # a semantic hit drawn for an audit (gateway/serving/audit.py)


def cacheable(policy: CacheSettings, chat: ChatRequest) -> bool:
    """Requests asking for logprobs are never cached: their caller is measuring the model
    (evaluation, scoring, classification by token probability) and needs its numbers for
    this very call; kept, the per-token alternatives would make an entry ten to fifty times
    the size of its text, crowding the team's cache out (or be refused by the entry size
    limit anyway); and a semantic hit would hand back the probabilities of another
    question's tokens. A text completion's integer logprobs ask for them even at 0 (the
    chosen tokens' own), so any value but absent (or chat's false) counts.

    Nor are requests for n > 1 choices: an entry holds one reply, which cannot answer a
    request for several (and a request for several cannot fill an entry a single-choice
    request would read); with no cache key they are not coalesced either, for the same
    reason. Keeping the n choices together under a key that includes n is a later option."""
    return (
        (policy.exact_enabled or policy.semantic_enabled)
        and (policy.cache_sampled or exact.is_deterministic(chat))
        and not _asks_logprobs(chat)
        and chat.n == 1
    )


def _asks_logprobs(chat: ChatRequest) -> bool:
    value = chat.options.get("logprobs")
    return value is not None and value is not False  # 0 asks (a text completion's)


def semantic_allowed(chat: ChatRequest) -> bool:
    """A request whose reply may be tool calls skips the semantic cache (the exact cache
    still answers it; the tools are in both keys, being options). A tool call's arguments
    are copied from the question's exact wording and executed by a program, not read by a
    person: a paraphrase that verification accepts can still differ in an argument (a
    file name, an account id) that changes what gets executed. A text completion skips it
    too: a prompt to be continued (code, a document) has no paraphrase with the same
    continuation."""
    return not chat.may_call_tools and chat.text_prompt is None


async def plan(
    directives: CacheDirectives, team_id: int, deployment: DeploymentInfo, chat: ChatRequest
) -> CachePlan:
    try:
        policy = await policy_for_team(team_id)
    except RedisUnavailable as exc:
        logger.warning("response caches bypassed, cache policy unreadable: %s", exc)
        return CachePlan(Outcome.BYPASS)
    if not cacheable(policy, chat):
        return CachePlan(Outcome.BYPASS)
    policy = policy.for_request(exact.is_deterministic(chat))  # sampled: sampled_ttl_s
    key = exact.cache_key(team_id, deployment, chat)
    question = semantic_keys.question_of(chat) if semantic_allowed(chat) else None
    context = None if question is None else semantic_keys.context_key(team_id, deployment, chat)
    own = _own_entries(team_id, key, context, question)
    slot = _slot(policy, chat, context, question)
    try:
        if directives.lookup:
            exact_key = key if policy.exact_enabled else None
            reply, populated = await _first_look(exact_key, slot)
            if reply is not None:
                return CachePlan(Outcome.HIT_EXACT, reply, own[0], own)
            if slot is not None and not populated:
                semantic.empty_context_lookup(
                    policy.similarity_threshold, policy.verify_enabled, team_id
                )
            elif slot is not None:
                slot, match = await _semantic_lookup(slot, policy, team_id)
                if match is not None:
                    hit = EntryRef(namespace("semantic", team_id), match.entry_key)
                    # never at 0.0; a sampled reply would differ from any fresh draw
                    audit = (
                        policy.audit_rate > 0
                        and exact.is_deterministic(chat)
                        and random.random() < policy.audit_rate
                    )
                    return CachePlan(Outcome.HIT_SEMANTIC, match.reply, hit, own, audit=audit)
    except (CacheUnavailable, SemanticUnavailable) as exc:
        logger.warning("response caches bypassed, cache Redis failed: %s", exc)
        return CachePlan(Outcome.BYPASS)
    return CachePlan(
        Outcome.MISS if directives.lookup else Outcome.BYPASS,
        own=own,
        key=key,
        slot=slot if directives.store else None,
        store_exact=directives.store and policy.exact_enabled,
        ttl_s=directives.ttl_s,
        policy=policy,
    )


def _own_entries(
    team_id: int, key: str, context: str | None, question: str | None
) -> tuple[EntryRef, ...]:
    """The exact entry and, for a question, the semantic entry this request's reply goes
    to: a false-hit report removes both, or the wrong reply would answer again."""
    entries = [EntryRef(namespace("exact", team_id), key)]
    if context is not None and question is not None:
        element = semantic_keys.element_id(context, question)
        entries.append(EntryRef(namespace("semantic", team_id), ENTRY_PREFIX + element))
    return tuple(entries)


def _slot(
    policy: CacheSettings, chat: ChatRequest, context: str | None, question: str | None
) -> SemanticSlot | None:
    """Where the question's reply goes in the semantic cache, neither probed nor embedded
    yet; None when the semantic cache does not consider the request."""
    if not policy.semantic_enabled or not semantic_allowed(chat):
        return None
    if context is None or question is None:
        if semantic_keys.question_too_long(chat):
            metrics.labelled(metrics.semantic_skips, "too_long").inc()
        return None
    verified = policy.verify_enabled or policy.max_false_hit_rate is not None
    return SemanticSlot.of(context, question, verified=verified)


async def _first_look(
    key: str | None, slot: SemanticSlot | None
) -> tuple[CachedReply | None, bool]:
    """The exact lookup (none without a key) and whether the slot's context has any entry
    (False without a slot, or after an exact hit): one round trip, the EXISTS and the GET
    both in the cache Redis batch of this event-loop turn."""
    populated = semantic.context_populated(slot) if slot is not None else None
    try:
        reply = await exact.lookup(key) if key is not None else None
    except BaseException:
        if populated is not None:
            populated.close()
        raise
    if populated is None:
        return reply, False
    if reply is not None:
        populated.close()  # answered: whether the context has entries no longer matters
        return reply, False
    return None, await populated


async def _semantic_lookup(
    slot: SemanticSlot, policy: CacheSettings, team_id: int
) -> tuple[SemanticSlot | None, SemanticMatch | None]:
    """The lookup in a populated context, timed; the slot as the lookup leaves it (probed,
    and embedded if it scored a candidate), None if it cannot be probed."""
    started = time.perf_counter()
    probed = await semantic.probed(slot)
    if probed is None:
        return None, None
    found = await semantic.lookup(
        probed,
        policy.similarity_threshold,
        policy.verify_enabled,
        team_id,
        policy.max_false_hit_rate,
    )
    metrics.semantic_lookup.observe(time.perf_counter() - started)
    return found.slot, found.match


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
    process makes after runs after them, on the same connection, so the caller need not
    wait for their replies before answering (await the result: it logs what failed).
    Nothing is embedded here: the semantic entry goes in with its probe vector, and with
    MiniLM's if the lookup made one."""
    policy = plan.policy
    if policy is None or plan.key is None:
        return _nothing()
    encoded = exact.encode(reply)
    if len(encoded) > policy.max_entry_bytes:
        return _nothing()
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
        return _nothing()
    writes.append(_note_served(request_id, team_id, plan.own))
    return _all_of(writes)


async def _nothing() -> None:
    pass


async def _all_of(sent: list[Awaitable[None]]) -> None:
    for reply in sent:  # each logs its own failure
        await reply


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
        return _nothing()
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
        sent.append(batch.submit("SET", SERVED_PREFIX + request_id, record, "EX", SERVED_TTL_S))
    return _settled(plan, request_id, [*sent, *([hit] if hit else [])])


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


def _note_served(request_id: str, team_id: int, entries: tuple[EntryRef, ...]) -> Awaitable[None]:
    """Which entries hold the reply a request got, so its caller can report it as wrong."""
    record = _served_record(team_id, entries)
    served = ("SET", SERVED_PREFIX + request_id, record, "EX", SERVED_TTL_S)
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


async def report_false_hit(request_id: str, team_id: int) -> bool:
    """Take the reply that answered this team's request out of service; False if there is
    none (or it answered another team: no way to probe other teams' requests). A reply
    generated for the request, or an exact hit, is wrong for its own question: removed.
    A semantic hit's entry is right for its own question but answered another: it is
    marked and never answers another question again (caching/semantic.py)."""
    client = async_cache_redis()
    try:
        # Through the batch: a reply this process just sent has its note there already,
        # ahead of this GET on the same connection (its caller need not wait for it).
        raw = await async_cache_redis_batch().execute("GET", SERVED_PREFIX + request_id)
        if raw is None or json.loads(raw)["team"] != team_id:
            return False
        served = json.loads(raw)
        for entry_namespace, key in served["entries"]:
            if key == served.get("semantic_hit"):
                await semantic.mark_reported(client, key)
            else:
                await eviction.forget(client, entry_namespace, key)
        await client.delete(SERVED_PREFIX + request_id)
    except REDIS_FAILURES as exc:
        raise CacheUnavailable(str(exc)) from exc
    await stats.count_false_hit(team_id)
    logger.info(
        "cache: team %s reported %s as a false hit; its entries are out of service",
        team_id,
        request_id,
    )
    return True
