"""A key that mints a key can only hand on what it has.

Without this, a key with the manage scope could mint a key with the manage scope, no
expiry, every model and no rate limit: a leaked short-lived, narrow key would become a
permanent, broad one. The minted key inherits the creator's limits where the request is
silent and is refused where it asks for more.
"""

from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

from gateway.accounts.records import KeyRecord


class BroaderThanCreator(Exception):
    """The requested key would exceed the key creating it (field: which limit)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class KeyRequest:
    scopes: tuple[str, ...]
    allowed_models: tuple[str, ...]  # () means every model
    expires_at: datetime | None
    requests_per_minute: int | None


def bounded_by_creator(creator: KeyRecord, wanted: KeyRequest) -> KeyRequest:
    extra = sorted(set(wanted.scopes) - set(creator.scopes))
    if extra:
        raise BroaderThanCreator("scopes", f"This key may not grant scopes it lacks: {extra}.")
    bounded = wanted
    if creator.allowed_models:
        if not wanted.allowed_models:
            bounded = replace(bounded, allowed_models=creator.allowed_models)
        elif not set(wanted.allowed_models) <= set(creator.allowed_models):
            outside = sorted(set(wanted.allowed_models) - set(creator.allowed_models))
            raise BroaderThanCreator(
                "allowed_models", f"This key may not grant models it cannot use: {outside}."
            )
    if creator.expires_at is not None:
        limit = datetime.fromtimestamp(creator.expires_at, UTC)
        if wanted.expires_at is None:
            bounded = replace(bounded, expires_at=limit)
        elif wanted.expires_at > limit + timedelta(seconds=1):
            raise BroaderThanCreator(
                "expires_in_days",
                f"This key expires at {limit:%Y-%m-%d %H:%M} UTC; a key it "
                "creates must expire no later.",
            )
    if creator.requests_per_minute is not None:
        if wanted.requests_per_minute is None:
            bounded = replace(bounded, requests_per_minute=creator.requests_per_minute)
        elif wanted.requests_per_minute > creator.requests_per_minute:
            raise BroaderThanCreator(
                "requests_per_minute",
                f"This key is limited to {creator.requests_per_minute} requests per minute; "
                "a key it creates may not have more.",
            )
    return bounded
