"""OpenAI's Batch API, stored: uploaded files, batches, and one row per finished line.

A line's row is written once (unique on batch and line number): that is what makes a
batch resumable after its runner dies, and every line's answer exactly once in the output.
"""

from django.db import models

from gateway.accounts.models import Team


class BatchFile(models.Model):
    """A file of /v1/files: a batch's input (purpose "batch") or what a batch wrote (its
    output and error files, purpose "batch_output"). The bytes live in the file storage
    (gateway/batches/storage.py); this row says whose they are and what they hold."""

    class Purpose(models.TextChoices):
        BATCH = "batch", "Batch input"
        BATCH_OUTPUT = "batch_output", "Batch output"

    id = models.CharField(primary_key=True, max_length=40)
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="batch_files")
    purpose = models.CharField(max_length=20, choices=Purpose.choices)
    filename = models.CharField(max_length=255)
    bytes = models.BigIntegerField()
    created_at = models.DateTimeField()
    expires_at = models.DateTimeField(null=True, blank=True)
    # An input file's summary, read once at upload: what a batch over it needs to check.
    line_count = models.PositiveIntegerField(default=0)
    estimated_tokens = models.BigIntegerField(default=0)
    # {endpoint: [model, ...]}: what its well-formed lines ask of whom.
    model_names = models.JSONField(default=dict)

    class Meta:
        indexes = [models.Index(fields=["team", "created_at"])]

    def __str__(self) -> str:
        return f"{self.id} {self.filename}"


class Batch(models.Model):
    class Status(models.TextChoices):
        VALIDATING = "validating"
        FAILED = "failed"
        IN_PROGRESS = "in_progress"
        FINALIZING = "finalizing"
        COMPLETED = "completed"
        EXPIRED = "expired"
        CANCELLING = "cancelling"
        CANCELLED = "cancelled"

    # A runner works on a batch in these states; the others are final.
    ACTIVE = (Status.VALIDATING, Status.IN_PROGRESS, Status.FINALIZING, Status.CANCELLING)

    id = models.CharField(primary_key=True, max_length=40)
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="batches")
    api_key_id = models.CharField(max_length=8, help_text="the creating key's lookup id")
    endpoint = models.CharField(max_length=40)
    input_file_id = models.CharField(max_length=40)
    output_file_id = models.CharField(max_length=40, blank=True, default="")
    error_file_id = models.CharField(max_length=40, blank=True, default="")
    completion_window = models.CharField(max_length=10, default="24h")
    status = models.CharField(max_length=12, choices=Status.choices, default=Status.VALIDATING)
    metadata = models.JSONField(null=True, blank=True)
    errors = models.JSONField(null=True, blank=True)
    total = models.PositiveIntegerField(default=0)
    completed = models.PositiveIntegerField(default=0)
    failed = models.PositiveIntegerField(default=0)
    # Counted against the team's max_batch_queue_tokens while the batch is unfinished.
    enqueued_tokens = models.BigIntegerField(default=0)
    prompt_tokens = models.BigIntegerField(default=0)
    completion_tokens = models.BigIntegerField(default=0)
    cost_micros = models.BigIntegerField(default=0)
    created_at = models.DateTimeField()
    expires_at = models.DateTimeField()
    in_progress_at = models.DateTimeField(null=True, blank=True)
    finalizing_at = models.DateTimeField(null=True, blank=True)
    completed_at = models.DateTimeField(null=True, blank=True)
    failed_at = models.DateTimeField(null=True, blank=True)
    expired_at = models.DateTimeField(null=True, blank=True)
    cancelling_at = models.DateTimeField(null=True, blank=True)
    cancelled_at = models.DateTimeField(null=True, blank=True)
    # Which runner holds the batch, and when it last said so (a dead one's is taken over).
    runner = models.CharField(max_length=100, blank=True, default="")
    heartbeat_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [
            models.Index(fields=["team", "created_at"]),
            models.Index(fields=["status"]),
        ]

    def __str__(self) -> str:
        return f"{self.id} {self.status}"


class BatchLine(models.Model):
    """One finished line of a batch: what its output or error file says about it."""

    batch = models.ForeignKey(Batch, on_delete=models.CASCADE, related_name="lines")
    line_number = models.PositiveIntegerField(help_text="1-based, in the input file")
    custom_id = models.CharField(max_length=512, blank=True, default="")
    request_id = models.CharField(max_length=64)
    status_code = models.PositiveSmallIntegerField(help_text="0: the line was malformed")
    body = models.JSONField(null=True, blank=True)
    error = models.JSONField(null=True, blank=True)
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    cost_micros = models.BigIntegerField(default=0)
    # What the HTTP reply's x-sluice-* headers would have said (max_tokens clamped, turns
    # trimmed, prompt compressed, the tier "auto" chose): the output line's response.headers.
    headers = models.JSONField(default=dict, blank=True)
    finished_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["batch", "line_number"], name="one_row_per_line")
        ]

    def __str__(self) -> str:
        return f"{self.batch_id} line {self.line_number}: {self.status_code}"

    @property
    def succeeded(self) -> bool:
        return self.status_code == 200
