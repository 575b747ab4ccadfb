"""The web chat's conversations, kept per user so a reload or another browser resumes them.

Writes go through gateway/chat/actions.py; the JSON API (gateway/chat/api.py) and the
socket (gateway/chat/history.py) only read and call those.
"""

from django.conf import settings
from django.db import models

from inference.chat_tools import MAX_CALL_ID_CHARS

DEFAULT_TITLE = "New conversation"
TITLE_MAX_LENGTH = 200
MODEL_MAX_LENGTH = 200
# A system prompt is sent with every message of its conversation: long ones cost each time.
SYSTEM_PROMPT_MAX_LENGTH = 20_000


class Conversation(models.Model):
    """One user's thread, with the settings every message of it is sent with."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="conversations"
    )
    title = models.CharField(max_length=TITLE_MAX_LENGTH, default=DEFAULT_TITLE)
    # A deployment's name or "auto"; empty: whatever the page offers first.
    model = models.CharField(max_length=MODEL_MAX_LENGTH, blank=True)
    system_prompt = models.TextField(blank=True, max_length=SYSTEM_PROMPT_MAX_LENGTH)
    temperature = models.FloatField(null=True, blank=True, help_text="empty: the model's default")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)  # the sidebar lists the latest first

    class Meta:
        ordering = ["-updated_at", "-id"]
        indexes = [models.Index(fields=["user", "-updated_at"])]

    def __str__(self) -> str:
        return f"{self.title} ({self.user_id})"


class Message(models.Model):
    """A user's message, a reply, or a tool's result; a reply records what it cost and how
    it was served, and the tool calls it made, each answered by a later tool message."""

    class Role(models.TextChoices):
        USER = "user", "User"
        ASSISTANT = "assistant", "Assistant"
        TOOL = "tool", "Tool"

    conversation = models.ForeignKey(
        Conversation, on_delete=models.CASCADE, related_name="messages"
    )
    role = models.CharField(max_length=10, choices=Role.choices)
    content = models.TextField()  # a reply that only calls tools has none: ""
    # A reply's tool calls as OpenAI's assistant message has them ([{id, type: function,
    # function: {name, arguments}}]); null for a reply of text only.
    tool_calls = models.JSONField(null=True, blank=True)
    # A tool message: the id of the call whose result it is.
    tool_call_id = models.CharField(max_length=MAX_CALL_ID_CHARS, blank=True)
    # Replies only: the deployment that answered (for model "auto", the one it routed to),
    # the request id (the usage ledger's), tokens, the caches' outcome, cost and latency.
    model = models.CharField(max_length=MODEL_MAX_LENGTH, blank=True)
    request_id = models.CharField(max_length=64, blank=True)
    prompt_tokens = models.PositiveIntegerField(null=True, blank=True)
    completion_tokens = models.PositiveIntegerField(null=True, blank=True)
    cache_result = models.CharField(max_length=20, blank=True)
    cost_micros = models.BigIntegerField(null=True, blank=True)
    ttft_ms = models.PositiveIntegerField(null=True, blank=True)
    stopped = models.BooleanField(default=False, help_text="the user stopped the reply")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return f"{self.role}: {self.content[:40]}"
