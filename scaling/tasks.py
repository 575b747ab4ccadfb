"""The autoscaler as a Celery beat task (one tick per run); `manage.py autoscale` is the
same loop as its own process. Either way only the Redis lease holder acts.

Add to CELERY_BEAT_SCHEDULE: {"autoscale": {"task": "scaling.tasks.autoscale_tick",
"schedule": 15.0}}. With the local actuator prefer the command: replicas started from a
Celery worker are tied to that worker's host.
"""

from celery import shared_task

from foundation.redis_clients import sync_redis
from scaling.autoscale.config import actuator_from_settings, tick_seconds
from scaling.autoscale.loop import AutoscaleLoop

_loop: AutoscaleLoop | None = None


def _the_loop() -> AutoscaleLoop:
    """One loop per worker process: it keeps its lease token and its actuator's handles."""
    global _loop
    if _loop is None:
        _loop = AutoscaleLoop(actuator_from_settings(), sync_redis(), tick_s=tick_seconds())
    return _loop


@shared_task(name="scaling.tasks.autoscale_tick", ignore_result=True)
def autoscale_tick() -> int:
    """Returns how many decisions were recorded, or -1 when another process leads."""
    decisions = _the_loop().tick()
    return -1 if decisions is None else len(decisions)
