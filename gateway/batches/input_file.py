"""A batch input file: JSONL, one request per line, in OpenAI's line format:

    {"custom_id": "q1", "method": "POST", "url": "/v1/chat/completions", "body": {...}}

Read twice: once at upload (`summarize`: is it JSONL at all, how many lines, which models,
about how many tokens), then line by line by the runner (`read_line`), which reports each
malformed line in the batch's error file with its number and goes on.
"""

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import IO, Any

from django.conf import settings

from foundation.text import storable_text
from inference.chat_request import (
    CHAT_PATH,
    TEXT_PATH,
    ChatRequest,
    InvalidRequest,
    parse_chat_request,
)
from inference.embedding_request import parse_embedding_request
from inference.text_completion import parse_text_completion

CHAT, TEXT = CHAT_PATH, TEXT_PATH
EMBEDDINGS = "/v1/embeddings"
ENDPOINTS = (CHAT, TEXT, EMBEDDINGS)
GENERATION_ENDPOINTS = (CHAT, TEXT)  # served by chat deployments
CUSTOM_ID_MAX_CHARS = 512


class NotABatchFile(ValueError):
    """The file as a whole is not a batch input file (HTTP 400 at upload)."""


class MalformedLine(ValueError):
    """One line that cannot be run; the message names what is wrong with it."""


@dataclass(frozen=True)
class LineRequest:
    line_number: int
    custom_id: str
    url: str
    body: dict[str, Any]

    def encoded_body(self) -> bytes:
        return json.dumps(self.body).encode()


@dataclass
class FileSummary:
    lines: int = 0  # non-blank lines, well-formed or not
    well_formed: int = 0
    estimated_tokens: int = 0  # prompt estimates plus max_tokens, over well-formed lines
    model_names: dict[str, set[str]] = field(default_factory=dict)  # by endpoint


def raw_lines(content: IO[bytes]) -> Iterator[tuple[int, bytes]]:
    """(1-based line number, bytes) of every non-blank line."""
    for number, raw in enumerate(content, 1):
        if raw.strip():
            yield number, raw


def read_line(number: int, raw: bytes) -> LineRequest:
    if len(raw) > settings.BATCH_LINE_MAX_BYTES:
        raise MalformedLine(f"the line is over {settings.BATCH_LINE_MAX_BYTES} bytes")
    try:
        line = json.loads(raw)
    except ValueError as exc:  # not UTF-8, not JSON, an integer of over 4,300 digits
        raise MalformedLine(f"the line is not JSON ({exc})") from None
    except RecursionError:
        raise MalformedLine("the line's JSON nests too deep") from None
    if not isinstance(line, dict):
        raise MalformedLine("the line is not a JSON object")
    custom_id = line.get("custom_id")
    if not isinstance(custom_id, str) or not custom_id:
        raise MalformedLine("custom_id must be a non-empty string")
    if len(custom_id) > CUSTOM_ID_MAX_CHARS:
        raise MalformedLine(f"custom_id is over {CUSTOM_ID_MAX_CHARS} characters")
    if not storable_text(custom_id):
        raise MalformedLine("custom_id must be text: no NUL character, no unpaired surrogate")
    if line.get("method") != "POST":
        raise MalformedLine("method must be POST")
    url = line.get("url")
    if url not in ENDPOINTS:
        raise MalformedLine(f"url must be one of {', '.join(ENDPOINTS)}, not {url!r}")
    body = line.get("body")
    if not isinstance(body, dict):
        raise MalformedLine("body must be a JSON object (the request)")
    if not isinstance(body.get("model"), str):
        raise MalformedLine("body.model must be a string")
    return LineRequest(number, custom_id, url, body)


def estimated_tokens(line: LineRequest) -> int:
    """What admission would reserve for the line: its prompt estimate plus max_tokens.
    Raises InvalidRequest for a body its endpoint would refuse."""
    if line.url in GENERATION_ENDPOINTS:
        chat = parse_generation(line)
        return chat.estimated_prompt_tokens() + chat.max_tokens * chat.n
    return parse_embedding_request(line.encoded_body()).estimated_prompt_tokens()


def parse_generation(line: LineRequest) -> ChatRequest:
    """A chat or text completion line's request, validated as its endpoint would."""
    parse = parse_chat_request if line.url == CHAT else parse_text_completion
    return parse(line.encoded_body())


def summarize(content: IO[bytes]) -> FileSummary:
    """Read a whole upload. Raises NotABatchFile when it is not UTF-8 JSONL with at least one
    well-formed line, or has more lines than BATCH_MAX_LINES."""
    summary = FileSummary()
    for number, raw in raw_lines(content):
        summary.lines += 1
        if summary.lines > settings.BATCH_MAX_LINES:
            raise NotABatchFile(f"A batch file holds at most {settings.BATCH_MAX_LINES} lines.")
        try:
            raw.decode()
        except UnicodeDecodeError:
            raise NotABatchFile(f"Line {number} is not UTF-8 text: upload JSONL.") from None
        try:
            line = read_line(number, raw)
            tokens = estimated_tokens(line)
        except (MalformedLine, InvalidRequest):
            continue  # reported in the error file when the batch runs
        summary.well_formed += 1
        summary.estimated_tokens += tokens
        summary.model_names.setdefault(line.url, set()).add(str(line.body["model"]))
    if summary.well_formed == 0:
        raise NotABatchFile(
            "The file holds no well-formed batch line: upload JSONL, one object per line with "
            'custom_id, method "POST", url and body.'
        )
    return summary
