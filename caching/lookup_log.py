"""A per-team sample of recent semantic lookups: numbers only, for threshold previews.

Each semantic lookup of a team leaves one compact JSON record in a capped Redis list
under CACHE_REDIS_URL (`sluice:cache:lookups:<team_id>`, newest first, the last
KEEP lookups, expiring WINDOW_S after the last one):

    {"c": [null, 0.911], "v": [0, 1], "t": 0.92, "ve": 1}

c: for each candidate the probe search returned (up to 16 above the probe floor, nearest
by probe first; one for a question over 1,000 characters; [] when the context's set had
none; [1.0] alone for the question's own entry, asked before word for word), MiniLM's
cosine where the lookup scored it, null where it did not (verification rejected it, or it
was never reached: caching/semantic.py scores only what verification accepts, at most 4);
v: for each, verify()'s verdict where verification evaluated it (1 accepted, 0 rejected;
1 for the own entry), null where it did not (entry gone or reported, past the 4 scored, or
verification off); t and ve: the threshold and verification in force.
Only when some candidate has one, p: for each, the false-hit probability of its evidence
cell (caching/evidence.py) where verification accepted it and it was scored, else null;
b: the error bound in force, when a team set one. No question text, no ids: nothing of the
team's data beyond these numbers.

The write is fire-and-forget (commands in the cache Redis batch's background queue:
foundation/redis_batch.py), so it adds no round trip to the lookup; a failing Redis loses
the sample, never the request.
"""

import asyncio
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass

from foundation.redis_clients import async_cache_redis_batch

logger = logging.getLogger(__name__)
PREFIX = "sluice:cache:lookups:"
KEEP = 1000
WINDOW_S = 7 * 24 * 3600
_pending: set["asyncio.Future[object]"] = set()


def key(team_id: int) -> str:
    return f"{PREFIX}{team_id}"


@dataclass(frozen=True)
class LookupSample:
    cosines: tuple[float | None, ...]  # None: verification rejected it, never scored
    verdicts: tuple[bool | None, ...]
    threshold: float
    verify_enabled: bool
    probabilities: tuple[float | None, ...] = ()  # () or one per candidate
    bound: float | None = None

    def encode(self) -> str:
        verdicts = [None if v is None else int(v) for v in self.verdicts]
        record: dict[str, object] = {
            "c": [None if c is None else round(c, 4) for c in self.cosines],
            "v": verdicts,
            "t": self.threshold,
            "ve": int(self.verify_enabled),
        }
        if any(p is not None for p in self.probabilities):
            record["p"] = [None if p is None else round(p, 4) for p in self.probabilities]
        if self.bound is not None:
            record["b"] = self.bound
        return json.dumps(record, separators=(",", ":"))

    @classmethod
    def decode(cls, raw: str | bytes) -> "LookupSample":
        data = json.loads(raw)
        cosines = tuple(None if c is None else float(c) for c in data["c"])
        verdicts = tuple(None if v is None else bool(v) for v in data["v"])
        if len(verdicts) != len(cosines):
            raise ValueError("a verdict per candidate")
        probabilities = tuple(None if p is None else float(p) for p in data.get("p", ()))
        if probabilities and len(probabilities) != len(cosines):
            raise ValueError("a probability per candidate")
        bound = None if data.get("b") is None else float(data["b"])
        return cls(cosines, verdicts, float(data["t"]), bool(data["ve"]), probabilities, bound)


def record(team_id: int, sample: LookupSample) -> None:
    """Queue the sample's write in the cache Redis batch's background queue, sent with
    other requests' bookkeeping once a request has called its worker (a lookup's own
    round trip does not wait for it); returns at once."""
    batch = async_cache_redis_batch()
    list_key = key(team_id)
    with batch.in_background():
        for command in (
            ("LPUSH", list_key, sample.encode()),
            ("LTRIM", list_key, 0, KEEP - 1),
            ("EXPIRE", list_key, WINDOW_S),
        ):
            reply = batch.submit(*command)
            _pending.add(reply)
            reply.add_done_callback(_written)


def record_candidates(
    team_id: int | None,
    rows: Sequence[tuple[float | None, bool | None, float | None]],
    threshold: float,
    verify_enabled: bool,
    bound: float | None,
) -> None:
    """A lookup's (cosine, verdict, probability) per candidate as one sample of the team's
    log; nothing without a team."""
    if team_id is None:
        return
    cosines = tuple(row[0] for row in rows)
    verdicts = tuple(row[1] for row in rows)
    probabilities = tuple(row[2] for row in rows)
    record(
        team_id,
        LookupSample(cosines, verdicts, threshold, verify_enabled, probabilities, bound),
    )


def _written(reply: "asyncio.Future[object]") -> None:
    _pending.discard(reply)
    if not reply.cancelled() and reply.exception() is not None:
        logger.debug("a semantic lookup sample was lost: %s", reply.exception())


async def drain() -> None:
    """Wait for the samples queued on this loop (tests; a clean shutdown)."""
    loop = asyncio.get_running_loop()
    mine = [t for t in _pending if t.get_loop() is loop]
    if mine:
        await asyncio.gather(*mine, return_exceptions=True)


def recent(raw_records: list[str] | list[bytes]) -> list[LookupSample]:
    """Decode what LRANGE returned, skipping anything unreadable."""
    samples = []
    for raw in raw_records:
        try:
            samples.append(LookupSample.decode(raw))
        except (ValueError, KeyError, TypeError):
            continue
    return samples
