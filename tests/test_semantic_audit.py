"""Issue 19: the semantic cache audits a sampled share of its hits (gateway/serving/audit.py):
the question is answered again by the model, billed to the platform, and the two replies
compared; the entry learns from the outcome. It learns the same way from a team's own
re-ask of a hit's request with the caches bypassed, at no one's extra cost."""

import json
import time
from pathlib import Path
from typing import Any

import pytest
import redis

from caching import cell_audits, responses, semantic
from caching.actions import update_cache_policy
from caching.evidence import PRIOR_WEIGHT, false_hit_probability
from gateway.serving.audit import replies_agree
from gateway.usage.ledger import ingest
from gateway.usage.models import UsageRecord
from tests.conftest import live_platform
from tests.sims import SimProcess
from tests.test_exact_cache import metric_lines
from tests.test_semantic_cache import NO_STORE, ask
from tests.waiting import wait_until

ORIGINAL = "What is the capital of France?"
PARAPHRASE = "What's the capital of France?"
AUDITS = "sluice_cache_semantic_audits_total"
REASKS = "sluice_cache_semantic_reasks_total"
BYPASS = {"Cache-Control": "no-cache, no-store"}


def settled_records(team: Any) -> int:
    """The team's usage records once none is on its way: a non-streamed reply is billed as
    it goes out, a moment after the client has it (two reads half a second apart agree)."""

    def count() -> int:
        ingest("test-consumer")
        return UsageRecord.objects.filter(team_id=team.pk).count()

    def stable() -> tuple[int] | None:
        first = count()
        time.sleep(0.5)
        return (first,) if count() == first else None

    settled = wait_until(stable, 10, "the team's usage records to settle")
    assert settled is not None
    return settled[0]


def audits(platform: dict[str, Any], outcome: str) -> float:
    return metric_lines(platform).get(f'{AUDITS}{{outcome="{outcome}"}}', 0)


def hit_until_audited(platform: dict[str, Any], outcome: str) -> int:
    """Ask the paraphrase until an audit has that outcome (the policy reaches the gateway
    within 2 s, the audit runs after the hit is served); how many times it asked."""
    asked = 0

    def done() -> bool:
        nonlocal asked
        ask(platform["client"], PARAPHRASE, extra_headers=NO_STORE)
        asked += 1
        return audits(platform, outcome) >= 1

    wait_until(done, 10, f"an audit that {outcome}", poll_s=0.2)
    return asked


@pytest.mark.live
@pytest.mark.django_db(transaction=True)
def test_an_audit_that_disagrees_takes_the_entry_out_of_service_at_the_platforms_cost(
    platform,
):
    """The simulator answers each prompt with its own words, so a paraphrase's fresh reply
    differs from the cached one: the entry stops answering other questions."""
    client, team = platform["client"], platform["team"].pk
    before = settled_records(platform["team"])
    update_cache_policy(team, audit_rate=1.0)
    assert ask(client, ORIGINAL)[1] == "miss"
    asked = 1 + hit_until_audited(platform, "disagreed")

    assert ask(client, "what is the capital of france?", extra_headers=NO_STORE)[1] == "miss"
    asked += 1
    lines = metric_lines(platform)
    assert lines['sluice_cache_semantic_rejections_total{reason="audit"}'] >= 1
    assert lines['sluice_cache_semantic_audit_tokens_total{model="small-model"}'] > 0
    # The team has a usage record per request it made, none for the audits' generations.
    assert settled_records(platform["team"]) == before + asked
    assert audits(platform, "agreed") == 0
    # a random draw of the team's hits: counted in the hit's evidence cell, as wrong
    assert team_cells(platform)["same-order 0.95|false"] == "1"


@pytest.fixture
def agreeing_platform(redis_url: str, tmp_path: Path) -> Any:
    """The simulator answers both wordings with the same text."""
    replies = tmp_path / "replies.json"
    replies.write_text(json.dumps({ORIGINAL: "Paris.", PARAPHRASE: "Paris."}))
    sim = SimProcess(model="sim-upstream", scripted_replies=replies)
    try:
        yield from live_platform(redis_url, sim)
    finally:
        sim.stop()


@pytest.mark.live
@pytest.mark.django_db(transaction=True)
def test_an_audit_that_agrees_is_counted_on_the_entry_which_keeps_answering(agreeing_platform):
    platform = agreeing_platform
    client = platform["client"]
    update_cache_policy(platform["team"].pk, audit_rate=1.0)
    assert ask(client, ORIGINAL)[1] == "miss"
    hit_until_audited(platform, "agreed")
    cache = redis.Redis.from_url(platform["redis_url"], decode_responses=True)
    [confirmed] = cache.keys(semantic.CONFIRMED_PREFIX + "*")
    assert int(cache.get(confirmed) or 0) >= 1
    assert not cache.keys(semantic.REPORTED_PREFIX + "*")
    assert ask(client, PARAPHRASE, extra_headers=NO_STORE)[1] == "hit-semantic"
    # a random draw of the team's hits: counted in the hit's evidence cell too, once
    assert team_cells(platform) == {"same-order 0.95|audited": "1"}


def team_cells(platform: dict[str, Any]) -> dict[str, str]:
    cache = redis.Redis.from_url(platform["redis_url"], decode_responses=True)
    return {str(k): str(v) for k, v in cache.hgetall(cell_audits.key(platform["team"].pk)).items()}


def turned_down_then_audited(platform: dict[str, Any], outcome: str) -> None:
    """Under a 0.5% bound, the paraphrase's candidate (the original, "same-order 0.95":
    0.7% in the table) is turned down: a miss, whose fresh reply audits the candidate."""
    client, team = platform["client"], platform["team"].pk
    update_cache_policy(team, max_false_hit_rate=0.005)
    assert ask(client, ORIGINAL)[1] == "miss"
    wait_until(  # the policy reaches the gateway within 2 s (a hit before then is not audited)
        lambda: ask(client, PARAPHRASE, extra_headers=NO_STORE)[1] == "miss",
        5,
        "the 0.5% bound to reach the gateway",
    )
    update_cache_policy(team, audit_rate=1.0)

    def audited() -> bool:
        assert ask(client, PARAPHRASE, extra_headers=NO_STORE)[1] == "miss"
        return audits(platform, f"turned_down_{outcome}") >= 1

    wait_until(audited, 10, f"an audit of a candidate turned down that {outcome}", poll_s=0.2)


@pytest.mark.live
@pytest.mark.django_db(transaction=True)
def test_a_candidate_the_bound_turned_down_is_audited_by_the_fresh_reply_in_the_teams_cell(
    agreeing_platform,
):
    turned_down_then_audited(agreeing_platform, "agreed")
    assert team_cells(agreeing_platform) == {"same-order 0.95|audited": "1"}
    cache = redis.Redis.from_url(agreeing_platform["redis_url"], decode_responses=True)
    assert not cache.keys(semantic.CONFIRMED_PREFIX + "*")  # the entry gave no hit
    assert audits(agreeing_platform, "agreed") == 0  # no model time: the miss's reply


@pytest.mark.live
@pytest.mark.django_db(transaction=True)
def test_a_turned_down_candidate_whose_reply_differs_counts_against_the_cell_not_the_entry(
    platform,
):
    turned_down_then_audited(platform, "disagreed")
    assert team_cells(platform) == {"same-order 0.95|audited": "1", "same-order 0.95|false": "1"}
    cache = redis.Redis.from_url(platform["redis_url"], decode_responses=True)
    assert not cache.keys(semantic.REPORTED_PREFIX + "*")


@pytest.mark.live
@pytest.mark.django_db(transaction=True)
def test_without_audits_no_candidate_turned_down_is_compared(platform):
    client, team = platform["client"], platform["team"].pk
    update_cache_policy(team, max_false_hit_rate=0.005)
    assert ask(client, ORIGINAL)[1] == "miss"
    wait_until(
        lambda: ask(client, PARAPHRASE, extra_headers=NO_STORE)[1] == "miss",
        5,
        "the 0.5% bound to reach the gateway",
    )
    assert ask(client, PARAPHRASE, extra_headers=NO_STORE)[1] == "miss"
    time.sleep(0.5)  # a comparison would run in the background after the reply
    assert not [line for line in metric_lines(platform) if "turned_down" in line]
    assert team_cells(platform) == {}


def reasks(platform: dict[str, Any], outcome: str) -> float:
    return metric_lines(platform).get(f'{REASKS}{{outcome="{outcome}"}}', 0)


def hit_then_reask(platform: dict[str, Any], outcome: str) -> None:
    """The original kept, its paraphrase answered by it, then the paraphrase asked again
    with the caches bypassed: fresh, and compared in the background."""
    client = platform["client"]
    assert ask(client, ORIGINAL)[1] == "miss"
    assert ask(client, PARAPHRASE, extra_headers=NO_STORE)[1] == "hit-semantic"
    assert ask(client, PARAPHRASE, extra_headers=BYPASS)[1] == "bypass"
    wait_until(lambda: reasks(platform, outcome) >= 1, 10, f"a re-ask that {outcome}")


@pytest.mark.live
@pytest.mark.django_db(transaction=True)
def test_a_reask_bypassing_the_caches_whose_reply_differs_takes_the_entry_out_of_service(
    platform,
):
    """The simulator answers each wording with its own words: the fresh reply to the
    paraphrase differs from the original's, which had answered it."""
    client = platform["client"]
    hit_then_reask(platform, "disagreed")
    assert ask(client, "what is the capital of france?", extra_headers=NO_STORE)[1] == "miss"
    # The note of the hit was taken: asking again compares nothing a second time.
    assert ask(client, PARAPHRASE, extra_headers=BYPASS)[1] == "bypass"
    assert ask(client, ORIGINAL, extra_headers=NO_STORE)[1] == "hit-exact"
    assert reasks(platform, "disagreed") == 1
    assert audits(platform, "disagreed") == 0  # no audit ran: the team's own re-ask taught it
    lines = metric_lines(platform)
    assert lines['sluice_cache_semantic_rejections_total{reason="audit"}'] >= 1
    assert lines.get('sluice_cache_semantic_audit_tokens_total{model="small-model"}', 0) == 0


@pytest.mark.live
@pytest.mark.django_db(transaction=True)
def test_a_reask_whose_reply_agrees_is_counted_on_the_entry(agreeing_platform):
    platform = agreeing_platform
    hit_then_reask(platform, "agreed")
    cache = redis.Redis.from_url(platform["redis_url"], decode_responses=True)
    [confirmed] = cache.keys(semantic.CONFIRMED_PREFIX + "*")
    assert int(cache.get(confirmed) or 0) == 1
    assert not cache.keys(semantic.REPORTED_PREFIX + "*")
    client = platform["client"]
    # Hit and re-asked again: the same request agreeing again is not counted again.
    assert ask(client, PARAPHRASE, extra_headers=NO_STORE)[1] == "hit-semantic"
    assert ask(client, PARAPHRASE, extra_headers=BYPASS)[1] == "bypass"
    wait_until(lambda: reasks(platform, "repeated") >= 1, 10, "a repeated re-ask")
    assert int(cache.get(confirmed) or 0) == 1
    assert reasks(platform, "agreed") == 1


@pytest.mark.live
@pytest.mark.django_db(transaction=True)
def test_a_request_bypassing_the_caches_without_an_earlier_hit_compares_nothing(platform):
    client = platform["client"]
    assert ask(client, ORIGINAL, extra_headers=BYPASS)[1] == "bypass"
    assert ask(client, ORIGINAL)[1] == "miss"  # kept this time
    assert ask(client, ORIGINAL, extra_headers=NO_STORE)[1] == "hit-exact"
    assert ask(client, ORIGINAL, extra_headers=BYPASS)[1] == "bypass"  # an exact hit's re-ask
    assert ask(client, PARAPHRASE, extra_headers=NO_STORE)[1] == "hit-semantic"
    assert all(reasks(platform, outcome) == 0 for outcome in ("agreed", "disagreed", "failed"))


@pytest.mark.live
@pytest.mark.django_db(transaction=True)
def test_only_a_deterministic_semantic_hit_leaves_a_note_for_its_reask(platform):
    """A sampled reply differs from any fresh draw: comparing one would teach nothing."""
    client, team = platform["client"], platform["team"].pk
    update_cache_policy(team, cache_sampled=True)
    wait_until(  # the policy reaches the gateway within 2 s; then the reply is kept
        lambda: ask(client, "How do I reset my password?", temperature=0.7)[1] == "miss",
        10,
        "a sampled reply kept",
    )
    hit = ask(client, "how do i reset my password", extra_headers=NO_STORE, temperature=0.7)
    assert hit[1] == "hit-semantic"
    assert ask(client, ORIGINAL)[1] == "miss"
    assert ask(client, PARAPHRASE, extra_headers=NO_STORE)[1] == "hit-semantic"
    cache = redis.Redis.from_url(platform["redis_url"], decode_responses=True)
    # The sampled hit's commands went first on the same connection: once the
    # deterministic hit's note is there, a note of the sampled one would be too.
    wait_until(lambda: cache.keys(responses.REASK_PREFIX + "*"), 10, "the hit's note")
    assert len(cache.keys(responses.REASK_PREFIX + "*")) == 1


@pytest.mark.unit
def test_agreements_lower_an_entrys_false_hit_probability():
    question, candidate = "How do I reset my password?", "how do i reset my password"
    alone = false_hit_probability(question, candidate, 0.98)
    assert false_hit_probability(question, candidate, 0.98, PRIOR_WEIGHT) == alone / 2
    # at most halved: agreements on some questions say little about every other one
    assert false_hit_probability(question, candidate, 0.98, 10 * PRIOR_WEIGHT) == alone / 2
    assert false_hit_probability(question, candidate, 0.5, 100) == 1.0  # below the floor


@pytest.mark.unit
def test_replies_agree_when_equal_or_alike_and_not_when_they_differ():
    import asyncio

    async def verdicts() -> list[bool]:
        return [
            await replies_agree("Paris.", " Paris. "),
            await replies_agree("The capital of France is Paris.", "Paris is France's capital."),
            await replies_agree("The capital of France is Paris.", "Take two tablets a day."),
            await replies_agree("Paris.", ""),
            await replies_agree(
                "No, you should not take ibuprofen while pregnant.",
                "Yes, you can take ibuprofen while pregnant.",
            ),  # embeddings at 0.94; verification sees the negation
        ]

    assert asyncio.run(verdicts()) == [True, True, False, False, False]
