"""A chat completion from the fleet, streamed or asked whole: acquire a worker, ask it, retry
before the first token (a whole reply's first chunk is the whole reply).

A failure before the first token is retried on another worker (nothing has reached the
client yet); a failure after it is reported, never retried, since a second generation would
not continue the first.
"""

import logging
from collections.abc import AsyncGenerator, Callable
from contextlib import aclosing
from typing import Any

from django.conf import settings

from inference.chat_request import CHAT_PATH
from inference.client import UpstreamError, stream_from_worker, whole_from_worker
from scaling.routing.dispatcher import Dispatcher, Lease, NoHealthyWorker, Priority
from scaling.routing.fair_queue import Tenant
from scaling.routing.router import RouteContext

logger = logging.getLogger(__name__)


async def stream_completion(
    dispatcher: Dispatcher,
    deployment: str,
    body: dict[str, Any],
    priority: Priority = Priority.INTERACTIVE,
    route: RouteContext | None = None,
    on_dispatch: Callable[[Lease | None], None] | None = None,
    tenant: Tenant | None = None,
    path: str = CHAT_PATH,
    headers: dict[str, str] | None = None,
    on_hold: Callable[[str], None] | None = None,
    whole: bool = False,
    reply_timeout_s: float | None = None,
) -> AsyncGenerator[tuple[Lease, dict[str, Any]], None]:
    """Yield (lease, chunk) pairs; retries other workers only until the first chunk.

    route: the request's RouteContext, so the deployment's routing policy picks the
    worker (each retry too, among the workers not yet tried). on_dispatch: told of each
    worker the request is sent to, before its first chunk (a request abandoned then has
    still had its prompt processed there), and told None when that worker failed before
    answering and another is to be tried. tenant: whose request it is, so the dispatcher
    queues it fairly among tenants and applies its concurrency cap. path: the workers'
    endpoint (a text completion's is /v1/completions). headers: sent to every worker tried
    (the deployment's API key for them). on_hold: the dispatcher's (Dispatcher.acquire).
    whole: ask each worker for the whole reply at once, which comes as one chunk
    (inference/client.py, `whole_from_worker`): for a request whose client does not stream;
    reply_timeout_s: its worker's time for all of it (default UPSTREAM_REPLY_TIMEOUT_S).
    A batch line asked whole is held in the batch allowance from when it is sent, since
    nothing comes back before its end (scaling/routing/batch_meter.py)."""

    def ask(url: str, model: str) -> AsyncGenerator[dict[str, Any], None]:
        if whole:
            return whole_from_worker(url, model, body, path, headers, reply_timeout_s)
        return stream_from_worker(url, model, body, path, headers)

    tried: set[str] = set()
    failure: UpstreamError | None = None
    for attempt in range(1, settings.UPSTREAM_MAX_ATTEMPTS + 1):
        try:
            lease = await dispatcher.acquire(
                deployment,
                priority,
                exclude=frozenset(tried),
                route=route,
                tenant=tenant,
                on_hold=on_hold,
            )
        except NoHealthyWorker:
            if failure is not None and tried:
                raise failure from None  # the real reason beats "no other worker left"
            raise
        started = False
        if on_dispatch is not None:
            on_dispatch(lease)
        if whole and lease.batch_line is not None:
            # No chunk comes before the whole reply: held from now, as it is sent (a scrape
            # asks /health before /metrics, a round trip in which the request arrives).
            lease.batch_line.answered()
        try:
            # aclosing: a consumer that stops early closes the upstream stream now, not at GC.
            async with aclosing(ask(lease.worker.url, lease.worker.upstream_model)) as chunks:
                async for chunk in chunks:
                    if not started and lease.batch_line is not None:
                        lease.batch_line.answered()  # the worker holds it: scrapes count it
                    started = True
                    yield lease, chunk
            return
        except UpstreamError as exc:
            if whole and lease.batch_line is not None:  # held from when it was sent
                lease.batch_line.not_held()  # the worker refused it, or may never have got it
            if started or not exc.retryable or attempt == settings.UPSTREAM_MAX_ATTEMPTS:
                raise
            failure = exc
            tried.add(lease.worker.url)
            if on_dispatch is not None:
                on_dispatch(None)  # no worker holds it while it waits for the next
            logger.warning(
                "retrying on another worker before the first token: %s (%s)", exc, lease.worker.url
            )
        finally:
            dispatcher.release(lease)
