from django.db import models


class UsageRecord(models.Model):
    """One finished, failed or cancelled request. Written only by the ledger task."""

    class Status(models.TextChoices):
        OK = "ok", "Completed"
        FAILED = "failed", "Failed"
        CANCELLED = "cancelled", "Cancelled by the client"

    request_id = models.CharField(max_length=64, unique=True)
    team = models.ForeignKey("accounts.Team", on_delete=models.CASCADE, related_name="usage")
    api_key_id = models.CharField(max_length=8, blank=True, help_text="the key's lookup id")
    model = models.CharField(max_length=200)
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    cache_result = models.CharField(max_length=20, default="miss")
    ttft_ms = models.PositiveIntegerField(null=True, blank=True)
    latency_ms = models.PositiveIntegerField(default=0)
    worker = models.CharField(max_length=300, blank=True)
    status = models.CharField(max_length=10, choices=Status.choices)
    cost_micros = models.BigIntegerField(default=0)
    # The batch a line of which this request was (docs/batches.md); its cost is discounted.
    batch_id = models.CharField(max_length=40, blank=True, default="")
    created_at = models.DateTimeField()

    class Meta:
        indexes = [models.Index(fields=["team", "created_at"])]

    def __str__(self) -> str:
        return f"{self.request_id} {self.model} {self.status}"
