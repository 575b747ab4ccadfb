"""Authenticate a Bearer API key: parse, find by lookup id, compare the hash in constant time.

Used by the OpenAI-compatible API (async, hot path) and by the management API.
"""

import logging
import time

from django.conf import settings

from foundation.redis_clients import REDIS_FAILURES, async_redis
from gateway.accounts.keys import MalformedKey, parse_key, secret_matches
from gateway.accounts.records import KeyRecord, key_records

logger = logging.getLogger(__name__)

LAST_USED_HASH = "sluice:apikey:last_used"
_last_noted: dict[str, float] = {}


class AuthenticationFailed(Exception):
    """The key is missing, malformed, unknown, wrong, revoked or expired (HTTP 401)."""


class ScopeDenied(Exception):
    """The key is valid but lacks the scope for this (HTTP 403)."""


class ModelNotAllowed(ScopeDenied):
    """The key is valid but restricted to other models (HTTP 403)."""


def bearer_token(authorization: str | None) -> str:
    if not authorization:
        raise AuthenticationFailed(
            "No API key provided. Send it as 'Authorization: Bearer sk-sluice-...'."
        )
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise AuthenticationFailed("Authorization header must be 'Bearer <API key>'.")
    return token.strip()


async def authenticate_key(raw_key: str, scope: str) -> KeyRecord:
    try:
        parsed = parse_key(raw_key)
    except MalformedKey as exc:
        raise AuthenticationFailed(f"Malformed API key. {exc}") from None
    record = await key_records.get(parsed.lookup_id)
    if record is None or not secret_matches(parsed.secret, record.secret_hash):
        raise AuthenticationFailed("Incorrect API key provided.")
    check_key_usable(record, scope)
    await _note_used(record.lookup_id)
    return record


def check_key_usable(record: KeyRecord, scope: str) -> None:
    """A known key may act for `scope` now: not revoked, not expired, scope granted."""
    if record.revoked:
        raise AuthenticationFailed("This API key has been revoked.")
    if record.expires_at is not None and record.expires_at <= time.time():
        raise AuthenticationFailed("This API key has expired.")
    if scope not in record.scopes:
        raise ScopeDenied(f"This API key does not have the '{scope}' scope.")


def check_model_allowed(allowed_models: tuple[str, ...], model: str) -> None:
    """An empty list allows every model."""
    if allowed_models and model not in allowed_models:
        raise ModelNotAllowed(f"This API key may not use the model '{model}'.")


async def _note_used(lookup_id: str) -> None:
    """Record last use in Redis at most once per interval per process; Celery writes the DB."""
    now = time.monotonic()
    if now - _last_noted.get(lookup_id, -1e9) < settings.API_KEY_LAST_USED_INTERVAL_S:
        return
    _last_noted[lookup_id] = now
    try:
        await async_redis().hset(LAST_USED_HASH, lookup_id, str(int(time.time())))
    except REDIS_FAILURES:
        # Losing a last-used timestamp must not fail a request that was authenticated.
        logger.warning("could not record last use of API key %s: Redis unreachable", lookup_id)


def forget_last_used_notes() -> None:
    """This process forgets when it last recorded each key's use (a fresh process)."""
    _last_noted.clear()
