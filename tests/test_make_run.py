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

import openai
import pytest

from foundation.embedded_redis import free_port, port_is_free
from tests.conftest import REPO_ROOT

READY_TIMEOUT_S = 360


class Launcher:
    def __init__(self, var_dir, port, **extra_env):
        self.port = port
        env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "DATABASE_URL")}
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
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line)

    def wait_for(self, pattern, timeout=READY_TIMEOUT_S):
        """The first line matching pattern, among lines already seen or still to come."""
        for line in self.seen:
            if match := re.search(pattern, line):
                return match
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=0.5)
            except queue.Empty:
                continue
            self.seen.append(line)
            match = re.search(pattern, line)
            if match:
                return match
        raise AssertionError(f"never saw {pattern!r}; output:\n{''.join(self.seen)}")

    def stop(self):
        """Ctrl-C first, so the supervisor stops its children; SIGKILL only as a last resort."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGINT)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)


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
    redis_url = (tmp_path / "var" / "redis.url").read_text().strip()
    launcher.wait_for(r"celery@\S+ ready", timeout=60)

    # A second terminal: manage.py reaches the same database and Redis with no exports.
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "DATABASE_URL")}
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
    time.sleep(2.0)
    with pytest.raises(urllib.error.HTTPError) as refused:
        curl_line_works(curl)
    assert refused.value.code == 401

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
    redis_url = (tmp_path / "var" / "redis.url").read_text().strip()
    assert port_is_free(int(redis_url.rsplit(":", 1)[1].split("/")[0]))


def test_children_do_not_outlive_a_killed_supervisor(launch, tmp_path):
    launcher = launch(SLUICE_EMBEDDED_WORKER="0")
    launcher.wait_for(r"Sluice is ready")
    schedule = str(tmp_path / "var" / "celerybeat-schedule")
    os.kill(launcher.process.pid, signal.SIGKILL)  # no chance to clean up
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        alive = subprocess.run(["pgrep", "-f", schedule], capture_output=True, check=False)
        if alive.returncode != 0 and port_is_free(launcher.port):
            return
        time.sleep(0.5)
    raise AssertionError("children kept running after the supervisor was killed")


def test_daphne_stays_selectable(launch):
    launcher = launch(SLUICE_EMBEDDED_WORKER="0", SLUICE_SERVER="daphne")
    launcher.wait_for(r"Sluice is ready")
    status, body = curl_line_works(
        launcher.wait_for(r"Usage:\s+curl -s -H 'Authorization: Bearer (\S+)' (\S+)")
    )
    assert status == 200 and '"team":"demo"' in body
