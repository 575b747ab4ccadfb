"""What the chat socket keeps of a conversation (docs/websocket.md, "Conversations").

A logged-in user's `chat` message may name one of their conversations: once the reply is
done (or stopped), the question and the reply, with its model, tokens, cache result, cost
and time to first token, are saved to it (gateway/chat/actions.py). The consumer only
calls `ChatThread.from_message` before the reply and `record` after it; the page sends the
whole message list each time, so the socket never has to read the history back.

With tools, an exchange may begin with tool results instead of a question: a reply that
called tools is kept with its calls, and the next message's trailing `tool` messages (the
results, each with the id of the call it answers) are kept before that message's reply. The
conversation then reads back (`/chat/api/`) as the message list a worker takes: the user's
question, the assistant's calls, each result, the answer.
"""

import logging
from dataclasses import dataclass
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import DatabaseError

from foundation.db import database_read
from gateway.chat import actions
from gateway.chat.models import Message
from gateway.serving.admission import Credential, SessionUserCredential
from gateway.serving.completion import Completion
from gateway.serving.errors import ApiError
from inference.reply import ReplyAssembler

logger = logging.getLogger(__name__)

# Fields of a `chat` message that are the socket's, not the chat completion's.
THREAD_FIELDS = ("conversation", "replace_from")


def completion_body(content: dict[str, Any]) -> dict[str, Any]:
    """The chat completion in a `chat` message: everything but its type and thread."""
    return {k: v for k, v in content.items() if k != "type" and k not in THREAD_FIELDS}


def reply_figures(run: Completion) -> dict[str, Any]:
    """Cost and time to first token of a finished reply, for the done event and the
    record. The cost is what the tokens shown cost, none when a cache or another
    request's generation served it (as billed: docs/caching.md)."""
    prompt, completion = run.used_tokens()
    cached = run.cached_prompt_tokens()
    cost = (
        0
        if run.served_without_generating
        else run.deployment.cost_micros(
            prompt, completion, cached_prompt_tokens=cached, spot=run.on_spot
        )
    )
    ttft_ms = None if run.ttft_s is None else round(run.ttft_s * 1000)
    return {"cost_micros": cost, "ttft_ms": ttft_ms}


@dataclass(frozen=True)
class ChatThread:
    """Where a reply is saved: a conversation of the user's, or nowhere."""

    user_id: int | None = None
    conversation_id: int | None = None
    replace_from: int | None = None  # a user message this exchange replaces, and all after

    @classmethod
    async def from_message(
        cls, credential: Credential, content: dict[str, Any]
    ) -> "ChatThread | ApiError":
        """The thread a `chat` message names, checked before any token is spent: an
        error to send when it names a conversation that is not the user's."""
        conversation, replace_from = content.get("conversation"), content.get("replace_from")
        if conversation is None:
            if replace_from is not None:
                return _invalid("'replace_from' needs a 'conversation'.", "replace_from")
            return cls()
        if not isinstance(credential, SessionUserCredential):
            message = "Conversations are kept for logged-in users; a key's socket sends none."
            return _invalid(message, "conversation")
        for name, value in (("conversation", conversation), ("replace_from", replace_from)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                return _invalid(f"'{name}' must be an id (an integer).", name)
        found = await database_read(_question_ids)(credential.user_id, conversation)
        if found is None:
            return ApiError(404, "No such conversation.", "conversation_not_found", "conversation")
        if replace_from is not None and replace_from not in found:
            message = "'replace_from' must be the id of a user message in this conversation."
            return _invalid(message, "replace_from")
        left = await database_read(actions.messages_left)(conversation, replace_from)
        if left < 2 + len(_tool_results(content)):  # the question (or results), the reply
            message = (
                f"This conversation holds {settings.CHAT_MAX_MESSAGES} messages, the most "
                "one keeps: start a new conversation to go on."
            )
            return ApiError(409, message, "conversation_full", "conversation")
        if replace_from is not None and not _ends_with_a_question(content.get("messages")):
            # What replaces a question is a question: tool results sent with replace_from
            # would delete the question and the call they answer, and keep only themselves.
            message = (
                "'replace_from' replaces a user message: the last message sent must be the "
                "user's. Send tool results without it."
            )
            return _invalid(message, "replace_from")
        return cls(credential.user_id, conversation, replace_from)

    async def record(
        self, body: dict[str, Any], run: Completion, assembled: ReplyAssembler, stopped: bool
    ) -> dict[str, Any]:
        """Save the question (or the tool results) and the reply, its tool calls with it; the
        ids for the done event ({} when not kept).
        A conversation deleted while its reply streamed, or a database failure, loses
        only this record: the reply has reached the user and been billed already."""
        if self.user_id is None or self.conversation_id is None:
            return {}
        prompt, completion = run.used_tokens()
        figures = reply_figures(run)
        reply = actions.Reply(
            content=assembled.text,
            model=run.deployment.name,
            request_id=run.request_id,
            prompt_tokens=prompt,
            completion_tokens=completion,
            cache_result=str(run.cache_result),
            cost_micros=figures["cost_micros"],
            ttft_ms=figures["ttft_ms"],
            stopped=stopped,
            tool_calls=assembled.tool_calls,
        )
        try:
            saved = await sync_to_async(actions.record_exchange)(
                self.user_id,
                self.conversation_id,
                _question(body),
                reply,
                self.replace_from,
                _tool_results(body),
            )
        except actions.ConversationNotFound:
            return {}
        except DatabaseError:
            logger.exception("conversation %s: reply not saved", self.conversation_id)
            return {}
        ids = {"tool_message_ids": list(saved.tool_message_ids)} if saved.tool_message_ids else {}
        return {
            "conversation": saved.conversation_id,
            "message_id": saved.reply_id,
            "user_message_id": saved.user_message_id,
            **ids,
        }


def _invalid(message: str, param: str) -> ApiError:
    return ApiError(400, message, "invalid_request", param)


def _question(body: dict[str, Any]) -> str | None:
    """The user message this reply answers: the last message, when it is the user's."""
    messages = body.get("messages")
    last = messages[-1] if isinstance(messages, list) and messages else None
    if not isinstance(last, dict) or last.get("role") != "user":
        return None
    return _text(last.get("content"))


def _text(content: Any) -> str | None:
    if isinstance(content, list):  # text parts (the kind a question or a result keeps)
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content if isinstance(content, str) else None


def _tool_results(body: dict[str, Any]) -> list[actions.ToolResult]:
    """The tool results this reply follows: the tool messages that end the list (after the
    assistant's turn that called them), in order."""
    messages = body.get("messages")
    results: list[actions.ToolResult] = []
    for message in reversed(messages if isinstance(messages, list) else []):
        if not isinstance(message, dict) or message.get("role") != "tool":
            break
        call_id = message.get("tool_call_id")
        if isinstance(call_id, str):  # validated before the reply: always, here
            results.append(actions.ToolResult(call_id, _text(message.get("content")) or ""))
    return results[::-1]


def _question_ids(user_id: int, conversation_id: int) -> set[int] | None:
    """The ids of the conversation's user messages; None when it is not this user's."""
    try:
        conversation = actions.owned_conversation(user_id, conversation_id)
    except actions.ConversationNotFound:
        return None
    return set(conversation.messages.filter(role=Message.Role.USER).values_list("id", flat=True))


def _ends_with_a_question(messages: object) -> bool:
    return (
        isinstance(messages, list)
        and bool(messages)
        and isinstance(messages[-1], dict)
        and messages[-1].get("role") == "user"
    )
