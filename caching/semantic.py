"""The semantic cache: answer a question asked before in other words, never a different one.

Only the last user message is compared, within its context (caching/semantic_keys.py):
each context has its own Redis 8 vector sets, so a follow-up is only ever compared with
follow-ups in the same conversation of the same team; where lookups verify, one set per
set of anchors (numbers, dates, negations), which verification requires to be equal.

A candidate must clear two bars: verify() (caching/verify/), which rejects the
near-misses embeddings confuse (negation, numbers, dates, names, swapped roles), and
either the policy's cosine threshold or, where the team set an error bound
(`max_false_hit_rate`), a calibrated false-hit probability at most that bound
(caching/evidence.py). An entry its team reported as a false hit never answers another
question again (it still answers its own, word for word): it keeps a marker for as long
as it can live. So does an entry whose reply a sampled audit found different from a fresh
answer (gateway/serving/audit.py); audits that agreed are counted per entry and lower its
false-hit probability under a bound.

MiniLM costs about 3 ms of CPU per question on the gateway's core, so a lookup avoids it
where it can. First, it asks whether the context's set exists: EXISTS, in the same cache
Redis batch as the exact lookup's GET (no round trip of its own). A set is deleted with its
last element and expires with its newest entry, so without one nothing can match. Then it
searches the set by probe vector (inference/probe_embeddings.py: a static embedding
distilled from MiniLM, about 30 us), verifies the nearest candidates, and runs MiniLM only
when one of them passes: MiniLM's cosine between the question and the candidate decides,
as before (caching/semantic_scores.py). A question whose lookup scored nothing is stored
with its probe alone; one that was embedded keeps its MiniLM vector in its entry. The set
key is the asking team's own context key: nothing here touches another team's contexts.

Layout under CACHE_REDIS_URL:
    sluice:cache:sem:probes:<context sha256>[:<anchors>]
                                             vector set of probe vectors (int8), elements
                                             are entry ids; where lookups verify, one set
                                             per context and set of anchors (numbers,
                                             dates, negations: semantic_keys.partition())
    sluice:cache:sem:entry:<entry sha256>    JSON {question, reply, vector: MiniLM's,
                                             base64 float32, if it was embedded}
    sluice:cache:sem:reported:<entry sha256> "report" once a hit it gave was reported
                                             false, "audit" once an audit disagreed
    sluice:cache:sem:confirmed:<entry sha256> audits of its hits that agreed (a count)
    sluice:cache:sem:cells:<team id>         the team's audited hits per evidence cell,
    sluice:cache:sem:cell-audited:<entry sha256>  each entry counted once there
                                             (caching/cell_audits.py)
    sluice:cache:lookups:<team id>           the team's last 1,000 lookups, numbers only
                                             (caching/lookup_log.py)
Entries are admitted through GDSF eviction (namespace "semantic:<team>"), which removes
an entry's vector element whenever the entry goes.
"""

import asyncio
import json
import logging
from collections.abc import Awaitable, Coroutine, Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any, cast

import redis.asyncio as aioredis

from caching import cell_audits, eviction, evidence, lookup_log, semantic_scores
from caching.exact import CachedReply
from caching.semantic_keys import ENTRY_PREFIX, LONG_QUESTION_CHARS, SemanticSlot
from caching.verify.features import analyze
from caching.verify.verdict import verify_analyzed
from foundation import metrics
from foundation.redis_batch import may_go_unawaited
from foundation.redis_clients import REDIS_FAILURES, async_cache_redis_batch
from inference.embeddings import EmbedderUnavailable
from inference.probe_embeddings import loaded_probe_embedder

logger = logging.getLogger(__name__)
REPORTED_PREFIX = "sluice:cache:sem:reported:"
CONFIRMED_PREFIX = "sluice:cache:sem:confirmed:"
REPORTED_TTL_S = 366 * 24 * 3600  # outlives any entry (a policy's max_age_s: a year at most)
# Candidates by probe vector: the nearest few are often near-misses verification rejects
# (a changed number or name), so more are read than MiniLM scores (docs/benchmarks.md).
PROBE_CANDIDATES = 16
SCORED = 4
# HNSW exploration, lower than Redis's defaults (200 to build, 100 to search): a probe set
# needs its 16 nearest, not the exact ones. Measured on 3,000 near-identical questions, 99.8%
# of the true 16 nearest found, and about 70 us less per VADD, 100 us less per VSIM.
BUILD_EF = 100
SEARCH_EF = 50
# (MiniLM floor, probe floor): a lookup whose MiniLM floor (its threshold, or 0.70 under a
# bound) is at least the first drops candidates under the second. Below it, MiniLM's cosine
# is under the first for 199 pairs in 200 of every development set (`manage.py
# probe_retrieval`, docs/benchmarks.md): not worth verifying or embedding.
PROBE_FLOORS = ((0.92, 0.70), (0.90, 0.68), (0.80, 0.60), (evidence.FLOOR, 0.55))
# What an entry's probe adds to the cache Redis's memory, charged to the team's budget with
# the entry: alone in its set (a question whose anchors no other has: a templated id) and
# among others (`INFO memory` over 2,000 128-dimension int8 probes each way: 3,193 and 957
# bytes an element, docs/benchmarks.md).
ELEMENT_BYTES = (3200, 1000)


class SemanticUnavailable(Exception):
    """Redis failed during a semantic lookup: the request goes on as a miss."""


async def probed(slot: SemanticSlot) -> SemanticSlot | None:
    """The slot with its probe vector (about 30 us, on the event loop; made only when
    a lookup or a store needs it, never for an exact hit); None, counted, for a question
    longer than MiniLM reads whole (1,016 tokens: dense text within MAX_QUESTION_CHARS,
    CJK or code), or without the probe table (logged once when it failed to load)."""
    if slot.probe is not None:
        return slot
    try:
        probe = (await loaded_probe_embedder()).vector(slot.question)
    except EmbedderUnavailable:
        return None
    if probe is None:
        metrics.labelled(metrics.semantic_skips, "too_long").inc()
        return None
    return replace(slot, probe=probe)


@dataclass(frozen=True)
class SemanticMatch:
    reply: CachedReply
    entry_key: str
    similarity: float
    question: str
    cell: str | None = None  # its evidence cell, where verified (an audit counts it there)


def populated_submitted(slot: SemanticSlot) -> "asyncio.Future[Any]":
    """Whether the slot's context has any entry (its vector set exists), so that a lookup
    can be worth a search: its EXISTS, in this event-loop turn's cache Redis batch when
    this returns (commands submitted next, the exact lookup's GET, share its round trip).
    Read it with populated(), or cancel() it (unsent, it is not sent)."""
    return may_go_unawaited(async_cache_redis_batch().submit("EXISTS", slot.set_key))


async def populated(reply: "asyncio.Future[Any]") -> bool:
    """populated_submitted()'s answer; SemanticUnavailable if Redis failed."""
    try:
        return bool(await reply)
    except REDIS_FAILURES as exc:
        raise SemanticUnavailable(str(exc)) from exc


def empty_context_lookup(threshold: float, verify_enabled: bool, team_id: int | None) -> None:
    """A lookup in a context with no entry: nothing is embedded or searched. With a team it
    is logged as a lookup that found no candidate, as the search would have found none (the
    dashboard's threshold preview counts it among the misses, as before)."""
    if team_id is not None:
        lookup_log.record(team_id, lookup_log.LookupSample((), (), threshold, verify_enabled))


@dataclass(frozen=True)
class Lookup:
    match: SemanticMatch | None
    slot: SemanticSlot  # with the question's MiniLM vector if the lookup embedded it
    # Without a match: the best verified candidate the bound turned down, which the fresh
    # reply can audit (gateway/serving/audit.py, compare_turned_down).
    turned_down: SemanticMatch | None = None


async def lookup(
    slot: SemanticSlot,
    threshold: float,
    verify_enabled: bool,
    team_id: int | None = None,
    bound: float | None = None,
) -> Lookup:
    """The best candidate, by MiniLM's cosine, that verification accepts and that clears
    the threshold, or with a bound (a team's max_false_hit_rate) whose false-hit
    probability is within it (verification is then always on: the probability is
    calibrated on verified pairs).

    Candidates are the PROBE_CANDIDATES nearest by probe vector, above probe_floor(). Each
    is verified first (tens of us); MiniLM embeds the question (about 3 ms) only when one
    passes, and scores at most SCORED of them. With a team, the lookup's numbers (cosines,
    verdicts) go to its lookup log, after the fact. The slot must be probed."""
    floor = evidence.FLOOR if bound is not None else threshold
    verify_enabled = verify_enabled or bound is not None
    gate = probe_floor(floor)
    batch = async_cache_redis_batch()  # each command shares a pipeline with other requests'
    audited_cells, recent = None, None
    if team_id is not None and verify_enabled:  # what the team's audits found, per cell
        recent = cell_audits.recently_read(team_id)
        if recent is None:
            audited_cells = batch.submit("HGETALL", cell_audits.key(team_id))
            may_go_unawaited(audited_cells)
    try:
        # Its own question's entry, in the search's round trip: a question asked before word
        # for word answers whatever the search finds (the probe ties reordered words).
        own_entry = batch.submit("GET", slot.entry_key)
        may_go_unawaited(own_entry)  # the search may fail first
        found = await batch.execute(
            "VSIM", slot.set_key, "FP32", slot.probe_bytes(), "COUNT", PROBE_CANDIDATES,
            "EF", SEARCH_EF, "WITHSCORES",
        )  # fmt: skip
        own = await own_entry
        if own is not None:
            if audited_cells is not None and team_id is not None:
                cell_audits.keep_if_read(team_id, audited_cells)  # read anyway: keep it
            own_row = ((1.0, True, 0.0),)
            lookup_log.record_candidates(team_id, own_row, threshold, verify_enabled, bound)
            return Lookup(_match(json.loads(own), slot.element, 1.0), slot)
        # (its own element, if there, has lost its entry)
        near = [e for e, score in _scored(found) if score >= gate and e != slot.element]
        if len(slot.question) > LONG_QUESTION_CHARS:
            near = near[:1]
        keys = [p + e for p in (ENTRY_PREFIX, REPORTED_PREFIX, CONFIRMED_PREFIX) for e in near]
        stored = await batch.execute("MGET", *keys) if near else []
        audited: Mapping[str, cell_audits.CellAudits] = recent if recent is not None else {}
        if audited_cells is not None and team_id is not None:
            audited = cell_audits.read(team_id, await audited_cells)
    except REDIS_FAILURES as exc:
        raise SemanticUnavailable(str(exc)) from exc
    count = len(near)
    entries, reported, confirmed = stored[:count], stored[count : 2 * count], stored[2 * count :]
    verdicts: list[bool | None] = [None] * count
    cosines: list[float | None] = [None] * count
    probabilities: list[float | None] = [None] * count
    accepted: list[tuple[int, dict[str, Any]]] = []
    asked = None
    if verify_enabled and near:  # analyzed when the slot was made, if it partitions
        asked = slot.features if slot.features is not None else analyze(slot.question)
    for index, raw in enumerate(entries):
        if raw is None:
            continue  # expired or evicted; its element goes at the next purge
        if reported[index] is not None:
            why = "audit" if _text(reported[index]) == "audit" else "reported"
            metrics.labelled(metrics.semantic_rejections, why).inc()
            continue
        if len(accepted) == SCORED:
            continue  # enough to score (reported ones are still counted)
        entry = json.loads(raw)
        if asked is not None:
            theirs = semantic_scores.candidate_features(near[index], entry["question"])
            verdict = verify_analyzed(asked, theirs)
            verdicts[index] = verdict.accepted
            if not verdict.accepted:
                metrics.labelled(metrics.semantic_rejections, verdict.reason).inc()
                continue
        accepted.append((index, entry))
    found = Lookup(None, slot)
    if accepted:
        found = await _best_scored(
            slot,
            accepted,
            (near, confirmed, audited),
            floor,
            bound,
            (verdicts, cosines, probabilities),
        )
    rows = list(zip(cosines, verdicts, probabilities, strict=True))
    lookup_log.record_candidates(team_id, rows, threshold, verify_enabled, bound)
    return found


async def _best_scored(
    slot: SemanticSlot,
    accepted: list[tuple[int, dict[str, Any]]],
    known: tuple[list[str], list[Any], Mapping[str, cell_audits.CellAudits]],
    floor: float,
    bound: float | None,
    logged: tuple[list[bool | None], list[float | None], list[float | None]],
) -> Lookup:
    """Score the accepted candidates by MiniLM's cosine (embedding the question if the
    slot has no vector yet) and take the best one over the floor and within the bound
    (else name the best one the bound turned down, if it has an evidence cell).
    Fills in cosines and probabilities, by candidate index, for the lookup log. Known:
    the candidates' elements, their entries' agreeing audits, the team's audits by cell."""
    near, confirmed, audited = known
    verdicts, cosines, probabilities = logged
    if slot.vector is None:
        vector = await semantic_scores.question_vector(slot.question)
        if vector is None:
            return Lookup(None, slot)
        slot = slot.embedded(vector)
    assert slot.vector is not None
    scored = []
    for index, entry in accepted:
        theirs = await semantic_scores.candidate_vector(near[index], entry)
        if theirs is not None:
            similarity = semantic_scores.cosine(slot.vector, theirs)
            cosines[index] = similarity
            scored.append((similarity, index, entry))
    turned_down = None
    for similarity, index, entry in sorted(scored, key=lambda s: -s[0]):
        if similarity < floor:
            break
        short = len(slot.question) <= LONG_QUESTION_CHARS
        cell = None
        if verdicts[index] and (bound is not None or short):
            # Decisive under a bound (verification is on); logged for the preview of one
            # otherwise (about 10 us for a short question, up to 0.5 ms for a long one).
            # Only for a verified candidate: the table is measured on verified pairs.
            probabilities[index], cell = semantic_scores.false_hit_probability(
                slot.question, entry["question"], similarity, confirmed[index], audited
            )
        probability = probabilities[index]
        if bound is not None and (probability is None or probability > bound):
            metrics.labelled(metrics.semantic_rejections, "over_bound").inc()
            if turned_down is None and cell is not None:
                turned_down = _match(entry, near[index], similarity, cell)
            continue
        return Lookup(_match(entry, near[index], similarity, cell), slot)
    return Lookup(None, slot, turned_down)


def probe_floor(floor: float) -> float:
    """The probe cosine under which a candidate cannot reach MiniLM's `floor` (none for a
    threshold under 0.70, which nothing was measured for)."""
    return next((probe for minilm, probe in PROBE_FLOORS if floor >= minilm), -1.0)


def _match(
    entry: dict[str, Any], element: str, similarity: float, cell: str | None = None
) -> SemanticMatch:
    reply = CachedReply.decoded(entry["reply"])  # whichever version of it wrote the entry
    return SemanticMatch(reply, ENTRY_PREFIX + element, similarity, entry["question"], cell)


async def mark_reported(client: aioredis.Redis, entry_key: str, source: str = "report") -> None:
    """A hit this entry gave was reported false (or an audit disagreed: source "audit"):
    from now on it answers only its own question (the marker outlives the entry)."""
    element = entry_key.removeprefix(ENTRY_PREFIX)
    await client.set(REPORTED_PREFIX + element, source, ex=REPORTED_TTL_S)


async def record_audit(
    client: aioredis.Redis,
    entry_key: str,
    agreed: bool,
    team_cell: tuple[int, str | None] | None = None,
) -> None:
    """What an audit of a hit this entry gave found: agreement is counted, a disagreement
    takes the entry out of service for other questions. A sampled audit of a team's hit
    (team_cell: the team and the hit's evidence cell, where it had one) is counted in the
    team's cell too (caching/cell_audits.py); a re-ask, which is no random draw, is not."""
    element = entry_key.removeprefix(ENTRY_PREFIX)
    if agreed:
        async with client.pipeline(transaction=False) as pipe:
            pipe.incr(CONFIRMED_PREFIX + element)
            pipe.expire(CONFIRMED_PREFIX + element, REPORTED_TTL_S)
            await pipe.execute()
    else:
        await mark_reported(client, entry_key, "audit")
    if team_cell is not None and team_cell[1] is not None:
        await cell_audits.record(client, team_cell[0], team_cell[1], agreed, entry_key)


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
    await store_submitted(slot, reply, budget, ttl_s, cost)


def store_submitted(
    slot: SemanticSlot, reply: CachedReply, budget: eviction.Budget, ttl_s: int, cost: int
) -> Coroutine[Any, Any, None]:
    """Add the question to its context's set, then admit its entry (which owns the element
    from then on). The set itself expires with the longest-lived entry it could hold. All
    four commands are in the cache Redis batch of this event-loop turn, in this order, when
    this returns: one round trip (they were four), and a lookup this process makes later
    runs after them. The set gets the probe vector (the slot must be probed); the entry
    keeps MiniLM's vector when the lookup made one (never embedded twice). Await the
    result: it logs a failure, or an entry over its budget."""
    batch = async_cache_redis_batch()
    entry: dict[str, Any] = {"question": slot.question, "reply": asdict(reply)}
    if slot.vector is not None:
        entry["vector"] = semantic_scores.encode(slot.vector)
    value = json.dumps(entry)
    # Default (int8) quantisation: probe scores only rank and gate candidates; MiniLM's
    # vectors, which decide, are kept whole in the entries.
    added = batch.submit(
        "VADD", slot.set_key, "FP32", slot.probe_bytes(), slot.element, "EF", BUILD_EF
    )
    admitting = eviction.admit_in_batch(
        batch,
        budget,
        slot.entry_key,
        value,
        ttl_s,
        cost,
        vector_set=slot.set_key,
        element=slot.element,
        element_bytes=ELEMENT_BYTES,
    )
    # A set with no entries left must not linger: it lives as long as its newest entry.
    extended = batch.submit("EXPIRE", slot.set_key, ttl_s, "GT")
    started = batch.submit("EXPIRE", slot.set_key, ttl_s, "NX")
    return _stored(budget, len(value), added, admitting, extended, started)


async def _stored(budget: eviction.Budget, size: int, *sent: Awaitable[Any]) -> None:
    # Every reply is awaited (none left unretrieved), then the first failure is reported.
    replies = await asyncio.gather(*sent, return_exceptions=True)
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
            size,
            budget.namespace,
        )
