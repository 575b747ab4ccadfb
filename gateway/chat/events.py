"""What the chat socket sends for a reply's chunks (docs/websocket.md): text as `delta`
events, tool calls as `tool_call_delta` events, and the fields `done` adds about how the
reply ended.

A tool call streams as OpenAI's chunks stream it: its first part names the call (its index,
id and function name), the rest carry fragments of its JSON arguments under the same index.
The socket passes each part on as it comes rather than waiting for the whole call, so a
client sees a long call being written as it sees text; and `done` repeats the calls
assembled (inference/reply.py), in the shape an assistant message takes them, so a client
that only wants the result need not put the fragments together, and can send them back as
the assistant's turn with the tool results after it.
"""

from typing import Any

from inference.reply import ReplyAssembler

Event = dict[str, Any]


def chunk_events(request_id: str, chunk: dict[str, Any]) -> list[Event]:
    """The events for one pipeline chunk, in the order its parts came; read defensively
    (a chunk comes from a worker, or a cache replay of one)."""
    events: list[Event] = []
    choices = chunk.get("choices")
    for choice in choices if isinstance(choices, list) else []:
        delta = choice.get("delta") if isinstance(choice, dict) else None
        if not isinstance(delta, dict):
            continue
        text = delta.get("content")
        if isinstance(text, str) and text:
            events.append({"type": "delta", "id": request_id, "content": text})
        calls = delta.get("tool_calls")
        for position, part in enumerate(calls if isinstance(calls, list) else []):
            if isinstance(part, dict):
                events.append(_call_event(request_id, part, position))
    return events


def _call_event(request_id: str, part: dict[str, Any], position: int) -> Event:
    index = part.get("index", position)
    function = part.get("function")
    function = function if isinstance(function, dict) else {}
    arguments = function.get("arguments")
    event: Event = {
        "type": "tool_call_delta",
        "id": request_id,
        "index": index if isinstance(index, int) else position,
        "arguments": arguments if isinstance(arguments, str) else "",
    }
    if isinstance(part.get("id"), str) and part["id"]:
        event["call_id"] = part["id"]
    if isinstance(function.get("name"), str) and function["name"]:
        event["name"] = function["name"]
    return event


def ending(reply: ReplyAssembler) -> Event:
    """What `done` (or `stopped`) says of the reply itself: why it ended (null when
    stopped before the worker said), and the tool calls it made, assembled."""
    calls = reply.tool_calls
    return {"finish_reason": reply.finish_reason, **({"tool_calls": calls} if calls else {})}
