from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models.functions import Coalesce

# How long a sampled reply is kept where a team turns cache_sampled on: the project seed's
# five-minute default. Deterministic replies keep an hour (CACHE_EXACT_TTL_S,
# CACHE_SEMANTIC_TTL_S); docs/caching.md, "How long replies are kept", says why they differ.
SAMPLED_TTL_S = 300


class CachePolicy(models.Model):
    """How a team's replies are cached. The row without a team is the global default;
    a team without its own row uses it (and without either, the settings' defaults)."""

    team = models.OneToOneField(
        "accounts.Team",
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="cache_policy",
        help_text="Empty: the global default for teams without a policy of their own.",
    )
    exact_enabled = models.BooleanField(default=True)
    semantic_enabled = models.BooleanField(default=True)
    cache_sampled = models.BooleanField(
        default=False,
        help_text="Also cache requests with temperature > 0 and no seed: "
        "a replay then returns one earlier draw.",
    )
    exact_ttl_s = models.PositiveIntegerField(default=3600, validators=[MinValueValidator(1)])
    semantic_ttl_s = models.PositiveIntegerField(default=3600, validators=[MinValueValidator(1)])
    sampled_ttl_s = models.PositiveIntegerField(
        default=SAMPLED_TTL_S,
        validators=[MinValueValidator(1)],
        help_text="How long a sampled reply (kept only with cache_sampled) lives in either "
        "cache, unless a request asks otherwise: one draw stands in for the others briefly.",
    )
    max_age_s = models.PositiveIntegerField(
        default=7 * 24 * 3600,
        # At most a year: the semantic cache's reported-entry markers live 366 days.
        validators=[MinValueValidator(1), MaxValueValidator(365 * 24 * 3600)],
        help_text="Hard maximum age of any entry, whatever TTL a request asks for "
        "(at most a year).",
    )
    similarity_threshold = models.FloatField(
        default=0.92,
        validators=[MinValueValidator(0.5), MaxValueValidator(1.0)],
        help_text="Cosine similarity a semantic candidate needs before verification.",
    )
    max_false_hit_rate = models.FloatField(
        null=True,
        blank=True,
        validators=[MinValueValidator(0.005), MaxValueValidator(0.2)],
        help_text="The largest share of semantic hits allowed to be wrong (0.01 = 1%): a "
        "candidate answers only if its calibrated false-hit probability is at most this, "
        "with verification always on. Empty: the similarity threshold decides, as before.",
    )
    audit_rate = models.FloatField(
        default=0.0,
        validators=[MinValueValidator(0.0), MaxValueValidator(1.0)],
        help_text="Share of semantic hits answered again by the model in the background, "
        "billed to the platform, not the team, and compared with the cached reply: a "
        "disagreement takes the entry out of service for other questions, agreements let "
        "it answer a little further under an error bound. 0: no audit.",
    )
    verify_enabled = models.BooleanField(
        default=True,
        help_text="Reject candidates that differ in negation, numbers, dates, "
        "names or roles, however similar their embeddings.",
    )
    max_entry_bytes = models.PositiveIntegerField(
        default=256 * 1024, validators=[MinValueValidator(1)]
    )
    memory_budget_bytes = models.PositiveBigIntegerField(
        default=64 * 1024 * 1024,
        validators=[MinValueValidator(1024)],
        help_text="Per cache (exact, semantic) of the team; beyond it, entries are evicted "
        "by GreedyDual-Size-Frequency.",
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name_plural = "cache policies"
        constraints = [
            # NULLs are distinct in a plain unique index; coalescing makes them collide.
            models.UniqueConstraint(
                Coalesce("team", models.Value(0)), name="one_global_cache_policy"
            ),
        ]

    def __str__(self) -> str:
        return f"cache policy of {self.team}" if self.team_id else "global cache policy"
