from decimal import Decimal
from typing import Any

from django.conf import settings
from django.core.validators import MinValueValidator
from django.db import models
from django.utils import timezone


class Team(models.Model):
    name = models.CharField(max_length=100, unique=True)
    slug = models.SlugField(max_length=100, unique=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Membership(models.Model):
    class Role(models.TextChoices):
        MEMBER = "member", "Member"
        ADMIN = "admin", "Admin"

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships"
    )
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=10, choices=Role.choices, default=Role.MEMBER)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "team"], name="one_membership_per_team")
        ]

    def __str__(self) -> str:
        return f"{self.user} in {self.team} ({self.role})"


class QuotaFields(models.Model):
    """The limits a quota policy sets. An empty field means no limit of that kind.

    Shared by a team's own policy and the platform default, so a limit added to one is a
    limit of the other too.
    """

    requests_per_minute = models.PositiveIntegerField(null=True, blank=True)
    tokens_per_minute = models.PositiveIntegerField(null=True, blank=True)
    tokens_per_month = models.PositiveBigIntegerField(null=True, blank=True)
    budget_per_month_usd = models.DecimalField(
        max_digits=12,
        decimal_places=2,
        null=True,
        blank=True,
        validators=[MinValueValidator(Decimal("0"))],
    )
    max_tokens_cap = models.PositiveIntegerField(
        null=True, blank=True, validators=[MinValueValidator(1)]
    )
    # Fair queueing: while workers are full, queued requests are served across teams in
    # proportion to their weights, so a team flooding the queue delays mostly itself.
    queue_weight = models.PositiveSmallIntegerField(
        default=1,
        validators=[MinValueValidator(1)],
        help_text="Share of queued slots relative to other teams (1 = an equal share).",
    )
    max_concurrent_requests = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1)],
        help_text="Most requests of this team generating at once; empty means no cap.",
    )
    # Batch lines are not held to the minute limits; this bounds what a team may queue.
    max_batch_queue_tokens = models.PositiveBigIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1)],
        help_text="Most tokens (prompt estimate + max_tokens) of this team's unfinished "
        "batches; a batch that would pass it is refused at creation. Empty means no limit.",
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        abstract = True


class QuotaPolicy(QuotaFields):
    """A team's own limits, all of them: an empty field is unlimited for this team. A team
    without one follows DefaultQuotaPolicy, live (docs/accounts.md, "Quotas")."""

    class LengthPolicy(models.TextChoices):
        """What a request whose max_tokens does not fit (the model's context window, or
        the team's max_tokens_cap) gets: refused with a 400, max_tokens lowered, or the
        oldest turns left out (gateway/serving/context_trim.py). A request may choose
        its own with x-sluice-context-policy (or the socket's context_policy field)."""

        REFUSE = "refuse", "Refuse (400 context_length_exceeded / max_tokens_over_cap)"
        CLAMP = "clamp", "Clamp max_tokens to what fits (header x-sluice-max-tokens-clamped)"
        TRIM = "trim", "Trim the oldest turns to fit (header x-sluice-context-trimmed)"

    team = models.OneToOneField(Team, on_delete=models.CASCADE, related_name="quota")
    # The team's own: a team without a QuotaPolicy row is refused (the default).
    max_tokens_policy = models.CharField(
        max_length=10,
        choices=LengthPolicy.choices,
        default=LengthPolicy.REFUSE,
        help_text="A prompt plus max_tokens over the context window, or max_tokens over the "
        "cap: refuse; clamp max_tokens to what fits; or trim the oldest turns (keeping system "
        "messages and the last user message) until it fits the window, and refuse over the cap",
    )
    compress_prompts = models.BooleanField(
        default=False,
        help_text="Leave out what a model does not read for meaning before counting and "
        "sending a prompt: trailing whitespace and blank-line runs, a message repeated right "
        "after itself, the middle of very long tool outputs (gateway/serving/compression.py)",
    )

    class Meta:
        verbose_name_plural = "quota policies"
        constraints = [
            models.CheckConstraint(
                condition=models.Q(budget_per_month_usd__gte=0)
                | models.Q(budget_per_month_usd__isnull=True),
                name="budget_not_negative",
            ),
        ]

    def __str__(self) -> str:
        return f"quota for {self.team}"


def default_limits_from_settings() -> dict[str, int]:
    """What the platform default starts as: the DEFAULT_* settings (gateway/settings.py)."""
    return {
        "requests_per_minute": settings.DEFAULT_REQUESTS_PER_MINUTE,
        "tokens_per_minute": settings.DEFAULT_TOKENS_PER_MINUTE,
        "tokens_per_month": settings.DEFAULT_TOKENS_PER_MONTH,
        "max_tokens_cap": settings.DEFAULT_MAX_TOKENS_CAP,
    }


class DefaultQuotaPolicy(QuotaFields):
    """The limits of every team without a QuotaPolicy of its own: exactly one row (id 1).

    A model of its own, not a QuotaPolicy row flagged as the default: QuotaPolicy.team stays
    required, so nothing that reads team policies (dashboards, bills) can take the default
    for a team's by accident, and "one row" is a check constraint rather than a partial
    unique index. The row is created from the DEFAULT_* settings on first read (`load`),
    not by a data migration, so a fresh or flushed database gets it back on first use; from
    then on the admin is the source of truth and the settings are not read again.
    """

    SINGLETON_ID = 1

    class Meta:
        verbose_name = "default quota policy"
        verbose_name_plural = "default quota policy"
        constraints = [
            models.CheckConstraint(condition=models.Q(id=1), name="one_default_quota_policy"),
            models.CheckConstraint(
                condition=models.Q(budget_per_month_usd__gte=0)
                | models.Q(budget_per_month_usd__isnull=True),
                name="default_budget_not_negative",
            ),
        ]

    def __str__(self) -> str:
        return "default quota policy (teams without their own)"

    def save(self, *args: Any, **kwargs: Any) -> None:
        self.pk = self.SINGLETON_ID
        super().save(*args, **kwargs)

    @classmethod
    def load(cls) -> "DefaultQuotaPolicy":
        """The row, created from the settings if missing (a concurrent creator wins: its
        insert makes ours fail and get_or_create reads it instead)."""
        policy, _ = cls.objects.get_or_create(
            pk=cls.SINGLETON_ID, defaults=default_limits_from_settings()
        )
        return policy


class ApiKey(models.Model):
    """A team's API key. Only the SHA-256 of the secret part is stored."""

    class Scope(models.TextChoices):
        INFERENCE = "inference", "Inference (OpenAI-compatible API)"
        MANAGE = "manage", "Manage the team (keys, quotas, usage)"

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="api_keys")
    lookup_id = models.CharField(max_length=8, unique=True, editable=False)
    secret_hash = models.CharField(max_length=64, editable=False)
    name = models.CharField(max_length=100, blank=True)
    scopes = models.JSONField(default=list)
    allowed_models = models.JSONField(default=list, blank=True)
    requests_per_minute = models.PositiveIntegerField(null=True, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    # The key (its lookup id) that minted this one through the management API, if any.
    created_by_key = models.CharField(max_length=8, blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        verbose_name = "API key"

    def __str__(self) -> str:
        return f"sk-sluice-{self.lookup_id}-… ({self.name or 'unnamed'})"
