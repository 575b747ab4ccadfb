"""The semantic cache through a live gateway (real MiniLM, real Redis 8 vector sets), with
the official openai client."""

import asyncio
import time
from typing import Any

import openai
import pytest
import redis.asyncio as aioredis
from rest_framework.test import APIClient

from caching.actions import update_cache_policy
from gateway.accounts import actions
from gateway.usage.ledger import ingest
from gateway.usage.models import UsageRecord
from tests.staff import EVERY_TEAM_ACTION, staff_user
from tests.test_exact_cache import generations, metric_lines, report
from tests.waiting import wait_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.live]
SYSTEM = {"role": "system", "content": "Answer briefly."}
NO_STORE = {"Cache-Control": "no-store"}


def ask(
    client: openai.OpenAI, question: str, context: list[Any] | None = None, **options: Any
) -> tuple[str, str, str]:
    """The reply text, the x-sluice-cache header and the request id."""
    messages = [*(context or [SYSTEM]), {"role": "user", "content": question}]
    options = {"temperature": 0, "max_tokens": 5, **options}
    raw = client.chat.completions.with_raw_response.create(
        model="small-model", messages=messages, **options
    )
    reply = raw.parse()
    return reply.choices[0].message.content or "", raw.headers["x-sluice-cache"], reply.id


@pytest.mark.parametrize(
    ("original", "paraphrase"),
    [
        ("What is the capital of France?", "What's the capital of France?"),
        ("How do I reset my password?", "how do i reset my password"),
        ("Convert 5 kilometres to miles", "Convert five kilometres to miles"),
    ],
    ids=["contraction", "casing-and-punctuation", "number-as-word"],
)
def test_a_paraphrase_is_answered_from_the_semantic_cache(platform, original, paraphrase):
    client = platform["client"]
    first, state, _ = ask(client, original)
    assert state == "miss"
    before = generations(platform)
    second, state, _ = ask(client, paraphrase)
    assert state == "hit-semantic"
    assert second == first
    assert generations(platform) == before  # no GPU work for the hit

    def the_hit() -> UsageRecord | None:  # billed as (or just after) the reply went out
        ingest("test-consumer")
        return UsageRecord.objects.filter(cache_result="hit-semantic").first()

    hit = wait_until(the_hit, 5, "the hit's usage record")
    assert hit is not None
    assert (hit.prompt_tokens, hit.completion_tokens, hit.cost_micros) == (0, 0, 0)


# Each pair scores at least 0.92 cosine on MiniLM: only verification keeps them apart.
# "anchors": they differ in a negation or a date, which verification requires to be equal,
# so each lives in its own vector set (caching/semantic_keys.py, partition()) and the
# other is never even a candidate.
@pytest.mark.parametrize(
    ("original", "near_miss", "reason"),
    [
        ("Cancel my subscription", "Don't cancel my subscription", "anchors"),
        ("Is it safe to eat raw eggs?", "Is it not safe to eat raw eggs?", "anchors"),
        ("Convert 5 kilometres to miles", "Convert 5 miles to kilometres", "numbers"),
        ("Book a flight from Paris to London", "Book a flight from London to Paris", "roles"),
        (
            "What was the weather in Paris yesterday?",
            "What was the weather in Paris today?",
            "anchors",
        ),
        (
            "Summarise the meeting notes from Monday",
            "Summarise the meeting notes from Tuesday",
            "anchors",
        ),
    ],
    ids=["negation", "inserted-not", "swapped-units", "swapped-cities", "relative-date", "weekday"],
)
def test_a_near_miss_goes_to_the_model(platform, original, near_miss, reason):
    client = platform["client"]
    ask(client, original)
    before = generations(platform)
    assert ask(client, near_miss)[1] == "miss"
    assert generations(platform) == before + 1
    rejections = {
        name: count
        for name, count in metric_lines(platform).items()
        if name.startswith("sluice_cache_semantic_rejections_total")
    }
    if reason == "anchors":
        assert not any(rejections.values())
    else:  # found above the threshold, and verification turned it down for this reason
        assert rejections[f'sluice_cache_semantic_rejections_total{{reason="{reason}"}}'] == 1


def test_a_follow_up_never_gets_the_answer_from_another_conversation(platform):
    client = platform["client"]
    france = [
        SYSTEM,
        {"role": "user", "content": "Tell me about France."},
        {"role": "assistant", "content": "France is a country in Europe."},
    ]
    spain = [
        SYSTEM,
        {"role": "user", "content": "Tell me about Spain."},
        {"role": "assistant", "content": "Spain is a country in Europe."},
    ]
    ask(client, "What is its population?", france)
    assert ask(client, "What's its population?", france)[1] == "hit-semantic"
    assert ask(client, "What's its population?", spain)[1] == "miss"
    edited = [{"role": "system", "content": "Answer in French."}]
    assert ask(client, "What's its population?", edited)[1] == "miss"
    assert ask(client, "What's its population?", france, max_tokens=6)[1] == "miss"


def test_questions_that_only_start_alike_past_the_embedding_window_never_share_a_reply(
    platform,
):
    """Within the semantic cache's 3,000 characters but past the 1,016 tokens the embedder
    reads whole (dense CJK text): cut short, two questions that differ only at the end would
    embed identically, so both skip the semantic cache (counted)."""
    client = platform["client"]
    shared = "请根据下面的长篇背景资料回答最后的问题并详细说明理由" * 90  # 2,340 characters
    assert len(shared) < 3000
    assert ask(client, shared + "问题是什么颜色")[1] == "miss"
    assert ask(client, shared + "问题是哪一年")[1] == "miss"
    skipped = 'sluice_cache_semantic_skips_total{reason="too_long"}'
    # The second is counted when its reply's store probes it, settled after the reply.
    wait_until(lambda: metric_lines(platform).get(skipped) == 2, 5, "both questions counted")


def test_long_questions_are_cached_whole_and_one_sharing_their_opening_is_not_answered(
    platform,
):
    """Past MiniLM's 256-token window, a question is embedded window by window and pooled:
    it is cached (asked again, it is a semantic hit), and a question that shares its first
    window but asks something else is a miss."""
    client = platform["client"]
    background = (
        "Our team runs a small bakery in the old town. Every morning we bake bread, rolls "
        "and pastries, and in the afternoon we prepare cakes for orders placed online. "
    ) * 8  # about 330 tokens
    staffing = background + "How should we schedule the staff over the holiday weekend?"
    pricing = background + (
        "Which price should we charge for a three-tier wedding cake with fresh flowers, "
        "delivered far away, compared with our usual birthday cakes and cupcakes?"
    )
    assert ask(client, staffing)[1] == "miss"
    assert ask(client, pricing)[1] == "miss"
    assert ask(client, staffing + " ")[1] == "hit-semantic"  # another exact key, same question
    skipped = 'sluice_cache_semantic_skips_total{reason="too_long"}'
    assert metric_lines(platform).get(skipped, 0) == 0


def test_another_team_never_gets_a_semantic_hit(platform):
    ask(platform["client"], "What is the capital of France?")
    other = actions.issue_api_key(actions.create_team("Other")).plaintext
    client = openai.OpenAI(base_url=platform["client"].base_url, api_key=other, max_retries=0)
    assert ask(client, "What's the capital of France?")[1] == "miss"


def test_a_policy_change_reaches_the_gateway_within_two_seconds(platform):
    client = platform["client"]
    ask(client, "What is the capital of France?")
    update_cache_policy(platform["team"].pk, semantic_enabled=False)
    changed_at = time.monotonic()
    state = "hit-semantic"
    while state == "hit-semantic" and time.monotonic() - changed_at < 5:
        # no-store: a probe that misses must not become the next probe's exact hit
        state = ask(client, "whats the capital of france", extra_headers=NO_STORE)[1]
    assert state == "miss"
    assert time.monotonic() - changed_at < 2

    update_cache_policy(platform["team"].pk, semantic_enabled=True, similarity_threshold=0.999)
    # The gateway has the new policy once a probe differing only in case hits semantically
    # again (MiniLM is uncased: the similarity is 1.0, above even 0.999).
    wait_until(
        lambda: (
            ask(client, "what is the capital of france?", extra_headers=NO_STORE)[1]
            == "hit-semantic"
        ),
        5,
        "the gateway to apply the re-enabled semantic cache",
    )
    assert ask(client, "Tell me the capital of France?", extra_headers=NO_STORE)[1] == "miss"


def test_a_reported_semantic_hit_no_longer_answers_the_question_it_got_wrong(platform):
    client = platform["client"]
    ask(client, "How do I reset my password?")
    _, state, request_id = ask(client, "How can I reset my password?")
    assert state == "hit-semantic"
    assert report(platform, platform["key"], {"request_id": request_id})[0] == 200
    assert ask(client, "How can I reset my password?")[1] == "miss"


def test_a_reported_hit_from_the_entrys_own_question_removes_the_entry(platform):
    """Only spaces differ, so the exact key differs and the semantic entry of the very
    same question answers: reported wrong, it is wrong for its own question, and goes."""
    client = platform["client"]
    assert ask(client, "How do I reset my password?")[1] == "miss"
    _, state, request_id = ask(client, "How do I reset my password? ", extra_headers=NO_STORE)
    assert state == "hit-semantic"
    assert report(platform, platform["key"], {"request_id": request_id})[0] == 200
    assert ask(client, "How do I reset my password?  ", extra_headers=NO_STORE)[1] == "miss"


def test_a_team_reads_its_own_cache_counters(platform):
    client = platform["client"]
    ask(client, "What is the capital of France?")
    ask(client, "What is the capital of France?")
    ask(client, "What's the capital of France?")
    staff = staff_user("ops", *EVERY_TEAM_ACTION)
    api = APIClient()
    api.force_authenticate(staff)
    counters = api.get("/api/v1/teams/acme/cache/").json()["counters"]
    assert (counters["miss"], counters["hit-exact"], counters["hit-semantic"]) == (1, 1, 1)
    assert counters["tokens_saved"] > 0
    other = actions.create_team("Other")
    assert api.get(f"/api/v1/teams/{other.slug}/cache/").json()["counters"]["requests"] == 0


def test_a_tight_memory_budget_keeps_the_teams_caches_within_it(platform):
    from caching.eviction import usage

    client = platform["client"]
    # Room for a few small replies per cache: an exact entry is its reply and 512 bytes, a
    # semantic one also its probe's element (3,200 bytes for the first of its set, 1,000
    # for each other: these questions have no numbers, so they share one set).
    budget = 5000
    update_cache_policy(platform["team"].pk, memory_budget_bytes=budget)
    # Kept as a sleep: the gateway's copy of the policy ages out within a second, and until a
    # reply is evicted nothing observable says which budget it holds.
    time.sleep(1.5)
    questions = [
        "Name a primary colour.",
        "What is the boiling point of water?",
        "Who wrote Hamlet?",
        "What is the speed of light?",
        "How many legs does a spider have?",
        "Which planet is the largest?",
        "What is the chemical symbol for gold?",
        "Who painted the Mona Lisa?",
        "What is the tallest mountain on Earth?",
        "Which ocean is the deepest?",
    ]
    for question in questions:
        ask(client, question)

    async def read() -> list[Any]:
        cache_redis = aioredis.Redis.from_url(platform["redis_url"], decode_responses=True)
        try:
            return [
                await usage(cache_redis, f"{kind}:{platform['team'].pk}")
                for kind in ("exact", "semantic")
            ]
        finally:
            await cache_redis.aclose()

    for namespace in asyncio.run(read()):
        assert 0 < namespace.used_bytes <= budget
        assert namespace.entries < len(questions)  # some were evicted to stay within it
    assert ask(client, questions[-1])[1] == "hit-exact"  # the newest entry survived


def test_an_entry_reported_as_a_false_hit_never_answers_another_question(platform):
    """The entry is right for its own question, so it keeps answering that one word for
    word; every other question is refused it, however similar."""
    client = platform["client"]
    assert ask(client, "What is the capital of France?")[1] == "miss"
    _, state, request_id = ask(client, "What's the capital of France?", extra_headers=NO_STORE)
    assert state == "hit-semantic"

    status, body = report(platform, platform["key"], {"request_id": request_id})
    assert (status, body) == (200, {"request_id": request_id, "removed": True})

    for paraphrase in ("What's the capital of France?", "what is the capital of france?"):
        assert ask(client, paraphrase, extra_headers=NO_STORE)[1] == "miss"
    # its own question, another exact key (a trailing space), still answered by it
    assert ask(client, "What is the capital of France? ")[1] == "hit-semantic"
    rejected = 'sluice_cache_semantic_rejections_total{reason="reported"}'
    assert metric_lines(platform)[rejected] == 2


def test_with_an_error_bound_a_candidate_answers_only_when_its_evidence_meets_it(platform):
    """max_false_hit_rate replaces the threshold: a rewording that keeps every content
    word in order (cosine 0.96, under a 0.99 threshold) meets a 2% bound; one with a
    content word swapped (cosine 0.88: a question's one-swap cell, far over 2%) does not, counted
    as over_bound."""
    client, team = platform["client"], platform["team"].pk
    rewording = "How do I reset my password please?"
    update_cache_policy(team, similarity_threshold=0.99)
    assert ask(client, "How do I reset my password?")[1] == "miss"
    wait_until(
        lambda: ask(client, rewording, extra_headers=NO_STORE)[1] == "miss",
        5,
        "the 0.99 threshold to reach the gateway",
    )
    update_cache_policy(team, max_false_hit_rate=0.02)
    wait_until(
        lambda: ask(client, rewording, extra_headers=NO_STORE)[1] == "hit-semantic",
        5,
        "the 2% bound to reach the gateway",
    )
    assert ask(client, "How do I change my password?", extra_headers=NO_STORE)[1] == "miss"
    over = 'sluice_cache_semantic_rejections_total{reason="over_bound"}'
    assert metric_lines(platform)[over] == 1
