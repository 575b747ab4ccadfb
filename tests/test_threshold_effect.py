"""Issue 8: the predicted effect of a similarity threshold change, before it is saved.

The lookup log (real MiniLM embeddings, a real Redis 8 vector set), the prediction's
arithmetic on synthetic samples, and the Preview button of the Tuning page."""

import asyncio
import json
from typing import Any

import pytest
import redis
from django.conf import settings
from django.test import Client
from django.urls import reverse

from caching import eviction, lookup_log, semantic
from caching.exact import CachedReply
from caching.lookup_log import LookupSample
from gateway.accounts import actions as account_actions
from gateway.dashboard import actions, threshold_effect
from gateway.dashboard.models import TuningChange
from gateway.dashboard.threshold_effect import expected_precision, predict, preview
from inference.embeddings import OnnxMiniLM
from tests.semantic_slots import probed_slot
from tests.staff import tuning_staff
from tests.test_dashboard import cache_form_values

CONTEXT = "c" * 64
STORED = ["Book a flight from Paris to London", "How do I reset my password?"]


@pytest.fixture(scope="module")
def minilm() -> OnnxMiniLM:
    return OnnxMiniLM(settings.EMBEDDING_MODEL_DIR)


def reply(text: str) -> CachedReply:
    return CachedReply(content=text, finish_reason="stop", prompt_tokens=5, completion_tokens=3)


def logged(redis_url: str, team_id: int) -> list[dict[str, Any]]:
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    return [json.loads(raw) for raw in client.lrange(lookup_log.key(team_id), 0, -1)]


@pytest.mark.live
def test_each_lookup_of_a_team_leaves_numbers_only(redis_url: str, minilm: OnnxMiniLM) -> None:
    async def scenario() -> list[semantic.SemanticMatch | None]:
        budget = eviction.Budget("semantic:7", 10_000_000)
        for question in STORED:
            slot = await probed_slot(CONTEXT, question, minilm.embed_batch([question])[0])
            await semantic.store(slot, reply(f"answer to {question}"), budget, 600, 10)
        matches = []
        for question, context in [
            ("Book a flight from London to Paris", CONTEXT),  # near-miss: roles
            ("how do i reset my password", CONTEXT),  # paraphrase
            ("Anything at all", "d" * 64),
        ]:  # an empty context
            vector = minilm.embed_batch([question])[0]
            found = await semantic.lookup(
                await probed_slot(context, question, vector), 0.92, True, team_id=7
            )
            matches.append(found.match)
        await semantic.lookup(
            await probed_slot(CONTEXT, "x", minilm.embed_batch(["x"])[0]), 0.92, True
        )  # no team: not logged
        await lookup_log.drain()
        return matches

    near_miss, paraphrase, empty = asyncio.run(scenario())
    assert near_miss is None and paraphrase is not None and empty is None
    newest_first = logged(redis_url, 7)
    assert len(newest_first) == 3
    # Each sample is written by its own task: they may reach Redis in any order.
    empty_set = next(sample for sample in newest_first if not sample["c"])
    hit = next(sample for sample in newest_first if sample["v"][:1] == [1])
    rejected = next(sample for sample in newest_first if sample["v"][:1] == [0])
    assert empty_set == {"c": [], "v": [], "t": 0.92, "ve": 1}
    # The near-miss: verification turned its nearest candidate down before anything was
    # scored, so no cosine is logged for it (MiniLM never ran for that lookup).
    assert rejected["c"][0] is None and rejected["v"][0] == 0
    assert all(cosine is None for cosine in rejected["c"])
    assert hit["c"][0] >= 0.92 and hit["v"][0] == 1
    # No text of the team's: only numbers (and the four keys) are kept.
    raw = json.dumps(newest_first)
    assert not any(word in raw for word in ("Paris", "password", "Anything"))
    client = redis.Redis.from_url(redis_url)
    assert 0 < client.ttl(lookup_log.key(7)) <= lookup_log.WINDOW_S
    assert not client.exists(lookup_log.key(0))


@pytest.mark.live
def test_the_log_keeps_the_last_thousand(redis_url: str) -> None:
    async def scenario() -> None:
        for n in range(lookup_log.KEEP + 5):
            lookup_log.record(3, LookupSample((n / 10_000,), (None,), 0.9, True))
        await lookup_log.drain()

    asyncio.run(scenario())
    kept = logged(redis_url, 3)
    assert len(kept) == lookup_log.KEEP and kept[0]["c"] == [(lookup_log.KEEP + 4) / 10_000]


def sample(*candidates: tuple[float, bool | None], threshold: float = 0.9) -> LookupSample:
    return LookupSample(
        tuple(c for c, _ in candidates), tuple(v for _, v in candidates), threshold, True
    )


# Ten lookups at threshold 0.90: 2 verified hits, 1 rejected, 3 whose best candidate was
# below 0.90 (never verified), 4 with nothing in their set.
SAMPLES = [
    sample((0.95, True)),
    sample((0.91, True)),
    sample((0.93, False), (0.85, None)),
    sample((0.88, None)),
    sample((0.87, None)),
    sample((0.70, None)),
    *[sample() for _ in range(4)],
]


@pytest.mark.unit
def test_known_samples_give_known_hit_rates() -> None:
    assert predict(SAMPLES, 0.90, True).hit_rate == pytest.approx(0.2)
    assert predict(SAMPLES, 0.92, True).hit_rate == pytest.approx(0.1)  # only 0.95 is left
    assert predict(SAMPLES, 0.96, True).hit_rate == 0.0
    # Without verification every candidate at or above the threshold answers.
    assert predict(SAMPLES, 0.90, False).hit_rate == pytest.approx(0.3)
    assert predict(SAMPLES, 0.85, False).hit_rate == pytest.approx(0.5)
    # At 0.86 the never-verified 0.88 and 0.87 get the nearest band's rate: band 0.86-0.88
    # and 0.88-0.90 have no verdicts, 0.90-0.92 has 1 of 1 accepted.
    lower = predict(SAMPLES, 0.86, True)
    assert lower.estimated == 2 and lower.hit_rate == pytest.approx(0.4)
    # The 0.93 rejection (band 0.92-0.94, 0 of 1) is nearer for a 0.93 twin of its own.
    twin = [sample((0.93, None))]
    assert predict(twin + SAMPLES, 0.92, True).hit_rate == pytest.approx(1 / 11)


@pytest.mark.unit
def test_with_no_verdict_at_all_candidates_count_as_accepted() -> None:
    unseen = [sample((0.88, None)), sample()]
    effect = predict(unseen, 0.85, True)
    assert effect.assumed == 1 and effect.estimated == 0 and effect.hit_rate == 0.5


@pytest.mark.unit
def test_a_lower_threshold_never_predicts_a_lower_hit_rate() -> None:
    mixed = [
        *SAMPLES,
        sample((0.97, False), (0.94, None), (0.89, None)),
        sample((0.86, False), (0.84, None)),
    ]
    for verify_enabled in (True, False):
        rates = [predict(mixed, t / 100, verify_enabled).hit_rate for t in range(99, 69, -1)]
        assert rates == sorted(rates)


@pytest.mark.unit
def test_precision_comes_from_the_benchmark_table() -> None:
    assert expected_precision(0.92, True).value == pytest.approx(0.922)
    assert expected_precision(0.91, True).value == pytest.approx((0.932 + 0.922) / 2)
    assert expected_precision(0.90, False).value == pytest.approx(0.399)
    low = expected_precision(0.5, True)
    assert low.value == pytest.approx(0.962) and not low.measured_range
    assert preview([], (0.92, True), (0.9, True)) is None


@pytest.fixture
def staff_client() -> Client:
    client = Client()
    client.force_login(tuning_staff())
    return client


def form_for(team: object, **changes: object) -> dict[str, object]:
    values = {
        "form": "cache",
        "team": getattr(team, "pk", ""),
        **cache_form_values(team),
        **changes,
    }
    return {k: v for k, v in values.items() if v is not False}  # unchecked boxes are absent


def push(team_id: int, samples: list[LookupSample]) -> None:
    async def scenario() -> None:
        for one in samples:
            lookup_log.record(team_id, one)
        await lookup_log.drain()

    asyncio.run(scenario())


@pytest.mark.live
@pytest.mark.django_db
def test_preview_shows_the_effect_and_saves_nothing(staff_client: Client) -> None:
    team = account_actions.create_team("Acme")
    before = actions.current_cache_values(team)["similarity_threshold"]
    push(team.pk, SAMPLES)
    url = reverse("dashboard:tuning")
    response = staff_client.post(url, {**form_for(team, similarity_threshold=0.86), "preview": "1"})
    page = response.content.decode()
    assert response.status_code == 200 and 'id="threshold-effect"' in page
    assert "last 10 semantic lookups" in page and "6 found a candidate" in page
    assert "estimated from verify()" in page and "benchmark" in page
    effect = threshold_effect.preview(SAMPLES, (before, True), (0.86, True))
    assert effect is not None
    assert effect.current.hit_rate_pct in page and "40.0%" in page  # as computed above
    assert 'value="0.86"' in page  # the form keeps what was typed
    assert not TuningChange.objects.exists()
    assert actions.current_cache_values(team)["similarity_threshold"] == before
    # The plain page and Save show no preview.
    assert 'id="threshold-effect"' not in staff_client.get(url, {"team": team.pk}).content.decode()


@pytest.mark.live
@pytest.mark.django_db
def test_preview_without_samples_says_so(staff_client: Client) -> None:
    team = account_actions.create_team("Quiet")
    response = staff_client.post(
        reverse("dashboard:tuning"), {**form_for(team, similarity_threshold=0.9), "preview": "1"}
    )
    page = response.content.decode()
    assert "this team has no recent semantic lookups" in page
    assert not TuningChange.objects.exists()


@pytest.mark.live
@pytest.mark.django_db
def test_the_global_preview_pools_teams_on_the_global_default(staff_client: Client) -> None:
    follower, own = account_actions.create_team("Follower"), account_actions.create_team("Own")
    actions.change_cache_policy(None, own, {"similarity_threshold": 0.95})
    push(follower.pk, SAMPLES[:4])
    push(own.pk, SAMPLES)
    response = staff_client.post(
        reverse("dashboard:tuning"), {**form_for(None, similarity_threshold=0.9), "preview": "1"}
    )
    assert "last 4 semantic lookups" in response.content.decode()


def bound_sample(*candidates: tuple[float, bool | None, float | None]) -> LookupSample:
    return LookupSample(
        tuple(c for c, _, _ in candidates),
        tuple(v for _, v, _ in candidates),
        0.92,
        True,
        tuple(p for _, _, p in candidates),
    )


# Five lookups: a candidate in a 0.7% cell, one in a 3% cell, a rejected one before a 1%
# one, one never evaluated (below the threshold then in force), and an empty set.
BOUND_SAMPLES = [
    bound_sample((0.97, True, 0.007)),
    bound_sample((0.96, True, 0.03)),
    bound_sample((0.95, False, None), (0.94, True, 0.01)),
    bound_sample((0.90, None, None)),
    LookupSample((), (), 0.92, True),
]


@pytest.mark.unit
def test_a_bound_is_replayed_on_the_logged_probabilities() -> None:
    strict = threshold_effect.predict_bound(BOUND_SAMPLES, 0.01)
    assert strict.hit_rate == pytest.approx(2 / 5)
    assert strict.false_hit_rate == pytest.approx((0.007 + 0.01) / 2)
    assert strict.unknown == 1  # the 0.90 candidate: counted as a miss, and said
    loose = threshold_effect.predict_bound(BOUND_SAMPLES, 0.05)
    assert loose.hit_rate == pytest.approx(3 / 5)
    assert loose.false_hit_rate == pytest.approx((0.007 + 0.03 + 0.01) / 3)
    assert threshold_effect.predict_bound(BOUND_SAMPLES, 0.005).hit_rate == 0.0
    # A record from before probabilities were logged: every candidate unknown, no hit.
    old = LookupSample.decode('{"c":[0.95],"v":[1],"t":0.92,"ve":1}')
    assert threshold_effect.predict_bound([old], 0.05).unknown == 1


@pytest.mark.live
def test_a_lookup_logs_the_false_hit_probability_of_what_it_verified(
    redis_url: str, minilm: OnnxMiniLM
) -> None:
    async def scenario() -> None:
        budget = eviction.Budget("semantic:8", 10_000_000)
        question = "How do I reset my password?"
        slot = await probed_slot(CONTEXT, question, minilm.embed_batch([question])[0])
        await semantic.store(slot, reply("answer"), budget, 600, 10)
        rewording = "How do I reset my password please?"
        vector = minilm.embed_batch([rewording])[0]
        await semantic.lookup(await probed_slot(CONTEXT, rewording, vector), 0.92, True, 8, 0.02)
        await lookup_log.drain()

    asyncio.run(scenario())
    [record] = logged(redis_url, 8)
    assert record["v"][0] == 1 and record["b"] == 0.02
    assert 0 < record["p"][0] <= 0.02  # same-order words at cosine 0.96: a 0.7% cell


@pytest.mark.live
def test_a_lookup_without_verification_logs_no_false_hit_probability(
    redis_url: str, minilm: OnnxMiniLM
) -> None:
    """The false-hit table is measured on verified pairs: a candidate nobody verified has
    no probability, or the bound's preview would count it as answering."""

    async def scenario() -> None:
        budget = eviction.Budget("semantic:9", 10_000_000)
        question = "How do I reset my password?"
        slot = await probed_slot(CONTEXT, question, minilm.embed_batch([question])[0])
        await semantic.store(slot, reply("answer"), budget, 600, 10)
        rewording = "How do I reset my password please?"
        vector = minilm.embed_batch([rewording])[0]
        await semantic.lookup(await probed_slot(CONTEXT, rewording, vector), 0.92, False, 9)
        await lookup_log.drain()

    asyncio.run(scenario())
    [record] = logged(redis_url, 9)
    assert record["v"][0] is None and record["c"][0] >= 0.92
    assert "p" not in record


@pytest.mark.live
def test_a_question_asked_before_word_for_word_answers_whatever_the_search_finds(
    redis_url: str,
) -> None:
    """Its own entry is read beside the search, not found by it: the probe gives the same
    vector to the same words in another order, and a set of 16 such twins would hide it."""

    async def scenario() -> semantic.Lookup:
        budget = eviction.Budget("semantic:10", 10_000_000)
        words = ["alpha", "beta", "gamma", "delta", "epsilon"]
        for shift in range(5):
            for swap in range(5):
                order = words[shift:] + words[:shift]
                order[0], order[swap] = order[swap], order[0]
                twin = await probed_slot(CONTEXT, " ".join(order))
                await semantic.store(twin, reply(" ".join(order)), budget, 600, 10)
        asked = " ".join(reversed(words))
        await semantic.store(await probed_slot(CONTEXT, asked), reply("mine"), budget, 600, 10)
        found = await semantic.lookup(await probed_slot(CONTEXT, asked), 0.92, True, 10)
        await lookup_log.drain()
        return found

    found = asyncio.run(scenario())
    assert found.match is not None and found.match.reply.content == "mine"
    assert found.match.similarity == 1.0 and found.slot.vector is None  # nothing embedded
    [record] = logged(redis_url, 10)
    assert record["c"] == [1.0] and record["v"] == [1] and record["p"] == [0.0]


@pytest.mark.unit
def test_candidates_never_scored_count_under_every_threshold() -> None:
    # Verification rejected the nearest by probe (no cosine); the next one was scored.
    scored_after_a_rejection = LookupSample((None, 0.95), (False, True), 0.92, True)
    never_scored = LookupSample((None, None), (False, None), 0.92, True)
    samples = [scored_after_a_rejection, never_scored]
    assert predict(samples, 0.90, True).hit_rate == pytest.approx(0.5)
    assert predict(samples, 0.50, False).hit_rate == pytest.approx(0.5)
    with_bound = LookupSample((None, 0.95), (False, True), 0.92, True, (None, 0.01), 0.02)
    assert threshold_effect.predict_bound([with_bound], 0.02).hit_rate == 1.0
    # Rejections have no band: an unjudged candidate gets the overall acceptance rate.
    unjudged = LookupSample((0.93,), (None,), 0.92, False)
    # (three verdicts, one acceptance)
    estimate = threshold_effect.AcceptanceRates([*samples, unjudged]).estimate(0.93)
    assert estimate == pytest.approx(1 / 3)
    assert predict([*samples, unjudged], 0.92, True).estimated == 1


@pytest.mark.live
@pytest.mark.django_db
def test_preview_of_a_proposed_bound_shows_its_hit_rate_and_predicted_error(
    staff_client: Client,
) -> None:
    team = account_actions.create_team("Bounded")
    push(team.pk, BOUND_SAMPLES)
    response = staff_client.post(
        reverse("dashboard:tuning"),
        {**form_for(team, max_false_hit_rate=0.01), "preview": "1"},
    )
    page = response.content.decode()
    assert 'id="bound-effect"' in page
    assert "<td>1.0%</td><td>40.0%</td><td>0.85%</td>" in page
    assert "1 candidate(s) were never evaluated" in page
    assert not TuningChange.objects.exists()
