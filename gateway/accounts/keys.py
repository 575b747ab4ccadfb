"""API key format, hashing and parsing.

A key is `sk-sluice-<lookup id>-<secret>`. The lookup id finds the row (and the Redis
record) without touching the secret; only SHA-256(secret) is stored, and comparison is
constant-time. A fast hash is right here: the secret has ~238 bits of entropy, so there
is nothing for a slow password hash to protect against.
"""

import hashlib
import hmac
import re
import secrets
import string
from dataclasses import dataclass

KEY_PREFIX = "sk-sluice-"
LOOKUP_ID_LENGTH = 8
SECRET_LENGTH = 40
_LOOKUP_ALPHABET = string.ascii_lowercase + string.digits
_SECRET_ALPHABET = string.ascii_letters + string.digits
_KEY_PATTERN = re.compile(r"sk-sluice-([a-z0-9]{8})-([A-Za-z0-9]{40})")
LOOKUP_ID_PATTERN = re.compile(r"[a-z0-9]{8}")


class MalformedKey(ValueError):
    """The string is not shaped like a Sluice API key."""


@dataclass(frozen=True)
class ParsedKey:
    lookup_id: str
    secret: str


@dataclass(frozen=True)
class NewKey:
    plaintext: str
    lookup_id: str
    secret_hash: str


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def secret_matches(secret: str, stored_hash: str) -> bool:
    return hmac.compare_digest(hash_secret(secret), stored_hash)


def parse_key(raw: str) -> ParsedKey:
    match = _KEY_PATTERN.fullmatch(raw)
    if match is None:
        raise MalformedKey(
            f"API keys look like {KEY_PREFIX}<8 lowercase letters or digits>-"
            "<40 letters or digits>."
        )
    return ParsedKey(lookup_id=match.group(1), secret=match.group(2))


def new_key() -> NewKey:
    lookup_id = "".join(secrets.choice(_LOOKUP_ALPHABET) for _ in range(LOOKUP_ID_LENGTH))
    secret = "".join(secrets.choice(_SECRET_ALPHABET) for _ in range(SECRET_LENGTH))
    return NewKey(
        plaintext=f"{KEY_PREFIX}{lookup_id}-{secret}",
        lookup_id=lookup_id,
        secret_hash=hash_secret(secret),
    )


def is_lookup_id(value: str) -> bool:
    return LOOKUP_ID_PATTERN.fullmatch(value) is not None
