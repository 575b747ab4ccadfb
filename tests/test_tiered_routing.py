"""Tiered routing (model "auto"): the classifier's rules, its accuracy on the labelled
prompts, resolving "auto" to a deployment, and the whole path through a live gateway."""

from io import StringIO
from typing import Any

import openai
import pytest
from asgiref.sync import async_to_sync
from django.core.management import call_command

from bench.management.commands.tier_accuracy import evaluate, load_prompts
from gateway.accounts import actions
from gateway.api.views import model_list
from gateway.serving.admission import Caller, Target, choose_target
from gateway.serving.errors import DOMAIN_ERRORS, api_error
from gateway.usage.ledger import ingest
from gateway.usage.models import UsageRecord
from inference import fleet
from inference.chat_request import ChatRequest, parse_chat_request
from inference.deployments import BUILTIN_EMBEDDING_MODEL, catalog
from scaling.routing.tiers import Tier, TierDecision, choose_deployment, classify
from tests.conftest import MESSAGES
from tests.waiting import wait_until

EASY = "What is the capital of France?"
HARD = (
    "Write a Python function that parses ISO 8601 durations like P3DT4H12M and returns "
    "the total seconds, with unit tests."
)


def user(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


SMALL_CASES = [
    EASY,
    "How do I reset my password?",
    "Translate 'good night' into German.",
    "Rewrite this more politely: give me the file.",
    "What is 12% of 250?",
    "thanks!",
    "Summarize in one sentence: the meeting moved to Friday because the room was booked.",
    "What does the HTTP status code 503 mean?",
]
LARGE_CASES = [
    HARD,
    "Why does this fail?\n```python\nd = {}\nd['a'] += 1\n```",
    "Prove that there are infinitely many primes.",
    "Explain step by step how a B-tree insertion splits nodes.",
    "Compare Kafka and RabbitMQ for an event-sourcing system and recommend one.",
    "Design a multi-region architecture for a payments API.",
    "Write a 2,000-word essay on the history of cryptography.",
    'Traceback (most recent call last):\n  File "app.py", line 3, in <module>\n'
    "    main()\nKeyError: 'user'\nwhat is wrong?",
]


@pytest.mark.unit
@pytest.mark.parametrize("text", SMALL_CASES)
def test_simple_requests_go_to_the_small_tier(text):
    assert classify(user(text)).tier == "small"


@pytest.mark.unit
@pytest.mark.parametrize("text", LARGE_CASES)
def test_hard_requests_go_to_the_large_tier(text):
    assert classify(user(text)).tier == "large"


@pytest.mark.unit
def test_request_shape_counts_too_long_conversations_output_budgets_and_json():
    assert classify(user("Hi"), max_tokens=4096).tier == "large"
    assert "large max_tokens" in classify(user("Hi"), max_tokens=4096).reason
    long_chat = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": "and then?"} for i in range(10)
    ]
    assert classify(long_chat).tier == "large"
    assert "long task +1" in classify(user("Please look at this. " * 40)).signals
    json_ask = classify(user("Explain the reply format."), response_format={"type": "json_object"})
    assert json_ask.tier == "large" and json_ask.signals == (
        "asks for an explanation +1",
        "structured output +1",
    )


@pytest.mark.unit
def test_the_last_user_message_is_the_task_and_content_parts_are_read():
    system = {"role": "system", "content": "Prove everything you say, step by step."}
    assert classify([system, *user(EASY)]).tier == "small"  # the system prompt is not the task
    parts = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Prove that "},
                {"type": "text", "text": "sqrt(2) is irrational."},
            ],
        }
    ]
    assert classify(parts).tier == "large"
    pasted = "Our log: " + "GET /health 200 OK. " * 5000 + "Explain step by step why it fails."
    assert "step-by-step reasoning +2" in classify(user(pasted)).signals  # the tail is read too


@pytest.mark.unit
def test_decisions_explain_themselves_and_do_not_change():
    decision = classify(user(LARGE_CASES[1]))
    assert decision.reason.startswith(f"score {decision.score:g}: code block")
    assert decision.reason.isascii() and "\n" not in decision.reason
    assert classify(user(EASY)).reason == "score 0: no hard-task signal"
    assert all(classify(user(LARGE_CASES[1])) == decision for _ in range(100))


@pytest.mark.unit
def test_accuracy_on_the_labelled_prompts_stays_above_its_floor():
    rows = load_prompts()
    assert len(rows) >= 200 and {r.label for r in rows} == {"small", "large"}
    assert len({r.prompt for r in rows}) == len(rows)
    overall = evaluate(rows)
    holdout = evaluate(r for r in rows if r.set == "holdout")
    # Measured 95.5% overall and 90.6% on the holdout rows (docs/routing.md).
    assert overall.accuracy >= 0.93, overall.errors
    assert holdout.accuracy >= 0.86, holdout.errors
    assert overall.recall("small") >= 0.95 and overall.recall("large") >= 0.87


@pytest.mark.unit
def test_the_accuracy_command_prints_the_figures():
    out = StringIO()
    call_command("tier_accuracy", stdout=out)
    text = out.getvalue()
    assert "all: 243 prompts, accuracy" in text and "holdout:" in text
    assert "large: precision" in text and "us per request" in text


def decision(tier: Tier) -> TierDecision:
    return TierDecision(tier, "score 0: no hard-task signal", 0)


@pytest.mark.unit
def test_a_tier_s_first_deployment_by_name_serves_it_and_the_other_tier_is_the_fallback():
    both = [("zeta", "small"), ("alpha", "small"), ("big", "large"), ("nightly", "batch")]
    route = choose_deployment(decision("small"), both)
    assert route is not None and (route.deployment, route.tier, route.fallback) == (
        "alpha",
        "small",
        False,
    )
    assert route.headers() == {
        "x-sluice-tier": "small (score 0: no hard-task signal)",
        "x-sluice-routed-model": "alpha",
    }
    fallback = choose_deployment(decision("large"), [("alpha", "small"), ("nightly", "batch")])
    assert fallback is not None and (fallback.deployment, fallback.fallback) == ("alpha", True)
    assert fallback.headers()["x-sluice-tier"].startswith(
        "small (fallback: no large deployment available; score 0"
    )
    assert choose_deployment(decision("small"), [("nightly", "batch")]) is None


def prepare(caller: Caller, raw: bytes) -> tuple[ChatRequest, Target]:
    """The pipeline's parse and deployment choice, as the adapters call them."""
    chat = parse_chat_request(raw)
    return chat, async_to_sync(choose_target)(caller, chat)


def body(text: str, model: str = "auto") -> bytes:
    return f'{{"model": "{model}", "messages": [{{"role": "user", "content": "{text}"}}]}}'.encode()


@pytest.fixture
def team(redis_url):
    return actions.create_team("Acme", requests_per_minute=100, tokens_per_minute=100_000)


@pytest.mark.unit
@pytest.mark.django_db
def test_auto_resolves_to_the_decided_tier_and_keeps_the_request_unchanged(team):
    fleet.ensure_deployment("small-a", tier="small")
    fleet.ensure_deployment("large-a", tier="large")
    chat, target = prepare(Caller(team.pk), body(EASY))
    deployment = target.deployment
    assert (chat.model, deployment.name, deployment.tier) == ("auto", "small-a", "small")
    _, target = prepare(Caller(team.pk), body("Prove that 17 is prime."))
    assert target.headers()["x-sluice-routed-model"] == "large-a"
    _, named = prepare(Caller(team.pk), body(EASY, "large-a"))
    assert named.tier_route is None and named.headers() == {}


@pytest.mark.unit
@pytest.mark.django_db
def test_auto_only_reaches_allowed_models_and_falls_back_within_them(team):
    fleet.ensure_deployment("small-a", tier="small")
    fleet.ensure_deployment("large-a", tier="large")
    small_only = Caller(team.pk, allowed_models=("small-a",))
    _, target = prepare(small_only, body("Prove that 17 is prime."))
    assert target.deployment.name == "small-a" and target.tier_route is not None
    assert target.tier_route.fallback and target.tier_route.decision.tier == "large"
    with pytest.raises(DOMAIN_ERRORS) as refused:
        prepare(Caller(team.pk, allowed_models=("auto",)), body(EASY))
    error = api_error(refused.value)
    assert (error.status, error.code) == (403, "model_not_allowed")


def chat_models(listed: list[dict[str, object]]) -> list[object]:
    """/v1/models less the built-in embedding model (listed wherever its weights are)."""
    return [m["id"] for m in listed if m["id"] != BUILTIN_EMBEDDING_MODEL]


@pytest.mark.unit
@pytest.mark.django_db
def test_auto_is_unknown_without_small_or_large_deployments(team):
    fleet.ensure_deployment("nightly", tier="batch")
    with pytest.raises(DOMAIN_ERRORS) as missing:
        prepare(Caller(team.pk), body(EASY))
    error = api_error(missing.value)
    assert (error.status, error.code) == (404, "model_not_found")
    assert chat_models(model_list(async_to_sync(catalog.all)())) == ["nightly"]


@pytest.mark.unit
@pytest.mark.django_db
def test_a_deployment_named_auto_is_served_as_itself_and_listed_once(team):
    fleet.ensure_deployment("auto", tier="small")
    fleet.ensure_deployment("large-a", tier="large")
    _, target = prepare(Caller(team.pk), body("Prove that 17 is prime."))
    assert target.deployment.name == "auto" and target.tier_route is None
    assert chat_models(model_list(async_to_sync(catalog.all)())) == ["auto", "large-a"]


@pytest.fixture
def tiered_platform(redis_url):
    """A live gateway with `tier-small` and `tier-large`, each on its own simulator."""
    from tests.live import LiveGateway
    from tests.sims import SimProcess

    sims = {tier: SimProcess(model=f"sim-{tier}") for tier in ("small", "large")}
    gateway = None
    try:
        team = actions.create_team("Acme", requests_per_minute=100, tokens_per_minute=100_000)
        for tier, sim in sims.items():
            deployment = fleet.ensure_deployment(
                f"tier-{tier}", served_model_name=f"sim-{tier}", tier=tier
            )
            fleet.register_worker(deployment, sim.url, registered_by="test")
        gateway = LiveGateway(redis_url)
        client = openai.OpenAI(
            base_url=f"{gateway.url}/v1",
            max_retries=0,
            api_key=actions.issue_api_key(team).plaintext,
        )
        for tier in sims:
            _wait_until_served(client, f"tier-{tier}")
        yield {"client": client, "sims": sims}
    finally:
        if gateway is not None:
            gateway.stop()
        for sim in sims.values():
            sim.stop()


def _wait_until_served(client: openai.OpenAI, model: str) -> None:
    wait_until(
        lambda: client.chat.completions.create(model=model, messages=MESSAGES, max_tokens=1),
        10,
        f"the gateway to serve {model} (the scraper publishes its worker)",
        ignoring=(openai.InternalServerError,),
        poll_s=0.2,
    )


@pytest.mark.live
@pytest.mark.django_db(transaction=True)
def test_auto_through_the_live_gateway_reaches_the_right_simulator(tiered_platform):
    client, sims = tiered_platform["client"], tiered_platform["sims"]
    assert "auto" in {m.id for m in client.models.list()}
    replies = {}
    for tier, prompt in (("small", EASY), ("large", HARD)):
        before = {t: sim.metric("vllm:request_success_total") for t, sim in sims.items()}
        raw = client.chat.completions.with_raw_response.create(
            model="auto", messages=[{"role": "user", "content": prompt}], max_tokens=8
        )
        reply = raw.parse()
        assert reply.model == f"tier-{tier}" and reply.choices[0].message.content
        assert raw.headers["x-sluice-routed-model"] == f"tier-{tier}"
        assert raw.headers["x-sluice-tier"].startswith(f"{tier} (score ")
        after = {t: sim.metric("vllm:request_success_total") for t, sim in sims.items()}
        other = "large" if tier == "small" else "small"
        assert (after[tier] - before[tier], after[other] - before[other]) == (1, 0)
        replies[tier] = reply

    streamed = client.chat.completions.with_raw_response.create(
        model="auto", messages=[{"role": "user", "content": HARD}], max_tokens=4, stream=True
    )
    assert streamed.headers["x-sluice-routed-model"] == "tier-large"
    assert all(chunk.model == "tier-large" for chunk in streamed.parse())

    def recorded() -> bool:  # settlement finishes just after the last chunk
        ingest("test-consumer")
        ids = [reply.id for reply in replies.values()]
        return UsageRecord.objects.filter(request_id__in=ids).count() == len(ids)

    wait_until(recorded, 5, "both replies' usage records")
    for tier, reply in replies.items():
        record = UsageRecord.objects.get(request_id=reply.id)
        assert (record.model, record.status) == (f"tier-{tier}", "ok")
        assert record.worker == sims[tier].url
