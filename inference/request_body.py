"""The checks every generation request body shares, whichever endpoint it came to (a chat
completion, a text completion): decoding, values that cannot travel on, the model name,
max_tokens, n and the stream fields."""

import json
import math
import re
from typing import Any

from inference.chat_options import InvalidRequest, one_of

# Admission reserves max_tokens for each choice; a larger max_tokens than any deployed
# context would only be refused by the worker after queueing.
MAX_TOKENS_LIMIT = 32_768
# The most choices (n) one request may ask for. Admission reserves n x max_tokens up front,
# and the worker runs the n sequences side by side in its batch: a larger n lets one request
# hold a team's whole token minute and a worker's batch slots at once. Eight covers
# best-of-n sampling and self-consistency voting; more is a batch (gateway/batches).
MAX_CHOICES = 8
# Far beyond any real request (a JSON schema in response_format included), and far within
# what every encoder on the way recurses through: the cache key, the admission estimate and
# the worker's request each serialize the body again, a few levels deeper than it came.
MAX_NESTING = 64
# include_obfuscation: OpenAI pads its stream chunks against side channels; accepted and
# ignored (the gateway does not pad).
STREAM_OPTIONS = {"include_usage", "include_obfuscation"}
_SURROGATE = re.compile(r"[\ud800-\udfff]")


def decode_body(raw: bytes) -> Any:
    """JSON from an HTTP body. NaN and Infinity are not JSON; Python accepts them unless
    told otherwise."""
    try:
        return json.loads(raw, parse_constant=_refuse_constant)
    except (ValueError, UnicodeDecodeError):
        raise InvalidRequest("The body is not valid JSON.") from None
    except RecursionError:  # the decoder's own depth limit (about 1,000 levels)
        raise InvalidRequest(f"The body nests deeper than {MAX_NESTING} levels.") from None


def _refuse_constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON")


# OpenAI's request fields that Sluice refuses by design (docs/api.md): refused by name when
# set, but, like any optional field, accepted as left out when null.
_REFUSED_BY_DESIGN = frozenset({"audio", "prediction", "web_search_options", "moderation"})


def check_object(body: Any, known: set[str]) -> dict[str, Any]:
    """The body as an object of known fields only: anything else is refused by name rather
    than silently dropped."""
    if not isinstance(body, dict):
        raise InvalidRequest("The body must be a JSON object.")
    check_values(body)
    for name in _REFUSED_BY_DESIGN & body.keys():
        if body[name] is None:  # an explicit null is as if absent (docs/api.md)
            del body[name]
    unknown = sorted(set(body) - known)
    if unknown:
        raise InvalidRequest(f"Unrecognized request argument(s): {', '.join(unknown)}.", unknown[0])
    if not isinstance(body.get("model"), str) or not body["model"]:
        raise InvalidRequest("'model' must be a non-empty string.", "model")
    return body


def check_values(body: dict[str, Any]) -> None:
    """Refuse what decodes but cannot travel on: nesting deeper than MAX_NESTING, strings
    with a lone surrogate (the escape \\ud800 decodes to one; it has no UTF-8 form, so
    encoding the body for a cache key or a worker would fail), and numbers out of float
    range (1e999 decodes to inf, which is not JSON). Iterative: the depth is the point."""
    for name, value in body.items():
        pending: list[tuple[Any, int]] = [(name, 0), (value, 1)]
        while pending:
            item, depth = pending.pop()
            if isinstance(item, str):
                if not item.isascii() and _SURROGATE.search(item):
                    raise InvalidRequest(
                        f"'{name}' holds a lone surrogate: not valid Unicode text.", name
                    )
            elif isinstance(item, float) and not math.isfinite(item):
                raise InvalidRequest(f"'{name}' holds a number out of range.", name)
            elif isinstance(item, dict | list) and depth > MAX_NESTING:
                raise InvalidRequest(f"'{name}' nests deeper than {MAX_NESTING} levels.", name)
            elif isinstance(item, dict):
                pending.extend((key, depth) for key in item)
                pending.extend((inner, depth + 1) for inner in item.values())
            elif isinstance(item, list):
                pending.extend((inner, depth + 1) for inner in item)


def max_tokens_given(body: dict[str, Any]) -> bool:
    return body.get("max_completion_tokens") is not None or body.get("max_tokens") is not None


def check_max_tokens(body: dict[str, Any], default: int) -> int:
    """max_completion_tokens, else max_tokens, else the default; each is checked when given
    (a null max_completion_tokens must not let a malformed max_tokens through)."""
    for name in ("max_completion_tokens", "max_tokens"):
        value = body.get(name)
        if value is not None and (
            isinstance(value, bool)
            or not isinstance(value, int)
            or not 1 <= value <= MAX_TOKENS_LIMIT
        ):
            raise InvalidRequest(f"'{name}' must be an integer from 1 to {MAX_TOKENS_LIMIT}.", name)
    for name in ("max_completion_tokens", "max_tokens"):
        if body.get(name) is not None:
            return int(body[name])
    return default


def check_n(body: dict[str, Any]) -> int:
    """n: an integer from 1 to MAX_CHOICES; null is the field left out (1)."""
    n = body.get("n")
    if n is None:
        return 1
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_CHOICES:
        raise InvalidRequest(f"'n' must be an integer from 1 to {MAX_CHOICES}.", "n")
    return int(n)


def check_stream(body: dict[str, Any]) -> tuple[bool, bool]:
    """(stream, include_usage); null is the field left out, as OpenAI reads it (stream and
    stream_options are nullable)."""
    stream = False if body.get("stream") is None else body["stream"]
    options = {} if body.get("stream_options") is None else body["stream_options"]
    if not isinstance(stream, bool):
        raise InvalidRequest("'stream' must be a boolean.", "stream")
    if not isinstance(options, dict) or not all(
        one_of(key, STREAM_OPTIONS) and (value is None or isinstance(value, bool))
        for key, value in options.items()
    ):
        raise InvalidRequest(
            "'stream_options' must be an object of include_usage and include_obfuscation, "
            "each a boolean.",
            "stream_options",
        )
    return stream, bool(options.get("include_usage"))
