"""The web chat's conversations as a small JSON API under /chat/api/ (docs/websocket.md,
"Conversations").

Session login only, CSRF on every write (Django's middleware: the page sends the
csrftoken cookie back as X-CSRFToken). A conversation is looked up with its user, so
another user's id answers 404, exactly as an id that does not exist.
"""

import json
from collections.abc import Callable
from typing import Any

from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.http import require_http_methods

from gateway.chat import actions
from gateway.chat.models import Conversation, Message

# The sidebar shows the latest ones; older ones are a page away (?offset=100).
PAGE_SIZE = 100

View = Callable[..., HttpResponse]


def _error(status: int, message: str, code: str, param: str | None = None) -> JsonResponse:
    # The shape and types of the API's errors (gateway/serving/errors.py).
    error = {"message": message, "type": "invalid_request_error", "param": param, "code": code}
    return JsonResponse({"error": error}, status=status)


def _logged_in(view: View) -> View:
    """401 in JSON rather than a redirect to the login page: the caller is a script."""

    def checked(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not request.user.is_authenticated:
            return _error(401, "Log in to use conversations.", "unauthenticated")
        try:
            return view(request, *args, **kwargs)
        except actions.ConversationNotFound:
            return _error(404, "No such conversation.", "conversation_not_found")
        except actions.TooManyConversations as exc:
            return _error(409, str(exc), "too_many_conversations")
        except ValidationError as exc:
            field, messages = next(iter(exc.message_dict.items()))
            return _error(400, f"{field}: {' '.join(messages)}", "invalid_request", field)

    return checked


def _user_id(request: HttpRequest) -> int:
    assert request.user.pk is not None  # _logged_in let it through
    return int(request.user.pk)


def _json_body(request: HttpRequest) -> dict[str, Any]:
    if not request.body:
        return {}
    try:
        body = json.loads(request.body)
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise ValidationError({"body": "Not JSON (or nested too deep)."}) from None
    if not isinstance(body, dict):
        raise ValidationError({"body": "Must be a JSON object."})
    return body


def conversation_summary(conversation: Conversation) -> dict[str, Any]:
    return {
        "id": conversation.pk,
        "title": conversation.title,
        "model": conversation.model,
        "system_prompt": conversation.system_prompt,
        "temperature": conversation.temperature,
        "created_at": conversation.created_at.isoformat(),
        "updated_at": conversation.updated_at.isoformat(),
    }


def message_fields(message: Message) -> dict[str, Any]:
    """A message as the page and other clients read it back; a reply's `tool_calls` and a
    tool result's `tool_call_id` are there only when it has them, in OpenAI's message shape:
    its role, content, tool_calls and tool_call_id can be sent back to the socket (the
    record's other fields, id, model and cost, cannot: a chat message refuses them)."""
    fields: dict[str, Any] = {"id": message.pk, "role": message.role, "content": message.content}
    if message.tool_calls:
        fields["tool_calls"] = message.tool_calls
    if message.role == Message.Role.TOOL:
        fields["tool_call_id"] = message.tool_call_id
    if message.role == Message.Role.ASSISTANT:
        fields.update(
            model=message.model,
            request_id=message.request_id,
            prompt_tokens=message.prompt_tokens,
            completion_tokens=message.completion_tokens,
            cache=message.cache_result,
            cost_micros=message.cost_micros,
            ttft_ms=message.ttft_ms,
            stopped=message.stopped,
        )
    return fields


MAX_OFFSET_DIGITS = 9


@require_http_methods(["GET", "POST"])
@_logged_in
def conversations(request: HttpRequest) -> HttpResponse:
    """GET: the user's conversations, latest first. POST: a new one."""
    if request.method == "POST":
        created = actions.create_conversation(_user_id(request), _json_body(request))
        return JsonResponse(conversation_summary(created), status=201)
    offset = request.GET.get("offset", "0")
    # isascii: "²".isdigit() is true and int() refuses it; the cap keeps OFFSET in range.
    if not (offset.isascii() and offset.isdigit()) or len(offset) > MAX_OFFSET_DIGITS:
        raise ValidationError({"offset": f"Must be a whole number under 10^{MAX_OFFSET_DIGITS}."})
    start = int(offset)
    page = list(
        Conversation.objects.filter(user_id=_user_id(request))[start : start + PAGE_SIZE + 1]
    )
    return JsonResponse(
        {
            "conversations": [conversation_summary(c) for c in page[:PAGE_SIZE]],
            "has_more": len(page) > PAGE_SIZE,
        }
    )


@require_http_methods(["GET", "PATCH", "DELETE"])
@_logged_in
def conversation(request: HttpRequest, conversation_id: int) -> HttpResponse:
    """GET: its settings and messages. PATCH: rename or change settings. DELETE: gone."""
    mine = actions.owned_conversation(_user_id(request), conversation_id)
    if request.method == "DELETE":
        actions.delete_conversation(mine)
        return HttpResponse(status=204)
    if request.method == "PATCH":
        mine = actions.change_conversation(mine, _json_body(request))
    return JsonResponse(
        {
            **conversation_summary(mine),
            "messages": [message_fields(m) for m in mine.messages.all()],
        }
    )


@require_http_methods(["GET"])
@_logged_in
def messages(request: HttpRequest, conversation_id: int) -> HttpResponse:
    """The conversation's messages in order, each reply with what it cost."""
    mine = actions.owned_conversation(_user_id(request), conversation_id)
    return JsonResponse({"messages": [message_fields(m) for m in mine.messages.all()]})
