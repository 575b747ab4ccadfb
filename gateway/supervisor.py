"""Run several child processes in the foreground and keep them honest.

Ctrl-C (or SIGTERM) stops every child: SIGTERM first, SIGKILL after a grace period. A
child that exits on its own is reported with its exit code and brings the rest down, so
a dead Celery worker or Redis is never hidden behind a server that still answers.
"""

import ctypes
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import FrameType
from typing import IO

GRACE_PERIOD_S = 10.0
_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """In the child: get SIGTERM if the supervisor dies, even by SIGKILL (Linux only)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):
        pass  # not Linux: Ctrl-C and SIGTERM still stop every child through stop_all()


@dataclass
class Child:
    name: str
    process: subprocess.Popen[bytes]
    relay: threading.Thread | None = field(default=None)


def _relay_output(name: str, stream: IO[bytes]) -> None:
    for raw in iter(stream.readline, b""):
        line = raw.decode(errors="replace").rstrip("\n")
        sys.stdout.write(f"{name:>7} | {line}\n")
        sys.stdout.flush()


class Supervisor:
    def __init__(self) -> None:
        self.children: list[Child] = []
        self._stopping = False

    def start(self, name: str, command: Sequence[str], env: dict[str, str]) -> Child:
        # Own session: the terminal's Ctrl-C reaches only us, and we stop children in order.
        process = subprocess.Popen(
            list(command),
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_die_with_parent,  # only calls prctl: safe between fork and exec
        )
        assert process.stdout is not None
        relay = threading.Thread(target=_relay_output, args=(name, process.stdout), daemon=True)
        relay.start()
        child = Child(name, process, relay)
        self.children.append(child)
        return child

    def install_signal_handlers(self) -> None:
        def request_stop(signum: int, frame: FrameType | None) -> None:
            self._stopping = True

        signal.signal(signal.SIGINT, request_stop)
        signal.signal(signal.SIGTERM, request_stop)

    @property
    def stopping(self) -> bool:
        return self._stopping

    def first_exited(self) -> Child | None:
        return next((c for c in self.children if c.process.poll() is not None), None)

    def wait(self) -> int:
        """Block until Ctrl-C or a child dies; stop everything; return the exit status."""
        while not self._stopping:
            dead = self.first_exited()
            if dead is not None:
                print(
                    f"sluice: {dead.name} (pid {dead.process.pid}) exited with code "
                    f"{dead.process.returncode}; stopping everything else.",
                    file=sys.stderr,
                    flush=True,
                )
                self.stop_all()
                return 1
            time.sleep(0.2)
        print("sluice: stopping…", file=sys.stderr, flush=True)
        self.stop_all()
        return 0

    def stop_all(self) -> None:
        # Reverse start order: the server stops before the Redis it depends on.
        for child in reversed(self.children):
            if child.process.poll() is None:
                _signal_group(child.process, signal.SIGTERM)
        deadline = time.monotonic() + GRACE_PERIOD_S
        for child in reversed(self.children):
            try:
                child.process.wait(timeout=max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                print(f"sluice: {child.name} ignored SIGTERM; killing it", file=sys.stderr)
                _signal_group(child.process, signal.SIGKILL)
                child.process.wait()
            if child.relay is not None:
                child.relay.join(timeout=1)


def _signal_group(process: subprocess.Popen[bytes], signum: int) -> None:
    try:
        os.killpg(process.pid, signum)
    except ProcessLookupError:
        pass
    except PermissionError:
        process.send_signal(signum)
