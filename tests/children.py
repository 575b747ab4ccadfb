"""Child processes for live tests (simulators, gateways, scrapers).

Each child's output is passed on, line by line and prefixed with its name, to the test's own
stderr (pytest shows it with a failure), and its last lines are kept, so a start that fails
can say why. A start that fails stops every child it started: nothing is left behind.
"""

import contextlib
import subprocess
import sys
import threading
from collections import deque
from collections.abc import Iterator, Sequence
from pathlib import Path

from foundation.embedded_redis import free_port
from tests.waiting import answers, wait_until

WORKERS = Path(__file__).resolve().parent / "workers"  # stand-in servers for live tests

KEPT_LINES = 40


class Child:
    def __init__(
        self, name: str, args: Sequence[str], cwd: Path, env: dict[str, str] | None = None
    ) -> None:
        self.name = name
        self.last_lines: deque[str] = deque(maxlen=KEPT_LINES)
        self.process = subprocess.Popen(
            list(args),
            cwd=cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
        )
        self._pump = threading.Thread(target=self._pass_on_output, daemon=True)
        self._pump.start()

    def _pass_on_output(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.last_lines.append(line)
            # ValueError: pytest has closed the capture it had swapped in for sys.stderr.
            with contextlib.suppress(ValueError, OSError):
                sys.stderr.write(f"[{self.name}] {line}")

    def exited(self) -> bool:
        return self.process.poll() is not None

    def describe(self) -> str:
        code = self.process.poll()
        state = "still running" if code is None else f"exited with code {code}"
        output = "".join(self.last_lines) or "(no output)\n"
        return f"{self.name} {state}; its last output:\n{output}"

    def stop(self, timeout_s: float = 10) -> None:
        """SIGTERM, then SIGKILL if it does not exit within timeout_s."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ValueError, OSError):
                    sys.stderr.write(f"{self.name}: no exit {timeout_s} s after SIGTERM; killed\n")
                self.process.kill()
                self.process.wait(timeout=timeout_s)
        self._pump.join(timeout=2)  # the rest of its output


def stop_all(children: Sequence[Child]) -> None:
    """SIGTERM to every child first, so they shut down side by side, then stop each."""
    for child in children:
        if not child.exited():
            child.process.terminate()
    for child in children:
        child.stop()


class StartFailed(RuntimeError):
    pass


def wait_until_serving(children: Sequence[Child], url: str, timeout_s: float, what: str) -> None:
    """Wait until url answers while every child keeps running; otherwise stop them all and
    raise StartFailed with each one's exit code and last output."""

    def up() -> bool:
        if any(child.exited() for child in children):
            raise StartFailed(f"{what} exited during its start")
        return answers(url)

    try:
        wait_until(up, timeout_s, f"{what} to answer at {url}", poll_s=0.1)
    except BaseException as error:  # an interrupted start leaves nothing behind either
        reports = "".join(child.describe() for child in children)  # exit codes before stop
        stop_all(children)
        if isinstance(error, StartFailed | AssertionError):
            raise StartFailed(f"{what} did not start ({error}):\n{reports}") from None
        raise


def worker_script(script: str, env: dict[str, str], ready_path: str, *args: str) -> Iterator[str]:
    """A stand-in server of tests/workers/ as a child on a free port (`--port N` and args):
    its URL once ready_path answers, stopped afterwards. For a fixture to yield from."""
    port = free_port()
    child = Child(
        f"{script} :{port}",
        [sys.executable, str(WORKERS / script), "--port", str(port), *args],
        WORKERS.parent.parent,
        env,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_serving([child], f"{url}{ready_path}", 15, script)
        yield url
    finally:
        child.stop()
