"""Prompt compression (gateway/serving/compression.py) on bench/compression_corpus.py: the
prompt tokens before and after, counted by the embedded model's own tokenizer and chat
template (inference/prompt_tokens.py, exact for it); and, on the prompts where only
whitespace or a repeat is left out, whether the embedded model's answer (vLLM, greedy)
stays the same. docs/benchmarks.md, "Prompt compression"."""

import asyncio
from contextlib import aclosing
from dataclasses import dataclass

from bench.compression_corpus import CORPUS, MEANING_KEPT
from bench.prompt_tokens import embedded_counter
from gateway.serving.compression import compress
from inference.chat_request import ChatRequest, chat_request_from
from inference.client import close_http_session, stream_from_worker
from inference.worker_command import EMBEDDED_MODEL

ANSWER_TOKENS = 32


@dataclass(frozen=True)
class Row:
    name: str
    before: int
    after: int
    chars_saved: int
    same_answer: bool | None  # None: not asked (compression may change the meaning there)


def _request(body: dict[str, object]) -> ChatRequest:
    return chat_request_from({"model": EMBEDDED_MODEL, "max_tokens": ANSWER_TOKENS, **body})


async def _answer(url: str, chat: ChatRequest) -> str:
    body = {**chat.upstream_body(), "temperature": 0}
    pieces = []
    async with aclosing(stream_from_worker(url, EMBEDDED_MODEL, body)) as chunks:
        async for chunk in chunks:
            for choice in chunk.get("choices") or []:
                pieces.append((choice.get("delta") or {}).get("content") or "")
    return "".join(pieces)


async def _rows(url: str | None) -> list[Row]:
    counter = embedded_counter()
    rows = []
    try:
        for name, body in CORPUS.items():
            chat = _request(body)
            done = compress(chat)
            same = None
            if url is not None and name in MEANING_KEPT:
                same = await _answer(url, chat) == await _answer(url, done.chat)
            rows.append(
                Row(name, counter.count(chat), counter.count(done.chat), done.chars_saved, same)
            )
    finally:
        await close_http_session()
    return rows


def run(url: str | None) -> list[Row]:
    return asyncio.run(_rows(url))


def table(rows: list[Row]) -> list[str]:
    lines = [
        "| prompt | tokens before | after | saved | characters left out | same answer |",
        "|---|---|---|---|---|---|",
    ]
    for row in rows:
        saved = 100 * (row.before - row.after) / row.before
        same = "-" if row.same_answer is None else ("yes" if row.same_answer else "**no**")
        lines.append(
            f"| {row.name} | {row.before} | {row.after} | {saved:.1f}% | {row.chars_saved} "
            f"| {same} |"
        )
    before, after = sum(r.before for r in rows), sum(r.after for r in rows)
    lines.append(f"| all | {before} | {after} | {100 * (before - after) / before:.1f}% | | |")
    return lines
