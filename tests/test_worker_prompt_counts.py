"""Prompts of a model whose tokenizer is not on the gateway's host are counted at admission
by one of its workers (/tokenize), remembered per team, and estimated only when no worker
can count them (an OpenAI-compatible server, none routable), which the metric says."""

import asyncio
import http.client
import json
import logging
import re
from collections.abc import Iterator
from decimal import Decimal
from functools import partial
from typing import Any

import aiohttp
import openai
import pytest

from gateway.accounts import actions
from inference import fleet, worker_prompt_counts
from inference.chat_request import ChatRequest
from inference.client import close_http_session
from inference.deployments import DeploymentInfo, catalog
from inference.models import ModelDeployment
from inference.scraper import Scraper
from inference.sim.text import prompt_tokens
from inference.snapshot import WorkerView, fleet_view, worker_view
from inference.worker_prompt_counts import WorkerPromptCounts
from tests.live import LiveGateway
from tests.sims import SimProcess
from tests.waiting import wait_until

SERVED = "vllm:prompt_tokens_total"
COUNTED = re.compile(
    r'sluice_prompt_counted_total\{how="(?P<how>\w+)",model="(?P<model>[\w-]+)"\} (?P<value>\S+)'
)
# One-letter words: the simulator counts a token per word (about 250 here), the bytes / 3
# estimate about 180: it fits a 200-token window with 8 to spare, the real count does not.
LONG = " ".join("abcdefghij"[i % 10] for i in range(250))


def chat_of(text: str) -> ChatRequest:
    return ChatRequest("remote", [{"role": "user", "content": text}], 8, False, False, {})


def deployment_info(name: str = "remote") -> DeploymentInfo:
    return DeploymentInfo(name, Decimal(0), Decimal(0), 0)


def counted(gateway: LiveGateway, model: str) -> dict[str, float]:
    """sluice_prompt_counted_total of `model` from the gateway's /metrics, by `how`."""
    connection = http.client.HTTPConnection("127.0.0.1", gateway.port, timeout=5)
    connection.request("GET", "/metrics")
    text = connection.getresponse().read().decode()
    found = {}
    for line in text.splitlines():
        sample = COUNTED.fullmatch(line)
        if sample and sample["model"] == model:
            found[sample["how"]] = float(sample["value"])
    return found


@pytest.fixture
def remote(redis_url: str) -> Iterator[dict[str, Any]]:
    """`remote` served by a simulator under a name with no folder on this host (so it is
    counted by the worker), with a 200-token window; `hosted` an OpenAI-compatible
    deployment of the same simulator (no /tokenize is asked of it)."""
    sim, other = SimProcess(), SimProcess()
    gateway = None
    try:
        team = actions.create_team("Acme", requests_per_minute=1000, tokens_per_minute=10**6)
        deployment = fleet.ensure_deployment("remote", served_model_name="sim")
        deployment.context_length = 200
        deployment.save()
        fleet.register_worker(deployment, sim.url, registered_by="test")
        hosted = fleet.ensure_deployment("hosted", served_model_name="sim")
        hosted.worker_kind = ModelDeployment.WorkerKind.OPENAI
        hosted.context_length = 200
        hosted.save()
        fleet.register_worker(hosted, other.url, registered_by="test")
        gateway = LiveGateway(redis_url)
        key = actions.issue_api_key(team).plaintext
        client = openai.OpenAI(base_url=f"{gateway.url}/v1", api_key=key, max_retries=0)

        def served(model: str) -> bool:
            client.chat.completions.create(
                model=model, messages=[{"role": "user", "content": "hi"}], max_tokens=2
            )
            return True

        for model in ("remote", "hosted"):
            wait_until(partial(served, model), 15, f"{model} served", ignoring=(openai.APIError,))
        yield {"client": client, "sim": sim, "gateway": gateway}
    finally:
        if gateway is not None:
            gateway.stop()
        sim.stop()
        other.stop()


@pytest.mark.live
@pytest.mark.django_db(transaction=True)
def test_a_prompt_over_the_window_as_the_worker_counts_it_is_refused_before_it_queues(remote):
    client, sim = remote["client"], remote["sim"]
    assert chat_of(LONG).estimated_prompt_tokens() + 8 < 200
    served = sim.metric(SERVED)
    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(
            model="remote", messages=[{"role": "user", "content": LONG}], max_tokens=8
        )
    assert refused.value.code == "context_length_exceeded"
    assert "estimated" not in refused.value.message  # the worker's own count
    assert sim.metric(SERVED) == served  # counted by /tokenize; never generated


@pytest.mark.live
@pytest.mark.django_db(transaction=True)
def test_the_reservation_is_the_workers_count_and_a_repeat_is_not_asked_again(remote):
    client, gateway = remote["client"], remote["gateway"]
    before = counted(gateway, "remote")
    messages = [{"role": "user", "content": "count me " * 20}]
    reply = client.chat.completions.create(model="remote", messages=messages, max_tokens=4)
    again = client.chat.completions.create(
        model="remote", messages=messages, max_tokens=4, temperature=0.7
    )
    assert reply.usage is not None and again.usage is not None
    after = counted(gateway, "remote")
    assert after.get("worker", 0) - before.get("worker", 0) == 1
    assert after.get("worker_remembered", 0) - before.get("worker_remembered", 0) == 1
    assert after.get("estimated", 0) == before.get("estimated", 0)


@pytest.mark.live
@pytest.mark.django_db(transaction=True)
def test_an_openai_compatible_deployment_is_estimated_and_says_so(remote):
    client, gateway = remote["client"], remote["gateway"]
    before = counted(gateway, "hosted").get("estimated", 0)
    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(
            model="hosted", messages=[{"role": "user", "content": "x " * 600}], max_tokens=8
        )
    assert "estimated" in refused.value.message
    client.chat.completions.create(
        model="hosted", messages=[{"role": "user", "content": "hello"}], max_tokens=2
    )
    assert counted(gateway, "hosted").get("estimated", 0) - before == 2
    assert "worker" not in counted(gateway, "hosted")


@pytest.mark.unit
def test_a_count_remembered_for_one_team_is_not_another_teams():
    counts = WorkerPromptCounts()
    deployment, chat = deployment_info(), chat_of("the same prompt")
    counts.remember(1, deployment, chat, 42)
    assert counts.remembered(1, deployment, chat) == 42
    assert counts.remembered(2, deployment, chat) is None
    assert counts.remembered(1, deployment, chat_of("another prompt")) is None
    assert counts.remembered(1, deployment_info("other"), chat) is None


@pytest.mark.unit
def test_a_tool_schema_with_an_integer_over_64_bits_is_remembered_by_its_whole_text():
    def with_maximum(maximum: int) -> ChatRequest:
        schema = {"type": "object", "properties": {"n": {"type": "integer", "maximum": maximum}}}
        tool = {"type": "function", "function": {"name": "f", "parameters": schema}}
        return ChatRequest(
            "remote", [{"role": "user", "content": "x"}], 8, False, False, {"tools": [tool]}
        )

    counts, deployment = WorkerPromptCounts(), deployment_info()
    counts.remember(1, deployment, with_maximum(10**20), 42)  # orjson refuses the integer
    assert counts.remembered(1, deployment, with_maximum(10**20)) == 42
    assert counts.remembered(1, deployment, with_maximum(10**20 + 1)) is None


@pytest.mark.unit
def test_the_oldest_count_goes_first_when_the_memory_is_full():
    counts = WorkerPromptCounts(capacity=2)
    deployment = deployment_info()
    first, second, third = chat_of("one"), chat_of("two"), chat_of("three")
    counts.remember(1, deployment, first, 1)
    counts.remember(1, deployment, second, 2)
    assert counts.remembered(1, deployment, first) == 1  # used: now the newest
    counts.remember(1, deployment, third, 3)
    assert counts.remembered(1, deployment, second) is None
    assert counts.remembered(1, deployment, first) == 1
    assert counts.remembered(1, deployment, third) == 3


@pytest.mark.live
def test_no_routable_worker_gives_no_count():
    fleet_view.invalidate()
    assert asyncio.run(WorkerPromptCounts().ask(deployment_info("nowhere"), chat_of("hi"))) is None


@pytest.mark.live
@pytest.mark.django_db(transaction=True)
def test_a_prompt_the_worker_refuses_costs_no_back_off_but_a_missing_endpoint_does(caplog):
    """A 400 for one prompt (here: a message without a role) estimates that request only:
    the next prompt is counted by the same worker. A 404 (a worker that does not serve the
    model, or has no /tokenize) keeps that worker from being asked for a while, and says
    so in the log, with the status only, never the worker's error text."""
    serving, elsewhere = SimProcess(), SimProcess(model="other")
    try:
        remote = fleet.ensure_deployment("remote", served_model_name="sim")
        fleet.register_worker(remote, serving.url, registered_by="test")
        wrong = fleet.ensure_deployment("wrong-name", served_model_name="not-served-there")
        fleet.register_worker(wrong, elsewhere.url, registered_by="test")

        async def scenario() -> tuple[int | None, int | None, int | None, int | None]:
            try:
                on_remote, on_wrong = await scraped_deployments("remote", "wrong-name")
                counts = WorkerPromptCounts()
                no_role = ChatRequest("remote", [{"content": "no role"}], 8, False, False, {})
                refused = await counts.ask(on_remote, no_role)
                counted = await counts.ask(on_remote, chat_of("hello there"))
                missing = await counts.ask(on_wrong, chat_of("hello there"))
                again = await counts.ask(on_wrong, chat_of("hello there"))
                return refused, counted, missing, again
            finally:
                await close_http_session()

        with caplog.at_level(logging.WARNING, logger="inference.worker_prompt_counts"):
            refused, counted, missing, again = asyncio.run(scenario())
        assert refused is None
        assert counted == len(prompt_tokens([{"role": "user", "content": "hello there"}]))
        assert missing is None and again is None
        warnings = [
            r.getMessage()
            for r in caplog.records
            if r.name == "inference.worker_prompt_counts" and r.levelno >= logging.WARNING
        ]
        assert len(warnings) == 1 and "wrong-name" in warnings[0]
        assert "tokenize answered 404 (not asked again for 30 s)" in warnings[0]
    finally:
        serving.stop()
        elsewhere.stop()


@pytest.mark.live
@pytest.mark.django_db(transaction=True)
def test_a_back_off_that_ran_out_is_forgotten_when_another_worker_backs_off(monkeypatch):
    """Pods come and go, and their URLs with them: an expired back-off is not kept."""
    monkeypatch.setattr(worker_prompt_counts, "BACK_OFF_S", 0.05)
    first, second = SimProcess(model="other"), SimProcess(model="other")
    try:
        for name, sim in (("gone", first), ("later", second)):
            deployment = fleet.ensure_deployment(name, served_model_name="not-served-there")
            fleet.register_worker(deployment, sim.url, registered_by="test")

        async def scenario() -> dict[str, float]:
            try:
                gone, later = await scraped_deployments("gone", "later")
                counts = WorkerPromptCounts()
                assert await counts.ask(gone, chat_of("hello there")) is None  # a 404
                assert set(counts._unable_until) == {first.url}
                await asyncio.sleep(0.1)
                assert await counts.ask(later, chat_of("hello there")) is None
                return counts._unable_until
            finally:
                await close_http_session()

        assert set(asyncio.run(scenario())) == {second.url}
    finally:
        first.stop()
        second.stop()


async def scraped_deployments(*names: str) -> list[DeploymentInfo]:
    """One scrape published, then the named deployments as admission reads them."""
    async with aiohttp.ClientSession() as session:
        await Scraper().scrape_once(session)
    fleet_view.invalidate()
    found = []
    for name in names:
        deployment = await catalog.get(name)
        assert deployment is not None, name
        found.append(deployment)
    return found


@pytest.mark.unit
def test_a_snapshot_entry_with_a_field_this_process_does_not_know_is_still_read():
    """A rolling upgrade: a newer scraper publishes a field an older gateway lacks."""
    view = WorkerView(
        1,
        "http://w:8000",
        "remote",
        "sim",
        "ready",
        8,
        {},
        True,
        0,
        0,
        0,
        None,
        None,
        None,
        0.0,
        "",
    )
    entry = {**json.loads(view.to_json()), "published_by_a_newer_scraper": 1}
    assert worker_view(entry) == view


@pytest.mark.live
@pytest.mark.django_db(transaction=True)
def test_identical_prompts_asked_at_once_are_counted_once_per_team():
    """Eight requests of one team with the same prompt, admitted together, cost the worker
    one /tokenize; another team's same prompt is asked on its own (sharing it would tell
    that team, by timing, that the prompt was just sent)."""
    sim = SimProcess()
    try:
        remote = fleet.ensure_deployment("remote", served_model_name="sim")
        fleet.register_worker(remote, sim.url, registered_by="test")
        question = "the same question, eight times at once"

        async def scenario() -> list[tuple[int, str] | None]:
            try:
                (deployment,) = await scraped_deployments("remote")
                counts = WorkerPromptCounts()
                teams = [1] * 8 + [2] * 3
                asks = (counts.count(team, deployment, chat_of(question)) for team in teams)
                return await asyncio.gather(*asks)
            finally:
                await close_http_session()

        asked_before = sim.metric("sim:tokenize_requests_total")
        results = asyncio.run(scenario())
        assert sim.metric("sim:tokenize_requests_total") - asked_before == 2
        expected = len(prompt_tokens([{"role": "user", "content": question}]))
        assert results == [(expected, "worker")] * 11
    finally:
        sim.stop()


@pytest.mark.live
@pytest.mark.django_db(transaction=True)
def test_a_long_prompt_too_slow_to_count_costs_no_back_off_but_a_short_one_does(settings):
    """One team's very long prompts, each slower to tokenize than the timeout, must not
    switch counting off for every team: only that request is estimated. A short prompt
    that times out says the worker is slow, and it is not asked for a while."""
    sim = SimProcess()
    try:
        remote = fleet.ensure_deployment("remote", served_model_name="sim")
        fleet.register_worker(remote, sim.url, registered_by="test")
        long_prompt = chat_of("word " * 20_000)  # estimated at about 33,000 tokens

        async def scenario() -> tuple[int | None, int | None, int | None, int | None]:
            try:
                (deployment,) = await scraped_deployments("remote")
                counts = WorkerPromptCounts()
                settings.WORKER_COUNT_TIMEOUT_S = 1e-6  # every ask times out
                long_timed_out = await counts.ask(deployment, long_prompt)
                settings.WORKER_COUNT_TIMEOUT_S = 5.0
                counted_next = await counts.ask(deployment, chat_of("hello there"))
                settings.WORKER_COUNT_TIMEOUT_S = 1e-6
                short_timed_out = await counts.ask(deployment, chat_of("hello"))
                settings.WORKER_COUNT_TIMEOUT_S = 5.0
                backed_off = await counts.ask(deployment, chat_of("hello there"))
                return long_timed_out, counted_next, short_timed_out, backed_off
            finally:
                await close_http_session()

        long_timed_out, counted_next, short_timed_out, backed_off = asyncio.run(scenario())
        assert long_timed_out is None
        assert counted_next == len(prompt_tokens([{"role": "user", "content": "hello there"}]))
        assert short_timed_out is None
        assert backed_off is None
    finally:
        sim.stop()
