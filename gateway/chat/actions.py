"""Every write to the web chat's conversations goes through these functions.

Each validates its input and writes in one transaction. Ownership is part of every write
that takes an id: a conversation is looked up with its user, so another user's id is
simply not found (the API answers 404, never 403, so ids cannot be probed).
"""

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.conf import settings as django_settings
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from foundation.text import storable, storable_text
from gateway.chat.models import (
    DEFAULT_TITLE,
    MODEL_MAX_LENGTH,
    SYSTEM_PROMPT_MAX_LENGTH,
    TITLE_MAX_LENGTH,
    Conversation,
    Message,
)

# A title made from the first question: long enough to tell conversations apart.
AUTO_TITLE_LENGTH = 60
MAX_TEMPERATURE = 2.0  # OpenAI's range, which vLLM shares
# Ids are BigAutoField: a larger number is no id, and the database would refuse the query.
MAX_ID = 2**63 - 1


class ConversationNotFound(Exception):
    """No conversation with that id belongs to this user (it may belong to another)."""


class TooManyConversations(Exception):
    """The user keeps CHAT_MAX_CONVERSATIONS already."""

    def __init__(self, limit: int) -> None:
        super().__init__(
            f"You have {limit} conversations, the most one account keeps: delete some to "
            "start a new one."
        )


@dataclass(frozen=True)
class ToolResult:
    """A tool's result that the client sent back: the call it answers, and its text."""

    tool_call_id: str
    content: str


@dataclass(frozen=True)
class Reply:
    """A finished (or stopped) reply, as the socket saw it: its text, and the tool calls it
    made (None: text only)."""

    content: str
    model: str
    request_id: str
    prompt_tokens: int
    completion_tokens: int
    cache_result: str
    cost_micros: int
    ttft_ms: int | None
    stopped: bool
    tool_calls: list[dict[str, Any]] | None = None


@dataclass(frozen=True)
class RecordedExchange:
    conversation_id: int
    user_message_id: int | None
    reply_id: int
    tool_message_ids: tuple[int, ...] = ()


def owned_conversation(user_id: int, conversation_id: Any) -> Conversation:
    """The user's conversation by id; ConversationNotFound for anyone else's or a bad id."""
    if isinstance(conversation_id, bool) or not isinstance(conversation_id, int | str):
        raise ConversationNotFound(conversation_id)
    try:
        wanted = int(conversation_id)
        if not 0 < wanted <= MAX_ID:
            raise ValueError(conversation_id)
        return Conversation.objects.get(pk=wanted, user_id=user_id)
    except (ValueError, Conversation.DoesNotExist):
        raise ConversationNotFound(conversation_id) from None


@transaction.atomic
def create_conversation(user_id: int, settings: Mapping[str, Any] | None = None) -> Conversation:
    """A new, empty conversation; `settings` as change_conversation takes them. The user's
    row is locked while their conversations are counted, so creations at the same moment
    cannot pass CHAT_MAX_CONVERSATIONS together."""
    conversation = Conversation(user_id=user_id)
    _apply(conversation, {"title": DEFAULT_TITLE, **(settings or {})})
    get_user_model().objects.select_for_update().filter(pk=user_id).first()
    limit = django_settings.CHAT_MAX_CONVERSATIONS
    if Conversation.objects.filter(user_id=user_id).count() >= limit:
        raise TooManyConversations(limit)
    conversation.save()
    return conversation


def messages_left(conversation_id: int, replace_from: int | None) -> int:
    """How many more messages the conversation may keep (CHAT_MAX_MESSAGES), counting those
    a replacement deletes as gone."""
    kept = Message.objects.filter(conversation_id=conversation_id)
    if replace_from is not None:
        kept = kept.filter(id__lt=replace_from)
    left: int = django_settings.CHAT_MAX_MESSAGES - kept.count()
    return left


@transaction.atomic
def change_conversation(conversation: Conversation, changes: Mapping[str, Any]) -> Conversation:
    """Rename it, or change the model, system prompt or temperature its messages go with."""
    _apply(conversation, changes)
    conversation.save()
    return conversation


@transaction.atomic
def delete_conversation(conversation: Conversation) -> None:
    conversation.delete()  # its messages go with it (on_delete=CASCADE)


@transaction.atomic
def record_exchange(
    user_id: int,
    conversation_id: int,
    question: str | None,
    reply: Reply,
    replace_from: int | None = None,
    tool_results: Sequence[ToolResult] = (),
) -> RecordedExchange:
    """Keep a question (or the tool results the reply follows) and its reply, once the
    reply is done or stopped. A reply that calls tools keeps its calls, and the results
    sent back with the next message are kept before that message's reply, so the
    conversation reads back in the order a worker must be sent it.

    `replace_from`: the id of an earlier user message this exchange replaces (regenerate,
    or edit and resend): it and everything after it go, in the same transaction, so a
    failed reply never leaves the conversation without the message it replaced. The
    conversation row is locked, so two sockets writing one conversation take turns.
    """
    try:
        conversation = Conversation.objects.select_for_update().get(
            pk=conversation_id, user_id=user_id
        )
    except Conversation.DoesNotExist:
        raise ConversationNotFound(conversation_id) from None
    if replace_from is not None:
        conversation.messages.filter(id__gte=replace_from).delete()
    # Kept, with U+FFFD for what no database stores (foundation/text.py), not lost.
    question = None if question is None else storable(question)
    asked = None
    if question is not None:
        asked = Message.objects.create(
            conversation=conversation, role=Message.Role.USER, content=question
        )
        if (
            conversation.title == DEFAULT_TITLE
            and not conversation.messages.exclude(pk=asked.pk).exists()
        ):
            conversation.title = title_from(question)
    results = [
        Message.objects.create(
            conversation=conversation,
            role=Message.Role.TOOL,
            content=storable(result.content),
            tool_call_id=result.tool_call_id,
        )
        for result in tool_results
    ]
    answered = Message.objects.create(
        conversation=conversation,
        role=Message.Role.ASSISTANT,
        content=storable(reply.content),
        tool_calls=storable(reply.tool_calls),
        model=reply.model[:MODEL_MAX_LENGTH],
        request_id=reply.request_id,
        prompt_tokens=reply.prompt_tokens,
        completion_tokens=reply.completion_tokens,
        cache_result=reply.cache_result,
        cost_micros=reply.cost_micros,
        ttft_ms=reply.ttft_ms,
        stopped=reply.stopped,
    )
    conversation.updated_at = timezone.now()
    conversation.save(update_fields=["title", "updated_at"])
    return RecordedExchange(
        conversation.pk,
        asked.pk if asked else None,
        answered.pk,
        tuple(result.pk for result in results),
    )


def title_from(question: str) -> str:
    """The first words of the first question, on one line."""
    text = re.sub(r"\s+", " ", question).strip()
    if len(text) <= AUTO_TITLE_LENGTH:
        return text or DEFAULT_TITLE
    return text[: AUTO_TITLE_LENGTH - 1].rsplit(" ", 1)[0].rstrip(",;:.") + "…"


def _apply(conversation: Conversation, changes: Mapping[str, Any]) -> None:
    unknown = sorted(set(changes) - {"title", "model", "system_prompt", "temperature"})
    if unknown:
        raise ValidationError({unknown[0]: "Unknown field."})
    if "title" in changes:
        conversation.title = _text(changes["title"], "title", TITLE_MAX_LENGTH, required=True)
    if "model" in changes:
        conversation.model = _text(changes["model"], "model", MODEL_MAX_LENGTH)
    if "system_prompt" in changes:
        conversation.system_prompt = _text(
            changes["system_prompt"], "system_prompt", SYSTEM_PROMPT_MAX_LENGTH, strip=False
        )
    if "temperature" in changes:
        conversation.temperature = _temperature(changes["temperature"])


def _text(
    value: Any, field: str, max_length: int, required: bool = False, strip: bool = True
) -> str:
    if not isinstance(value, str):
        raise ValidationError({field: "Must be a string."})
    if not storable_text(value):
        raise ValidationError({field: "Must be text: no NUL character, no unpaired surrogate."})
    text = re.sub(r"\s+", " ", value).strip() if strip else value
    if required and not text:
        raise ValidationError({field: "Must not be empty."})
    if len(text) > max_length:
        raise ValidationError({field: f"At most {max_length} characters."})
    return text


def _temperature(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValidationError({"temperature": "Must be a number, or null for the default."})
    if not 0 <= value <= MAX_TEMPERATURE:
        raise ValidationError({"temperature": f"Must be from 0 to {MAX_TEMPERATURE:g}."})
    return float(value)
