"""HTTP caching for the /v1/ GETs worth keeping: an ETag, Cache-Control, and a bodiless 304
when the client already holds the answer.

/v1/models and /v1/models/{id} answer each key with what that key may use, so a copy may
only live in the caller's own cache:
- `private`: a CDN or shared proxy must never hand one key's list to another key;
- `Vary: Authorization`: a client that switches keys does not reuse the other key's copy;
- a short max-age (MODEL_LIST_MAX_AGE_S), because deployments come and go and a key's
  allowed models change; after it the client revalidates with If-None-Match.
The view runs on every request, revalidations included: the key is checked each time, so a
revoked key gets its 401, never a 304. What a 304 saves is the body on the wire. The ETag
is a hash of the body (Django's set_response_etag), so it changes with anything listed.
Refusals (401, 403, 404...) are `no-store`: nobody keeps an error.
"""

import functools
from collections.abc import Callable, Coroutine
from typing import Any

from asgiref.sync import iscoroutinefunction
from django.http import HttpRequest, HttpResponseNotModified
from django.http.response import HttpResponseBase
from django.utils.cache import patch_cache_control, patch_vary_headers, set_response_etag
from django.utils.http import parse_etags

# Long enough for a client's burst of startup calls to share one answer, short enough that
# a new deployment or a changed key shows within a minute even without revalidation.
MODEL_LIST_MAX_AGE_S = 60
KEPT_ON_304 = ("Cache-Control", "ETag", "Vary")
MARK = "http_cache_max_age_s"

AsyncView = Callable[..., Coroutine[Any, Any, HttpResponseBase]]


def http_cacheable(max_age_s: int) -> Callable[[AsyncView], AsyncView]:
    """Wrap an async GET view whose answer depends on the caller's key (see above)."""

    def decorate(view: AsyncView) -> AsyncView:
        if not iscoroutinefunction(view):
            raise TypeError(f"http_cacheable wraps async views; {view!r} is not one")
        if max_age_of(view) is not None:  # the outer copy would turn the inner 304 into no-store
            raise TypeError(f"{view!r} is http_cacheable already")

        @functools.wraps(view)
        async def cacheable(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
            return conditional(request, await view(request, *args, **kwargs), max_age_s)

        vars(cacheable)[MARK] = max_age_s
        return cacheable

    return decorate


def max_age_of(view: Callable[..., Any]) -> int | None:
    """The max-age a view was made http_cacheable with, None if it was not. Decorators
    outside it (require_GET) keep the mark: functools.wraps copies a function's __dict__."""
    return vars(view).get(MARK)


def conditional(
    request: HttpRequest, response: HttpResponseBase, max_age_s: int
) -> HttpResponseBase:
    """Add the caching headers to a view's answer; a 304 if If-None-Match names its ETag."""
    patch_vary_headers(response, ("Authorization",))
    if response.status_code != 200 or response.streaming:
        patch_cache_control(response, no_store=True)
        return response
    set_response_etag(response)
    patch_cache_control(response, private=True, max_age=max_age_s)
    etag = response.get("ETag")
    if etag is None or not _already_held(request.headers.get("If-None-Match"), etag):
        return response
    not_modified = HttpResponseNotModified()
    for name in KEPT_ON_304:
        not_modified[name] = response[name]
    return not_modified


def _already_held(if_none_match: str | None, etag: str) -> bool:
    """If-None-Match compares weakly (RFC 9110, 13.1.2): W/"x" matches "x"."""
    if not if_none_match:
        return False
    held = parse_etags(if_none_match)
    return held == ["*"] or etag.removeprefix("W/") in {t.removeprefix("W/") for t in held}
