"""usage.prompt_tokens_details.cached_tokens, as OpenAI reports it: the prompt tokens the
worker read from its prefix cache (vLLM with --enable-prompt-tokens-details; the simulator
models the same cache), and a reply from Sluice's own cache reports its whole prompt."""

from typing import Any

import pytest

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
