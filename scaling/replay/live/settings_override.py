"""Django settings changed for the length of a block, then put back: a live replay's own.

A live replay runs the gateway's dispatcher, the scraper and the fleet view in this
process, and they read their knobs (REDIS_URL, GATEWAY_PROCESSES, the intervals) from
django.conf.settings; the replay needs its own values there while it runs, and the old
ones back after, even when the run fails or is cut.
"""

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from django.conf import settings

_UNSET = object()


@contextmanager
def settings_overridden(values: Mapping[str, Any]) -> Iterator[None]:
    """Set these settings on django.conf.settings for the block; restore them after
    (deleting any that were not set before). Process-wide: every thread sees them."""
    previous: dict[str, Any] = {}
    try:
        for name, value in values.items():
            previous[name] = getattr(settings, name, _UNSET)
            setattr(settings, name, value)
        yield
    finally:
        for name, value in previous.items():
            if value is _UNSET:
                delattr(settings, name)
            else:
                setattr(settings, name, value)
