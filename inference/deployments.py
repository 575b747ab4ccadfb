"""Model deployments as the API sees them: a per-process copy refreshed every few seconds.

Besides the deployments in the database, the catalog holds the built-in embedding model
(all-MiniLM-L6-v2, the one the semantic cache runs in every gateway process) whenever its
weights are prepared: /v1/embeddings serves it with no worker. An operator who defines an
embedding deployment serving it (to price it, or to give it another public name) replaces
that default entry. One with workers registered is served by them (vLLM can serve the same
model under that name), never in the gateway.
"""

import logging
import time
from dataclasses import dataclass, field
from decimal import Decimal

from django.conf import settings
from django.db.models import Exists, OuterRef
from redis.exceptions import RedisError

from foundation.db import database_read
from foundation.single_flight import SingleFlight
from inference.chat_options import SGLANG_OPTIONS, VLLM_OPTIONS
from inference.models import ModelDeployment, Worker
from inference.snapshot import fleet_view
from inference.worker_auth import bearer, worker_api_key

logger = logging.getLogger(__name__)
REFRESH_S = 5.0
CHAT = ModelDeployment.Kind.CHAT.value
EMBEDDING = ModelDeployment.Kind.EMBEDDING.value
OPENAI_COMPATIBLE = ModelDeployment.WorkerKind.OPENAI.value
SGLANG = ModelDeployment.WorkerKind.SGLANG.value
# The built-in embedding model's public name, and the upstream name that marks an embedding
# deployment without workers as served in the gateway process (inference/embeddings.py).
BUILTIN_EMBEDDING_MODEL = "all-minilm-l6-v2"


@dataclass(frozen=True)
class DeploymentInfo:
    name: str
    price_input_per_million: Decimal
    price_output_per_million: Decimal
    created: int
    revision: str = "1"  # part of every cache key: bumping it retires cached replies
    routing_policy: str = "prefix_aware"  # the worker choice (scaling/routing/policies.py)
    tier: str = "small"  # small and large deployments are what model "auto" routes to
    accepts_images: bool = False  # image_url content parts reach its workers
    kind: str = CHAT  # chat (/v1/chat/completions) or embedding (/v1/embeddings)
    in_process: bool = False  # the built-in embedder answers it, in this process
    context_length: int | None = None  # the operator's override; None: what workers report
    batch_discount_percent: int = 50  # what a batch line saves on the prices
    served_model_name: str = ""  # the name its workers serve (and its tokenizer's folder)
    # vllm, simulated, sglang, or openai (any OpenAI-compatible server). vLLM's extensions
    # such as cache_salt go to the first two only; a hosted API refuses fields it does not
    # know, and SGLang takes its own subset of vLLM's sampling fields (SGLANG_OPTIONS).
    worker_kind: str = "vllm"
    # The vLLM sampling fields its requests may carry (ModelDeployment.extra_fields); None:
    # what its worker kind takes (all of them, or none for an OpenAI-compatible server).
    allowed_extra_fields: frozenset[str] | None = None
    # The key its workers want (inference/worker_auth.py), read from the variable that
    # ModelDeployment.api_key_env names; never in a repr (a log line, a traceback).
    worker_api_key: str = field(default="", repr=False)
    # A prompt token read from the worker's prefix cache; None: the input price.
    price_cached_input_per_million: Decimal | None = None
    spot_discount_percent: int = 0  # what a request a spot worker served saves

    @property
    def speaks_vllm(self) -> bool:
        """vLLM or its simulator: vLLM's extensions (/tokenize, its sampling fields) apply."""
        return self.worker_kind not in (OPENAI_COMPATIBLE, SGLANG)

    @property
    def sends_cache_salt(self) -> bool:
        """Whether requests carry the team's cache_salt, which keeps teams out of each
        other's prefix cache: vLLM (and its simulator), and SGLang, which takes the same
        field; never a generic OpenAI-compatible server (a hosted API refuses it)."""
        return self.worker_kind != OPENAI_COMPATIBLE

    @property
    def worker_headers(self) -> dict[str, str]:
        return bearer(self.worker_api_key)

    @property
    def extra_fields(self) -> frozenset[str]:
        if self.allowed_extra_fields is not None:
            return self.allowed_extra_fields
        if self.worker_kind == SGLANG:
            return frozenset(SGLANG_OPTIONS)
        return frozenset(VLLM_OPTIONS) if self.speaks_vllm else frozenset()

    @property
    def is_chat(self) -> bool:
        return self.kind == CHAT

    def cost_micros(
        self,
        prompt_tokens: int,
        completion_tokens: int,
        batch: bool = False,
        cached_prompt_tokens: int = 0,
        spot: bool = False,
    ) -> int:
        """Cost in micro-dollars: tokens x USD per million tokens, the prompt tokens the
        worker read from its prefix cache at the cached-input price, less the batch discount
        for a line of a batch or the spot discount for a request a spot worker served.

        A batch line on a spot worker gets the larger discount, not both: batch lines go
        to spot workers first (scaling/routing/scorers/spot_first.py), so the batch price
        already counts on spot capacity, and multiplying would give that saving twice."""
        cached = min(max(cached_prompt_tokens, 0), prompt_tokens)
        cached_price = self.price_cached_input_per_million
        if cached_price is None:
            cached_price = self.price_input_per_million
        cost = (
            (prompt_tokens - cached) * self.price_input_per_million
            + cached * cached_price
            + completion_tokens * self.price_output_per_million
        )
        discount = max(
            self.batch_discount_percent if batch else 0,
            self.spot_discount_percent if spot else 0,
        )
        if discount:
            cost = cost * (100 - discount) / 100
        return int(cost)


class DeploymentCatalog:
    def __init__(self) -> None:
        self._by_name: dict[str, DeploymentInfo] = {}
        self._loaded_at = float("-inf")
        self._flights: SingleFlight[dict[str, DeploymentInfo]] = SingleFlight()

    async def all(self) -> dict[str, DeploymentInfo]:
        if time.monotonic() - self._loaded_at >= REFRESH_S:
            self._by_name = await self._flights.run("catalog", database_read(_load))
            self._loaded_at = time.monotonic()
            await _load_fleet_copy()  # for known_context_length (sync callers: /v1/models)
        return self._by_name

    async def get(self, name: str) -> DeploymentInfo | None:
        return (await self.all()).get(name)

    def clear_local(self) -> None:
        """Forget this process's copy; the next lookup reads the database."""
        self._loaded_at = float("-inf")


def _load() -> dict[str, DeploymentInfo]:
    deployments = {
        d.name: DeploymentInfo(
            d.name,
            d.price_input_per_million,
            d.price_output_per_million,
            int(d.pk),
            f"{d.served_model_name}@{d.revision}",
            d.routing_policy,
            d.tier,
            d.accepts_images,
            d.kind,
            d.kind == EMBEDDING
            and d.upstream_model == BUILTIN_EMBEDDING_MODEL
            and not d.has_workers,
            d.context_length,
            d.batch_discount_percent,
            d.upstream_model,
            d.worker_kind,
            None if d.extra_fields is None else frozenset(d.extra_fields),
            worker_api_key(d.api_key_env, d.name),
            d.price_cached_input_per_million,
            d.spot_discount_percent,
        )
        for d in ModelDeployment.objects.annotate(
            has_workers=Exists(Worker.objects.filter(deployment=OuterRef("pk")))
        )
    }
    if not any(d.in_process for d in deployments.values()) and builtin_embedder_prepared():
        deployments.setdefault(BUILTIN_EMBEDDING_MODEL, BUILTIN_EMBEDDING)
    return deployments


async def context_length(deployment: DeploymentInfo) -> int | None:
    """The deployment's context window in tokens: the operator's override, else the smallest
    its workers report (their /v1/models max_model_len, via the fleet snapshot); None when
    neither is known (then nothing is refused for length before the worker)."""
    if deployment.context_length is not None:
        return deployment.context_length
    await fleet_view.workers()
    return fleet_view.reported_context_length(deployment.name)


def known_context_length(deployment: DeploymentInfo) -> int | None:
    """context_length() from the fleet copy already loaded (the catalog loads it when it
    refreshes), for sync callers such as the /v1/models list."""
    if deployment.context_length is not None:
        return deployment.context_length
    return fleet_view.reported_context_length(deployment.name)


async def _load_fleet_copy() -> None:
    """Best effort: without Redis the list simply lacks worker-reported windows."""
    try:
        await fleet_view.workers()
    except (RedisError, OSError) as exc:
        logger.debug("fleet snapshot unreadable for context lengths: %s", exc)


def builtin_embedder_prepared() -> bool:
    """Whether this machine has the built-in model's weights (`make worker` prepares them)."""
    return bool((settings.EMBEDDING_MODEL_DIR / ".prepared").exists())


# The default entry: free (an operator prices it by defining the deployment), created 0.
BUILTIN_EMBEDDING = DeploymentInfo(
    BUILTIN_EMBEDDING_MODEL,
    Decimal("0"),
    Decimal("0"),
    0,
    revision=f"{BUILTIN_EMBEDDING_MODEL}@1",
    tier="small",
    kind=EMBEDDING,
    in_process=True,
)

catalog = DeploymentCatalog()
