"""The embeddings pipeline: the chat pipeline's authenticate, admit and settle steps around
one embedding call instead of a generation.

    1 authenticate   the credential -> Caller, then validate (after auth, as OpenAI does)
    2 admit          the named deployment, of kind embedding; the key's allowed models;
                     what the model takes (token arrays, dimensions); the input tokens,
                     counted (built-in model) or estimated (a worker's); one reservation of
                     those tokens and their cost, with nothing reserved to generate
    3 embed          the built-in model in this process (inference/builtin_embedder.py), or
                     a worker of the deployment through the dispatcher (fair queueing, the
                     team's concurrency cap), retried on another worker on a failure
    4 settle         reconcile to the tokens embedded and queue one usage event, in one
                     round trip (settlement.bill, the same as a chat completion's)

No cache: embeddings are cheap to recompute and a client that repeats them keeps its own.
Raises domain exceptions; gateway/serving/errors.py says what a client is told.
"""

import asyncio
import base64
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from django.conf import settings

from caching.outcome import Outcome
from foundation import metrics
from gateway.accounts.authentication import check_model_allowed
from gateway.accounts.quotas import Reservation
from gateway.serving import settlement
from gateway.serving.admission import Credential, reserve_tokens
from gateway.serving.completion import dispatcher
from gateway.serving.errors import ModelNotFound, rate_limit_headers
from gateway.serving.pipeline import RATE_LIMIT_ATTRIBUTE, naming_the_model
from gateway.usage.ledger import UsageEvent
from inference.builtin_embedder import (
    DIMENSIONS,
    MAX_TOKENS,
    EmbedderUnavailable,
    TextTooLong,
    count_tokens,
    embed_texts,
)
from inference.deployments import EMBEDDING, DeploymentInfo, catalog
from inference.embedding_client import UpstreamError, WorkerEmbeddings, embed_on_worker
from inference.embedding_request import EmbeddingRequest, InvalidRequest, encode_vector
from scaling.routing.dispatcher import NoHealthyWorker, Priority
from scaling.routing.fair_queue import Tenant

logger = logging.getLogger(__name__)
Vector = list[float] | str


def new_embedding_id() -> str:
    return f"embd-{uuid.uuid4().hex}"


@dataclass
class EmbeddingRun:
    """One admitted request: what it reserved, then what it used and how it ended."""

    request_id: str
    deployment: DeploymentInfo
    reservation: Reservation
    input_tokens: int  # counted (built-in) or estimated (a worker's model): the reservation
    started_at: float = field(default_factory=time.monotonic)
    status: str = "failed"
    used_tokens: int = 0  # billed: 0 unless the model did the work
    worker_url: str = ""
    on_spot: bool = False  # served by a worker labelled spot: billed at the spot discount


@dataclass(frozen=True)
class Embeddings:
    """The answer, for the adapter to shape."""

    run: EmbeddingRun
    vectors: list[Vector]

    def body(self) -> dict[str, Any]:
        data = [
            {"object": "embedding", "index": index, "embedding": vector}
            for index, vector in enumerate(self.vectors)
        ]
        tokens = self.run.used_tokens
        usage = {"prompt_tokens": tokens, "total_tokens": tokens}
        return {"object": "list", "data": data, "model": self.run.deployment.name, "usage": usage}

    def headers(self) -> dict[str, str]:
        return rate_limit_headers(self.run.reservation.state)


async def create_embeddings(
    credential: Credential, read_request: Callable[[], EmbeddingRequest], request_id: str
) -> Embeddings:
    """Steps 1 to 4. A request that fails or is cancelled after admission is settled (and
    billed nothing unless the model did the work) before the exception leaves."""
    caller = await credential.authorize()  # 1 authenticate
    request = read_request()
    deployment = await catalog.get(request.model)  # 2 admit: which deployment
    if deployment is None:
        raise ModelNotFound(request.model)
    with naming_the_model(deployment.name):
        check_model_allowed(caller.allowed_models, deployment.name)
        check_embedding_model(request, deployment)
        tokens = await input_tokens(request, deployment)
        reservation = await reserve_tokens(caller, deployment, tokens, 0)
        run = EmbeddingRun(request_id, deployment, reservation, tokens)
        try:
            if deployment.in_process:  # 3 embed
                vectors = await _in_process(run, request)
            else:
                vectors = await _from_workers(run, request)
            run.status = "ok"
        except BaseException as exc:
            if isinstance(exc, Exception):
                setattr(exc, RATE_LIMIT_ATTRIBUTE, reservation.state)
            else:
                run.status = "cancelled"  # the client left: billed if the model was at work
            raise
        finally:
            await asyncio.shield(_settle(run))  # 4 settle
    return Embeddings(run, vectors)


def check_embedding_model(request: EmbeddingRequest, deployment: DeploymentInfo) -> None:
    """What the deployment cannot serve, refused before any quota is spent."""
    if deployment.kind != EMBEDDING:
        raise InvalidRequest(
            f"The model '{deployment.name}' is a chat model, not an embedding model: use it "
            "with /v1/chat/completions, or pick an embedding model (GET /v1/models).",
            "model",
        )
    if not deployment.in_process:
        return  # a worker's model: the worker says what it cannot do (a 400)
    if request.token_arrays is not None:
        raise InvalidRequest(
            f"The model '{deployment.name}' takes text only, not token-id arrays (it "
            "tokenizes in the gateway with its own vocabulary): send strings.",
            "input",
        )
    if request.dimensions not in (None, DIMENSIONS):
        raise InvalidRequest(
            f"The model '{deployment.name}' makes {DIMENSIONS}-dimensional vectors and cannot "
            "shorten them: leave out 'dimensions'.",
            "dimensions",
        )


async def input_tokens(request: EmbeddingRequest, deployment: DeploymentInfo) -> int:
    """What admission reserves: the built-in model's own token count (an input longer than
    it reads is refused), or an upper-leaning estimate for a worker's model."""
    if not deployment.in_process or request.texts is None:
        return request.estimated_prompt_tokens()
    try:
        counts = await count_tokens(request.texts)
    except EmbedderUnavailable as exc:
        raise _unavailable(exc) from exc
    for index, count in enumerate(counts):
        if count > MAX_TOKENS:
            where = "'input'" if len(counts) == 1 else f"input[{index}]"
            raise InvalidRequest(
                f"{where} is {count} tokens; the model '{deployment.name}' reads at most "
                f"{MAX_TOKENS} (it would embed only the beginning): split it into shorter "
                "pieces.",
                "input",
            )
    return sum(counts)


def _unavailable(exc: Exception) -> NoHealthyWorker:
    logger.error("built-in embedding model unavailable: %s", exc)
    return NoHealthyWorker("the built-in embedding model is not available in this gateway")


async def _in_process(run: EmbeddingRun, request: EmbeddingRequest) -> list[Vector]:
    assert request.texts is not None  # check_embedding_model refused token arrays
    run.used_tokens = run.input_tokens  # from here on the embedder is at work
    try:
        vectors = await embed_texts(request.texts)
    except EmbedderUnavailable as exc:
        run.used_tokens = 0
        raise _unavailable(exc) from exc
    except TextTooLong as exc:  # counted as fitting: the two tokenizers disagree
        run.used_tokens = 0
        raise InvalidRequest(f"An input is {exc}.", "input") from exc
    return [encode_vector(vector, request.encoding_format) for vector in vectors]


async def _from_workers(run: EmbeddingRun, request: EmbeddingRequest) -> list[Vector]:
    """A worker of the deployment, queued fairly among teams; a failure before the answer
    is retried on another worker, as a chat completion's before its first token."""
    limits = run.reservation.limits
    team = f"team:{run.reservation.team_id}"
    tenant = Tenant(team, limits.queue_weight, limits.max_concurrent_requests)
    body = request.upstream_body()
    priority = Priority.BATCH if run.reservation.batch_id else Priority.INTERACTIVE
    tried: set[str] = set()
    failure: UpstreamError | None = None
    for attempt in range(1, settings.UPSTREAM_MAX_ATTEMPTS + 1):
        try:
            lease = await dispatcher.acquire(
                run.deployment.name, priority, exclude=frozenset(tried), tenant=tenant
            )
        except NoHealthyWorker:
            if failure is not None:
                raise failure from None  # the real reason beats "no other worker left"
            raise
        url = run.worker_url = lease.worker.url
        run.on_spot = lease.worker.spot
        if lease.batch_line is not None:
            # No chunk comes before the whole answer: held from now, as it is sent (a scrape
            # asks /health before /metrics, a round trip in which the request arrives).
            lease.batch_line.answered()
        run.used_tokens = run.input_tokens  # a client that leaves now still had it embedded
        try:
            answer = await embed_on_worker(
                url,
                lease.worker.upstream_model,
                body,
                request.count,
                run.deployment.worker_headers,
            )
        except UpstreamError as exc:
            run.used_tokens = 0  # a worker that failed or refused did no work to bill
            if lease.batch_line is not None:
                lease.batch_line.not_held()  # nor holds the line
            if not exc.retryable or attempt == settings.UPSTREAM_MAX_ATTEMPTS:
                raise
            failure = exc
            tried.add(url)
            logger.warning("embeddings: retrying on another worker: %s (%s)", exc, url)
            continue
        finally:
            dispatcher.release(lease)
        run.used_tokens = answer.prompt_tokens
        return _in_format(answer, request.encoding_format)
    raise AssertionError("unreachable: the last attempt returns or raises")


def _in_format(answer: WorkerEmbeddings, encoding_format: str) -> list[Vector]:
    """The worker's vectors in the format asked for (a server that ignores the field)."""
    return [
        vector
        if isinstance(vector, str) == (encoding_format == "base64")
        else encode_vector(_as_array(vector), encoding_format)
        for vector in answer.vectors
    ]


def _as_array(vector: Vector) -> "np.typing.NDArray[np.float32]":
    if isinstance(vector, str):
        return np.frombuffer(base64.b64decode(vector), dtype="<f4")
    return np.asarray(vector, dtype=np.float32)


async def _settle(run: EmbeddingRun) -> None:
    """Bill what the model embedded (nothing for a refusal or a failure) and queue the
    usage event; metrics and a log line for a request that did not end well."""
    model, used = run.deployment.name, run.used_tokens
    cost = run.deployment.cost_micros(used, 0, bool(run.reservation.batch_id), spot=run.on_spot)
    latency_s = time.monotonic() - run.started_at
    metrics.labelled(metrics.latency, model).observe(latency_s)
    metrics.labelled(metrics.tokens, model, "prompt").inc(used)
    event = UsageEvent(
        request_id=run.request_id,
        team_id=run.reservation.team_id,
        api_key_id=run.reservation.key_id or "",
        model=model,
        prompt_tokens=used,
        completion_tokens=0,
        status=run.status,
        latency_ms=int(latency_s * 1000),
        ttft_ms=None,
        worker=run.worker_url,
        cost_micros=cost,
        created_at=time.time(),
        cache_result=Outcome.BYPASS.value,
        batch_id=run.reservation.batch_id,
    )
    await settlement.bill(run.reservation, used, cost, event)
    logger.log(
        logging.DEBUG if run.status == "ok" else logging.INFO,
        "embeddings %s team %s model %s worker %s tokens %d status %s",
        run.request_id,
        run.reservation.team_id,
        model,
        run.worker_url or "-",
        used,
        run.status,
    )
