"""What the simulator answers, piece by piece: each piece is one output token and the delta
vLLM would stream for it. Deterministic: the same request always gets the same reply.

- Words (text.py), or a scripted reply (a test hook), as `content` deltas.
- Reasoning, when the request asks for it the way reasoning models are asked:
  `chat_template_kwargs: {"enable_thinking": true}` (Qwen3 and others). "Let me think
  about: <the last message>" comes first as `reasoning_content` deltas, then the answer.
- Tool calls, when the request offers function tools and tool_choice is not "none":
  a named tool_choice calls that function; "required" calls every offered function (at
  most MAX_PARALLEL_CALLS; only the first with parallel_tool_calls false); "auto" calls
  the first function, unless the conversation ends with a tool result, which gets a text
  answer (so an agent loop ends). Arguments come from the function's parameter schema and
  the last message: strings get its text, numbers its word count, booleans true, enums
  their first value. Streamed as vLLM does: a delta with the call's index, id, type and
  function name, then the JSON arguments in fragments; finish_reason `tool_calls`.
- n choices, when asked: each its own words (tool calls and scripted replies are the same
  in every choice), streamed interleaved under their indices (server.py).
- Logprobs, when asked: every piece carries its token's logprob (and `top_logprobs`
  alternatives), drawn from the token's hash; for a text completion's integer `logprobs`,
  in OpenAI's legacy shape (`text_logprobs`), as vLLM's /v1/completions answers it.
"""

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any

from inference.sim.text import _WORDS, completion, scripted_completion

MAX_PARALLEL_CALLS = 4
_FRAGMENT = re.compile(r"\s*(?:\w+|[^\w\s])")


@dataclass(frozen=True)
class Piece:
    token: str
    delta: dict[str, Any]


@dataclass(frozen=True)
class Reply:
    pieces: list[Piece]
    calls: bool  # the reply is tool calls (finish_reason tool_calls when complete)


def _functions(options: dict[str, Any]) -> list[dict[str, Any]]:
    tools = options.get("tools")
    return [
        tool["function"]
        for tool in (tools if isinstance(tools, list) else [])
        if isinstance(tool, dict)
        and tool.get("type") == "function"
        and isinstance(tool.get("function"), dict)
        and isinstance(tool["function"].get("name"), str)
    ]


def called_functions(options: dict[str, Any], last_role: str) -> list[dict[str, Any]]:
    """The functions this request's reply calls (none: a text reply)."""
    functions = _functions(options)
    choice = options.get("tool_choice", "auto")
    if not functions or choice == "none":
        return []
    if isinstance(choice, dict):
        name = (choice.get("function") or {}).get("name")
        return [f for f in functions if f["name"] == name][:1]
    if choice == "required":
        many = options.get("parallel_tool_calls") is not False
        return functions[:MAX_PARALLEL_CALLS] if many else functions[:1]
    return [] if last_role == "tool" else functions[:1]


def arguments(function: dict[str, Any], question: str) -> str:
    schema = function.get("parameters")
    properties = schema.get("properties") if isinstance(schema, dict) else None
    values: dict[str, Any] = {}
    for name, spec in (properties if isinstance(properties, dict) else {}).items():
        spec = spec if isinstance(spec, dict) else {}
        kind, enum = spec.get("type"), spec.get("enum")
        if isinstance(enum, list) and enum:
            values[name] = enum[0]
        elif kind in ("integer", "number"):
            values[name] = len(question.split())
        elif kind == "boolean":
            values[name] = True
        elif kind == "array":
            values[name] = question.split()[:3]
        elif kind == "object":
            values[name] = {}
        else:
            values[name] = question
    return json.dumps(values)


def _fragments(text: str) -> list[str]:
    pieces = _FRAGMENT.findall(text)
    return pieces if "".join(pieces) == text else [text]


def _digest(*parts: object) -> bytes:
    return hashlib.sha256("\x1f".join(map(str, parts)).encode()).digest()


def _call_pieces(functions: list[dict[str, Any]], question: str, prompt: list[str]) -> list[Piece]:
    pieces = []
    for index, function in enumerate(functions):
        call_id = "chatcmpl-tool-" + _digest(*prompt, index).hex()[:32]
        head = {"index": index, "id": call_id, "type": "function"}
        named = {"tool_calls": [{**head, "function": {"name": function["name"]}}]}
        pieces.append(Piece(function["name"], named))
        for fragment in _fragments(arguments(function, question)):
            delta = {"tool_calls": [{"index": index, "function": {"arguments": fragment}}]}
            pieces.append(Piece(fragment, delta))
    return pieces


def wants_reasoning(options: dict[str, Any]) -> bool:
    kwargs = options.get("chat_template_kwargs")
    return isinstance(kwargs, dict) and kwargs.get("enable_thinking") is True


def reply_for(
    options: dict[str, Any],
    messages: list[dict[str, str]],
    prompt: list[str],
    max_tokens: int,
    mean_length: int,
    scripted: str | None,
    choice: int = 0,
) -> Reply:
    """The whole reply, cut at max_tokens. `choice`: which of a request's n choices; each
    draws its own words (the first those of a single-choice request), as sampling would."""
    asked = [m["content"] for m in messages if m["role"] == "user"]
    question = asked[-1] if asked else messages[-1]["content"]
    pieces: list[Piece] = []
    if wants_reasoning(options):
        thought = scripted_completion(f"Let me think about: {messages[-1]['content']}", max_tokens)
        pieces += [Piece(token, {"reasoning_content": token}) for token in thought]
    functions = called_functions(options, messages[-1]["role"])
    if functions:
        pieces += _call_pieces(functions, question, prompt)
    else:
        room = max(max_tokens - len(pieces), 0)
        if scripted is not None:
            words = scripted_completion(scripted, room)
        else:
            seed = [*prompt, f"\x1echoice {choice}"] if choice else prompt
            words = completion(seed, room, mean_length, ignore_eos=bool(options.get("ignore_eos")))
        pieces += [Piece(word, {"content": word}) for word in words]
    return Reply(pieces[:max_tokens], calls=bool(functions))


def logprobs(token: str, position: int, alternatives: int) -> dict[str, Any]:
    """The `logprobs.content` entry for one sampled token: greedy, so it is the most likely;
    its alternatives are words of the vocabulary, each less likely than the one before."""
    digest = _digest(token, position)
    chosen = -(digest[0] / 255) * 2  # from 0 down to -2
    entry = {"token": token, "logprob": chosen, "bytes": list(token.encode())}
    top = [entry]
    for rank in range(1, alternatives):
        word = _WORDS[digest[rank % len(digest)] % len(_WORDS)]
        alternative = chosen - rank * (1 + digest[(rank + 7) % len(digest)] / 255)
        top.append({"token": word, "logprob": alternative, "bytes": list(word.encode())})
    return {**entry, "top_logprobs": top[:alternatives]}


def text_logprobs(token: str, position: int, offset: int, alternatives: int) -> dict[str, Any]:
    """A text completion's logprobs for one token, as vLLM's /v1/completions sends them:
    the four lists of OpenAI's legacy shape, one entry each; the top entry maps the chosen
    token and up to `alternatives` others to their logprobs (up to alternatives + 1 in all,
    as OpenAI's). `offset`: where the token starts in the generated text."""
    entry = logprobs(token, position, alternatives + 1)
    return {
        "tokens": [token],
        "token_logprobs": [entry["logprob"]],
        "top_logprobs": [{top["token"]: top["logprob"] for top in entry["top_logprobs"]}],
        "text_offset": [offset],
    }
