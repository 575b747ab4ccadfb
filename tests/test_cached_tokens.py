"""usage.prompt_tokens_details.cached_tokens, as OpenAI reports it: the prompt tokens the
worker read from its prefix cache (vLLM with --enable-prompt-tokens-details; the simulator
models the same cache), and a reply from Sluice's own cache reports its whole prompt."""

from decimal import Decimal
from typing import Any

import pytest

from gateway.usage.ledger import ingest
from gateway.usage.models import UsageRecord
from inference.deployments import DeploymentInfo
from inference.models import ModelDeployment
from tests.waiting import wait_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.live]

LONG = " ".join(f"word{i}" for i in range(400))  # many KV blocks of the simulator's cache


def ask(platform: dict[str, Any], text: str, **options: Any) -> Any:
    return platform["client"].chat.completions.with_raw_response.create(
        model="small-model",
        messages=[{"role": "system", "content": LONG}, {"role": "user", "content": text}],
        max_tokens=4,
        **options,
    )


def test_a_repeated_prefix_is_reported_as_cached_tokens(platform):
    first = ask(platform, "First question?", temperature=0.9).parse()
    second = ask(platform, "Another question?", temperature=0.9).parse()
    assert first.usage.prompt_tokens_details.cached_tokens == 0
    cached = second.usage.prompt_tokens_details.cached_tokens
    assert 0 < cached < second.usage.prompt_tokens  # the shared system prompt, not the rest


def test_a_stream_reports_cached_tokens_in_its_usage_chunk(platform):
    ask(platform, "Warm the prefix.", temperature=0.9)
    stream = platform["client"].chat.completions.create(
        model="small-model",
        messages=[{"role": "system", "content": LONG}, {"role": "user", "content": "Again?"}],
        max_tokens=4,
        temperature=0.9,
        stream=True,
        stream_options={"include_usage": True},
    )
    usage = [chunk.usage for chunk in stream if chunk.usage is not None]
    assert len(usage) == 1
    assert 0 < usage[0].prompt_tokens_details.cached_tokens < usage[0].prompt_tokens


def test_a_reply_from_the_gateways_cache_reports_its_whole_prompt_cached(platform):
    ask(platform, "What is 2 + 2?", temperature=0)
    replayed = ask(platform, "What is 2 + 2?", temperature=0)
    assert replayed.headers["x-sluice-cache"] == "hit-exact"
    usage = replayed.parse().usage
    assert usage.prompt_tokens_details.cached_tokens == usage.prompt_tokens > 0


def test_cached_prompt_tokens_are_priced_at_the_cached_input_price():
    priced = DeploymentInfo("m", Decimal(10), Decimal(20), 0)
    assert priced.cost_micros(1_000, 100, cached_prompt_tokens=600) == 1_000 * 10 + 100 * 20
    cheaper = DeploymentInfo(
        "m", Decimal(10), Decimal(20), 0, price_cached_input_per_million=Decimal(1)
    )
    assert cheaper.cost_micros(1_000, 100, cached_prompt_tokens=600) == 400 * 10 + 600 + 2_000
    assert cheaper.cost_micros(1_000, 0, batch=True, cached_prompt_tokens=600) == 2_300  # 50%
    assert cheaper.cost_micros(10, 0, cached_prompt_tokens=99) == 10  # never above the prompt


def test_the_ledger_bills_a_prefix_cache_hit_at_the_cached_input_price(platform):
    ModelDeployment.objects.filter(name="small-model").update(
        price_input_per_million=Decimal(10),
        price_output_per_million=Decimal(20),
        price_cached_input_per_million=Decimal(1),
    )
    ask(platform, "Warm the prefix.", temperature=0.9)

    def billed_as_priced() -> bool:
        """A request billed at the new prices (the gateway reads them within seconds):
        its uncached prompt at 10, its cached prompt at 1, its completion at 20 per M."""
        reply = ask(platform, "Priced question?", temperature=0.9).parse()
        cached = reply.usage.prompt_tokens_details.cached_tokens
        assert cached > 0
        prompt, completion = reply.usage.prompt_tokens, reply.usage.completion_tokens
        expected = (prompt - cached) * 10 + cached * 1 + completion * 20

        def recorded() -> UsageRecord | None:
            ingest("test-consumer")
            return UsageRecord.objects.filter(request_id=reply.id).first()

        record = wait_until(recorded, 5, "the usage record")
        assert record is not None
        return bool(record.cost_micros == expected)

    wait_until(billed_as_priced, 15, "a request billed at the cached-input price", poll_s=0.5)
