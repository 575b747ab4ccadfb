"""The options of a chat completion request: which are passed to the worker, which are
accepted and dropped, and what each must be.

Every option that reaches a worker is checked for type, range and size first: a shared
worker compiles stop lists, bias tables, schemas, regexes and grammars for everyone's batch,
so one request must not hand it a huge one; and caches keyed on these options must never
store garbage. An option that is not listed here is refused by name (chat_request.py),
never silently dropped.
"""

import json
import re
from collections.abc import Callable
from typing import Any

# The OpenAI sampling and output options, and vLLM's own (sent in `extra_body` by the
# openai client), passed through to the worker unchanged.
OPENAI_OPTIONS = {
    "temperature",
    "top_p",
    "stop",
    "presence_penalty",
    "frequency_penalty",
    "seed",
    "logit_bias",
    "user",
    "response_format",
    "logprobs",
    "top_logprobs",
    "reasoning_effort",  # vLLM hands it to the chat template (gpt-oss reads it)
}
VLLM_OPTIONS = {
    "ignore_eos",
    "min_tokens",
    "top_k",
    "min_p",
    "repetition_penalty",
    "length_penalty",
    "guided_json",
    "guided_regex",
    "guided_choice",
    "guided_grammar",
    "structured_outputs",
    "chat_template_kwargs",
    "skip_special_tokens",
    "include_stop_str_in_output",
    "spaces_between_special_tokens",
}
# The vLLM fields SGLang's OpenAI-compatible server takes under the same names (its own
# structured-output fields are regex, json_schema and ebnf: not vLLM's guided_*).
SGLANG_OPTIONS = {
    "ignore_eos",
    "min_tokens",
    "top_k",
    "min_p",
    "repetition_penalty",
    "chat_template_kwargs",
    "skip_special_tokens",
    "spaces_between_special_tokens",
}
# Tool calling (checked in chat_tools.py: their rules depend on each other).
TOOL_OPTIONS = {"tools", "tool_choice", "parallel_tool_calls", "functions", "function_call"}
PASSTHROUGH = OPENAI_OPTIONS | VLLM_OPTIONS | TOOL_OPTIONS
# Newer OpenAI fields that change nothing for a self-hosted model: checked, then dropped
# (never sent to the worker, never part of a cache key). `store` and `metadata` are for
# OpenAI's stored completions, `service_tier` for its capacity tiers, `safety_identifier`
# for its abuse detection, the `prompt_cache_*` fields tune its prompt cache (a vLLM worker
# caches prefixes by itself), `verbosity` steers only OpenAI's own models, and
# `modalities` is accepted as ["text"], what every reply here is (audio is refused).
IGNORED = {
    "metadata",
    "store",
    "service_tier",
    "safety_identifier",
    "prompt_cache_key",
    "prompt_cache_retention",
    "prompt_cache_options",
    "verbosity",
    "modalities",
}
SERVICE_TIERS = {"auto", "default", "flex", "scale", "priority", "fast"}
METADATA_PAIRS, METADATA_KEY_CHARS, METADATA_VALUE_CHARS = 16, 64, 512  # OpenAI's limits
SAFETY_IDENTIFIER_CHARS = 64  # OpenAI's limit
MAX_PROMPT_CACHE_KEY_CHARS = 1_024
PROMPT_CACHE_OPTIONS = {"ttl": {"30m"}, "mode": {"implicit", "explicit"}}
PROMPT_CACHE_RETENTIONS = {"in_memory", "24h"}
VERBOSITIES = {"low", "medium", "high"}
REASONING_EFFORTS = {"none", "minimal", "low", "medium", "high", "xhigh", "max"}

# Sizes a shared worker is asked to handle.
MAX_STOP_CHARS = 256
MAX_LOGIT_BIAS_ENTRIES = 300
MAX_SCHEMA_BYTES = 16_384  # a response_format, a guided_json schema, a grammar
MAX_PATTERN_CHARS = 2_048  # a guided_regex
MAX_CHOICES, MAX_CHOICE_CHARS = 256, 256  # guided_choice
MAX_TEMPLATE_KWARGS_BYTES = 4_096
MAX_TOP_LOGPROBS = 20  # OpenAI's limit, and vLLM's default --max-logprobs
RESPONSE_FORMATS = {"text", "json_object", "json_schema"}
# OpenAI's json_schema format: {name, description, schema, strict}, the name as a function's.
JSON_SCHEMA_KEYS = {"name", "description", "schema", "strict"}
RESPONSE_FORMAT_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
# What vLLM passes to the chat template itself: a request that set them through
# chat_template_kwargs would replace the conversation, the tools or the template (Jinja
# that runs on the worker) rather than tune it.
RESERVED_TEMPLATE_KWARGS = {"chat_template", "messages", "tools", "documents", "tokenize"}


class InvalidRequest(ValueError):
    """The request body is not a chat completion this gateway accepts (param: which field)."""

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.param = param


def number(low: float, high: float, above_low: bool = False) -> Callable[[Any], bool]:
    def valid(value: Any) -> bool:
        if not isinstance(value, int | float) or isinstance(value, bool):
            return False
        return (low < value if above_low else low <= value) and value <= high

    return valid


def integer(low: int, high: int = 2**63 - 1) -> Callable[[Any], bool]:
    return lambda v: isinstance(v, int) and not isinstance(v, bool) and low <= v <= high


def boolean(value: Any) -> bool:
    return isinstance(value, bool)


def one_of(value: Any, choices: set[str]) -> bool:
    """Membership without hashing: a list or object given where a name belongs is refused,
    not a TypeError (unhashable) that would reach the client as a 500."""
    return isinstance(value, str) and value in choices


def json_size(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False).encode())


def _short_string(value: Any) -> bool:
    return isinstance(value, str) and len(value) <= MAX_STOP_CHARS


def _stop(value: Any) -> bool:
    return _short_string(value) or (
        isinstance(value, list) and len(value) <= 4 and all(_short_string(s) for s in value)
    )


def _logit_bias(value: Any) -> bool:
    return (
        isinstance(value, dict)
        and len(value) <= MAX_LOGIT_BIAS_ENTRIES
        and all(
            isinstance(token, str) and token.isdigit() and number(-100, 100)(bias)
            for token, bias in value.items()
        )
    )


def _response_format(value: Any) -> bool:
    if not isinstance(value, dict) or not one_of(value.get("type"), RESPONSE_FORMATS):
        return False
    if value["type"] != "json_schema":
        return set(value) == {"type"}
    schema = value.get("json_schema")
    return (
        set(value) == {"type", "json_schema"}
        and isinstance(schema, dict)
        and set(schema) <= JSON_SCHEMA_KEYS
        and (
            "name" not in schema  # OpenAI requires one; a worker that does says so itself
            or (
                isinstance(schema["name"], str)
                and RESPONSE_FORMAT_NAME.fullmatch(schema["name"]) is not None
            )
        )
        and isinstance(schema.get("description", ""), str)
        and isinstance(schema.get("schema", {}), dict)
        and isinstance(schema.get("strict", False), bool | None)
        and json_size(value) <= MAX_SCHEMA_BYTES
    )


def _schema(value: Any) -> bool:
    return isinstance(value, dict | str) and json_size(value) <= MAX_SCHEMA_BYTES


def _regex(value: Any) -> bool:
    """Type and size only: the workers' regex dialects (outlines, xgrammar) are not Python's,
    so the worker judges the pattern (its refusal reaches the client as a 400)."""
    return isinstance(value, str) and 0 < len(value) <= MAX_PATTERN_CHARS


def _choices(value: Any) -> bool:
    return (
        isinstance(value, list)
        and 1 <= len(value) <= MAX_CHOICES
        and all(isinstance(c, str) and 0 < len(c) <= MAX_CHOICE_CHARS for c in value)
    )


def _grammar(value: Any) -> bool:
    return isinstance(value, str) and len(value) > 0 and json_size(value) <= MAX_SCHEMA_BYTES


def _structured_outputs(value: Any) -> bool:
    return isinstance(value, dict) and bool(value) and json_size(value) <= MAX_SCHEMA_BYTES


def _template_kwargs(value: Any) -> bool:
    return (
        isinstance(value, dict)
        and not any(one_of(key, RESERVED_TEMPLATE_KWARGS) for key in value)
        and json_size(value) <= MAX_TEMPLATE_KWARGS_BYTES
    )


def _metadata(value: Any) -> bool:
    return (
        isinstance(value, dict)
        and len(value) <= METADATA_PAIRS
        and all(
            len(key) <= METADATA_KEY_CHARS
            and isinstance(item, str)
            and len(item) <= METADATA_VALUE_CHARS
            for key, item in value.items()
        )
    )


def _prompt_cache_options(value: Any) -> bool:
    return isinstance(value, dict) and all(
        one_of(key, set(PROMPT_CACHE_OPTIONS)) and one_of(item, PROMPT_CACHE_OPTIONS[key])
        for key, item in value.items()
    )


# What each option must be, and how the 400 says it.
OPTION_RULES: dict[str, tuple[Callable[[Any], bool], str]] = {
    "temperature": (number(0, 2), "a number from 0 to 2"),
    "top_p": (number(0, 1), "a number from 0 to 1"),
    "presence_penalty": (number(-2, 2), "a number from -2 to 2"),
    "frequency_penalty": (number(-2, 2), "a number from -2 to 2"),
    "seed": (integer(-(2**63)), "an integer"),
    "top_k": (integer(-1), "an integer of -1 or more"),
    "min_tokens": (integer(0), "a non-negative integer"),
    "min_p": (number(0, 1), "a number from 0 to 1"),
    "repetition_penalty": (number(0, 2, above_low=True), "a number above 0, at most 2"),
    "length_penalty": (number(-10, 10), "a number from -10 to 10"),
    "stop": (_stop, f"a string or an array of up to 4 strings of {MAX_STOP_CHARS} characters"),
    "user": (lambda v: isinstance(v, str), "a string"),
    "ignore_eos": (boolean, "a boolean"),
    "skip_special_tokens": (boolean, "a boolean"),
    "include_stop_str_in_output": (boolean, "a boolean"),
    "spaces_between_special_tokens": (boolean, "a boolean"),
    "logprobs": (boolean, "a boolean"),
    "top_logprobs": (integer(0, MAX_TOP_LOGPROBS), f"an integer from 0 to {MAX_TOP_LOGPROBS}"),
    "logit_bias": (
        _logit_bias,
        f"an object of up to {MAX_LOGIT_BIAS_ENTRIES} token ids mapped to numbers from -100 to 100",
    ),
    "response_format": (
        _response_format,
        f"an object with a type in {sorted(RESPONSE_FORMATS)} (json_schema with "
        "{name, description, schema, strict}, the name 1 to 64 letters, digits, underscores "
        f"or dashes), at most {MAX_SCHEMA_BYTES} bytes as JSON",
    ),
    "guided_json": (
        _schema,
        f"a JSON schema (object or string) of at most {MAX_SCHEMA_BYTES} bytes",
    ),
    "guided_regex": (_regex, f"a regular expression of at most {MAX_PATTERN_CHARS} characters"),
    "guided_choice": (
        _choices,
        f"an array of 1 to {MAX_CHOICES} non-empty strings of at most {MAX_CHOICE_CHARS} "
        "characters",
    ),
    "guided_grammar": (_grammar, f"a non-empty string of at most {MAX_SCHEMA_BYTES} bytes"),
    "structured_outputs": (
        _structured_outputs,
        f"a non-empty object of at most {MAX_SCHEMA_BYTES} bytes as JSON",
    ),
    "reasoning_effort": (
        lambda v: one_of(v, REASONING_EFFORTS),
        f"one of {sorted(REASONING_EFFORTS)}",
    ),
    "chat_template_kwargs": (
        _template_kwargs,
        f"an object of at most {MAX_TEMPLATE_KWARGS_BYTES} bytes as JSON, without the keys "
        f"{sorted(RESERVED_TEMPLATE_KWARGS)} (the worker sets those itself)",
    ),
}
IGNORED_RULES: dict[str, tuple[Callable[[Any], bool], str]] = {
    "metadata": (
        _metadata,
        f"an object of up to {METADATA_PAIRS} keys of {METADATA_KEY_CHARS} characters with "
        f"string values of {METADATA_VALUE_CHARS}",
    ),
    "store": (boolean, "a boolean"),
    "service_tier": (lambda v: one_of(v, SERVICE_TIERS), f"one of {sorted(SERVICE_TIERS)}"),
    "safety_identifier": (
        lambda v: isinstance(v, str) and len(v) <= SAFETY_IDENTIFIER_CHARS,
        f"a string of at most {SAFETY_IDENTIFIER_CHARS} characters",
    ),
    "prompt_cache_key": (
        lambda v: isinstance(v, str) and len(v) <= MAX_PROMPT_CACHE_KEY_CHARS,
        f"a string of at most {MAX_PROMPT_CACHE_KEY_CHARS} characters",
    ),
    "prompt_cache_retention": (
        lambda v: one_of(v, PROMPT_CACHE_RETENTIONS),
        f"one of {sorted(PROMPT_CACHE_RETENTIONS)}",
    ),
    "prompt_cache_options": (
        _prompt_cache_options,
        "an object with an optional ttl ('30m') and mode ('implicit' or 'explicit')",
    ),
    "verbosity": (lambda v: one_of(v, VERBOSITIES), f"one of {sorted(VERBOSITIES)}"),
    "modalities": (
        lambda v: isinstance(v, list) and all(item == "text" for item in v),
        '["text"]: every reply here is text (no worker produces audio)',
    ),
}


def check_options(body: dict[str, Any]) -> dict[str, Any]:
    """The options sent to the worker (tool options are checked in chat_tools.py); the
    ignored fields are checked here too, then dropped."""
    for name, (valid, expected) in IGNORED_RULES.items():
        if body.get(name) is not None and not valid(body[name]):
            raise InvalidRequest(f"'{name}' must be {expected}.", name)
    options = {
        k: v for k, v in body.items() if k in OPENAI_OPTIONS | VLLM_OPTIONS and v is not None
    }
    for name, value in options.items():
        valid, expected = OPTION_RULES[name]
        if not valid(value):
            raise InvalidRequest(f"'{name}' must be {expected}.", name)
    if options.get("top_logprobs") is not None and options.get("logprobs") is not True:
        raise InvalidRequest("'top_logprobs' needs 'logprobs': true.", "top_logprobs")
    return options
