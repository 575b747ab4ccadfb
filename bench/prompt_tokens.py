"""Prompt token counting at admission, against the worker's own count (docs/benchmarks.md,
"Prompt tokens at admission"): for each request of bench/prompt_corpus.py, the template
count (inference/prompt_tokens.py), the bytes / 3 estimate it replaces, and vLLM's
/tokenize on the embedded model (what usage.prompt_tokens reports); then the CPU time of
each way of counting in this process, and the wall time of asking the worker (how a model
whose folder is not on the gateway's host is counted)."""

import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

from bench.prompt_corpus import CORPUS
from foundation.embedded_redis import free_port
from gateway.launcher import answers
from inference import worker_command
from inference.chat_request import ChatRequest, parse_chat_request
from inference.client import close_http_session, count_prompt_tokens
from inference.prompt_tokens import PromptCounter, TemplateCounter
from inference.worker_command import EMBEDDED_MODEL


@dataclass(frozen=True)
class Row:
    name: str
    worker: int
    counted: int
    estimated: int


def corpus_requests() -> dict[str, ChatRequest]:
    return {
        name: parse_chat_request(json.dumps({"model": EMBEDDED_MODEL, **body}).encode())
        for name, body in CORPUS.items()
    }


def embedded_counter() -> TemplateCounter:
    counter = TemplateCounter.from_folder(Path(settings.TOKENIZER_DIR) / EMBEDDED_MODEL)
    if counter is None:
        raise RuntimeError("the embedded model is not prepared: run `make worker`")
    return counter


async def compare(url: str, counter: PromptCounter) -> list[Row]:
    rows = []
    try:
        for name, chat in corpus_requests().items():
            tools = chat.options.get("tools")
            worker = await count_prompt_tokens(url, EMBEDDED_MODEL, chat.messages, tools)
            rows.append(Row(name, worker, counter.count(chat), chat.estimated_prompt_tokens()))
    finally:
        await close_http_session()  # its connections belong to this event loop
    return rows


def microseconds_per_count(counter: PromptCounter, rounds: int) -> dict[str, tuple[float, float]]:
    """CPU per request, template count and estimate, for each request of the corpus."""
    timings = {}
    for name, chat in corpus_requests().items():
        spent = []
        for count in (counter.count, ChatRequest.estimated_prompt_tokens):
            started = time.process_time()
            for _ in range(rounds):
                count(chat)
            spent.append((time.process_time() - started) / rounds * 1e6)
        timings[name] = (spent[0], spent[1])
    return timings


async def worker_milliseconds(url: str, rounds: int) -> dict[str, float]:
    """Wall time of asking the worker (vLLM's /tokenize, over a kept-alive connection on
    this host), the median of `rounds` asks, per request of the corpus: what admission
    spends counting a prompt of a model whose folder is not on the gateway's host (the
    first time: a repeat is remembered, inference/worker_prompt_counts.py)."""
    medians = {}
    try:
        for name, chat in corpus_requests().items():
            tools = chat.options.get("tools")
            spent = []
            for _ in range(rounds):
                started = time.perf_counter()
                await count_prompt_tokens(url, EMBEDDED_MODEL, chat.messages, tools)
                spent.append((time.perf_counter() - started) * 1e3)
            medians[name] = statistics.median(spent)
    finally:
        await close_http_session()
    return medians


def error_percent(counted: int, worker: int) -> float:
    return 100.0 * (counted - worker) / worker


def start_embedded_worker(timeout_s: float = 300) -> tuple["subprocess.Popen[bytes]", str]:
    """The embedded vLLM worker on a free port (its log on stderr), once it answers."""
    base: Path = settings.BASE_DIR
    port = free_port()
    command = worker_command.worker_command(
        worker_command.worker_python(base),
        str(worker_command.prepared_model_dir(Path(settings.TOKENIZER_DIR))),
        port,
        worker_command.detect_device(),
    )
    env = worker_command.worker_env(dict(os.environ))
    process = subprocess.Popen(command, env=env, stdout=sys.stderr)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + timeout_s
    while not answers(f"{url}/health"):
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise RuntimeError(f"the embedded worker did not start ({command[0]} ...)")
        time.sleep(1)
    return process, url


def run(
    url: str, rounds: int
) -> tuple[list[Row], dict[str, tuple[float, float]], dict[str, float]]:
    counter = embedded_counter()
    rows = asyncio.run(compare(url, counter))
    asked = asyncio.run(worker_milliseconds(url, max(1, rounds // 10)))
    return rows, microseconds_per_count(counter, rounds), asked
