"""Database reads from async code, with the connection upkeep Django does per request.

Async views served by the lean API handler (gateway/api_handler.py) get no request signals,
so nothing would ever close a connection that went stale or broke (a database restart)
in the thread that runs their sync reads. `database_read` does that upkeep around each
call, as channels' database_sync_to_async does, but leaves connections inside a
transaction alone: closing one would end the caller's transaction.
"""

from collections.abc import Callable, Coroutine
from typing import Any, ParamSpec, TypeVar

from asgiref.sync import sync_to_async
from django.db import connections

P = ParamSpec("P")
R = TypeVar("R")


def close_stale_connections() -> None:
    for connection in connections.all(initialized_only=True):
        if not connection.in_atomic_block:
            connection.close_if_unusable_or_obsolete()


def database_read(function: Callable[P, R]) -> Callable[P, Coroutine[Any, Any, R]]:
    """`await database_read(load)(...)`: load runs in asgiref's thread-sensitive thread."""

    def with_upkeep(*args: P.args, **kwargs: P.kwargs) -> R:
        close_stale_connections()
        try:
            return function(*args, **kwargs)
        finally:
            close_stale_connections()

    return sync_to_async(with_upkeep)


def database_work_aside(function: Callable[P, R]) -> Callable[P, Coroutine[Any, Any, R]]:
    """`await database_work_aside(work)(...)`: for database work that takes seconds. It
    runs on a thread of its own, not the one thread every `database_read` shares, which
    would wait behind it (a batch runner's hold renewals did, and the hold went stale);
    that thread's connections are closed when it returns."""

    def closing(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return function(*args, **kwargs)
        finally:
            connections.close_all()

    return sync_to_async(closing, thread_sensitive=False)
