"""A lean Django ASGI handler for the OpenAI endpoints (/v1/).

Measured on the hot path (docs/benchmarks.md), Django's stock handler spends over a
millisecond per request before the view runs, all of it in thread hops:
- each sync middleware (sessions, CSRF, messages...) runs in a worker thread; an API client
  with a bearer key needs none of them;
- a ThreadSensitiveContext per request starts, then joins, a fresh thread;
- the request_started/finished signals run their sync receivers (database connection
  upkeep) in a thread;
- logging a 4xx or 5xx answer takes a thread too.
The /v1/ views are async and do their own authentication; their few database reads (on
cache misses) go through foundation.db.database_read, which does the connection upkeep around
each read instead. They build no absolute URLs, so the Host check CommonMiddleware would
trigger is not needed either, nor the script prefix (set for reverse(), which they never
call). Everything else keeps the full stack.
"""

import asyncio
import io
import logging
from collections.abc import Callable
from contextlib import aclosing
from typing import IO, Any, cast

from asgiref.sync import iscoroutinefunction, sync_to_async
from django.core.asgi import get_asgi_application
from django.core.exceptions import PermissionDenied, RequestAborted, SuspiciousOperation
from django.core.handlers.asgi import ASGIHandler
from django.http import Http404, HttpRequest
from django.http.response import HttpResponseBase
from django.urls import ResolverMatch
from django.utils.log import log_response

from gateway.api.common import AFTER_SENT, EventStream, LastEvent
from gateway.serving.errors import ApiError
from gateway.serving.settlement import AfterReply

logger = logging.getLogger(__name__)
API_PREFIXES = ("/v1/",)
RESOLVED_PATHS_KEPT = 64


class ApiHandler(ASGIHandler):
    def load_middleware(self, is_async: bool = False) -> None:
        self._view_middleware: list[Any] = []
        self._template_response_middleware: list[Any] = []
        self._exception_middleware: list[Any] = []
        self._middleware_chain = self._answer_in_openai_shape
        self._resolved: dict[str, ResolverMatch] = {}

    def resolve_request(self, request: HttpRequest) -> ResolverMatch:
        """Django walks its URL patterns for every request (3% of a request's CPU here); the
        few /v1/ paths that resolve are remembered (no middleware sets a per-request
        urlconf on this handler). Bounded: paths with ids cannot grow it without limit."""
        match = self._resolved.get(request.path_info)
        if match is None:
            match = super().resolve_request(request)
            if len(self._resolved) < RESOLVED_PATHS_KEPT:
                self._resolved[request.path_info] = match
        request.resolver_match = match
        return match

    async def get_response_async(self, request: HttpRequest) -> HttpResponseBase:
        """BaseHandler's, less a per-request urlconf (a task-local write, like the script
        prefix: the /v1/ views reverse no URLs) and the thread hop it takes to log a
        refusal: the log line is written here, as Django would word it."""
        response = await self._middleware_chain(request)
        if response.status_code >= 400:
            log_response(  # any response will do; django-stubs says HttpResponse
                "%s: %s",
                response.reason_phrase,
                request.path,
                response=response,  # type: ignore[arg-type]
                request=request,
            )
        return response

    async def _get_response_async(self, request: HttpRequest) -> HttpResponseBase:
        """Resolve and call the view: there is no view, template-response or exception
        middleware on this handler, so Django's version of this (which looks for them, and
        wraps the view for ATOMIC_REQUESTS) only costs time."""
        view, args, kwargs = self.resolve_request(request)
        if not iscoroutinefunction(view):  # every /v1/ view is async; a sync one gets a thread
            view = sync_to_async(view, thread_sensitive=True)
        response = await view(request, *args, **kwargs)
        self.check_response(response, view)
        return cast(HttpResponseBase, response)

    async def _answer_in_openai_shape(self, request: HttpRequest) -> HttpResponseBase:
        """OpenAI's clients parse every /v1/ answer as JSON: an unknown path, a wrong method
        and an unexpected failure are errors in their shape too, never Django's HTML."""
        try:
            response = await self._get_response_async(request)
        except Http404:
            message = f"No such endpoint: {request.method} {request.path}."
            return ApiError(404, message, "not_found").response()
        except SuspiciousOperation as exc:  # what Django's handler answered 400 for
            logger.warning("refused %s %s: %s", request.method, request.path, exc)
            return ApiError(
                400, "The request was refused as malformed.", "invalid_request"
            ).response()
        except PermissionDenied:
            return ApiError(403, "Not allowed.", "permission_denied").response()
        except Exception:
            logger.exception("unexpected failure answering %s %s", request.method, request.path)
            return ApiError(500, "The gateway failed on this request.", "internal_error").response()
        if response.status_code == 405 and not response.get("Content-Type", "").startswith(
            "application/json"
        ):
            allowed = response.get("Allow", "")
            message = f"{request.method} is not allowed on {request.path}; use {allowed}."
            refused = ApiError(405, message, "method_not_allowed").response()
            refused["Allow"] = allowed
            return refused
        return response

    async def read_body(self, receive: Any) -> IO[bytes]:
        """The body in memory when it came in one message, as an API request's JSON does
        (BodySizeLimit has bounded it); spooled to a temporary file as Django does
        otherwise (a file upload). A spooled file per request cost 1% of a cache hit's CPU."""
        first = await receive()
        if first["type"] == "http.request" and not first.get("more_body", False):
            return io.BytesIO(first.get("body", b""))
        replayed = False

        async def first_then_the_rest() -> Any:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return first

        return await super().read_body(first_then_the_rest)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            raise ValueError(f"the API handler serves HTTP, not {scope['type']}")
        await self.handle(scope, receive, send)

    async def handle(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        try:
            body = await self.read_body(receive)
        except RequestAborted:
            return
        # No set_script_prefix(): the /v1/ views reverse no URLs, and setting the
        # thread-and-task-local prefix cost 2% of a cache hit's CPU in a profile.
        request, error_response = self.create_request(scope, body)
        try:
            if request is None:
                assert error_response is not None  # Django returns one or the other
                await self.send_response(error_response, send)
                return
            await self._respond_unless_client_leaves(request, receive, send)
        finally:
            body.close()

    async def _respond_unless_client_leaves(
        self, request: HttpRequest, receive: Any, send: Any
    ) -> None:
        """A client that disconnects cancels the view, which cancels the upstream request.
        The view runs in this task, and a listener task cancels it if the client leaves
        first (Django runs the view in a task of its own and waits on both: 15 us more a
        request in asyncio's machinery). Work the response carries for after it is sent
        (awaiting_after_sent) is awaited however the sending went, once the race is over:
        a client that leaves once it has its reply cannot cut its billing short."""
        this = asyncio.current_task()
        assert this is not None
        after_sent: list[AfterReply] = []
        race = _Race()

        def client_left(listener: "asyncio.Task[None]") -> None:
            # exception() whether or not the race is still on: an exception left unread
            # is logged when the task is collected.
            if listener.cancelled() or listener.exception() is None:
                return
            if race.running:  # listen_for_disconnect raised RequestAborted
                race.client_left = True
                this.cancel()

        leave = asyncio.create_task(self.listen_for_disconnect(receive))
        leave.add_done_callback(client_left)
        try:
            await self._respond(request, send, after_sent)
        except asyncio.CancelledError:
            if not race.client_left:
                raise  # the server's own cancellation (a shutdown): not ours to swallow
            this.uncancel()
        except Exception:
            logger.exception("API response failed for %s", request.path)
        finally:
            race.running = False
            leave.cancel()
            for work in after_sent:
                work.reply_sent()
                try:
                    await asyncio.shield(work.task)
                except Exception:
                    logger.exception("work after the response to %s failed", request.path)

    async def _respond(self, request: HttpRequest, send: Any, after_sent: list[AfterReply]) -> None:
        response = await self.run_get_response(request)
        work = getattr(response, AFTER_SENT, None)
        if work is not None:
            after_sent.append(work)
        # The one SecurityMiddleware header that matters for JSON and SSE responses.
        response.headers.setdefault("X-Content-Type-Options", "nosniff")
        if isinstance(response, EventStream):
            await self._send_events(response, send)
        else:
            await self.send_response(response, send)

    async def _send_events(self, response: EventStream, send: Any) -> None:
        """A stream's events straight to the socket, one ASGI message each, as they come
        (Django's send_response maps every part through two more generators first)."""
        headers = [
            (name.encode("ascii"), value.encode("latin1")) for name, value in response.items()
        ]
        async with aclosing(response.events) as events:
            # The first event is taken before anything is sent: it enters the stream's
            # `async with run`, so a send cancelled from here on (a client that reads
            # nothing, a shutdown) still settles the request when the events are closed.
            # It is ready at once: the pipeline returned with the first chunk in hand.
            first = await anext(events, None)
            await send(
                {"type": "http.response.start", "status": response.status_code, "headers": headers}
            )
            if first is not None and await _sent_was_last(first, send):
                return  # aclosing closes the generator after the response has ended
            async for event in events:
                if await _sent_was_last(event, send):
                    return
        await send({"type": "http.response.body"})


async def _sent_was_last(event: bytes, send: Any) -> bool:
    """Send one event; a LastEvent ends the response with it."""
    last = isinstance(event, LastEvent)
    await send({"type": "http.response.body", "body": event, "more_body": not last})
    return last


class _Race:
    """Whether a response is still being made, and whether its client left during it."""

    def __init__(self) -> None:
        self.running = True
        self.client_left = False


class SplitByPath:
    """Send API paths to the lean handler and the rest to the full Django stack."""

    def __init__(self, full: Any, api: Any) -> None:
        self.full = full
        self.api = api

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        app = self.api if scope["path"].startswith(API_PREFIXES) else self.full
        await app(scope, receive, send)


def split_application(wrap_full: Callable[[Any], Any] = lambda app: app) -> SplitByPath:
    """wrap_full wraps only the full stack (static files, say): API requests skip it."""
    return SplitByPath(wrap_full(get_asgi_application()), ApiHandler())
