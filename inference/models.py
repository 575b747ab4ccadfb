from decimal import Decimal
from typing import Any

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models
from django.utils import timezone

from inference.chat_options import VLLM_OPTIONS
from inference.worker_auth import ENV_NAME, ENV_PREFIX

PRICE_FIELDS = (
    "price_input_per_million",
    "price_cached_input_per_million",
    "price_output_per_million",
    "gpu_cost_per_hour",
    "batch_discount_percent",
    "spot_discount_percent",
)


def validate_extra_fields(value: Any) -> None:
    if value is None:
        return
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValidationError("a list of field names, or blank")
    unknown = sorted(set(value) - VLLM_OPTIONS)
    if unknown:
        known = ", ".join(sorted(VLLM_OPTIONS))
        raise ValidationError(f"not vLLM sampling fields: {', '.join(unknown)}; they are {known}")


class ModelDeployment(models.Model):
    """A model as the API exposes it, served by a pool of identical workers."""

    class Tier(models.TextChoices):
        SMALL = "small", "Small (cheap, fast)"
        LARGE = "large", "Large (capable)"
        BATCH = "batch", "Batch (spot capacity)"

    class Kind(models.TextChoices):
        """What the model does: which endpoint serves it (the other one refuses it by name)."""

        CHAT = "chat", "Chat (/v1/chat/completions)"
        EMBEDDING = "embedding", "Embedding (/v1/embeddings)"

    class RoutingPolicy(models.TextChoices):
        """How a request picks among the deployment's workers (docs/routing.md)."""

        ROUND_ROBIN = "round_robin", "Round robin (each worker in turn)"
        LEAST_LOADED = "least_loaded", "Least loaded"
        PREFIX_AWARE = "prefix_aware", "Prefix-aware (prefix and session affinity, bounded load)"

    class WorkerKind(models.TextChoices):
        """What its workers are: the autoscaler only ever adds a replica of this kind, so a
        deployment of a real model never gets simulator (fake-text) workers beside it."""

        VLLM = "vllm", "vLLM (the real model)"
        SIMULATED = "simulated", "Simulated (python -m inference.sim: fake text, for tests)"
        SGLANG = (
            "sglang",
            (
                "SGLang: registered, never started; healthy while /health answers; load from "
                "its /metrics (sglang: names); its own sampling fields, no vLLM extensions"
            ),
        )
        OPENAI = (
            "openai",
            (
                "Any OpenAI-compatible server (SGLang, llama.cpp, TGI, a hosted API): registered, "
                "never started; healthy while /v1/models answers; no vLLM metrics or extensions"
            ),
        )

    name = models.CharField(max_length=200, unique=True, help_text="the public model name")
    served_model_name = models.CharField(
        max_length=200, blank=True, help_text="the name workers serve it under; blank = name"
    )
    revision = models.CharField(max_length=100, default="1", help_text="bump to invalidate caches")
    kind = models.CharField(
        max_length=10,
        choices=Kind.choices,
        default=Kind.CHAT,
        help_text="chat or embedding; an embedding deployment serving all-minilm-l6-v2 with "
        "no workers runs in the gateway itself",
    )
    tier = models.CharField(max_length=10, choices=Tier.choices, default=Tier.SMALL)
    price_input_per_million = models.DecimalField(
        max_digits=10, decimal_places=4, default=Decimal("0"), validators=[MinValueValidator(0)]
    )
    price_output_per_million = models.DecimalField(
        max_digits=10, decimal_places=4, default=Decimal("0"), validators=[MinValueValidator(0)]
    )
    # What a prompt token costs when the worker read it from its prefix cache (vLLM reports
    # them as usage.prompt_tokens_details.cached_tokens): providers price these lower.
    price_cached_input_per_million = models.DecimalField(
        max_digits=10,
        decimal_places=4,
        null=True,
        blank=True,
        validators=[MinValueValidator(0)],
        help_text="USD per million prompt tokens read from the worker's prefix cache; "
        "blank = the input price",
    )
    gpu_cost_per_hour = models.DecimalField(
        max_digits=10, decimal_places=4, default=Decimal("0"), validators=[MinValueValidator(0)]
    )
    # Set by `setup_demo` on the demo deployment it prices: the dashboard labels its
    # figures "example prices" so a newcomer does not read them as real money.
    prices_are_examples = models.BooleanField(
        default=False,
        help_text="the prices above are documented examples (the demo); the dashboard says so",
    )
    batch_discount_percent = models.PositiveSmallIntegerField(
        default=50,
        validators=[MaxValueValidator(100)],
        help_text="what lines of a batch (/v1/batches) save on the prices above, in percent",
    )
    # Spot capacity can be taken back at any moment, so a request it served is billed for
    # less. A batch line served on spot gets the larger of the two discounts, not both:
    # batch work is sent to spot workers first, and its discount already prices that in.
    spot_discount_percent = models.PositiveSmallIntegerField(
        default=0,
        validators=[MaxValueValidator(100)],
        help_text="what a request served by a worker labelled spot "
        '({"spot": true}) saves on the prices above, in percent; a batch line on spot '
        "gets the larger of this and the batch discount",
    )
    context_length = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1)],
        help_text="tokens of prompt plus output the model takes; blank = what its workers "
        "report (vLLM's max_model_len)",
    )
    max_in_flight_per_worker = models.PositiveIntegerField(
        default=64,
        validators=[MinValueValidator(1)],
        help_text="requests the gateway keeps in flight on each worker (its batch target)",
    )
    routing_policy = models.CharField(
        max_length=20,
        choices=RoutingPolicy.choices,
        default=RoutingPolicy.PREFIX_AWARE,
        help_text="how requests pick a worker; gateways follow a change within seconds",
    )
    worker_kind = models.CharField(
        max_length=10,
        choices=WorkerKind.choices,
        default=WorkerKind.VLLM,
        help_text="what its workers are; the autoscaler starts only this kind of replica "
        "(simulated: the vLLM-compatible simulator, for tests, replays and demos)",
    )
    # Off by default: an image part makes the worker fetch its URL (or decode its data), so
    # only a deployment that serves a vision model, marked so by an operator, gets them.
    accepts_images = models.BooleanField(
        default=False,
        help_text="the model takes image_url content parts (a vision model); text only otherwise",
    )
    # vLLM's own sampling fields (top_k, min_p, guided_json, ...) reach only the workers
    # that take them: a hosted API or another server refuses what it does not know, and an
    # operator may keep a costly one (a grammar) off a shared deployment.
    extra_fields = models.JSONField(
        null=True,
        blank=True,
        validators=[validate_extra_fields],
        help_text="the vLLM sampling fields requests may send, as a list, e.g. "
        '["top_k", "min_p"]; blank = all of them for a vLLM or simulated deployment, none '
        "for an OpenAI-compatible one",
    )

    api_key_env = models.CharField(
        max_length=100,
        blank=True,
        validators=[
            RegexValidator(ENV_NAME, f"a variable named {ENV_PREFIX}..., e.g. {ENV_PREFIX}HOSTED")
        ],
        help_text=f"the environment variable, named {ENV_PREFIX}... (in the gateway's and "
        "the scraper's processes), holding the API key its workers want, e.g. a hosted "
        "API's; sent as a bearer token. The key itself is never stored. Blank = none",
    )

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def save(self, *args: Any, **kwargs: Any) -> None:
        """A price changed while the flag stays as it was means an operator priced the
        deployment: its prices are no longer the examples, and the dashboard stops saying so."""
        if self.pk is not None and self.prices_are_examples and self._operator_repriced():
            self.prices_are_examples = False
            if kwargs.get("update_fields") is not None:
                kwargs["update_fields"] = {*kwargs["update_fields"], "prices_are_examples"}
        super().save(*args, **kwargs)

    def _operator_repriced(self) -> bool:
        rows = type(self).objects.filter(pk=self.pk, prices_are_examples=True)
        before = rows.values(*PRICE_FIELDS).first()
        return before is not None and any(before[f] != getattr(self, f) for f in PRICE_FIELDS)

    @property
    def upstream_model(self) -> str:
        return self.served_model_name or self.name


class Worker(models.Model):
    """One model server (a vLLM process on a GPU set, the embedded CPU worker, a simulator)."""

    class State(models.TextChoices):
        STARTING = "starting", "Starting (loading the model)"
        WARM = "warm", "Warm (started, held out of traffic)"
        READY = "ready", "Ready (in rotation)"
        DRAINING = "draining", "Draining (finishing its streams)"
        DEAD = "dead", "Dead"

    deployment = models.ForeignKey(
        ModelDeployment, on_delete=models.CASCADE, related_name="workers"
    )
    url = models.URLField(unique=True, help_text="base URL, e.g. http://10.0.0.5:8000")
    state = models.CharField(max_length=10, choices=State.choices, default=State.STARTING)
    labels = models.JSONField(
        default=dict, blank=True, help_text='e.g. {"gpu": "h100", "spot": true}'
    )
    registered_by = models.CharField(max_length=50, default="admin")
    created_at = models.DateTimeField(default=timezone.now)
    state_changed_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["deployment__name", "url"]

    def __str__(self) -> str:
        return f"{self.deployment.name} @ {self.url} ({self.state})"


class GpuRate(models.Model):
    """What one worker costs per hour on a kind of GPU, on demand and on spot capacity.

    The fleet sampler costs each live worker at the rate of its `gpu` label (the spot rate
    when it is labelled `"spot": true`); a worker with no matching rate costs its
    deployment's gpu_cost_per_hour. Each minute's cost is recorded as sampled, so changing
    a rate changes the cost from then on, never the history."""

    gpu = models.CharField(
        max_length=100,
        unique=True,
        help_text='the value of a worker\'s "gpu" label it prices, exactly, e.g. h100',
    )
    on_demand_per_hour = models.DecimalField(
        max_digits=10,
        decimal_places=4,
        validators=[MinValueValidator(0)],
        help_text="USD per hour of one worker on on-demand capacity",
    )
    spot_per_hour = models.DecimalField(
        max_digits=10,
        decimal_places=4,
        validators=[MinValueValidator(0)],
        help_text='USD per hour of one worker labelled {"spot": true}',
    )
    # Set by `setup_demo` on the rate it ships, as prices_are_examples on the demo
    # deployment: the dashboard says "example" beside it until an operator sets a rate.
    is_example = models.BooleanField(
        default=False,
        help_text="the rates are documented examples (the demo); the dashboard says so",
    )

    class Meta:
        ordering = ["gpu"]
        verbose_name = "GPU rate"

    def __str__(self) -> str:
        return f"{self.gpu}: ${self.on_demand_per_hour}/h on demand, ${self.spot_per_hour}/h spot"

    def save(self, *args: Any, **kwargs: Any) -> None:
        """A rate changed with the flag left as it was: an operator priced it, the example
        label goes (as ModelDeployment.save does for its prices)."""
        if self.pk is not None and self.is_example and self._operator_repriced():
            self.is_example = False
            if kwargs.get("update_fields") is not None:
                kwargs["update_fields"] = {*kwargs["update_fields"], "is_example"}
        super().save(*args, **kwargs)

    def _operator_repriced(self) -> bool:
        fields = ("gpu", "on_demand_per_hour", "spot_per_hour")
        before = type(self).objects.filter(pk=self.pk, is_example=True).values(*fields).first()
        return before is not None and any(before[f] != getattr(self, f) for f in fields)

    def per_hour(self, spot: bool) -> Decimal:
        return self.spot_per_hour if spot else self.on_demand_per_hour
