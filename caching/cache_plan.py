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

import logging
import random
import time
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any

from caching import exact, semantic, semantic_keys
from caching.exact import CacheDirectives, CachedReply, CacheUnavailable
from caching.outcome import Outcome
from caching.policy import CacheSettings, policy_for_team
from caching.semantic import SemanticMatch, SemanticUnavailable
from caching.semantic_keys import ENTRY_PREFIX, SemanticSlot
from foundation import metrics
from foundation.redis_clients import (
    RedisUnavailable,
)
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
class PendingPlan:
    """The plan with its first lookups in flight: the exact GET and the context's EXISTS
    are in the cache Redis batch of the event-loop turn that made it, so they travel
    while the request's admission does. `result()` finishes the plan (the semantic lookup,
    where the context has entries); `drop()` when the request goes no further."""

    done: CachePlan | None = None  # decided without a lookup
    directives: CacheDirectives | None = None
    team_id: int = 0
    chat: ChatRequest | None = None
    policy: CacheSettings | None = None
    key: str | None = None
    own: tuple[EntryRef, ...] = ()
    slot: SemanticSlot | None = None
    exact_reply: Coroutine[Any, Any, CachedReply | None] | None = None
    populated: Coroutine[Any, Any, bool] | None = None

    async def result(self) -> CachePlan:
        if self.done is not None:
            return self.done
        assert self.directives is not None and self.chat is not None and self.policy
        policy, own, slot = self.policy, self.own, self.slot
        try:
            reply, populated = await self._first_answers()
            if reply is not None:
                return CachePlan(Outcome.HIT_EXACT, reply, own[0], own)
            if slot is not None and self.directives.lookup and not populated:
                semantic.empty_context_lookup(
                    policy.similarity_threshold, policy.verify_enabled, self.team_id
                )
            elif slot is not None and self.directives.lookup:
                slot, match = await _semantic_lookup(slot, policy, self.team_id)
                if match is not None:
                    hit = EntryRef(namespace("semantic", self.team_id), match.entry_key)
                    # never at 0.0; a sampled reply would differ from any fresh draw
                    audit = (
                        policy.audit_rate > 0
                        and exact.is_deterministic(self.chat)
                        and random.random() < policy.audit_rate
                    )
                    return CachePlan(Outcome.HIT_SEMANTIC, match.reply, hit, own, audit=audit)
        except (CacheUnavailable, SemanticUnavailable) as exc:
            logger.warning("response caches bypassed, cache Redis failed: %s", exc)
            return CachePlan(Outcome.BYPASS)
        return CachePlan(
            Outcome.MISS if self.directives.lookup else Outcome.BYPASS,
            own=own,
            key=self.key,
            slot=slot if self.directives.store else None,
            store_exact=self.directives.store and policy.exact_enabled,
            ttl_s=self.directives.ttl_s,
            policy=policy,
        )

    def drop(self) -> None:
        """The answers are not wanted: nothing is left unawaited (a failed command's
        error is retrieved by its callback, not logged as lost)."""
        for pending in (self.exact_reply, self.populated):
            if pending is not None:
                pending.close()

    async def _first_answers(self) -> tuple[CachedReply | None, bool]:
        """The exact entry (None without a GET, or on a miss) and whether the context has
        any entry (False without a slot, or after an exact hit)."""
        try:
            reply = await self.exact_reply if self.exact_reply is not None else None
        except BaseException:
            self.drop()
            raise
        if self.populated is None:
            return reply, False
        if reply is not None:
            self.populated.close()  # answered: whether the context has entries no longer matters
            return reply, False
        return None, await self.populated


async def start_plan(
    directives: CacheDirectives, team_id: int, deployment: DeploymentInfo, chat: ChatRequest
) -> PendingPlan:
    """Steps 3 and 4 begun: the exact GET and the context's EXISTS are in this event-loop
    turn's cache Redis batch when this returns (one round trip, sent with whatever the
    caller submits next in this turn: admission's script goes to the other Redis at once).
    A request refused after this drops the plan; a lookup for it costs one GET."""
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
    pending = PendingPlan(None, directives, team_id, chat, policy, key, own, slot)
    if directives.lookup:
        if slot is not None:
            pending.populated = semantic.context_populated(slot)
        if policy.exact_enabled:
            pending.exact_reply = exact.lookup_submitted(key)
    return pending


async def plan(
    directives: CacheDirectives, team_id: int, deployment: DeploymentInfo, chat: ChatRequest
) -> CachePlan:
    """start_plan() and its result at once."""
    return await (await start_plan(directives, team_id, deployment, chat)).result()


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
