"""What the caches did for one request: told to the caller (x-sluice-cache, the socket's
`cache` field), counted per team, kept on the usage record."""

from enum import StrEnum


class Outcome(StrEnum):
    HIT_EXACT = "hit-exact"
    HIT_SEMANTIC = "hit-semantic"
    COALESCED = "coalesced"  # shared another identical request's generation
    MISS = "miss"
    BYPASS = "bypass"  # the caches were not consulted (sampled, no-cache, or unreachable)
