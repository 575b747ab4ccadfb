"""Rollup tables the dashboard reads instead of the ledger, an audit log of tuning changes,
and a per-minute sample of the fleet (the only record of how many workers ran when).

Rollups are derived data: gateway/dashboard/rollup.py recomputes recent buckets from the
ledger every 30 seconds (an upsert, so re-running it is harmless and late ledger rows are
counted), and `manage.py rollup_usage --hours N` rebuilds any range.
"""

from django.conf import settings
from django.db import models

from gateway.accounts.models import Team
from inference.models import ModelDeployment


class Rollup(models.Model):
    """Usage of one team on one model in one time bucket. lat_i / ttft_i count requests
    per latency bucket (gateway/dashboard/histogram.py) for P50/P99 estimates."""

    bucket = models.DateTimeField()
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+")
    model = models.CharField(max_length=200)
    requests = models.PositiveIntegerField(default=0)
    errors = models.PositiveIntegerField(default=0)
    cancelled = models.PositiveIntegerField(default=0)
    prompt_tokens = models.PositiveBigIntegerField(default=0)
    completion_tokens = models.PositiveBigIntegerField(default=0)
    cost_micros = models.BigIntegerField(default=0, help_text="billed at the token prices")
    hits_exact = models.PositiveIntegerField(default=0)
    hits_semantic = models.PositiveIntegerField(default=0)
    coalesced = models.PositiveIntegerField(default=0)
    misses = models.PositiveIntegerField(default=0)
    bypass = models.PositiveIntegerField(default=0)
    latency_ms_sum = models.PositiveBigIntegerField(default=0)
    ttft_ms_sum = models.PositiveBigIntegerField(default=0)
    ttft_count = models.PositiveIntegerField(default=0)
    lat_0 = models.PositiveIntegerField(default=0)
    lat_1 = models.PositiveIntegerField(default=0)
    lat_2 = models.PositiveIntegerField(default=0)
    lat_3 = models.PositiveIntegerField(default=0)
    lat_4 = models.PositiveIntegerField(default=0)
    lat_5 = models.PositiveIntegerField(default=0)
    lat_6 = models.PositiveIntegerField(default=0)
    lat_7 = models.PositiveIntegerField(default=0)
    lat_8 = models.PositiveIntegerField(default=0)
    lat_9 = models.PositiveIntegerField(default=0)
    lat_10 = models.PositiveIntegerField(default=0)
    lat_11 = models.PositiveIntegerField(default=0)
    ttft_0 = models.PositiveIntegerField(default=0)
    ttft_1 = models.PositiveIntegerField(default=0)
    ttft_2 = models.PositiveIntegerField(default=0)
    ttft_3 = models.PositiveIntegerField(default=0)
    ttft_4 = models.PositiveIntegerField(default=0)
    ttft_5 = models.PositiveIntegerField(default=0)
    ttft_6 = models.PositiveIntegerField(default=0)
    ttft_7 = models.PositiveIntegerField(default=0)
    ttft_8 = models.PositiveIntegerField(default=0)
    ttft_9 = models.PositiveIntegerField(default=0)
    ttft_10 = models.PositiveIntegerField(default=0)
    ttft_11 = models.PositiveIntegerField(default=0)

    class Meta:
        abstract = True


class MinuteRollup(Rollup):
    """Kept for ROLLUP_MINUTE_RETENTION_H hours: the hour view and the source of the hour
    tables. Split by API key too (hour buckets keep keys in KeyHourRollup instead, so the
    wide hour table stays at teams x models rows per hour)."""

    api_key_id = models.CharField(max_length=8, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["bucket", "team", "model", "api_key_id"], name="minute_rollup_unique"
            )
        ]
        indexes = [models.Index(fields=["team", "bucket"], name="minute_rollup_team")]

    def __str__(self) -> str:
        return f"{self.team_id} {self.model} {self.api_key_id} minute {self.bucket:%Y-%m-%d %H:%M}"


class HourRollup(Rollup):
    """Kept for good: the day and month views, costs and bills."""

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["bucket", "team", "model"], name="hour_rollup_unique")
        ]
        indexes = [models.Index(fields=["team", "bucket"], name="hour_rollup_team")]

    def __str__(self) -> str:
        return f"{self.team_id} {self.model} hour {self.bucket:%Y-%m-%d %H:%M}"


class KeyHourRollup(models.Model):
    """Usage of one API key in one hour: the Teams page's top keys over days and months."""

    bucket = models.DateTimeField()
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+")
    api_key_id = models.CharField(max_length=8, blank=True)
    requests = models.PositiveIntegerField(default=0)
    errors = models.PositiveIntegerField(default=0)
    prompt_tokens = models.PositiveBigIntegerField(default=0)
    completion_tokens = models.PositiveBigIntegerField(default=0)
    cost_micros = models.BigIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["bucket", "team", "api_key_id"], name="key_hour_rollup_unique"
            )
        ]

    def __str__(self) -> str:
        return f"key {self.api_key_id} hour {self.bucket:%Y-%m-%d %H:%M}"


class FleetSample(models.Model):
    """Workers of one deployment by state in one minute, with their load. Worker-hours
    (and so GPU cost) are the sum of these samples: a minute without a sample (the rollup
    task not running) costs nothing on the dashboard."""

    bucket = models.DateTimeField()
    deployment = models.ForeignKey(ModelDeployment, on_delete=models.CASCADE, related_name="+")
    starting = models.PositiveIntegerField(default=0)
    warm = models.PositiveIntegerField(default=0)
    ready = models.PositiveIntegerField(default=0)
    draining = models.PositiveIntegerField(default=0)
    dead = models.PositiveIntegerField(default=0)
    running = models.FloatField(default=0.0, help_text="requests running, summed over workers")
    waiting = models.FloatField(default=0.0, help_text="requests queued, summed over workers")
    gateway_queue = models.FloatField(
        default=0.0,
        help_text="requests waiting in the gateways' dispatch queues, summed over gateway "
        "processes (scaling/routing/queue_depth.py)",
    )
    kv_usage = models.FloatField(default=0.0, help_text="mean KV-cache usage of its workers")
    # Recorded as sampled, at the rates then in force, so a later price change never
    # rewrites history. Null on samples taken before it existed: those are costed at the
    # deployment's gpu_cost_per_hour now (gateway/dashboard/costs.py).
    gpu_cost_per_hour_micros = models.BigIntegerField(
        null=True,
        blank=True,
        help_text="what its workers holding a GPU cost per hour at this minute, in "
        "micro-dollars: each at its gpu label's rate (spot or on demand), else at the "
        "deployment's gpu_cost_per_hour",
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["bucket", "deployment"], name="fleet_sample_unique")
        ]

    def __str__(self) -> str:
        return f"fleet of {self.deployment_id} at {self.bucket:%Y-%m-%d %H:%M}"


class FleetHour(models.Model):
    """Fleet samples of one deployment summed over an hour: each state column holds
    worker-minutes, `minutes` how many samples there were (their mean is sum / minutes),
    and gpu_cost_per_hour_micros / 60 the hour's GPU cost."""

    bucket = models.DateTimeField()
    deployment = models.ForeignKey(ModelDeployment, on_delete=models.CASCADE, related_name="+")
    minutes = models.PositiveIntegerField(default=0)
    starting = models.PositiveIntegerField(default=0)
    warm = models.PositiveIntegerField(default=0)
    ready = models.PositiveIntegerField(default=0)
    draining = models.PositiveIntegerField(default=0)
    dead = models.PositiveIntegerField(default=0)
    running = models.FloatField(default=0.0)
    waiting = models.FloatField(default=0.0)
    gateway_queue = models.FloatField(default=0.0)
    gpu_cost_per_hour_micros = models.BigIntegerField(
        null=True,
        blank=True,
        help_text="the samples' gpu_cost_per_hour_micros summed (/ 60 is the hour's GPU "
        "cost); null when a sample of the hour has none (taken before it was recorded)",
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["bucket", "deployment"], name="fleet_hour_unique")
        ]

    def __str__(self) -> str:
        return f"fleet of {self.deployment_id} in hour {self.bucket:%Y-%m-%d %H:%M}"


class TuningChange(models.Model):
    """One saved change to a cache or autoscale policy: who, when, every changed field's
    old and new value. A revert is itself a change (pointing at the one it undid)."""

    class Target(models.TextChoices):
        CACHE = "cache", "Cache policy"
        AUTOSCALE = "autoscale", "Autoscale policy"

    at = models.DateTimeField(auto_now_add=True)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    target = models.CharField(max_length=10, choices=Target.choices)
    team = models.ForeignKey(
        Team,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="+",
        help_text="cache: empty means global",
    )
    deployment = models.ForeignKey(
        ModelDeployment, null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    old = models.JSONField(default=dict)
    new = models.JSONField(default=dict)
    reverts = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="reverted_by"
    )

    class Meta:
        ordering = ["-at", "-id"]
        indexes = [models.Index(fields=["-at"], name="tuning_change_at")]

    def __str__(self) -> str:
        scope = self.deployment or self.team or "global"
        return f"{self.get_target_display()} of {scope} at {self.at:%Y-%m-%d %H:%M:%S}"
