"""Wait until something has happened, with a deadline, instead of sleeping a fixed time.

A fixed sleep is too short on a busy machine (a flaky test) and longer than needed everywhere
else (a slow one). These poll a condition and, past the deadline, fail naming what did not
happen and what the condition last said.
"""

import asyncio
import inspect
import time
import urllib.request
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")
POLL_S = 0.05


class NeverHappened(AssertionError):
    """A waited-for condition did not hold before its deadline."""


def _failure(what: str, timeout_s: float, last: object) -> NeverHappened:
    return NeverHappened(f"timed out after {timeout_s} s waiting for {what} (last: {last!r})")


def wait_until(
    condition: Callable[[], T],
    timeout_s: float,
    what: str,
    *,
    ignoring: tuple[type[Exception], ...] = (),
    poll_s: float = POLL_S,
) -> T:
    """Call condition until it returns something truthy, and return that.

    Exceptions of the `ignoring` types count as "not yet". The condition is always tried once
    more at or after the deadline, so a wait is never shorter than a sleep of timeout_s.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            value = condition()
        except ignoring as error:
            last: object = error
        else:
            if value:
                return value
            last = value
        if time.monotonic() >= deadline:
            raise _failure(what, timeout_s, last)
        time.sleep(poll_s)


async def async_wait_until(
    condition: Callable[[], object],
    timeout_s: float,
    what: str,
    *,
    ignoring: tuple[type[Exception], ...] = (),
    poll_s: float = POLL_S,
) -> object:
    """wait_until for a coroutine: the event loop runs while it waits, and the condition may
    be a coroutine function (its result is awaited)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            value = condition()
            if inspect.isawaitable(value):
                value = await value
        except ignoring as error:
            last: object = error
        else:
            if value:
                return value
            last = value
        if time.monotonic() >= deadline:
            raise _failure(what, timeout_s, last)
        await asyncio.sleep(poll_s)


def answers(url: str) -> bool:
    """True once url answers with a success status."""
    try:
        with urllib.request.urlopen(url, timeout=1):
            return True
    except OSError:
        return False


def wait_until_answers(url: str, timeout_s: float, what: str) -> None:
    """Poll url until it answers, or fail naming what did not start."""
    wait_until(lambda: answers(url), timeout_s, f"{what} to answer at {url}", poll_s=0.1)
