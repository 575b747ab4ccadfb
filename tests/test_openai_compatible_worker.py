"""A deployment of worker kind `openai` fronts any OpenAI-compatible server that is not vLLM
(no /health, no vLLM /metrics, and a 400 for a field it does not know, as a hosted API
gives): it is healthy while /v1/models answers, and no vLLM extension (cache_salt) is sent
to it. Under the default kind, vllm, the same server is never put in rotation."""

import asyncio
from collections.abc import Iterator
from typing import Any

import aiohttp
import openai
import pytest

from gateway.accounts import actions
from inference import fleet
from inference.scraper import Scraper
from inference.snapshot import WorkerView
from tests.children import worker_script
from tests.conftest import child_env
from tests.live import LiveGateway
from tests.waiting import wait_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.live]
MESSAGES: Any = [{"role": "user", "content": "Say hello"}]
WORKER_KEY = "hosted-key-0123456789"
PLAIN = "openai_compatible_worker.py"


@pytest.fixture
def plain_server(redis_url: str) -> Iterator[str]:
    yield from worker_script(PLAIN, child_env(redis_url), "/ready")


@pytest.fixture
def keyed_server(redis_url: str) -> Iterator[str]:
    """The plain server as a hosted API: every route wants WORKER_KEY as a bearer token."""
    yield from worker_script(PLAIN, child_env(redis_url), "/ready", "--api-key", WORKER_KEY)


def served(client: openai.OpenAI, model: str) -> Any:
    return wait_until(
        lambda: client.chat.completions.create(model=model, messages=MESSAGES, max_tokens=8),
        15,
        f"the gateway to route {model} to the plain server",
        ignoring=(openai.NotFoundError, openai.InternalServerError),
        poll_s=0.3,
    )


def test_an_openai_compatible_server_is_served_streamed_and_not(platform, plain_server):
    deployment = fleet.ensure_deployment(
        "plain-model", served_model_name="plain-upstream", worker_kind="openai"
    )
    fleet.register_worker(deployment, plain_server, registered_by="test")
    client = platform["client"]

    reply = served(client, "plain-model")
    assert reply.choices[0].message.content == "Hello from a plain server."
    assert (reply.usage.prompt_tokens, reply.usage.completion_tokens) == (2, 5)
    assert reply.model == "plain-model"

    stream = client.chat.completions.create(
        model="plain-model", messages=MESSAGES, max_tokens=3, stream=True
    )
    text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    assert text == "Hello from a"


def test_under_the_vllm_kind_the_same_server_is_never_in_rotation(platform, plain_server):
    deployment = fleet.ensure_deployment("plain-as-vllm", served_model_name="plain-upstream")
    fleet.register_worker(deployment, plain_server, registered_by="test")
    client = platform["client"]

    def refused() -> bool:
        try:
            client.chat.completions.create(model="plain-as-vllm", messages=MESSAGES, max_tokens=2)
        except openai.APIStatusError as exc:
            return exc.status_code == 503
        return False

    wait_until(refused, 15, "the worker without /health to stay out of rotation", poll_s=0.3)


def test_a_hosted_apis_key_is_sent_from_the_variable_the_deployment_names(redis_url, keyed_server):
    """The key lives in the gateway's (and scraper's) environment; the deployment names the
    variable. Without it the hosted server refuses the probes and the worker stays out."""
    team = actions.create_team("Hosted", requests_per_minute=100, tokens_per_minute=100_000)
    deployment = fleet.ensure_deployment(
        "hosted-model",
        served_model_name="plain-upstream",
        worker_kind="openai",
        api_key_env="SLUICE_WORKER_KEY_TEST",
    )
    fleet.register_worker(deployment, keyed_server, registered_by="test")
    key = actions.issue_api_key(team).plaintext
    keyed = LiveGateway(redis_url, SLUICE_WORKER_KEY_TEST=WORKER_KEY)
    try:
        client = openai.OpenAI(base_url=f"{keyed.url}/v1", api_key=key, max_retries=0)
        reply = served(client, "hosted-model")
        assert reply.choices[0].message.content == "Hello from a plain server."
    finally:
        keyed.stop()
    unkeyed = LiveGateway(redis_url)  # the variable is not set: the probes are refused
    try:
        client = openai.OpenAI(base_url=f"{unkeyed.url}/v1", api_key=key, max_retries=0)

        def out_of_rotation() -> bool:
            """Never served without the key: refused by the worker (502, the platform's
            failure) until the failed probes take it out of rotation (503)."""
            with pytest.raises(openai.APIStatusError) as refused:
                client.chat.completions.create(model="hosted-model", messages=MESSAGES)
            assert refused.value.status_code in (502, 503), refused.value
            return refused.value.status_code == 503

        wait_until(out_of_rotation, 10, "the keyless probes to take the worker out", poll_s=0.3)
    finally:
        unkeyed.stop()


@pytest.fixture
def sglang_like_server(redis_url: str) -> Iterator[str]:
    yield from worker_script(PLAIN, child_env(redis_url), "/ready", "--sglang-metrics")


def test_a_server_with_sglangs_metrics_is_routed_on_its_load(sglang_like_server, plain_server):
    """Read under SGLang's names: running, queued and KV usage reach the fleet snapshot (and so
    routing and the autoscaler); a server without /metrics is still healthy, with no load."""
    deployment = fleet.ensure_deployment(
        "sglang-model", served_model_name="plain-upstream", worker_kind="openai"
    )
    fleet.register_worker(deployment, sglang_like_server, registered_by="test")
    fleet.register_worker(deployment, plain_server, registered_by="test")

    async def scrape() -> list[WorkerView]:
        async with aiohttp.ClientSession() as session:
            return await Scraper().scrape_once(session)

    views = {view.url: view for view in asyncio.run(scrape())}
    loaded, bare = views[sglang_like_server], views[plain_server]
    assert (loaded.running, loaded.waiting, loaded.kv_usage) == (3.0, 2.0, 0.25)
    assert loaded.healthy and bare.healthy and not bare.error
    assert (bare.running, bare.waiting) == (0.0, 0.0)
    assert loaded.reports_load and not bare.reports_load  # the fleet page says which


@pytest.fixture
def sglang_server(redis_url: str) -> Iterator[str]:
    """SGLang as the gateway sees it: /health, /metrics under sglang: names, the OpenAI API
    with cache_salt (required here) and top_k, and a 400 for a field it does not take."""
    yield from worker_script(PLAIN, child_env(redis_url), "/ready", "--sglang-metrics", "--health")


def test_an_sglang_deployment_is_healthy_on_its_health_check_and_isolated_by_cache_salt(
    platform, sglang_server, plain_server
):
    deployment = fleet.ensure_deployment(
        "sglang-model", served_model_name="plain-upstream", worker_kind="sglang"
    )
    fleet.register_worker(deployment, sglang_server, registered_by="test")
    no_health = fleet.ensure_deployment(
        "sglang-without-health", served_model_name="plain-upstream", worker_kind="sglang"
    )
    fleet.register_worker(no_health, plain_server, registered_by="test")

    async def scrape() -> list[WorkerView]:
        async with aiohttp.ClientSession() as session:
            return await Scraper().scrape_once(session)

    views = {view.url: view for view in asyncio.run(scrape())}
    sglang, bare = views[sglang_server], views[plain_server]
    assert sglang.healthy and (sglang.running, sglang.waiting) == (3.0, 2.0)
    assert not bare.healthy and "404" in bare.error  # no /health: never in rotation

    client = platform["client"]
    reply = served(client, "sglang-model")  # cache_salt sent: the stand-in refuses without
    assert reply.choices[0].message.content == "Hello from a plain server."
    with pytest.raises(openai.BadRequestError) as refused:  # SGLang names it regex/json_schema
        client.chat.completions.create(
            model="sglang-model",
            messages=MESSAGES,
            max_tokens=4,
            extra_body={"guided_regex": "[a-z]+"},
        )
    assert refused.value.param == "guided_regex"
    assert "its deployment allows: chat_template_kwargs, ignore_eos" in refused.value.message
    taken = client.chat.completions.create(  # admitted, and passed through
        model="sglang-model", messages=MESSAGES, max_tokens=4, extra_body={"top_k": 5}
    )
    assert taken.choices[0].message.content == "Hello from a plain"
