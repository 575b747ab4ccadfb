"""`make run`'s launcher, end to end: real Redis, server, Celery worker and beat."""

import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from typing import Any

import openai
import pytest
import redis
from openai.types import Batch
from openai.types.chat import ChatCompletionFunctionToolParam, ChatCompletionMessageFunctionToolCall

from foundation.embedded_redis import free_port, port_is_free
from inference.worker_command import EMBEDDED_MODEL
from tests.conftest import MESSAGES, REPO_ROOT
from tests.sims import SimProcess
from tests.waiting import wait_until

pytestmark = pytest.mark.live

READY_TIMEOUT_S = 360
# What `make run` starts itself unless told where they are.
SHARED_SERVICES = ("REDIS_URL", "CACHE_REDIS_URL", "DATABASE_URL")


class Launcher:
    def __init__(self, var_dir, port, **extra_env):
        self.port = port
        env = {k: v for k, v in os.environ.items() if k not in SHARED_SERVICES}
        env.update(SLUICE_VAR_DIR=str(var_dir), PORT=str(port), **extra_env)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "gateway.launcher"],
            cwd=REPO_ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.seen: list[str] = []
        self.ended = False
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line)
        self.lines.put(None)  # the end of its output: the launcher has exited

    def wait_for(self, pattern, timeout=READY_TIMEOUT_S):
        """The first line matching pattern, among lines already seen or still to come; fails
        at once if the launcher exits without printing one."""
        for line in self.seen:
            if match := re.search(pattern, line):
                return match
        deadline = time.monotonic() + timeout
        while not self.ended and time.monotonic() < deadline:
            try:
                received = self.lines.get(timeout=0.5)
            except queue.Empty:
                continue
            if received is None:
                self.ended = True
                break
            self.seen.append(received)
            match = re.search(pattern, received)
            if match:
                return match
        why = f"the launcher exited ({self.exit_status()})" if self.ended else f"{timeout} s"
        raise AssertionError(f"never saw {pattern!r} ({why}); output:\n{''.join(self.seen)}")

    def exit_status(self) -> str:
        try:
            return f"code {self.process.wait(timeout=10)}"
        except subprocess.TimeoutExpired:
            return "output closed, still running"

    def stop(self):
        """Ctrl-C first, so the supervisor stops its children; SIGKILL only as a last resort."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGINT)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=10)


@pytest.fixture
def launch(tmp_path):
    started = []

    def start(**env):
        started.append(Launcher(tmp_path / "var", free_port(), **env))
        return started[-1]

    yield start
    for running in started:
        running.stop()


def curl_line_works(match):
    key, url = match.group(1), match.group(2)
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {key}"})
    with urllib.request.urlopen(request, timeout=5) as response:
        return response.status, response.read().decode()


def test_make_run_answers_with_the_real_model_prints_working_curl_lines_and_stops(launch, tmp_path):
    launcher = launch()
    launcher.wait_for(r"Sluice is ready")
    try_it = launcher.wait_for(r"Try it:\s+(curl .*)$")
    printed = subprocess.run(
        ["bash", "-c", try_it.group(1)], capture_output=True, text=True, timeout=120, check=True
    )
    assert "Paris" in json.loads(printed.stdout)["choices"][0]["message"]["content"]
    curl = launcher.wait_for(r"Usage:\s+curl -s -H 'Authorization: Bearer (\S+)' (\S+)")
    status, body = curl_line_works(curl)
    assert status == 200 and '"team":"demo"' in body

    # The real vLLM worker streams through the platform to the official client.
    client = openai.OpenAI(
        base_url=f"http://127.0.0.1:{launcher.port}/v1", api_key=curl.group(1), max_retries=0
    )
    stream = client.chat.completions.create(
        model="smollm2-135m-instruct",
        temperature=0,
        max_tokens=30,
        stream=True,
        messages=[{"role": "user", "content": "What is the capital of France?"}],
    )
    pieces = [c.choices[0].delta.content or "" for c in stream if c.choices]
    assert len([p for p in pieces if p]) > 3 and "Paris" in "".join(pieces)
    # A text completion reaches the real worker's /v1/completions, streamed and not.
    text = client.completions.create(
        model=EMBEDDED_MODEL, prompt="The capital of France is", max_tokens=8, temperature=0
    )
    assert text.object == "text_completion" and text.choices[0].text.strip()
    assert text.usage is not None and text.usage.completion_tokens > 0
    streamed = client.completions.create(
        model=EMBEDDED_MODEL,
        prompt="The capital of France is",
        max_tokens=8,
        temperature=0,
        stream=True,
        extra_headers={"Cache-Control": "no-cache"},
    )
    assert "".join(c.choices[0].text for c in streamed if c.choices) == text.choices[0].text
    # Integer logprobs: the real worker's legacy shape, relayed whole and chunk by chunk.
    scoring: dict[str, Any] = {
        "model": EMBEDDED_MODEL,
        "prompt": "The capital of France is",
        "max_tokens": 4,
        "temperature": 0,
        "logprobs": 2,
    }
    scored = client.completions.create(**scoring)
    logprobs = scored.choices[0].logprobs
    assert logprobs is not None and logprobs.tokens and logprobs.top_logprobs
    assert "".join(logprobs.tokens) == scored.choices[0].text
    assert len(logprobs.token_logprobs or []) == len(logprobs.tokens)
    assert all(1 <= len(top) <= 3 for top in logprobs.top_logprobs)  # the token and 2 others
    streamed_tokens = [
        token
        for chunk in client.completions.create(**scoring, stream=True)
        for choice in chunk.choices
        for token in (choice.logprobs.tokens or [] if choice.logprobs else [])
    ]
    assert streamed_tokens == logprobs.tokens
    # Tool calling with a named function: the real worker's structured output makes the call.
    weather: ChatCompletionFunctionToolParam = {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "The weather in a city",
            "strict": True,  # the worker holds the arguments to the schema
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
                "additionalProperties": False,
            },
        },
    }
    called = client.chat.completions.create(
        model=EMBEDDED_MODEL,
        max_tokens=80,
        temperature=0,
        messages=[{"role": "user", "content": "What is the weather in Paris?"}],
        tools=[weather],
        tool_choice={"type": "function", "function": {"name": "get_weather"}},
    )
    [call] = called.choices[0].message.tool_calls or []
    assert isinstance(call, ChatCompletionMessageFunctionToolCall)
    assert call.function.name == "get_weather"
    assert isinstance(json.loads(call.function.arguments)["city"], str)
    redis_url = (tmp_path / "var" / "redis.url").read_text().strip()
    launcher.wait_for(r"main@\S+ ready", timeout=60)

    # A batch runs on the batches worker, through the real model, at batch priority.
    launcher.wait_for(r"batches@\S+ ready", timeout=60)
    lines = [
        {
            "custom_id": f"b{n}",
            "method": "POST",
            "url": "/v1/chat/completions",
            "body": {"model": EMBEDDED_MODEL, "messages": MESSAGES, "max_tokens": 4},
        }
        for n in range(2)
    ]
    upload = client.files.create(
        file=("batch.jsonl", "\n".join(json.dumps(line) for line in lines).encode()),
        purpose="batch",
    )
    batch = client.batches.create(
        input_file_id=upload.id, endpoint="/v1/chat/completions", completion_window="24h"
    )

    def completed() -> Batch | None:
        found = client.batches.retrieve(batch.id)
        return found if found.status == "completed" else None

    done = wait_until(completed, 120, "the batch to complete on the real model", poll_s=1)
    assert done is not None and done.output_file_id is not None
    answers = client.files.content(done.output_file_id).text.splitlines()
    assert sorted(json.loads(a)["custom_id"] for a in answers) == ["b0", "b1"]

    # A second terminal: manage.py reaches the same database and Redis with no exports.
    env = {k: v for k, v in os.environ.items() if k not in SHARED_SERVICES}
    env["SLUICE_VAR_DIR"] = str(tmp_path / "var")
    key_id = curl.group(1).split("-")[2]
    revoke = subprocess.run(
        [sys.executable, "manage.py", "revoke_api_key", key_id],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert revoke.returncode == 0, revoke.stderr

    def refused() -> bool:
        try:
            curl_line_works(curl)
        except urllib.error.HTTPError as error:
            assert error.code == 401
            return True
        return False

    # A revoked key stops working in every process within two seconds.
    wait_until(refused, 2.0, "the server to refuse the revoked key")

    os.killpg(launcher.process.pid, signal.SIGINT)
    assert launcher.process.wait(timeout=30) == 0
    redis_port = int(redis_url.rsplit(":", 1)[1].split("/")[0])
    assert port_is_free(launcher.port) and port_is_free(redis_port)


def test_a_child_that_dies_is_reported_and_brings_the_rest_down(launch, tmp_path):
    launcher = launch(SLUICE_EMBEDDED_WORKER="0")
    launcher.wait_for(r"Sluice is ready")
    schedule = str(tmp_path / "var" / "celerybeat-schedule")
    beat = subprocess.run(["pgrep", "-f", schedule], capture_output=True, text=True, check=True)
    os.kill(int(beat.stdout.split()[0]), signal.SIGKILL)
    launcher.wait_for(r"beat \(pid \d+\) exited with code -9; stopping everything else")
    assert launcher.process.wait(timeout=30) == 1
    assert port_is_free(launcher.port)


def test_a_failed_start_says_why_and_leaves_no_process_behind(launch, tmp_path):
    launcher = launch(SLUICE_EMBEDDED_WORKER="0", SLUICE_SERVER="nope")
    launcher.wait_for(r"SLUICE_SERVER='nope' is not one of uvicorn, daphne", timeout=60)
    assert launcher.process.wait(timeout=30) == 2
    for recorded in ("redis.url", "cache-redis.url"):
        url = (tmp_path / "var" / recorded).read_text().strip()
        assert port_is_free(int(url.rsplit(":", 1)[1].split("/")[0]))


def test_children_do_not_outlive_a_killed_supervisor(launch, tmp_path):
    launcher = launch(SLUICE_EMBEDDED_WORKER="0")
    launcher.wait_for(r"Sluice is ready")
    schedule = str(tmp_path / "var" / "celerybeat-schedule")
    os.kill(launcher.process.pid, signal.SIGKILL)  # no chance to clean up

    def children_gone() -> bool:
        beat = subprocess.run(["pgrep", "-f", schedule], capture_output=True, check=False)
        return beat.returncode != 0 and port_is_free(launcher.port)

    wait_until(
        children_gone, 20, "the children to exit after the supervisor was killed", poll_s=0.5
    )


def test_daphne_stays_selectable(launch):
    launcher = launch(SLUICE_EMBEDDED_WORKER="0", SLUICE_SERVER="daphne")
    launcher.wait_for(r"Sluice is ready")
    status, body = curl_line_works(
        launcher.wait_for(r"Usage:\s+curl -s -H 'Authorization: Bearer (\S+)' (\S+)")
    )
    assert status == 200 and '"team":"demo"' in body


def recorded_redis(var_dir, name):
    return redis.Redis.from_url((var_dir / name).read_text().strip(), decode_responses=True)


def test_the_caches_get_their_own_capped_redis_and_the_primary_never_evicts(launch, tmp_path):
    sim = SimProcess(model=EMBEDDED_MODEL)
    try:
        launcher = launch(
            SLUICE_EMBEDDED_WORKER="0",
            SLUICE_WORKERS=f"{EMBEDDED_MODEL}@{sim.url}",
            CACHE_REDIS_MAXMEMORY="64mb",
        )
        launcher.wait_for(r"Sluice is ready")
        var = tmp_path / "var"
        primary, caches = recorded_redis(var, "redis.url"), recorded_redis(var, "cache-redis.url")
        assert primary.config_get("maxmemory-policy") == {"maxmemory-policy": "noeviction"}
        assert caches.config_get("maxmemory") == {"maxmemory": str(64 * 1024 * 1024)}
        # Only keys with a TTL may go: cache entries, never the GDSF index (eviction.py).
        assert caches.config_get("maxmemory-policy") == {"maxmemory-policy": "volatile-lru"}
        with urllib.request.urlopen(f"http://127.0.0.1:{launcher.port}/readyz") as response:
            checks = json.loads(response.read())["checks"]
        assert checks == {"database": "ok", "redis": "ok", "cache_redis": "ok"}

        # The gateway's processes use it: a deterministic reply is kept there, not in the
        # primary Redis, which holds the team's admission counters.
        key = launcher.wait_for(r"API key:\s+(\S+)").group(1)
        client = openai.OpenAI(
            base_url=f"http://127.0.0.1:{launcher.port}/v1", api_key=key, max_retries=0
        )

        def answered_twice() -> bool:
            for _ in range(2):
                client.chat.completions.create(
                    model=EMBEDDED_MODEL, messages=MESSAGES, temperature=0, max_tokens=5
                )
            return True

        wait_until(
            answered_twice,
            20,
            "the gateway to serve the simulator (the scraper publishes it)",
            ignoring=(openai.InternalServerError,),
            poll_s=0.5,
        )
        wait_until(lambda: caches.keys("sluice:cache:exact:*"), 5, "the reply to be cached")
        assert not primary.keys("sluice:cache:*") and primary.dbsize() > 0

        # A second terminal finds the cache Redis too, with no exports.
        env = {k: v for k, v in os.environ.items() if k not in SHARED_SERVICES}
        env["SLUICE_VAR_DIR"] = str(var)
        shown = subprocess.run(
            [sys.executable, "manage.py", "shell", "-c", SHOW_CACHE_REDIS_URL],
            cwd=REPO_ROOT,
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        assert shown.stdout.splitlines()[-1] == (var / "cache-redis.url").read_text().strip()
        cache_port = caches.connection_pool.connection_kwargs["port"]
    finally:
        sim.stop()
    launcher.stop()
    assert port_is_free(cache_port)


SHOW_CACHE_REDIS_URL = "from django.conf import settings; print(settings.CACHE_REDIS_URL)"


def test_a_given_redis_url_without_a_cache_redis_url_is_shared_with_a_warning(
    launch, tmp_path, redis_url
):
    (tmp_path / "var").mkdir()
    (tmp_path / "var" / "cache-redis.url").write_text("redis://127.0.0.1:1/0\n")  # stale
    launcher = launch(SLUICE_EMBEDDED_WORKER="0", SLUICE_SERVER="nope", REDIS_URL=redis_url)
    launcher.wait_for(r"warning: REDIS_URL is set and CACHE_REDIS_URL is not", timeout=60)
    launcher.wait_for(r"SLUICE_SERVER='nope' is not one of", timeout=60)
    assert launcher.process.wait(timeout=30) == 2
    assert not (tmp_path / "var" / "cache-redis.url").exists()
