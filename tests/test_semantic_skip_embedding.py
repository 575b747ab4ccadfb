"""MiniLM runs only where a semantic lookup has a candidate verification accepted (issue
21, the hot path): a context with no entry is found empty by an EXISTS that travels with
the exact lookup's GET; candidates are found by probe vector and verified before any
embedding; a question is stored with its probe, and with MiniLM's vector only when its
lookup made one, never embedded twice (caching/cache_plan.py, caching/responses.py,
caching/semantic.py).

In process, against the real bundled Redis 8, the real probe table and the real int8
MiniLM, whose embed() is wrapped to count the questions it is given."""

import asyncio
import dataclasses
import gc
import json
import warnings
from collections.abc import Awaitable, Callable
from decimal import Decimal
from typing import Any

import numpy as np
import pytest
import redis

from caching import (
    cache_plan,
    eviction,
    lookup_log,
    responses,
    semantic,
    semantic_keys,
    semantic_scores,
)
from caching.cache_plan import CachePlan
from caching.exact import CacheDirectives, CachedReply
from caching.outcome import Outcome
from caching.policy import CacheSettings, default_settings
from caching.semantic_keys import SemanticSlot
from foundation import metrics, redis_clients
from foundation.redis_batch import CommandBatcher
from inference import embeddings
from inference.chat_request import ChatRequest
from inference.deployments import DeploymentInfo
from inference.embeddings import Vector

pytestmark = pytest.mark.live
TEAM, OTHER_TEAM = 7, 8
DEPLOYMENT = DeploymentInfo("small-model", Decimal(0), Decimal(0), created=0)
SYSTEM = {"role": "system", "content": "Answer briefly."}
REPLY = CachedReply("Paris.", "stop", 12, 2)
LOOKUP = CacheDirectives()
NAMESPACE = cache_plan.namespace("semantic", TEAM)


def chat(question: str, context: list[dict[str, Any]] | None = None) -> ChatRequest:
    messages = [*(context or [SYSTEM]), {"role": "user", "content": question}]
    return ChatRequest("small-model", messages, 5, False, False, {"temperature": 0})


class RecordingBatcher(CommandBatcher):
    """The commands of each pipeline the cache Redis batch sends, by name and key."""

    def __init__(self, client: Any) -> None:
        super().__init__(client)
        self.pipelines: list[list[tuple[str, Any]]] = []

    def _send(self, batch: Any) -> None:
        self.pipelines.append([(str(c[0]), c[1] if len(c) > 1 else None) for c, _ in batch])
        super()._send(batch)


@pytest.fixture
def embedded(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The questions the real embedder is asked to embed, in order."""
    model = embeddings.embedder()
    asked: list[str] = []
    real = model.embed

    async def counting(text: str) -> Vector:
        asked.append(text)
        return await real(text)

    monkeypatch.setattr(model, "embed", counting)
    # Candidates embedded by an earlier test are remembered per process: start with none.
    monkeypatch.setattr(semantic_scores, "_candidate_vectors", {})
    return asked


@pytest.fixture(autouse=True)
def policy(monkeypatch: pytest.MonkeyPatch) -> CacheSettings:
    """The settings' defaults (exact and semantic caches on, verification on), without the
    database: what a team without a policy row runs under."""
    defaults = default_settings()
    assert defaults.exact_enabled and defaults.semantic_enabled

    async def policy_for_team(team_id: int) -> CacheSettings:
        return defaults

    monkeypatch.setattr(cache_plan, "policy_for_team", policy_for_team)
    return defaults


def run(scenario: Callable[[RecordingBatcher], Awaitable[Any]]) -> Any:
    """The scenario on a fresh event loop, its cache Redis batch recorded."""

    async def main() -> Any:
        recording = RecordingBatcher(redis_clients.async_cache_redis())
        redis_clients._cache_batchers[asyncio.get_running_loop()] = recording
        try:
            return await scenario(recording)
        finally:
            await lookup_log.drain()
            await redis_clients.async_cache_redis().aclose()

    return asyncio.run(main())


async def planned(
    directives: CacheDirectives, team_id: int, deployment: DeploymentInfo, request: ChatRequest
) -> CachePlan:
    """The caches' plan for a request that admission let through: started, then read."""
    return await (await cache_plan.start_plan(directives, team_id, deployment, request)).result()


async def ask_and_keep(
    question: str,
    context: list[dict[str, Any]] | None = None,
    team_id: int = TEAM,
    directives: CacheDirectives = LOOKUP,
    request_id: str = "chatcmpl-1",
) -> CachePlan:
    """What the gateway does for a request that the model answers on a miss."""
    plan = await planned(directives, team_id, DEPLOYMENT, chat(question, context))
    if plan.result in (Outcome.MISS, Outcome.BYPASS):
        await responses.keep(plan, REPLY, 0, request_id, team_id)
    return plan


def set_key(question: str, context: list[dict[str, Any]] | None = None, team: int = TEAM) -> str:
    context_key = semantic_keys.context_key(team, DEPLOYMENT, chat(question, context))
    return SemanticSlot.of(context_key, question).set_key


def cache(redis_url: str) -> redis.Redis:
    return redis.Redis.from_url(redis_url, decode_responses=True)


def test_a_first_question_is_never_embedded_and_its_paraphrase_embeds_both_once(
    redis_url, embedded
):
    async def scenario(recording: RecordingBatcher) -> tuple[CachePlan, list[str], CachePlan]:
        question = chat("What is the capital of France?")
        first = await planned(LOOKUP, TEAM, DEPLOYMENT, question)
        at_lookup = list(embedded)
        await responses.keep(first, REPLY, 0, "chatcmpl-1", TEAM)
        second = await ask_and_keep("What's the capital of France?", request_id="chatcmpl-2")
        return first, at_lookup, second

    first, at_lookup, second = run(scenario)

    assert first.result == Outcome.MISS
    assert at_lookup == []  # the context had no entry: nothing embedded for the lookup
    assert first.slot is not None and first.slot.vector is None
    # Kept with its probe only; the paraphrase's lookup verifies it, then embeds the
    # paraphrase and the candidate, once each, and hits.
    assert embedded == ["What's the capital of France?", "What is the capital of France?"]
    assert second.result == Outcome.HIT_SEMANTIC and second.reply == REPLY
    # The skipped lookup is still in the team's lookup log, as one with no candidate.
    logged = [json.loads(r) for r in cache(redis_url).lrange(lookup_log.key(TEAM), 0, -1)]
    assert [sample["c"] for sample in logged][-1] == []
    assert len(logged) == 2 and logged[0]["c"][0] >= 0.92 and logged[0]["v"][0] == 1


def test_a_miss_with_no_near_candidate_embeds_nothing_and_is_stored_by_its_probe(
    redis_url, embedded
):
    async def scenario(recording: RecordingBatcher) -> CachePlan:
        await ask_and_keep("What is the capital of France?", request_id="chatcmpl-1")
        return await ask_and_keep("How many legs does a spider have?", request_id="chatcmpl-2")

    plan = run(scenario)

    assert plan.result == Outcome.MISS
    assert embedded == []
    assert plan.slot is not None and plan.slot.vector is None and plan.slot.probe is not None
    stored = cache(redis_url).execute_command("VEMB", plan.slot.set_key, plan.slot.element)
    # int8 in the set: the probe comes back within quantisation error
    assert float(np.dot(np.array(stored, dtype=np.float32), plan.slot.probe)) > 0.99
    entry = json.loads(str(cache(redis_url).get(plan.slot.entry_key)))
    assert "vector" not in entry


def test_questions_that_differ_in_a_number_never_search_each_other(redis_url, embedded):
    """The benchmark's deterministic misses: questions that differ only in a number. Each
    goes to its context's set for its numbers, which verification requires to be equal:
    every lookup finds its own set empty, so nothing is searched or embedded."""

    async def scenario(recording: RecordingBatcher) -> tuple[list[CachePlan], list[str]]:
        plans = [
            await ask_and_keep(f"Say hello to the benchmark, run {n}.", request_id=f"c-{n}")
            for n in range(1, 6)
        ]
        return plans, [name for pipeline in recording.pipelines for name, _ in pipeline]

    plans, sent = run(scenario)

    assert [plan.result for plan in plans] == [Outcome.MISS] * 5
    assert embedded == [] and "VSIM" not in sent and sent.count("VADD") == 5
    keys = {plan.slot.set_key for plan in plans if plan.slot is not None}
    assert len(keys) == 5 and all(cache(redis_url).exists(key) for key in keys)


def test_each_entry_is_charged_what_its_probe_costs_alone_or_in_a_shared_set(redis_url, embedded):
    questions = [
        "How many days are in 3 weeks?",
        "How many hours are in 3 days?",  # the same anchors: the same set
        "How many days are in 4 weeks?",
    ]

    async def scenario(recording: RecordingBatcher) -> list[CachePlan]:
        return [await ask_and_keep(q, request_id=f"c-{n}") for n, q in enumerate(questions)]

    plans = run(scenario)

    client = cache(redis_url)
    values = [client.get(plan.slot.entry_key) for plan in plans if plan.slot is not None]
    assert len(values) == 3 and all(values)
    charged = run(lambda r: eviction.usage(redis_clients.async_cache_redis(), NAMESPACE))
    alone, shared = semantic.ELEMENT_BYTES
    expected = sum(eviction.entry_size(str(v)) for v in values) + 2 * alone + shared
    assert charged.used_bytes == expected


def test_a_question_with_the_same_numbers_is_searched_for_in_their_set(redis_url, embedded):
    async def scenario(recording: RecordingBatcher) -> tuple[CachePlan, list[tuple[str, Any]]]:
        await ask_and_keep("How many days are in 3 weeks?", request_id="chatcmpl-1")
        await ask_and_keep("How many days are in 4 weeks?", request_id="chatcmpl-2")
        recording.pipelines.clear()
        plan = await ask_and_keep("How many days do 3 weeks have?", request_id="chatcmpl-3")
        return plan, [command for pipeline in recording.pipelines for command in pipeline]

    plan, sent = run(scenario)

    searched = [key for name, key in sent if name == "VSIM"]
    assert searched == [set_key("How many days are in 3 weeks?")]
    assert searched[0] != set_key("How many days are in 4 weeks?")
    # verification accepted the one candidate there: both were embedded to score it
    assert embedded == ["How many days do 3 weeks have?", "How many days are in 3 weeks?"]
    assert plan.result == Outcome.HIT_SEMANTIC


def test_without_verification_a_changed_number_is_a_candidate(
    redis_url: str, embedded: list[str], monkeypatch: pytest.MonkeyPatch, policy: CacheSettings
) -> None:
    """A team that turned verification off has one set per context, as before partitions:
    cosine alone decides, so the question that differs in a number is scored."""
    unverified = dataclasses.replace(policy, verify_enabled=False)

    async def policy_for_team(team_id: int) -> CacheSettings:
        return unverified

    monkeypatch.setattr(cache_plan, "policy_for_team", policy_for_team)

    async def scenario(recording: RecordingBatcher) -> CachePlan:
        await ask_and_keep("Say hello to the benchmark, run 1.", request_id="chatcmpl-1")
        return await ask_and_keep("Say hello to the benchmark, run 2.", request_id="chatcmpl-2")

    plan = run(scenario)

    assert plan.result == Outcome.HIT_SEMANTIC  # what turning verification off means
    shared = semantic_keys.SET_PREFIX + semantic_keys.context_key(
        TEAM, DEPLOYMENT, chat("Say hello to the benchmark, run 1.")
    )
    assert cache(redis_url).execute_command("VCARD", shared) == 1
    assert embedded == ["Say hello to the benchmark, run 2.", "Say hello to the benchmark, run 1."]


def test_a_question_its_lookup_embedded_is_stored_with_that_vector(redis_url, embedded):
    """Verification accepts the candidate (a lower-case noun changed), MiniLM's cosine is
    under the threshold: a miss, stored with the vector the lookup made."""

    async def scenario(recording: RecordingBatcher) -> CachePlan:
        await ask_and_keep("How do I reset my password?", request_id="chatcmpl-1")
        return await ask_and_keep("How do I reset my router?", request_id="chatcmpl-2")

    plan = run(scenario)

    assert plan.result == Outcome.MISS
    assert embedded == ["How do I reset my router?", "How do I reset my password?"]
    assert plan.slot is not None and plan.slot.vector is not None
    entry = json.loads(str(cache(redis_url).get(plan.slot.entry_key)))
    assert np.array_equal(semantic_scores.decode(entry["vector"]), plan.slot.vector)


def test_the_emptiness_check_travels_with_the_exact_lookup(redis_url, embedded):
    async def scenario(recording: RecordingBatcher) -> list[list[tuple[str, Any]]]:
        await planned(LOOKUP, TEAM, DEPLOYMENT, chat("Who wrote Hamlet?"))
        return list(recording.pipelines)

    pipelines = run(scenario)

    first = dict(pipelines[0])
    assert set(first) == {"GET", "EXISTS"}  # one round trip for both
    assert first["EXISTS"] == set_key("Who wrote Hamlet?")
    assert "VSIM" not in [name for pipeline in pipelines for name, _ in pipeline]
    assert embedded == []


def test_another_teams_entries_do_not_make_a_context_look_populated(redis_url, embedded):
    """Same messages, same deployment, another team: its own context is empty, so it
    embeds nothing and misses; the check only ever reads the asking team's set."""

    async def scenario(recording: RecordingBatcher) -> tuple[CachePlan, list[Any]]:
        await ask_and_keep("What is the capital of France?", team_id=TEAM)
        embedded.clear()
        recording.pipelines.clear()
        plan = await planned(LOOKUP, OTHER_TEAM, DEPLOYMENT, chat("What's the capital of France?"))
        return plan, list(recording.pipelines)

    plan, pipelines = run(scenario)

    assert plan.result == Outcome.MISS
    assert embedded == []
    checked = [key for pipeline in pipelines for name, key in pipeline if name == "EXISTS"]
    assert checked == [set_key("What's the capital of France?", team=OTHER_TEAM)]
    assert cache(redis_url).exists(set_key("What is the capital of France?", team=TEAM)) == 1


def test_a_context_emptied_by_a_false_hit_report_is_empty_again(redis_url, embedded):
    """A vector set goes with its last element: once the only entry is removed, a lookup
    in that context embeds nothing again."""

    async def scenario(recording: RecordingBatcher) -> CachePlan:
        await ask_and_keep("What is the capital of France?", request_id="chatcmpl-1")
        assert await responses.report_false_hit("chatcmpl-1", TEAM)
        embedded.clear()
        question = chat("What's the capital of France?")
        return await planned(LOOKUP, TEAM, DEPLOYMENT, question)

    plan = run(scenario)

    assert plan.result == Outcome.MISS
    assert embedded == []
    assert cache(redis_url).exists(set_key("What is the capital of France?")) == 0


@pytest.mark.parametrize(
    ("directives", "result", "kept_semantically"),
    [
        (CacheDirectives(lookup=False), Outcome.BYPASS, True),
        (CacheDirectives(store=False), Outcome.MISS, False),
    ],
    ids=["no-cache", "no-store"],
)
def test_in_an_empty_context_a_question_is_stored_without_an_embedding(
    redis_url, embedded, directives, result, kept_semantically
):
    """no-cache: no lookup, and its reply is kept by its probe; no-store: the lookup found
    the context empty and nothing is kept. MiniLM runs in neither."""

    async def scenario(recording: RecordingBatcher) -> CachePlan:
        plan = await planned(directives, TEAM, DEPLOYMENT, chat("Who wrote Hamlet?"))
        await responses.keep(plan, REPLY, 0, "chatcmpl-1", TEAM)
        return plan

    plan = run(scenario)

    assert plan.result == result
    assert embedded == []
    element = semantic_keys.element_id(
        semantic_keys.context_key(TEAM, DEPLOYMENT, chat("Who wrote Hamlet?")), "Who wrote Hamlet?"
    )
    stored = cache(redis_url).execute_command("VISMEMBER", set_key("Who wrote Hamlet?"), element)
    assert bool(stored) == kept_semantically


def test_a_no_store_lookup_in_a_populated_context_still_embeds_each_once(redis_url, embedded):
    async def scenario(recording: RecordingBatcher) -> CachePlan:
        await ask_and_keep("What is the capital of France?", request_id="chatcmpl-1")
        first = await planned(
            CacheDirectives(store=False), TEAM, DEPLOYMENT, chat("What's the capital of France?")
        )
        await planned(
            CacheDirectives(store=False), TEAM, DEPLOYMENT, chat("What's the capital of France?")
        )
        return first

    plan = run(scenario)

    assert plan.result == Outcome.HIT_SEMANTIC
    # The candidate's vector is remembered: the second lookup embeds only its question.
    assert embedded == [
        "What's the capital of France?",
        "What is the capital of France?",
        "What's the capital of France?",
    ]


def test_a_question_too_dense_to_embed_whole_is_counted_when_kept_and_not_stored(
    redis_url, embedded
):
    """Within the semantic cache's 3,000 characters but past the 1,016 tokens MiniLM
    reads whole (CJK): in an empty context the lookup never probes it, so keeping its
    reply finds it too long (counted once) and keeps the exact entry only."""
    question = "请根据下面的长篇背景资料回答最后的问题并详细说明理由" * 90 + "问题是什么颜色"
    assert len(question) < semantic_keys.MAX_QUESTION_CHARS
    too_long = metrics.semantic_skips.labels("too_long")
    before = too_long._value.get()

    plan = run(lambda recording: ask_and_keep(question))

    assert plan.result == Outcome.MISS and plan.key is not None
    assert embedded == []
    assert too_long._value.get() == before + 1
    assert cache(redis_url).exists(plan.key) == 1
    assert cache(redis_url).exists(set_key(question)) == 0


def test_an_exact_hit_leaves_the_emptiness_check_unawaited_without_warnings(redis_url, embedded):
    async def scenario(recording: RecordingBatcher) -> CachePlan:
        await ask_and_keep("What is the capital of France?", request_id="chatcmpl-1")
        embedded.clear()
        return await planned(LOOKUP, TEAM, DEPLOYMENT, chat("What is the capital of France?"))

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        plan = run(scenario)
        gc.collect()

    assert plan.result == Outcome.HIT_EXACT
    assert embedded == []
    assert not [w for w in caught if issubclass(w.category, RuntimeWarning)]


def test_the_same_question_from_another_named_user_is_another_context():
    """A question word for word the same is served without verification: a user message's
    `name` must keep bob from alice's "What is my name?" answer."""

    def named(name: str) -> ChatRequest:
        asked = {"role": "user", "name": name, "content": "What is my name?"}
        return ChatRequest("small-model", [SYSTEM, asked], 5, False, False, {"temperature": 0})

    alice = semantic_keys.context_key(TEAM, DEPLOYMENT, named("alice"))
    assert alice != semantic_keys.context_key(TEAM, DEPLOYMENT, named("bob"))
    assert alice == semantic_keys.context_key(TEAM, DEPLOYMENT, named("alice"))


def test_a_plan_dropped_in_its_turn_sends_nothing_and_leaves_nothing_unawaited(redis_url, embedded):
    """A request refused at admission drops its plan, whose GET and EXISTS are in the
    batch: refused in the same event-loop turn, they are never sent; no warning, and the
    next lookup on the connection gets its own answers."""

    async def scenario(recording: RecordingBatcher) -> CachePlan:
        await ask_and_keep("What is the capital of France?", request_id="chatcmpl-1")
        question = chat("What is the capital of France?")
        await asyncio.sleep(0.05)  # the store's batch is out
        before = len(recording.pipelines)
        dropped = await cache_plan.start_plan(LOOKUP, TEAM, DEPLOYMENT, question)
        assert dropped.exact_get is not None and dropped.context_exists is not None
        dropped.drop()
        await asyncio.sleep(0.05)  # past the turn in which the batch would have gone out
        assert recording.pipelines[before:] == []
        return await planned(LOOKUP, TEAM, DEPLOYMENT, question)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        plan = run(scenario)
        gc.collect()

    assert plan.result == Outcome.HIT_EXACT
    assert not [w for w in caught if issubclass(w.category, RuntimeWarning)]
