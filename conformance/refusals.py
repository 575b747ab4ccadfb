"""Where Sluice and OpenAI's description disagree on purpose, each with why.

The conformance check expects every request the description allows to succeed
(`positive_data_acceptance`) and every request it forbids to be refused
(`negative_data_rejection`). These are the documented exceptions, matched narrowly (a
refusal by its `param` and the value there), so that any other disagreement still fails:

- BY_DESIGN: what Sluice does not serve (docs/api.md, "Supported surface"; for text
  completions, "Text completions" there and `_text_by_design` here).
- OpenAI refuses it too: the description is looser than OpenAI's API. It lets a request
  carry fields it does not define (it never says `additionalProperties: false`), which the
  API answers with "Unrecognized request argument"; and it leaves some of the API's own
  rules to prose (a model name, an embedding input and a tool call id are never empty; an
  assistant message has content or calls; `tools` has at least one entry).

Where the API is looser than the description instead (nulls, base64 vectors): leniency.py.
"""

import copy
import os
import re
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from inference.chat_request import MAX_TOKENS_LIMIT
from inference.request_body import MAX_CHOICES

SPEC = Path(__file__).resolve().parent / "openai-openapi.yml"
CHAT, COMPLETIONS, EMBEDDINGS = "/chat/completions", "/completions", "/embeddings"
REQUESTS = {
    CHAT: "CreateChatCompletionRequest",
    COMPLETIONS: "CreateCompletionRequest",
    EMBEDDINGS: "CreateEmbeddingRequest",
}

# Top-level chat fields Sluice refuses, each with why.
BY_DESIGN_CHAT = {
    "n": "n > 1: admission reserves tokens for one choice",
    "prediction": "predicted outputs: no worker here serves them",
    "audio": "audio output: no worker here produces it",
    "modalities": "audio output (only ['text'] is accepted): no worker here produces it",
    "web_search_options": "web search: the gateway has no search tool",
    "moderation": "OpenAI's moderation service: not part of a self-hosted model",
}
# Per message: an earlier audio reply (audio output is not served).
BY_DESIGN_MESSAGE_FIELDS = {"audio"}
# Content part types and tool types Sluice refuses (param ...content.N.type, tools.N.type):
# audio and file inputs, and OpenAI's custom (free-form grammar) tools.
BY_DESIGN_PARTS = {"input_audio", "file"}
BY_DESIGN_TOOLS = {"custom"}
# What a text completion's prompt becomes in most requests when Sluice refuses the generated
# one by design (within_surface): several prompts, token ids, an empty one.
TEXT_PROMPT = "Say this is a test."
# A served model of the other kind (a chat model for embeddings, and back): the stateful
# phase sends the ids GET /models lists to every operation.
WRONG_KIND = {
    CHAT: (os.environ.get("SLUICE_CONFORMANCE_EMBEDDING_MODEL", "all-minilm-l6-v2"),),
    COMPLETIONS: (os.environ.get("SLUICE_CONFORMANCE_EMBEDDING_MODEL", "all-minilm-l6-v2"),),
    EMBEDDINGS: (os.environ.get("SLUICE_CONFORMANCE_CHAT_MODEL", "small-model"),),
}
# "Must be a-z, A-Z, 0-9, or contain underscores and dashes, with a maximum length of 64."
FUNCTION_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


@cache
def component_schemas() -> dict[str, Any]:
    spec = yaml.load(SPEC.read_text(), Loader=yaml.CSafeLoader)
    found: dict[str, Any] = spec["components"]["schemas"]
    return found


def _variants(schemas: list[Any], value: Any) -> list[dict[str, Any]]:
    """The concrete schemas value may match: $refs resolved, allOf, anyOf and oneOf
    flattened (every branch: a field any of them defines counts as defined), except where a
    discriminator picks the branch (a message's role picks its schema)."""
    found, pending = [], list(schemas)
    while pending:
        node = pending.pop()
        if not isinstance(node, dict):
            continue
        if "$ref" in node:
            pending.append(component_schemas()[node["$ref"].rsplit("/", 1)[1]])
        pending.extend(node.get("allOf", []))
        mapping = node.get("discriminator", {}).get("mapping", {})
        picked = (
            value.get(node["discriminator"]["propertyName"])
            if mapping and isinstance(value, dict)
            else None
        )
        if isinstance(picked, str) and picked in mapping:
            pending.append({"$ref": mapping[picked]})
        else:
            branches = [*node.get("anyOf", []), *node.get("oneOf", [])]
            fitting = [b for b in branches if _fits_enums(b, value)]
            pending.extend(fitting or branches)
        found.append(node)
    return found


def _fits_enums(branch: Any, value: Any) -> bool:
    """Whether value has no field whose value the branch's enum (or const) rules out: a
    content part of type image_url is not read by the text part's schema."""
    node = component_schemas()[branch["$ref"].rsplit("/", 1)[1]] if "$ref" in branch else branch
    if not isinstance(value, dict) or not isinstance(node, dict):
        return True
    for key, field in node.get("properties", {}).items():
        allowed = field.get("enum", [field["const"]] if "const" in field else None)
        if allowed is not None and key in value and value[key] not in allowed:
            return False
    return True


def _undefined(
    value: Any, schemas: list[Any], where: tuple[str, ...], found: list[tuple[str, ...]]
) -> None:
    """Append to found where value holds a field that no schema of schemas defines."""
    nodes = _variants(schemas, value)
    if isinstance(value, dict):
        if any(node.get("additionalProperties") not in (None, False) for node in nodes):
            return  # an open object (a map, a JSON schema)
        if not any("properties" in node for node in nodes):
            return
        for key, item in value.items():
            inner = [node["properties"][key] for node in nodes if key in node.get("properties", {})]
            if inner:
                _undefined(item, inner, (*where, key), found)
            else:
                found.append((*where, key))
    elif isinstance(value, list):
        items = [node["items"] for node in nodes if "items" in node]
        for index, item in enumerate(value):
            if items:
                _undefined(item, items, (*where, str(index)), found)


def undefined_fields(path: str, body: Any) -> list[tuple[str, ...]]:
    """Where body holds a field that OpenAI's description does not define (as paths)."""
    found: list[tuple[str, ...]] = []
    if path in REQUESTS:
        _undefined(body, [{"$ref": f"#/components/schemas/{REQUESTS[path]}"}], (), found)
    return found


def _undefined_field_at(path: str, param: str, body: Any) -> bool:
    """Whether the refused param is, holds, is held by or sits beside an undefined field
    (an object with an undefined field is refused whole, named by any of its fields)."""
    steps = tuple(param.split("."))
    for where in undefined_fields(path, body):
        parent = where[:-1]
        if (
            param == ".".join(where)  # a field named with a dot in it
            or steps[: len(where)] == where
            or where[: len(steps)] == steps
            or (parent and steps[: len(parent)] == parent)
        ):
            return True
    return False


def _at(body: Any, param: str) -> Any:
    """The value a dotted param (messages.0.content.1.type) names in body, or None."""
    value = body
    for step in param.split("."):
        if isinstance(value, dict):
            value = value.get(step)
        elif isinstance(value, list) and step.isdigit() and int(step) < len(value):
            value = value[int(step)]
        else:
            return None
    return value


def _integer(value: Any) -> bool:
    """An integer as JSON Schema reads one: 7, or a number with no fraction (7.0, 1e308)."""
    return type(value) is int or (type(value) is float and value.is_integer())


def _token_ids(value: Any) -> bool:
    """An embedding input (or a text prompt) of token ids: an array of integers, or of such
    arrays."""
    items = value if isinstance(value, list) else []
    return bool(items) and all(
        _integer(item) or (isinstance(item, list) and all(_integer(i) for i in item))
        for item in items
    )


TOKEN_LIMITS = ("max_completion_tokens", "max_tokens")


def _token_limit(body: dict[str, Any], param: str) -> int | None:
    """The token limit a refusal names (max_completion_tokens or max_tokens: Sluice checks
    each one given, whichever it reads), when it is an integer."""
    tokens = body.get(param) if param in TOKEN_LIMITS else None
    return tokens if type(tokens) is int else None


def _n(body: dict[str, Any]) -> Any:
    """The number of choices a request asks for (a null n is left out: 1)."""
    return 1 if body.get("n") is None else body["n"]


def _refused_prompt(prompt: Any) -> bool:
    """Whether a text completion's prompt, of a form the description allows, is one Sluice
    refuses by design: several prompts, token ids, or an empty prompt (or none)."""
    if prompt is None or prompt == "" or prompt == []:
        return True
    if isinstance(prompt, list) and all(isinstance(item, str) for item in prompt):
        return len(prompt) > 1 or prompt == [""]
    return _token_ids(prompt)


def _text_by_design(param: str, body: dict[str, Any]) -> bool:
    """Whether Sluice refuses the text completion field param names on purpose (docs/api.md,
    "Text completions")."""
    value = body.get(param)
    if param == "prompt":
        # One text prompt a request: several prompts go as requests of their own or as a
        # batch (admission, the cache and the reply are per prompt); token ids are OpenAI's
        # tokenizer's, not the deployment's; an empty prompt (or a null one) is, to OpenAI,
        # its document separator <|endoftext|>, a token a self-hosted model does not share
        # (vLLM refuses an empty prompt).
        return _refused_prompt(value)
    if param == "logprobs":
        # with echo, OpenAI scores the prompt too; the gateway echoes the prompt itself and
        # never has the worker score it, so the pair is refused rather than half answered
        return value is not None and body.get("echo") is True
    if param == "n":
        return isinstance(value, int) and value > MAX_CHOICES  # as for chat
    if param == "best_of":
        n = _n(body)  # sampling more candidates than are returned: vLLM no longer does
        return isinstance(value, int) and isinstance(n, int) and value > n
    # max_tokens 0: nothing to generate; its one use, scoring a prompt (echo with the
    # integer logprobs), is not served, and vLLM refuses it.
    return param == "max_tokens" and body.get("max_tokens") == 0


def by_design(path: str, param: str, body: dict[str, Any]) -> bool:
    """Whether Sluice refuses the field param names in body on purpose."""
    steps = param.split(".")
    if path == EMBEDDINGS:
        # The built-in model (all-MiniLM-L6-v2) makes 384 dimensions only, and reads text
        # only: it tokenizes in the gateway with its own vocabulary, not OpenAI's.
        return param == "dimensions" or (steps[0] == "input" and _token_ids(body.get("input")))
    if (limit := _token_limit(body, param)) is not None and limit > MAX_TOKENS_LIMIT:
        return True  # longer than any deployed context: the worker would refuse it anyway
    if path == COMPLETIONS:
        return _text_by_design(param, body)
    if param == "functions" and body.get("tools") is not None:
        return True  # the legacy functions are rewritten as tools: both at once is ambiguous
    if param in ("tools", "functions") and _names_twice(body.get(param)):
        return True  # a call names the function it calls: two of one name are ambiguous
    if len(steps) == 1:
        return param in BY_DESIGN_CHAT
    if steps[0] == "messages" and len(steps) == 3 and steps[2] == "function_call":
        # the legacy call is rewritten as a tool call: beside tool_calls it is ambiguous
        return isinstance(message := _at(body, ".".join(steps[:2])), dict) and bool(
            message.get("tool_calls")
        )
    if steps[0] == "messages" and len(steps) == 3:
        return steps[2] in BY_DESIGN_MESSAGE_FIELDS
    kind = _at(body, param)
    if kind == "image_url" and steps[-1] == "type":
        return True  # the check's chat model is text only: no deployment marked accepts_images
    if steps[0] == "messages" and steps[2:3] == ["tool_calls"] and isinstance(kind, dict):
        return kind.get("type") == "custom"  # a call of a custom tool
    if steps[0] == "messages" and steps[-1] == "type" and "content" in steps:
        return isinstance(kind, str) and kind in BY_DESIGN_PARTS
    if steps[0] == "tools" and steps[-1] == "type":
        return isinstance(kind, str) and kind in BY_DESIGN_TOOLS
    return False


def openai_refuses_too(path: str, param: str, body: dict[str, Any]) -> bool:
    """Whether OpenAI's API refuses the field param names in body too, though the
    description allows it: a rule the description leaves to prose, or to no one."""
    steps = param.split(".")
    value = _at(body, param)
    if _undefined_field_at(path, param, body):
        return True  # a field the description does not define
    if value == "" and (param in ("model", "input") or path == EMBEDDINGS):
        return True  # an empty model name or input ("cannot be an empty string")
    if param == "model" and isinstance(value, str) and value in WRONG_KIND.get(path, ()):
        return True  # OpenAI refuses a model of the other kind too (with a 404)
    if path == EMBEDDINGS and steps[0] == "input" and isinstance(value, list):
        return any(isinstance(token, int) and token < 0 for token in value)  # no such token
    if isinstance(value, float) and value.is_integer():
        return True  # OpenAI: "expected an integer, but got a decimal number instead"
    if param == "seed" and isinstance(value, int) and not -(2**63) <= value < 2**63:
        return True  # an int64: the description's bounds are int64's, rounded as floats
    if param == "logit_bias" and isinstance(value, dict) and path in (CHAT, COMPLETIONS):
        return not all(key.isdigit() for key in value)  # keys are token ids
    if path == COMPLETIONS and param == "best_of" and isinstance(value, int):
        n = _n(body)  # "best_of must be greater than n" (the description's own prose)
        return isinstance(n, int) and value < n
    if path != CHAT:
        return False
    if value == [] and (param == "tools" or (steps[0] == "messages" and steps[-1] == "tool_calls")):
        return True  # OpenAI: "empty array. Expected an array with minimum length 1"
    if param == "top_logprobs" and body.get("logprobs") is not True:
        return True  # "logprobs must be set to true if this parameter is used"
    if param == "tool_choice" and not body.get("tools"):
        return True  # "'tool_choice' is only allowed when 'tools' are specified"
    if param == "function_call" and not body.get("functions"):
        return True  # the same rule for the legacy pair
    if param in ("tool_choice", "function_call") and _names_an_unoffered_function(body, value):
        return True  # a named choice must name an offered function
    if param == "response_format" and isinstance(value, dict):
        schema = value.get("json_schema")
        name = schema.get("name") if isinstance(schema, dict) else None
        return isinstance(name, str) and not FUNCTION_NAME.fullmatch(name)  # as a function's
    if param.startswith(("tools.", "functions.")) and param.endswith(".name"):
        return not (isinstance(value, str) and FUNCTION_NAME.fullmatch(value))
    if (limit := _token_limit(body, param)) is not None and limit < 1:
        return True  # "integer below minimum value. Expected a value >= 1"
    if steps[0] != "messages" or len(steps) < 3:
        return False
    message = _at(body, ".".join(steps[:2]))
    if len(steps) == 3 and steps[2] in ("tool_call_id", "name") and value == "":
        return True  # a tool result answers a call by its id, a function result names it
    if len(steps) == 3 and steps[2] == "function_call" and isinstance(value, dict):
        return value.get("name") == ""  # function names are 1 to 64 characters
    if len(steps) == 4 and steps[2] == "tool_calls" and isinstance(value, dict):
        function = value.get("function")
        named = isinstance(function, dict) and function.get("name") != ""
        return value.get("id") == "" or not named  # a call has an id and names a function
    if len(steps) == 3 and steps[2] == "content" and isinstance(message, dict):
        return message.get("role") == "assistant" and value is None  # "Required unless..."
    return False


def _names_twice(offered: Any) -> bool:
    """Whether tools (or the legacy functions) define two functions of one name."""
    entries = [e.get("function", e) for e in offered or [] if isinstance(e, dict)]
    names = [e.get("name") for e in entries if isinstance(e, dict)]
    named = [name for name in names if isinstance(name, str)]  # a nameless one is another error
    return len(named) != len(set(named))


def _names_an_unoffered_function(body: dict[str, Any], choice: Any) -> bool:
    named = choice.get("function", choice) if isinstance(choice, dict) else None
    if not isinstance(named, dict):
        return False
    offered = [t.get("function", {}) for t in body.get("tools") or [] if isinstance(t, dict)]
    offered += [f for f in body.get("functions") or [] if isinstance(f, dict)]
    return named.get("name") not in [f.get("name") for f in offered if isinstance(f, dict)]


def within_surface(path: str, body: dict[str, Any]) -> dict[str, Any]:
    """body without what the description leaves undefined or Sluice refuses by design, and
    with `logprobs: true` where it asks for top_logprobs: so that most valid requests get a
    reply to check instead of stopping at a refusal already checked (the hooks keep one
    request in eight as generated)."""
    if path not in REQUESTS:
        return body
    body = copy.deepcopy(body)
    for *parents, key in undefined_fields(path, body):
        holder = _at(body, ".".join(parents)) if parents else body
        if isinstance(holder, dict):
            holder.pop(key, None)
    if path == COMPLETIONS:
        return _text_within_surface(body)
    if path != CHAT:
        return body
    body = {k: v for k, v in body.items() if k not in BY_DESIGN_CHAT}
    if body.get("top_logprobs") is not None:
        body["logprobs"] = True
    if body.get("tools") == []:
        body = {k: v for k, v in body.items() if k not in ("tools", "tool_choice")}
    for kind in ("tools", "functions"):  # function names follow OpenAI's rule
        if isinstance(body.get(kind), list):
            body[kind] = [_named(entry, index) for index, entry in enumerate(body[kind])]
    if body.get("tools") is not None:  # tools and the legacy functions: one or the other
        body = {k: v for k, v in body.items() if k not in ("functions", "function_call")}
    if isinstance(body.get("messages"), list):
        body["messages"] = [_message_within_surface(m) for m in body["messages"]]
    return body


def _text_within_surface(body: dict[str, Any]) -> dict[str, Any]:
    """A text completion without what _text_by_design refuses, each only where its value is
    of a form the description allows (a malformed one is left to be refused)."""
    if "prompt" in body and _refused_prompt(body["prompt"]):
        body["prompt"] = TEXT_PROMPT
    if type(body.get("logprobs")) is int and body.get("echo") is True:
        del body["logprobs"]
    if type(body.get("n")) is int and body["n"] > MAX_CHOICES:
        del body["n"]
    if type(body.get("best_of")) is int and body["best_of"] != _n(body):
        del body["best_of"]
    if type(body.get("max_tokens")) is int and body["max_tokens"] == 0:
        del body["max_tokens"]
    return body


def _named(entry: Any, index: int) -> Any:
    """A tool or function definition whose name breaks OpenAI's rule, renamed f<index>."""
    function = entry.get("function", entry) if isinstance(entry, dict) else None
    if not isinstance(function, dict):
        return entry
    name = function.get("name")
    if not isinstance(name, str) or FUNCTION_NAME.fullmatch(name):
        return entry
    renamed = {**function, "name": f"f{index}"}
    return {**entry, "function": renamed} if "function" in entry else renamed


def _message_within_surface(message: Any) -> Any:
    if not isinstance(message, dict):
        return message
    message = {k: v for k, v in message.items() if k not in BY_DESIGN_MESSAGE_FIELDS}
    if message.get("tool_calls") == []:
        del message["tool_calls"]
    content = message.get("content")
    if isinstance(content, list):
        kept = [p for p in content if not (isinstance(p, dict) and _refused_part(p))]
        message["content"] = kept or ""
    return message


def _refused_part(part: dict[str, Any]) -> bool:
    kind = part.get("type")
    return isinstance(kind, str) and kind in BY_DESIGN_PARTS
