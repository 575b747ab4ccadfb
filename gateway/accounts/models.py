from decimal import Decimal

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


class QuotaPolicy(models.Model):
    """A team's limits. An empty field means no limit of that kind."""

    team = models.OneToOneField(Team, on_delete=models.CASCADE, related_name="quota")
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
    updated_at = models.DateTimeField(auto_now=True)

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
