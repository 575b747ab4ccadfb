"""The note of which entries answered a request (what a false-hit report reads) lives as
long as those entries can, at most a day: the notes are in no team's memory budget."""

from dataclasses import replace

import pytest

from caching.cache_plan import CachePlan
from caching.outcome import Outcome
from caching.policy import CacheSettings, default_settings
from caching.responses import SERVED_TTL_S, served_ttl_s

pytestmark = pytest.mark.unit


def policy(exact_ttl_s: int, semantic_ttl_s: int, max_age_s: int = 7 * 86_400) -> CacheSettings:
    return replace(
        default_settings(),
        exact_ttl_s=exact_ttl_s,
        semantic_ttl_s=semantic_ttl_s,
        max_age_s=max_age_s,
    )


def test_a_note_lives_as_long_as_the_longest_lived_entry_the_policy_allows_at_most_a_day():
    hour = CachePlan(Outcome.MISS, policy=policy(3600, 1800))
    assert served_ttl_s(hour) == 3600
    asked = CachePlan(Outcome.MISS, policy=policy(3600, 1800), ttl_s=7200)
    assert served_ttl_s(asked) == 7200  # the request's own TTL
    week = CachePlan(Outcome.MISS, policy=policy(7 * 86_400, 3600))
    assert served_ttl_s(week) == SERVED_TTL_S
    capped = CachePlan(Outcome.MISS, policy=policy(3600, 3600, max_age_s=600), ttl_s=7200)
    assert served_ttl_s(capped) == 600  # the hard maximum age wins
    assert served_ttl_s(CachePlan(Outcome.HIT_EXACT)) == SERVED_TTL_S  # no policy known
