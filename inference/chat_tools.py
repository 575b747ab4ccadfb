"""Tool calling in a chat request: the tools offered, the choice among them, and the calls
and results already in the conversation.

Checked for shape and size before any worker sees them (a worker renders every tool's
schema into the prompt and may compile it into a grammar). The legacy `functions` /
`function_call` fields, and the `function` role and assistant `function_call` turns of
the same era, are rewritten into their tool-calling form here: vLLM and the other
OpenAI-compatible servers read only `tools`, so passing the legacy fields through would
have them silently ignored. The reply is rewritten back for such a request
(`legacy_chunk`, `legacy_message`), so an old client gets `function_call` as it expects.
"""

import re
from typing import Any

from inference.chat_options import InvalidRequest, json_size, one_of

FUNCTION_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")  # OpenAI's rule for a tool's name
MAX_TOOLS = 128  # OpenAI's limit
MAX_TOOLS_BYTES = 65_536  # every schema goes into the prompt, for each request
MAX_TOOL_CALLS = 128  # in one assistant message
MAX_CALL_ID_CHARS = 256
MAX_CALL_NAME_CHARS = 256  # a name a model produced: checked for size, not for OpenAI's rule
TOOL_CHOICES = {"none", "auto", "required"}
FUNCTION_CALL_CHOICES = {"none", "auto"}
FUNCTION_KEYS = {"name", "description", "parameters", "strict"}


def _function(value: Any, where: str, param: str) -> str:
    """A function's definition; returns its name."""
    if not isinstance(value, dict):
        raise InvalidRequest(f"{where} must be an object {{name, description, parameters}}.", param)
    unknown = sorted(set(value) - FUNCTION_KEYS)
    if unknown:
        raise InvalidRequest(f"{where} has unknown field(s): {', '.join(unknown)}.", param)
    name = value.get("name")
    if not isinstance(name, str) or FUNCTION_NAME.fullmatch(name) is None:
        raise InvalidRequest(
            f"{where}.name must be 1 to 64 letters, digits, underscores or dashes.",
            f"{param}.name",
        )
    if value.get("description") is not None and not isinstance(value["description"], str):
        raise InvalidRequest(f"{where}.description must be a string.", f"{param}.description")
    if value.get("parameters") is not None and not isinstance(value["parameters"], dict):
        raise InvalidRequest(
            f"{where}.parameters must be a JSON schema object.", f"{param}.parameters"
        )
    if value.get("strict") is not None and not isinstance(value["strict"], bool):
        raise InvalidRequest(f"{where}.strict must be a boolean.", f"{param}.strict")
    return name


def _definitions(value: Any, field: str) -> list[str]:
    """`tools` or `functions`: a bounded non-empty array; returns the function names."""
    if not isinstance(value, list) or not 1 <= len(value) <= MAX_TOOLS:
        raise InvalidRequest(f"'{field}' must be an array of 1 to {MAX_TOOLS} entries.", field)
    if json_size(value) > MAX_TOOLS_BYTES:
        raise InvalidRequest(f"'{field}' must be at most {MAX_TOOLS_BYTES} bytes as JSON.", field)
    names = []
    for index, entry in enumerate(value):
        where, param = f"{field}[{index}]", f"{field}.{index}"
        if field == "functions":
            names.append(_function(entry, where, param))
            continue
        if not isinstance(entry, dict):
            raise InvalidRequest(f"{where} must be {{type: function, function}}.", param)
        if entry.get("type") != "function":
            raise InvalidRequest(
                f"{where}.type must be 'function': the gateway takes function tools only.",
                f"{param}.type",
            )
        if set(entry) - {"type", "function"}:
            raise InvalidRequest(f"{where} must be {{type: function, function}}.", param)
        names.append(_function(entry.get("function"), f"{where}.function", f"{param}.function"))
    if len(set(names)) != len(names):
        raise InvalidRequest(f"'{field}' names a function twice.", field)
    return names


def _named(value: Any, names: list[str], field: str, legacy: bool) -> bool:
    """Whether a tool_choice (function_call) object names one of the offered functions."""
    if legacy:
        name = value.get("name") if isinstance(value, dict) and set(value) == {"name"} else None
    elif isinstance(value, dict) and set(value) == {"type", "function"}:
        function = value["function"]
        if (
            value["type"] != "function"
            or not isinstance(function, dict)
            or set(function) != {"name"}
        ):
            return False
        name = function["name"]
    else:
        return False
    if not one_of(name, set(names)):
        raise InvalidRequest(f"'{field}' names a function that is not offered.", field)
    return True


def check_tools(body: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """The tool options sent to the worker, in tool-calling form, and whether the request
    used the legacy functions fields (its reply is then given back in their form)."""
    tools, functions = body.get("tools"), body.get("functions")
    if tools is not None and functions is not None:
        raise InvalidRequest("Send 'tools' or the legacy 'functions', not both.", "functions")
    legacy = functions is not None or body.get("function_call") is not None
    field, choice_field = ("functions", "function_call") if legacy else ("tools", "tool_choice")
    offered = functions if legacy else tools
    choice = body.get(choice_field)
    parallel = body.get("parallel_tool_calls")
    if parallel is not None and not isinstance(parallel, bool):
        raise InvalidRequest("'parallel_tool_calls' must be a boolean.", "parallel_tool_calls")
    if legacy and body.get("tool_choice") is not None:
        raise InvalidRequest("'tool_choice' goes with 'tools', not 'functions'.", "tool_choice")
    if offered is None:
        if choice is not None:
            raise InvalidRequest(f"'{choice_field}' needs '{field}'.", choice_field)
        return {}, False
    names = _definitions(offered, field)
    choices = FUNCTION_CALL_CHOICES if legacy else TOOL_CHOICES
    named = choice is not None and not one_of(choice, choices)
    if named and not _named(choice, names, choice_field, legacy):
        shape = '{"name": ...}' if legacy else '{"type": "function", "function": {"name": ...}}'
        raise InvalidRequest(
            f"'{choice_field}' must be one of {sorted(choices)} or {shape}.", choice_field
        )
    if not legacy:
        options: dict[str, Any] = {"tools": tools}
        if choice is not None:
            options["tool_choice"] = choice
        if parallel is not None:
            options["parallel_tool_calls"] = parallel
        return options, False
    options = {
        "tools": [{"type": "function", "function": f} for f in offered],
        "parallel_tool_calls": False,  # a legacy reply holds one call
    }
    if isinstance(choice, dict):
        options["tool_choice"] = {"type": "function", "function": {"name": choice["name"]}}
    elif choice is not None:
        options["tool_choice"] = choice
    return options, True


def _check_call(call: Any, where: str, param: str, legacy: bool) -> None:
    keys = {"name", "arguments"} if legacy else {"id", "type", "function"}
    function = call if legacy else (call.get("function") if isinstance(call, dict) else None)
    if (
        not isinstance(call, dict)
        or set(call) - keys
        or (not legacy and not _bounded(call.get("id"), MAX_CALL_ID_CHARS))
        or (not legacy and call.get("type") != "function")
        or not isinstance(function, dict)
        or set(function) != {"name", "arguments"}
        or not _bounded(function["name"], MAX_CALL_NAME_CHARS)
        or not isinstance(function["arguments"], str)
    ):
        shape = (
            "{name, arguments}" if legacy else "{id, type: function, function: {name, arguments}}"
        )
        raise InvalidRequest(
            f"{where} must be {shape} with string values, the name and id 1 to "
            f"{MAX_CALL_NAME_CHARS} characters.",
            param,
        )


def _bounded(value: Any, limit: int) -> bool:
    return isinstance(value, str) and 0 < len(value) <= limit


def check_message(message: dict[str, Any], index: int) -> None:
    """The tool-calling parts of one message: calls only on assistant messages, a result
    only on a tool message, which names the call it answers."""
    role, where, param = message["role"], f"messages[{index}]", f"messages.{index}"
    calls = message.get("tool_calls")
    if calls is not None:
        if role != "assistant":
            raise InvalidRequest(
                f"{where}: only assistant messages have tool_calls.", f"{param}.tool_calls"
            )
        if not isinstance(calls, list) or not 1 <= len(calls) <= MAX_TOOL_CALLS:
            raise InvalidRequest(
                f"{where}.tool_calls must be an array of 1 to {MAX_TOOL_CALLS} calls.",
                f"{param}.tool_calls",
            )
        for number, call in enumerate(calls):
            _check_call(
                call, f"{where}.tool_calls[{number}]", f"{param}.tool_calls.{number}", False
            )
    if message.get("function_call") is not None:
        if role != "assistant" or calls is not None:
            raise InvalidRequest(
                f"{where}: function_call goes on an assistant message without tool_calls.",
                f"{param}.function_call",
            )
        _check_call(
            message["function_call"], f"{where}.function_call", f"{param}.function_call", True
        )
    if role == "tool" and not _bounded(message.get("tool_call_id"), MAX_CALL_ID_CHARS):
        raise InvalidRequest(
            f"{where} is a tool result: it needs the tool_call_id of the call it answers.",
            f"{param}.tool_call_id",
        )
    if role != "tool" and message.get("tool_call_id") is not None:
        raise InvalidRequest(
            f"{where}: only tool messages have a tool_call_id.", f"{param}.tool_call_id"
        )
    if role == "function" and not _bounded(message.get("name"), MAX_CALL_NAME_CHARS):
        raise InvalidRequest(
            f"{where} is a function result: it needs the name of the function.",
            f"{param}.name",
        )


def modern_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Legacy turns in tool-calling form: an assistant function_call becomes a tool call
    with the id call_<its index> (stable, so identical requests keep one cache key), and a
    function result the tool result that answers the latest such call."""
    if not any(m["role"] == "function" or m.get("function_call") is not None for m in messages):
        return messages
    modern, latest = [], None
    for index, message in enumerate(messages):
        if message.get("function_call") is not None:
            latest = f"call_{index}"
            call = {"id": latest, "type": "function", "function": message["function_call"]}
            rest = {k: v for k, v in message.items() if k != "function_call"}
            message = {**rest, "tool_calls": [call]}
        elif message["role"] == "function":
            answered = latest or f"call_{index}"
            # A function result's content may be null; a tool result's is a string.
            content = "" if message.get("content") is None else message["content"]
            message = {"role": "tool", "tool_call_id": answered, "content": content}
        modern.append(message)
    return modern


def legacy_chunk(chunk: dict[str, Any]) -> dict[str, Any]:
    """A streamed chunk for a legacy functions request: its first tool call's deltas as
    function_call deltas (the request asked for one call), finish_reason function_call."""
    choices = []
    for choice in chunk.get("choices") or []:
        delta = dict(choice.get("delta") or {})
        calls = delta.pop("tool_calls", None)
        listed = calls if isinstance(calls, list) else []
        first = [c for c in listed if isinstance(c, dict) and c.get("index", 0) == 0]
        if first and isinstance(first[0].get("function"), dict):
            delta["function_call"] = first[0]["function"]
        choices.append({**choice, "delta": delta, "finish_reason": _legacy(choice)})
    return {**chunk, "choices": choices} if "choices" in chunk else chunk


def legacy_message(
    message: dict[str, Any], finish_reason: str | None
) -> tuple[dict[str, Any], str | None]:
    """A whole reply for a legacy functions request: function_call instead of tool_calls."""
    calls = message.get("tool_calls")
    if not calls:
        return message, finish_reason
    rest = {k: v for k, v in message.items() if k != "tool_calls"}
    return {**rest, "function_call": calls[0]["function"]}, _legacy(
        {"finish_reason": finish_reason}
    )


def _legacy(choice: dict[str, Any]) -> str | None:
    finish = choice.get("finish_reason")
    return "function_call" if finish == "tool_calls" else finish
