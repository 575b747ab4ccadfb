"""Failed web sign-ins are limited per username and per client address.

`throttled(view)` wraps a login view: django.contrib.auth's LoginView at /accounts/login/
and the admin site's own at /admin/login/ (gateway/urls.py), which is a separate view.
Both answer a failed sign-in by showing the form again (200) and a good one with a
redirect, so the wrapper needs nothing else from them. The password-change pages (the
site's and the admin's) answer the same way and ask for the present password, so they are
wrapped too, counted against the signed-in account (`throttled(view, signed_in)`): a stolen
session cannot guess its owner's password there without limit, and guesses on either page
share one count.

Counts live in Redis (foundation/rate_window.py), so they hold across gateway processes:
- per username (`LOGIN_FAILURES_PER_USERNAME`): many addresses guessing one account;
- per address (`LOGIN_FAILURES_PER_ADDRESS`): one address trying many accounts.
Both in `LOGIN_FAILURE_WINDOW_S`, from the first failure. The username is counted as
typed (trimmed, case-folded, hashed), whether or not such a user exists, so the lockout
says nothing about which usernames exist. A locked-out attempt is refused (429) before
the password is checked: a right password would otherwise tell a guesser they had it.
A good sign-in clears its username's count, not its address's. When Redis cannot be
reached, sign-in is refused (503) rather than left unlimited.
"""

import hashlib
import logging
import math
import unicodedata
from collections.abc import Callable
from functools import wraps
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse, HttpResponseBase
from django.template.loader import render_to_string
from django.utils.cache import add_never_cache_headers

from foundation.rate_window import RedisWindow, WindowCount
from foundation.redis_clients import RedisUnavailable, sync_redis
from gateway.client_address import request_client_address

logger = logging.getLogger(__name__)

View = Callable[..., HttpResponseBase]
HINT = "If you have forgotten your password, ask your team's administrator to reset it."


def _by_username() -> RedisWindow:
    return RedisWindow(
        "login:username", settings.LOGIN_FAILURES_PER_USERNAME, settings.LOGIN_FAILURE_WINDOW_S
    )


def _by_address() -> RedisWindow:
    return RedisWindow(
        "login:address", settings.LOGIN_FAILURES_PER_ADDRESS, settings.LOGIN_FAILURE_WINDOW_S
    )


def username_subject(username: str) -> str:
    """What a username is counted as: the same for "Ann", " ann" and full-width "Ann", and
    not the name itself. NFKC first, as Django's login form normalises the name before looking the
    user up: otherwise each compatibility variant of a name would get a counter of its own."""
    normalised = unicodedata.normalize("NFKC", username).strip().casefold()
    return hashlib.sha256(normalised.encode()).hexdigest()[:32]


def _page(request: HttpRequest, status: int, message: str, hint: str = "") -> HttpResponse:
    context = {"message": message, "hint": hint, "login_url": request.get_full_path()}
    response = HttpResponse(
        render_to_string("registration/sign_in_refused.html", context, request), status=status
    )
    add_never_cache_headers(response)
    return response


def _locked_out(request: HttpRequest, counts: list[WindowCount]) -> HttpResponse:
    seconds = max(1, math.ceil(max(count.reset_in_s for count in counts if count.full)))
    minutes = math.ceil(seconds / 60)
    message = (
        f"Too many failed sign-ins; try again in {minutes} minute{'s' if minutes != 1 else ''}."
    )
    response = _page(request, 429, message, HINT)
    response["Retry-After"] = str(seconds)
    return response


def _unavailable(request: HttpRequest) -> HttpResponse:
    message = "Signing in is unavailable for a moment; try again shortly."
    response = _page(request, 503, message)
    response["Retry-After"] = "5"
    return response


def named_in_the_form(request: HttpRequest) -> str:
    """A sign-in's account: the one its form names."""
    return str(request.POST.get("username", ""))


def signed_in(request: HttpRequest) -> str:
    """A password change's account: the one signed in (a stolen session guessing the
    present password, which the change asks for)."""
    return str(request.user.get_username()) if request.user.is_authenticated else ""


def throttled(view: View, account: Callable[[HttpRequest], str] = named_in_the_form) -> View:
    """`view` (a form that checks a password) with its failures counted per account and
    per address, and refused past either limit."""

    @wraps(view)
    def throttled_view(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        if request.method != "POST":
            return view(request, *args, **kwargs)
        client = sync_redis()
        username = username_subject(account(request))
        address = request_client_address(request)
        try:
            counts = [
                _by_username().peek_sync(client, username),
                _by_address().peek_sync(client, address),
            ]
        except RedisUnavailable:
            logger.warning("sign-in refused: the failed sign-in counts are unreadable")
            return _unavailable(request)
        if any(count.full for count in counts):
            return _locked_out(request, counts)
        response = view(request, *args, **kwargs)
        if response.status_code != 200:  # redirected: signed in
            try:
                _by_username().clear_sync(client, username)
            except RedisUnavailable:
                logger.warning("a good sign-in could not clear its username's failures")
            return response
        try:  # the form came back: a failed sign-in
            counts = [
                _by_username().hit_sync(client, username),
                _by_address().hit_sync(client, address),
            ]
        except RedisUnavailable:
            logger.warning("failed sign-in not counted: Redis is down; refused")
            return _unavailable(request)
        # The failure that reaches a limit already says so: no need to find out by trying.
        return _locked_out(request, counts) if any(c.full for c in counts) else response

    return throttled_view
