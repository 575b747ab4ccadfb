"""One decision per request: which cache answers it, and where its reply will be kept.

Order: the exact cache (one GET), then the semantic cache (nearest neighbours in the
context's vector set by probe vector, verify, then MiniLM's cosine for the candidates
verification accepted: caching/semantic.py). The GET travels with an EXISTS of the
question's context set (one round trip, sent beside admission's: start_plan): a context
with no entry cannot answer, so its question is neither probed nor searched for, only
probed when its reply is kept (caching/responses.py); a question the lookup embedded is
stored with that vector, never embedded twice. A failing cache Redis never fails a
request: it goes to the model and the response says `bypass` (and the log why); a
missing embedding model makes every semantic lookup a miss (logged when it failed to
load).
"""

import asyncio
import logging
import random
import time
from dataclasses import dataclass
from typing import Any

from caching import exact, pending_stores, semantic, semantic_keys
from caching.exact import CacheDirectives, CachedReply, CacheUnavailable
from caching.outcome import Outcome
from caching.policy import CacheSettings, policy_for_team
from caching.semantic import SemanticMatch, SemanticUnavailable
from caching.semantic_keys import ENTRY_PREFIX, SemanticSlot
from foundation import metrics
from foundation.redis_clients import RedisUnavailable
from inference.chat_request import ChatRequest
from inference.deployments import DeploymentInfo

logger = logging.getLogger(__name__)


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
    the lookup made them (responses.keep probes it if not; it never runs MiniLM)."""

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
    hit_cell: str | None = None  # a semantic hit's evidence cell, where it was verified
    # On a miss, drawn for an audit: the best candidate the bound turned down, whose reply
    # the fresh one is compared with (gateway/serving/audit.py, compare_turned_down).
    turned_down: SemanticMatch | None = None
    # A deterministic semantic hit's exact key: a re-ask of the same request that bypasses
    # the caches is compared with this hit (responses.reasked_hit).
    reask_key: str | None = None


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


@dataclass(eq=False)
class Lookup:
    """What a cacheable request's plan is made of, before the answers are read."""

    directives: CacheDirectives
    team_id: int
    chat: ChatRequest
    policy: CacheSettings
    key: str
    own: tuple[EntryRef, ...]
    slot: SemanticSlot | None
    too_long: bool  # a question the semantic cache cannot take whole (counted if admitted)


@dataclass(eq=False)
class PendingPlan:
    """The plan with its first lookups submitted: the exact GET and the context's EXISTS
    are in the cache Redis batch of the event-loop turn that made it, so they travel
    while the request's admission does. `result()` finishes the plan (the semantic lookup,
    where the context has entries); `drop()` when the request goes no further."""

    decided: CachePlan | None  # without a lookup (caches bypassed or not cacheable)
    lookup: Lookup | None = None
    exact_get: "asyncio.Future[Any] | None" = None
    context_exists: "asyncio.Future[Any] | None" = None

    async def result(self) -> CachePlan:
        if self.lookup is None:
            return self.decided or CachePlan(Outcome.BYPASS)
        lookup, policy, slot = self.lookup, self.lookup.policy, self.lookup.slot
        if lookup.too_long:
            metrics.labelled(metrics.semantic_skips, "too_long").inc()
        turned_down = None
        try:
            reply, populated = await self._first_answers()
            if reply is not None:
                return CachePlan(Outcome.HIT_EXACT, reply, lookup.own[0], lookup.own, policy=policy)
            looked_in_context = self.context_exists is not None and slot is not None
            if looked_in_context and not populated:
                semantic.empty_context_lookup(
                    policy.similarity_threshold, policy.verify_enabled, lookup.team_id
                )
            elif looked_in_context and slot is not None:
                slot, match, turned_down = await _semantic_lookup(slot, policy, lookup.team_id)
                if match is not None:
                    return _semantic_hit(lookup, match)
        except (CacheUnavailable, SemanticUnavailable) as exc:
            logger.warning("response caches bypassed, cache Redis failed: %s", exc)
            return CachePlan(Outcome.BYPASS)
        directives = lookup.directives
        if turned_down is not None and not _drawn_for_audit(lookup):
            turned_down = None
        return CachePlan(
            Outcome.MISS if directives.lookup else Outcome.BYPASS,
            own=lookup.own,
            key=lookup.key,
            slot=slot if directives.store else None,
            store_exact=directives.store and policy.exact_enabled,
            ttl_s=directives.ttl_s,
            policy=policy,
            turned_down=turned_down,
        )

    def drop(self) -> None:
        """The answers are not wanted: commands not sent yet never are (a refusal in the
        turn that made the plan costs Redis nothing), and no error goes unretrieved."""
        for sent in (self.exact_get, self.context_exists):
            if sent is not None:
                sent.cancel()

    async def _first_answers(self) -> tuple[CachedReply | None, bool]:
        """The exact entry (None without a GET, or on a miss) and whether the context has
        any entry (False without its EXISTS, or after an exact hit)."""
        try:
            get = self.exact_get
            reply = await exact.looked_up(get) if get is not None else None
            if reply is not None or self.context_exists is None:
                return reply, False
            return None, await semantic.populated(self.context_exists)
        finally:
            self.drop()  # whatever was not read (an exact hit's EXISTS, a failure's other)


def _semantic_hit(lookup: Lookup, match: SemanticMatch) -> CachePlan:
    hit = EntryRef(namespace("semantic", lookup.team_id), match.entry_key)
    audit = _drawn_for_audit(lookup)
    # An audited hit is compared by its audit: a re-ask would count that evidence twice.
    deterministic = exact.is_deterministic(lookup.chat)
    reask_key = lookup.key if deterministic and not audit else None
    return CachePlan(
        Outcome.HIT_SEMANTIC,
        match.reply,
        hit,
        lookup.own,
        policy=lookup.policy,
        audit=audit,
        hit_cell=match.cell,
        reask_key=reask_key,
    )


async def start_plan(
    directives: CacheDirectives, team_id: int, deployment: DeploymentInfo, chat: ChatRequest
) -> PendingPlan:
    """Steps 3 and 4 begun: the exact GET and the context's EXISTS are in this event-loop
    turn's cache Redis batch when this returns (one round trip, sent with whatever the
    caller submits next in this turn: admission's quota script, on its own connection).
    A request refused after this drops the plan; one refused in a later turn has cost the
    cache Redis that round trip."""
    try:
        policy = await policy_for_team(team_id)
    except RedisUnavailable as exc:
        logger.warning("response caches bypassed, cache policy unreadable: %s", exc)
        return PendingPlan(CachePlan(Outcome.BYPASS))
    if not cacheable(policy, chat):
        return PendingPlan(CachePlan(Outcome.BYPASS))
    policy = policy.for_request(exact.is_deterministic(chat))  # sampled: sampled_ttl_s
    key = exact.cache_key(team_id, deployment, chat)
    question = semantic_keys.question_of(chat) if semantic_allowed(chat) else None
    context = None if question is None else semantic_keys.context_key(team_id, deployment, chat)
    own = _own_entries(team_id, key, context, question)
    slot = _slot(policy, chat, context, question)
    too_long = (
        slot is None
        and policy.semantic_enabled
        and semantic_allowed(chat)
        and semantic_keys.question_too_long(chat)
    )
    pending = PendingPlan(None, Lookup(directives, team_id, chat, policy, key, own, slot, too_long))
    if directives.lookup:
        # Asked right after a reply it may find: behind that reply's store (pending_stores).
        await pending_stores.wait_for_stores_of(key, *(() if slot is None else (slot.set_key,)))
        if slot is not None:
            pending.context_exists = semantic.populated_submitted(slot)
        if policy.exact_enabled:
            pending.exact_get = exact.lookup_submitted(key)
    return pending


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
        return None  # too long, or no question (start_plan counts the first, if admitted)
    verified = policy.verify_enabled or policy.max_false_hit_rate is not None
    return SemanticSlot.of(context, question, verified=verified)


def _drawn_for_audit(lookup: Lookup) -> bool:
    policy = lookup.policy
    return (
        policy.audit_rate > 0  # never at 0.0
        and exact.is_deterministic(lookup.chat)  # a sampled reply differs from any fresh draw
        and random.random() < policy.audit_rate
    )


async def _semantic_lookup(
    slot: SemanticSlot, policy: CacheSettings, team_id: int
) -> tuple[SemanticSlot | None, SemanticMatch | None, SemanticMatch | None]:
    """The lookup in a populated context, timed; the slot as the lookup leaves it (probed,
    and embedded if it scored a candidate), None if it cannot be probed; the match, or the
    best candidate the bound turned down."""
    started = time.perf_counter()
    probed = await semantic.probed(slot)
    if probed is None:
        return None, None, None
    found = await semantic.lookup(
        probed,
        policy.similarity_threshold,
        policy.verify_enabled,
        team_id,
        policy.max_false_hit_rate,
    )
    metrics.semantic_lookup.observe(time.perf_counter() - started)
    return found.slot, found.match, found.turned_down
