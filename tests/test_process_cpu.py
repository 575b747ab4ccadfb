"""The benchmark's CPU accounting (bench/process_cpu.py): each process under the
platform's launcher counts in the group of its nearest ancestor that names one."""

import os
import subprocess
import sys

import pytest

from bench.process_cpu import cpu_by_group

pytestmark = pytest.mark.live  # it starts processes
# Burns half a second of CPU, says so, and stays (a process's own CPU time is read from
# /proc while it runs).
WORKER = (
    "import sys, time\n"
    "end = time.process_time() + 0.5\n"
    "while time.process_time() < end: pass\n"
    "print('burnt', flush=True)\n"
    "sys.stdin.read()\n"
)
# A server process that names the app, whose worker has a command line of its own (as
# uvicorn spawns its workers for GATEWAY_PROCESSES > 1); it relays the worker's word.
SERVER = (
    "import subprocess, sys\n"
    f"worker = subprocess.Popen([sys.executable, '-c', {WORKER!r}], stdout=subprocess.PIPE)\n"
    "sys.stdout.write(worker.stdout.readline().decode()); sys.stdout.flush()\n"
    "sys.stdin.read()\n"
    "worker.kill()\n"
)


def test_a_spawned_gateway_worker_counts_as_the_gateway_not_as_other():
    server = subprocess.Popen(
        [sys.executable, "-c", SERVER, "gateway.asgi:application"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None and server.stdout.readline() == "burnt\n"
        groups = cpu_by_group(os.getpid())
    finally:
        server.communicate("")
    assert groups.get("gateway", 0.0) >= 0.45  # the worker's half second, not "other"
