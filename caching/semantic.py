"""The semantic cache: answer a question asked before in other words, never a different one.

Only the last user message is compared; everything before it (system prompt, earlier
turns) and every option that shapes the reply must match exactly. That is the context
key: a hash of team, deployment and revision, all earlier messages, max_tokens and the
options. Each context has its own Redis 8 vector set, so a follow-up question is only
ever compared with follow-ups in the same conversation, of the same team, and a user
who changed their context never gets the answer to the old one.

A candidate must clear two bars: verify() (caching/verify/), which rejects the
near-misses embeddings confuse (negation, numbers, dates, names, swapped roles), and
either the policy's cosine threshold or, where the team set an error bound
(`max_false_hit_rate`), a calibrated false-hit probability at most that bound
(caching/evidence.py). An entry its team reported as a false hit never answers another
question again (it still answers its own, word for word): it keeps a marker for as long
as it can live. So does an entry whose reply a sampled audit found different from a fresh
answer (gateway/serving/audit.py); audits that agreed are counted per entry and lower its
false-hit probability under a bound.

Embedding a question costs about 1.6 ms of CPU, and many lookups find their context empty
(each new turn of a conversation is a context of its own). So a lookup first asks whether
the context's set exists: EXISTS, in the same cache Redis batch as the exact lookup's GET
(no round trip of its own; 10 to 25 us of client CPU). A set is deleted with its last
element and expires with its newest entry, so without one nothing can match: the lookup
is a miss with nothing embedded or searched, and the question is embedded when its reply
is stored, if it is (caching/responses.py). With one, the vector the lookup embedded is
the one stored. The set key is the asking team's own context key: the check never
touches another team's contexts.

Layout under CACHE_REDIS_URL:
    sluice:cache:sem:set:<context sha256>    vector set, elements are entry ids (NOQUANT:
                                             the scores are the model's, so the measured
                                             threshold table holds)
    sluice:cache:sem:entry:<entry sha256>    JSON {question, reply}
    sluice:cache:sem:reported:<entry sha256> "report" once a hit it gave was reported
                                             false, "audit" once an audit disagreed
    sluice:cache:sem:confirmed:<entry sha256> audits of its hits that agreed (a count)
    sluice:cache:lookups:<team id>           the team's last 1,000 lookups, numbers only
                                             (caching/lookup_log.py), for the
                                             dashboard's threshold preview
Entries are admitted through GDSF eviction (namespace "semantic:<team>"), which removes
an entry's vector element whenever the entry goes.
"""

import asyncio
import hashlib
import json
import logging
from collections.abc import Coroutine
from dataclasses import asdict, dataclass, replace
from typing import Any, cast

import redis.asyncio as aioredis

from caching import eviction, evidence, lookup_log
from caching.exact import CachedReply
from caching.verify.verdict import verify
from foundation import metrics
from foundation.redis_clients import REDIS_FAILURES, async_cache_redis_batch
from inference.chat_request import ChatRequest
from inference.deployments import DeploymentInfo
from inference.embeddings import Vector

logger = logging.getLogger(__name__)
SET_PREFIX = "sluice:cache:sem:set:"
ENTRY_PREFIX = "sluice:cache:sem:entry:"
REPORTED_PREFIX = "sluice:cache:sem:reported:"
CONFIRMED_PREFIX = "sluice:cache:sem:confirmed:"
REPORTED_TTL_S = 366 * 24 * 3600  # outlives any entry (a policy's max_age_s: a year at most)
CANDIDATES = 4  # nearest neighbours checked: the closest may fail verification


class SemanticUnavailable(Exception):
    """Redis failed during a semantic lookup: the request goes on as a miss."""


# A question is embedded whole (inference/embeddings.py reads up to 1,016 tokens window by
# window and pools them), so two long questions that share their beginning differ by the
# rest. Verification is pure Python on the event loop, up to 3.5 ms for 3,000 characters
# of numbers (measured): a question over LONG_QUESTION_CHARS has only its nearest candidate
# checked, and one over MAX_QUESTION_CHARS skips the semantic cache (counted), as do denser
# texts past the embedder's 1,016 tokens (CJK, code).
MAX_QUESTION_CHARS = 3000
LONG_QUESTION_CHARS = 1000


def question_of(chat: ChatRequest) -> str | None:
    """The last user message's text; None when the conversation does not end with one, or
    when it is too long for the semantic cache."""
    question = _last_user_text(chat)
    return question if question is not None and len(question) <= MAX_QUESTION_CHARS else None


def question_too_long(chat: ChatRequest) -> bool:
    question = _last_user_text(chat)
    return question is not None and len(question) > MAX_QUESTION_CHARS


def _last_user_text(chat: ChatRequest) -> str | None:
    last = chat.messages[-1]
    if last.get("role") != "user":
        return None
    content = last.get("content")
    if isinstance(content, list):
        parts = [
            p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text"
        ]
        if len(parts) != len(content):
            return None  # images or audio: their meaning is not in the text
        content = " ".join(parts)
    return content.strip() if isinstance(content, str) and content.strip() else None


def context_key(team_id: int, deployment: DeploymentInfo, chat: ChatRequest) -> str:
    material = {
        "team": team_id,
        "deployment": deployment.name,
        "revision": deployment.revision,
        "context": chat.messages[:-1],
        "max_tokens": chat.max_tokens,
        "options": chat.options,
    }
    # Who asks (a user message's `name`): "What is my name?" from bob is not alice's
    # question, though word for word the same (which is served without verification). Only
    # when there is more than role and content: every other context keeps its key.
    asker = {k: v for k, v in chat.messages[-1].items() if k not in ("role", "content")}
    if asker:
        material["asker"] = asker
    canonical = json.dumps(material, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def element_id(context: str, question: str) -> str:
    return hashlib.sha256(f"{context}\n{question}".encode()).hexdigest()


@dataclass(frozen=True)
class SemanticSlot:
    """Where a question lives: its context's vector set and its own entry; its vector once
    it is embedded (None until then: a lookup in an empty context never embeds it)."""

    set_key: str
    element: str
    question: str
    vector: Vector | None = None

    @classmethod
    def of(cls, context: str, question: str, vector: Vector | None = None) -> "SemanticSlot":
        return cls(SET_PREFIX + context, element_id(context, question), question, vector)

    @property
    def entry_key(self) -> str:
        return ENTRY_PREFIX + self.element

    def embedded(self, vector: Vector) -> "SemanticSlot":
        return replace(self, vector=vector)

    def vector_bytes(self) -> bytes:
        if self.vector is None:
            raise ValueError("the question is not embedded yet: SemanticSlot.embedded()")
        return self.vector.tobytes()


@dataclass(frozen=True)
class SemanticMatch:
    reply: CachedReply
    entry_key: str
    similarity: float
    question: str


def context_populated(slot: SemanticSlot) -> Coroutine[Any, Any, bool]:
    """Whether the slot's context has any entry (its vector set exists), so that a lookup
    can be worth an embedding. Its EXISTS is already in this event-loop turn's cache Redis
    batch when this returns (commands submitted next, the exact lookup's GET, share its
    round trip); await the answer, or close() the coroutine when it is no longer needed.
    SemanticUnavailable if Redis failed."""
    reply = async_cache_redis_batch().submit("EXISTS", slot.set_key)
    reply.add_done_callback(_retrieved)  # a failure nobody awaited is not logged as lost
    return _populated(reply)


async def _populated(reply: "asyncio.Future[Any]") -> bool:
    try:
        return bool(await reply)
    except REDIS_FAILURES as exc:
        raise SemanticUnavailable(str(exc)) from exc


def _retrieved(reply: "asyncio.Future[Any]") -> None:
    if not reply.cancelled():
        reply.exception()


def empty_context_lookup(threshold: float, verify_enabled: bool, team_id: int | None) -> None:
    """A lookup in a context with no entry: nothing is embedded or searched. With a team it
    is logged as a lookup that found no candidate, as the search would have found none (the
    dashboard's threshold preview counts it among the misses, as before)."""
    if team_id is not None:
        lookup_log.record(team_id, lookup_log.LookupSample((), (), threshold, verify_enabled))


async def lookup(
    slot: SemanticSlot,
    threshold: float,
    verify_enabled: bool,
    team_id: int | None = None,
    bound: float | None = None,
) -> SemanticMatch | None:
    """The first candidate that verification accepts and that clears the threshold, or
    with a bound (a team's max_false_hit_rate) whose false-hit probability is within it
    (verification is then always on: the probability is calibrated on verified pairs).
    With a team, the lookup's numbers (cosines, verdicts) go to its lookup log, after the
    fact. The slot must be embedded."""
    vector = slot.vector_bytes()
    floor = evidence.FLOOR if bound is not None else threshold
    verify_enabled = verify_enabled or bound is not None
    batch = async_cache_redis_batch()  # each command shares a pipeline with other requests'
    try:
        found = await batch.execute(
            "VSIM", slot.set_key, "FP32", vector, "COUNT", CANDIDATES, "WITHSCORES"
        )
        scored = _scored(found)
        candidates = [(e, cosine) for e, cosine in scored if cosine >= floor]
        if len(slot.question) > LONG_QUESTION_CHARS:
            candidates = candidates[:1]
        keys = [
            prefix + element
            for prefix in (ENTRY_PREFIX, REPORTED_PREFIX, CONFIRMED_PREFIX)
            for element, _ in candidates
        ]
        stored = await batch.execute("MGET", *keys) if candidates else []
    except REDIS_FAILURES as exc:
        raise SemanticUnavailable(str(exc)) from exc
    verdicts: list[bool | None] = [None] * len(scored)
    probabilities: list[float | None] = [None] * len(scored)
    match = None
    count = len(candidates)
    entries, reported, confirmed = stored[:count], stored[count : 2 * count], stored[2 * count :]
    for index, ((element, similarity), raw) in enumerate(zip(candidates, entries, strict=True)):
        if raw is None:
            continue  # expired or evicted; its element goes at the next purge
        entry = json.loads(raw)
        if entry["question"] == slot.question:
            probabilities[index] = 0.0  # its own question, word for word
        else:
            if reported[index] is not None:
                why = "audit" if _text(reported[index]) == "audit" else "reported"
                metrics.labelled(metrics.semantic_rejections, why).inc()
                continue
            if verify_enabled:
                verdict = verify(slot.question, entry["question"])
                verdicts[index] = verdict.accepted  # candidates are scored's first entries
                if not verdict.accepted:
                    metrics.labelled(metrics.semantic_rejections, verdict.reason).inc()
                    continue
                if bound is not None or len(slot.question) <= LONG_QUESTION_CHARS:
                    # Decisive under a bound; logged for the preview of one otherwise
                    # (about 10 us for a short question, up to 0.5 ms for a long one).
                    probabilities[index] = _probability(
                        slot.question, entry["question"], similarity, confirmed[index]
                    )
            probability = probabilities[index]  # always set under a bound: verify is on
            if bound is not None and (probability is None or probability > bound):
                metrics.labelled(metrics.semantic_rejections, "over_bound").inc()
                continue
        match = SemanticMatch(
            CachedReply(**entry["reply"]), ENTRY_PREFIX + element, similarity, entry["question"]
        )
        break
    if team_id is not None:
        lookup_log.record(
            team_id,
            lookup_log.LookupSample(
                tuple(cosine for _, cosine in scored),
                tuple(verdicts),
                threshold,
                verify_enabled,
                tuple(probabilities),
                bound,
            ),
        )
    return match


async def mark_reported(client: aioredis.Redis, entry_key: str, source: str = "report") -> None:
    """A hit this entry gave was reported false (or an audit disagreed: source "audit"):
    from now on it answers only its own question (the marker outlives the entry)."""
    element = entry_key.removeprefix(ENTRY_PREFIX)
    await client.set(REPORTED_PREFIX + element, source, ex=REPORTED_TTL_S)


async def record_audit(client: aioredis.Redis, entry_key: str, agreed: bool) -> None:
    """What an audit of a hit this entry gave found: agreement is counted, a disagreement
    takes the entry out of service for other questions."""
    if not agreed:
        await mark_reported(client, entry_key, "audit")
        return
    key = CONFIRMED_PREFIX + entry_key.removeprefix(ENTRY_PREFIX)
    async with client.pipeline(transaction=False) as pipe:
        pipe.incr(key)
        pipe.expire(key, REPORTED_TTL_S)
        await pipe.execute()


def _probability(question: str, candidate: str, similarity: float, confirmed: Any) -> float:
    """The candidate's false-hit probability; 1.0 (never served under a bound) when the
    false-hit table cannot be read, logged: lookups under a threshold go on unharmed."""
    global _table_unreadable
    try:
        return evidence.false_hit_probability(question, candidate, similarity, int(confirmed or 0))
    except (OSError, ValueError, KeyError, TypeError):
        if not _table_unreadable:  # once per process, not once per lookup
            logger.exception("semantic cache: the false-hit table is unreadable")
        _table_unreadable = True
        return 1.0


_table_unreadable = False


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _scored(found: Any) -> list[tuple[str, float]]:
    """VSIM's answer as (element, cosine), best first. redis-py gives {element: score} (or
    a flat list without its response callback); Redis scores are (1 + cosine) / 2."""
    if isinstance(found, dict):
        scored = list(found.items())
    else:
        flat = list(found or [])
        scored = list(zip(flat[::2], flat[1::2], strict=True))
    return sorted(((str(e), 2 * float(score) - 1) for e, score in scored), key=lambda p: -p[1])


async def store(
    slot: SemanticSlot, reply: CachedReply, budget: eviction.Budget, ttl_s: int, cost: int
) -> None:
    """Add the question to its context's set, then admit its entry (which owns the element
    from then on). The set itself expires with the longest-lived entry it could hold. All
    four commands go in the cache Redis batch of this event-loop turn, in this order: one
    round trip (they were four). The slot must be embedded: with the lookup's own vector
    when the lookup embedded it (caching/responses.py never embeds a question twice)."""
    vector = slot.vector_bytes()
    batch = async_cache_redis_batch()
    value = json.dumps({"question": slot.question, "reply": asdict(reply)})
    added = batch.submit("VADD", slot.set_key, "FP32", vector, slot.element, "NOQUANT")
    admitting = eviction.admit_in_batch(
        batch,
        budget,
        slot.entry_key,
        value,
        ttl_s,
        cost,
        vector_set=slot.set_key,
        element=slot.element,
    )
    # A set with no entries left must not linger: it lives as long as its newest entry.
    extended = batch.submit("EXPIRE", slot.set_key, ttl_s, "GT")
    started = batch.submit("EXPIRE", slot.set_key, ttl_s, "NX")
    # Every reply is awaited (none left unretrieved), then the first failure is reported.
    replies = await asyncio.gather(added, admitting, extended, started, return_exceptions=True)
    failure = next((r for r in replies if isinstance(r, BaseException)), None)
    if isinstance(failure, REDIS_FAILURES):
        logger.warning("semantic cache: entry not stored, cache Redis failed: %s", failure)
        return
    if failure is not None:
        raise failure
    admission = cast(eviction.Admission, replies[1])
    if not admission.admitted:
        logger.info(
            "semantic cache: entry of %d bytes not admitted to %s (over the budget, or the "
            "namespace is still shrinking to a lowered one)",
            len(value),
            budget.namespace,
        )
