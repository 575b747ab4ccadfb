"""Prompt tokens counted at admission in the model's own tokens: equal to what the real
embedded vLLM worker counts (its /tokenize, what usage.prompt_tokens reports) for every
kind of content; and a prompt whose real count does not fit the context window is refused
before any worker sees it, although the old bytes / 3 estimate would have let it through."""

import asyncio
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import openai
import pytest

from bench.prompt_corpus import CJK, CORPUS
from bench.prompt_tokens import compare, corpus_requests, embedded_counter, start_embedded_worker
from gateway.accounts import actions
from inference import fleet
from inference.prompt_tokens import ESTIMATED, PromptCounters
from inference.worker_command import EMBEDDED_MODEL
from tests.live import LiveGateway
from tests.sims import SimProcess
from tests.waiting import wait_until

SERVED = "vllm:prompt_tokens_total"


@pytest.fixture(scope="module")
def embedded_worker() -> Iterator[str]:
    process, url = start_embedded_worker()
    try:
        yield url
    finally:
        process.terminate()
        process.wait(timeout=30)


@pytest.mark.live
def test_counts_equal_the_workers_own_for_every_kind_of_content(embedded_worker):
    rows = asyncio.run(compare(embedded_worker, embedded_counter()))
    assert [row.name for row in rows] == list(CORPUS)
    for row in rows:
        assert row.counted == row.worker, row
    # The estimate it replaces was off by more than a third on some (CJK under, tools over).
    assert any(abs(row.estimated - row.worker) > row.worker / 3 for row in rows)


@pytest.mark.unit
def test_a_model_without_a_folder_here_is_estimated(settings, tmp_path):
    settings.TOKENIZER_DIR = tmp_path
    counters = PromptCounters()
    assert asyncio.run(counters.for_model("remote-model")) is ESTIMATED
    assert asyncio.run(counters.for_model("../etc")) is ESTIMATED  # never outside the folder


@pytest.mark.unit
def test_image_parts_are_left_to_the_estimate():
    counter = embedded_counter()
    chat = corpus_requests()["content parts"]
    image = {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}
    with_image = replace(chat, messages=[{"role": "user", "content": [image]}])
    assert counter.count(with_image) == with_image.estimated_prompt_tokens()


@pytest.fixture
def tiny_window(redis_url: str) -> Iterator[dict[str, Any]]:
    """A gateway whose deployment `tiny` serves the embedded model's name from a simulator,
    with a 200-token window: prompts are counted with the embedded model's tokenizer."""
    sim = SimProcess(model=EMBEDDED_MODEL)
    gateway = None
    try:
        team = actions.create_team("Acme", requests_per_minute=100, tokens_per_minute=100_000)
        deployment = fleet.ensure_deployment("tiny", served_model_name=EMBEDDED_MODEL)
        deployment.context_length = 200
        deployment.save()
        fleet.register_worker(deployment, sim.url, registered_by="test")
        gateway = LiveGateway(redis_url)
        key = actions.issue_api_key(team).plaintext
        client = openai.OpenAI(base_url=f"{gateway.url}/v1", api_key=key, max_retries=0)
        yield {"client": client, "sim": sim}
    finally:
        if gateway is not None:
            gateway.stop()
        sim.stop()


@pytest.mark.live
@pytest.mark.django_db(transaction=True)
def test_a_prompt_over_the_window_in_real_tokens_is_refused_before_the_worker(tiny_window):
    client, sim = tiny_window["client"], tiny_window["sim"]
    messages = [{"role": "user", "content": CJK * 3}]  # 252 real tokens, estimated 148
    chat = corpus_requests()["cjk"]
    assert chat.estimated_prompt_tokens() + 8 < 200 < embedded_counter().count(chat)

    def served_short() -> bool:
        client.chat.completions.create(
            model="tiny", messages=[{"role": "user", "content": "hi"}], max_tokens=2
        )
        return True

    wait_until(served_short, 15, "the gateway to serve tiny", ignoring=(openai.APIError,))
    served = sim.metric(SERVED)
    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(model="tiny", messages=messages, max_tokens=8)
    assert refused.value.code == "context_length_exceeded"
    assert "(252 in the messages, 8 in the completion)" in refused.value.message
    assert sim.metric(SERVED) == served  # the worker never saw it
