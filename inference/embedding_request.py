"""Validate an OpenAI embeddings request body, and shape the vectors of its answer.

OpenAI's `input` is a string, an array of strings, an array of token ids, or an array of
token-id arrays; each form is bounded here (count and size per item) so that one request
cannot hold an embedder or a worker for long. Which forms a model takes, and whether it
can shorten its vectors (`dimensions`), is the serving side's call, once the deployment
is known (gateway/serving/embeddings.py).
"""

import base64
import json
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from inference.chat_options import InvalidRequest

__all__ = ["EmbeddingRequest", "InvalidRequest", "encode_vector", "parse_embedding_request"]

KNOWN = {"model", "input", "encoding_format", "dimensions", "user"}
ENCODINGS = ("float", "base64")
MAX_INPUTS = 2048  # OpenAI's limit per request
# About 8,192 tokens at four characters a token: OpenAI's longest input for its own models.
MAX_INPUT_CHARS = 32_768
MAX_INPUT_TOKENS = 8_192
MAX_TOKEN_ID = 2**31 - 1
MAX_USER_CHARS = 256


@dataclass(frozen=True)
class EmbeddingRequest:
    model: str
    # Exactly one of the two: text inputs, or token-id arrays (each already tokenized).
    texts: list[str] | None
    token_arrays: list[list[int]] | None
    encoding_format: str = "float"
    dimensions: int | None = None
    user: str | None = None

    @property
    def count(self) -> int:
        return len(self.texts if self.texts is not None else self.token_arrays or [])

    def estimated_prompt_tokens(self) -> int:
        """Admission's reservation where the gateway cannot count with the model's own
        tokenizer (a worker's model): token arrays exactly, text as UTF-8 bytes / 3 plus two
        special tokens each, upper-leaning like the chat estimate; reconciled to the
        worker's usage afterwards."""
        if self.token_arrays is not None:
            return sum(len(tokens) for tokens in self.token_arrays)
        return sum(len(text.encode()) // 3 + 2 for text in self.texts or [])

    def upstream_body(self) -> dict[str, Any]:
        """What a worker gets (its own model name is set by the caller)."""
        body: dict[str, Any] = {
            "input": self.texts if self.texts is not None else self.token_arrays,
            "encoding_format": self.encoding_format,
        }
        if self.dimensions is not None:
            body["dimensions"] = self.dimensions
        if self.user is not None:
            body["user"] = self.user
        return body


def encode_vector(vector: npt.NDArray[np.float32], encoding_format: str) -> list[float] | str:
    """One embedding as OpenAI sends it: a list of floats, or base64 of little-endian
    float32 (what the openai client asks for by default, and decodes)."""
    if encoding_format == "base64":
        return base64.b64encode(vector.astype("<f4").tobytes()).decode("ascii")
    floats: list[float] = vector.astype(np.float32).tolist()
    return floats


def _refuse_constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON")


def parse_embedding_request(raw: bytes) -> EmbeddingRequest:
    """An embeddings request from an HTTP body; InvalidRequest (400) names the parameter."""
    try:
        body = json.loads(raw, parse_constant=_refuse_constant)
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise InvalidRequest("The body is not valid JSON.") from None
    if not isinstance(body, dict):
        raise InvalidRequest("The body must be a JSON object.")
    unknown = sorted(set(body) - KNOWN)
    if unknown:
        raise InvalidRequest(f"Unrecognized request argument(s): {', '.join(unknown)}.", unknown[0])
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise InvalidRequest("'model' must be a non-empty string.", "model")
    texts, token_arrays = _inputs(body.get("input"))
    encoding = body.get("encoding_format")
    if encoding is not None and encoding not in ENCODINGS:
        raise InvalidRequest("'encoding_format' must be 'float' or 'base64'.", "encoding_format")
    return EmbeddingRequest(
        model=model,
        texts=texts,
        token_arrays=token_arrays,
        encoding_format=encoding or "float",
        dimensions=_dimensions(body.get("dimensions")),
        user=_user(body.get("user")),
    )


def _inputs(value: Any) -> tuple[list[str] | None, list[list[int]] | None]:
    """(texts, None) or (None, token arrays), each item checked."""
    if isinstance(value, str):
        return [_text(value, "input")], None
    if not isinstance(value, list) or not value:
        raise InvalidRequest(
            "'input' must be a non-empty string, an array of strings, an array of token ids "
            "or an array of token-id arrays.",
            "input",
        )
    if all(_is_token(item) for item in value):
        return None, [_tokens(value, "input")]
    if len(value) > MAX_INPUTS:
        raise InvalidRequest(f"'input' has {len(value)} items; at most {MAX_INPUTS}.", "input")
    if all(isinstance(item, str) for item in value):
        return [_text(item, f"input.{i}") for i, item in enumerate(value)], None
    if all(isinstance(item, list) for item in value):
        return None, [_tokens(item, f"input.{i}") for i, item in enumerate(value)]
    raise InvalidRequest(
        "'input' mixes kinds of items: send all strings or all token-id arrays.", "input"
    )


def _text(text: str, param: str) -> str:
    if not text:
        raise InvalidRequest(f"'{param}' is an empty string; it has nothing to embed.", param)
    if len(text) > MAX_INPUT_CHARS:
        raise InvalidRequest(
            f"'{param}' is {len(text)} characters; at most {MAX_INPUT_CHARS} per input.", param
        )
    try:
        text.encode()
    except UnicodeEncodeError:  # a lone surrogate (\ud800): no tokenizer can read it
        raise InvalidRequest(f"'{param}' is not valid Unicode text.", param) from None
    return text


def _is_token(item: Any) -> bool:
    return isinstance(item, int) and not isinstance(item, bool)


def _tokens(items: list[Any], param: str) -> list[int]:
    if not items or len(items) > MAX_INPUT_TOKENS:
        raise InvalidRequest(
            f"'{param}' must hold 1 to {MAX_INPUT_TOKENS} token ids; it holds {len(items)}.", param
        )
    if not all(_is_token(item) and 0 <= item <= MAX_TOKEN_ID for item in items):
        raise InvalidRequest(
            f"'{param}' must be an array of token ids (integers from 0 to {MAX_TOKEN_ID}).", param
        )
    return list(items)


def _dimensions(value: Any) -> int | None:
    if value is None:
        return None
    if not _is_token(value) or not 1 <= value <= 65_536:
        raise InvalidRequest("'dimensions' must be a positive integer.", "dimensions")
    return int(value)


def _user(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > MAX_USER_CHARS:
        raise InvalidRequest(f"'user' must be a string of at most {MAX_USER_CHARS}.", "user")
    return value
