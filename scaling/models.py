"""Autoscaling policy (one per deployment, every threshold editable in the admin) and the
record of every decision the autoscaler takes, for the dashboard.

The decision logic itself is pure and lives in scaling/autoscale/decide.py; these rows are its
inputs and its diary.
"""

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.utils import timezone

from inference.models import ModelDeployment

_SHARE = [MinValueValidator(0.0), MaxValueValidator(1.0)]


class AutoscalePolicy(models.Model):
    """How one deployment scales. Utilisation is a share (0.8 = 80%) of the deployment's
    batch target (max_in_flight_per_worker), or KV-cache usage when that is higher."""

    class Mode(models.TextChoices):
        REACTIVE = "reactive", "Reactive (act on what is measured)"
        PREDICTIVE = "predictive", "Predictive (act on the demand forecast one start-up ahead)"

    deployment = models.OneToOneField(
        ModelDeployment, on_delete=models.CASCADE, related_name="autoscale_policy"
    )
    enabled = models.BooleanField(default=True, help_text="off: the autoscaler leaves it alone")
    mode = models.CharField(max_length=10, choices=Mode.choices, default=Mode.PREDICTIVE)
    min_replicas = models.PositiveIntegerField(default=1)
    max_replicas = models.PositiveIntegerField(default=8, validators=[MinValueValidator(1)])
    warm_pool = models.PositiveIntegerField(
        default=0, help_text="started replicas held out of traffic, promoted instantly"
    )
    warm_pool_sleeps = models.BooleanField(
        default=False,
        help_text="warm replicas sleep (vLLM sleep mode: weights in host memory, no GPU "
        "memory) where the worker supports it, and are woken in seconds when needed",
    )
    target_utilisation = models.FloatField(
        default=0.7,
        validators=_SHARE,
        help_text="a scaling step sizes the fleet so utilisation lands here",
    )
    scale_up_utilisation = models.FloatField(default=0.8, validators=_SHARE)
    scale_up_queue = models.PositiveIntegerField(
        default=1000, help_text="waiting requests across the deployment"
    )
    ttft_p99_target_s = models.FloatField(default=2.0, validators=[MinValueValidator(0.01)])
    scale_up_window_s = models.PositiveIntegerField(
        default=60, help_text="an up condition must hold this long before acting"
    )
    scale_down_utilisation = models.FloatField(default=0.3, validators=_SHARE)
    scale_down_window_s = models.PositiveIntegerField(default=900)
    scale_up_cooldown_s = models.PositiveIntegerField(default=60)
    scale_down_cooldown_s = models.PositiveIntegerField(
        default=300, help_text="counted from the last scaling step in either direction"
    )
    startup_time_s = models.PositiveIntegerField(
        default=180, help_text="start to ready; predictive mode looks this far ahead"
    )
    allow_spot = models.BooleanField(
        default=False, help_text="start new replicas on spot capacity (batch tier only)"
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name_plural = "autoscale policies"

    def __str__(self) -> str:
        return f"autoscale policy for {self.deployment}"

    def clean(self) -> None:
        """Thresholds that contradict each other would make the fleet oscillate."""
        errors: dict[str, str] = {}
        if self.max_replicas < self.min_replicas:
            errors["max_replicas"] = "must be at least min_replicas"
        if not self.scale_down_utilisation < self.target_utilisation < self.scale_up_utilisation:
            errors["target_utilisation"] = (
                "must lie strictly between the scale-down and scale-up utilisations "
                "(that gap is the hysteresis that prevents flapping)"
            )
        if self.allow_spot and self.deployment_id and self.deployment.tier != "batch":
            errors["allow_spot"] = "spot capacity is only allowed for the batch tier"
        if errors:
            raise ValidationError(errors)


class ScalingDecision(models.Model):
    """One autoscaler decision with the reason a person reads and the numbers it used."""

    class Action(models.TextChoices):
        UP = "up", "Scale up"
        DOWN = "down", "Scale down"
        HOLD = "hold", "Hold"
        WARM = "warm", "Warm pool"
        DRAIN = "drain", "Stop drained"

    deployment = models.ForeignKey(
        ModelDeployment, on_delete=models.CASCADE, related_name="scaling_decisions"
    )
    at = models.DateTimeField(default=timezone.now)
    action = models.CharField(max_length=5, choices=Action.choices)
    rule = models.CharField(max_length=40, help_text="which rule decided (machine-readable)")
    from_replicas = models.PositiveIntegerField()
    to_replicas = models.PositiveIntegerField()
    reason = models.TextField()
    inputs = models.JSONField(default=dict, blank=True)
    actuated = models.BooleanField(default=False, help_text="the actuator carried it out")
    error = models.TextField(blank=True)

    class Meta:
        ordering = ["-at"]
        indexes = [models.Index(fields=["deployment", "-at"], name="scaling_decision_dep_at")]

    def __str__(self) -> str:
        return f"{self.deployment} {self.action} {self.from_replicas}->{self.to_replicas}"
