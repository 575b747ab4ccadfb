"""Run several child processes in the foreground and keep them honest.

Ctrl-C (or SIGTERM) stops every child: SIGTERM first, SIGKILL after a grace period. A
child that exits on its own is reported with its exit code and brings the rest down, so
a dead Celery worker or Redis is never hidden behind a server that still answers.

A child started with `drain_s` (the ASGI server, gateway/drain.py) drains on SIGTERM: it
is stopped first and alone, and waited for up to drain_s (plus DRAIN_MARGIN_S), because
what it finishes meanwhile needs the others (the model worker generating, Redis to settle
and bill). Only then do the others get their SIGTERM. A second Ctrl-C ends the wait: the
draining child gets SIGINT (gateway/drain.py: stop now), and the rest follow at once.
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
DRAIN_MARGIN_S = 5.0  # after the drain timeout: uvicorn's own shutdown, the process's exit
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
    drain_s: float | None = None  # drains on SIGTERM for up to this long: stopped first


def _relay_output(name: str, stream: IO[bytes]) -> None:
    for raw in iter(stream.readline, b""):
        line = raw.decode(errors="replace").rstrip("\n")
        sys.stdout.write(f"{name:>7} | {line}\n")
        sys.stdout.flush()


class Supervisor:
    def __init__(self) -> None:
        self.children: list[Child] = []
        self._stopping = False
        self._hurry = False  # a second Ctrl-C: no more waiting for a drain

    def start(
        self,
        name: str,
        command: Sequence[str],
        env: dict[str, str],
        drain_s: float | None = None,
    ) -> Child:
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
        child = Child(name, process, relay, drain_s)
        self.children.append(child)
        return child

    def install_signal_handlers(self) -> None:
        def request_stop(signum: int, frame: FrameType | None) -> None:
            self._hurry = self._stopping
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
        # Reverse start order: the server stops before the Redis it depends on; a child
        # that drains stops before all the others, while they still serve it.
        draining = [c for c in reversed(self.children) if c.drain_s is not None]
        if any(child.process.poll() is None for child in draining):
            drain_s = max(child.drain_s or 0.0 for child in draining)
            names = ", ".join(child.name for child in draining)
            print(
                f"sluice: draining {names} (up to {drain_s:g} s; Ctrl-C again to stop at once)…",
                file=sys.stderr,
                flush=True,
            )
            self._stop(draining, drain_s + DRAIN_MARGIN_S)
        self._stop([c for c in reversed(self.children) if c.drain_s is None], GRACE_PERIOD_S)

    def _stop(self, children: list[Child], grace_s: float) -> None:
        """SIGTERM to each, wait up to grace_s (less after a second Ctrl-C), SIGKILL."""
        for child in children:
            if child.process.poll() is None:
                _signal_group(child.process, signal.SIGTERM)
        hurried = False
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline and any(c.process.poll() is None for c in children):
            if self._hurry and not hurried:
                hurried = True
                for child in children:
                    if child.drain_s is not None and child.process.poll() is None:
                        _signal_group(child.process, signal.SIGINT)
                deadline = min(deadline, time.monotonic() + GRACE_PERIOD_S)
            time.sleep(0.05)
        for child in children:
            if child.process.poll() is None:
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
