"""A team's audited hits, counted per evidence cell: the false-hit table learning a team's traffic.

The false-hit table's rates (caching/evidence.py) are measured on development question
families, and traffic unlike them can sit well above a rate: two groups of question
families the table had never seen gave 9% and 12% false hits among hits at a 5% bound
(docs/benchmarks.md). No table measured in advance can promise more than "traffic like
the development pairs". The team's own traffic can say more. At the policy's
`audit_rate` (gateway/serving/audit.py), a semantic hit is answered again by the model and
compared with the cached reply, and so is the best verified candidate of a miss, one the
bound turned down: that question is answered fresh anyway, so the comparison costs no
model time. Counted per cell, the outcomes are a sample drawn at random from the team's
candidates that were the best of their lookup (hits and turned-down alike; an audit
skipped while AUDITS_IN_FLIGHT run is not counted). A cell's rate for the team is the
table's rate, worth evidence.PRIOR_WEIGHT audits, plus the team's audits of that cell
(evidence.probability_in_cell): a cell the team's audits find wrong more often than the
bound stops serving that team, and one they find right opens at a bound the table alone
would not meet. Each entry is counted once (the first audit of a hit it gave or of it
turned down): a paraphrase asked a thousand times is one observation, not a thousand, so
one repeated question cannot open or close a cell on its own.

What the rate is not: an upper confidence bound (it is the estimate, as the table's is),
aged (an audit counts until the record expires, 14 days after the last one), or per
deployment (a team's cells are rated together: whether two questions mean the same is
the question's, not the model's, though the replies compared are the model's).

Only audits are counted. A false-hit report and an exact re-ask come from a reply that
looked wrong, not from a random draw: counting them would rate a cell by its worst hits.
They act on their entry (caching/semantic.py). Per team: what one team's traffic teaches
never changes another team's hits.

    sluice:cache:sem:cells:<team id>   hash: "<cell>|audited" and "<cell>|false", counts;
                                        expires CELL_AUDITS_TTL_S after its last audit
    sluice:cache:sem:cell-audited:<entry sha256>
                                        set once the entry was counted in its team's cells
"""

import asyncio
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import redis.asyncio as aioredis

KEY_PREFIX = "sluice:cache:sem:cells:"
COUNTED_PREFIX = "sluice:cache:sem:cell-audited:"
CELL_AUDITS_TTL_S = 14 * 24 * 3600
AUDITED, FALSE = "audited", "false"
READ_EVERY_S = 1.0
TEAMS_KEPT = 10_000
_read: dict[int, tuple[float, "CellRecord"]] = {}  # team -> (when read, its record)


@dataclass(frozen=True)
class CellAudits:
    """Audits of one team's hits in one cell, and how many found the hit false."""

    audited: int = 0
    false: int = 0


NO_AUDITS = CellAudits()


def key(team_id: int) -> str:
    return f"{KEY_PREFIX}{team_id}"


class CellRecord(Mapping[str, CellAudits]):
    """A team's counts by cell, as its hash was read: each cell is parsed only when a
    lookup asks for it (a lookup asks for the few cells of its verified candidates; reading
    every cell of a full record took about 150 us of the gateway's core). A field this
    version does not write, or a value that is no count, is ignored: a lookup never fails
    on it."""

    def __init__(self, raw: Any) -> None:
        if isinstance(raw, list | tuple):  # RESP2: fields and values, flat
            raw = dict(zip(raw[::2], raw[1::2], strict=False))
        fields = raw if isinstance(raw, dict) else {}
        if any(isinstance(field, bytes) for field in fields):
            fields = {_text(field): value for field, value in fields.items()}
        self._fields: dict[str, Any] = fields

    def __bool__(self) -> bool:  # not Mapping's: its len() would parse every cell
        return bool(self._fields)

    def __getitem__(self, cell: str) -> CellAudits:
        if not isinstance(cell, str):
            raise KeyError(cell)
        audited = _count(self._fields.get(f"{cell}|{AUDITED}"))
        false = _count(self._fields.get(f"{cell}|{FALSE}"))
        if audited is None and false is None:
            raise KeyError(cell)
        audited = audited or 0
        return CellAudits(audited, min(false or 0, audited))  # never more false than audited

    def __iter__(self) -> Iterator[str]:
        cells = (field.rpartition("|")[0] for field in self._fields)
        return iter(sorted({cell for cell in cells if cell and cell in self}))

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __contains__(self, cell: object) -> bool:
        return isinstance(cell, str) and any(
            _count(self._fields.get(f"{cell}|{what}")) is not None for what in (AUDITED, FALSE)
        )


def recently_read(team_id: int) -> CellRecord | None:
    """The team's record as this process read it in the last READ_EVERY_S, if it did: a
    busy team's lookups read the hash about once a second, not each time (its 70-odd
    fields cost about 0.5 ms of the gateway's core per lookup, docs/benchmarks.md). An
    audit this process counts makes the next lookup read the hash again (record() forgets
    the team's copy; a read already on its way may still keep the older one, for at most
    READ_EVERY_S); one another process counts is seen within READ_EVERY_S."""
    kept = _read.get(team_id)
    if kept is None or time.monotonic() - kept[0] > READ_EVERY_S:
        return None
    return kept[1]


def clear_local() -> None:
    """Forget every record this process read (a fresh process, or a test's)."""
    _read.clear()


def read(team_id: int, raw: Any) -> CellRecord:
    """The record from the team's HGETALL reply, kept for recently_read()."""
    _read.pop(team_id, None)  # re-inserted last: the dict's order is the order of reading
    if len(_read) >= TEAMS_KEPT:
        _read.pop(next(iter(_read)))  # read longest ago
    record = _read[team_id] = (time.monotonic(), parse(raw))
    return record[1]


def keep_if_read(team_id: int, reading: "asyncio.Future[Any]") -> None:
    """A lookup that had no use for the team's record after all: keep it if it came."""
    if reading.done() and not reading.cancelled() and reading.exception() is None:
        read(team_id, reading.result())


def parse(raw: Any) -> CellRecord:
    """The team's counts by cell, from its hash (HGETALL's reply: a dict, or a flat list of
    fields and values under RESP2; empty when the team has none)."""
    return CellRecord(raw)


def _count(value: Any) -> int | None:
    if value is None:
        return None
    text = _text(value)
    return int(text) if text.isascii() and text.isdigit() else None


def record_commands(team_id: int, cell: str, agreed: bool) -> list[tuple[Any, ...]]:
    """The Redis commands that count one audit of the team's hit in this cell."""
    commands: list[tuple[Any, ...]] = [("HINCRBY", key(team_id), f"{cell}|{AUDITED}", 1)]
    if not agreed:
        commands.append(("HINCRBY", key(team_id), f"{cell}|{FALSE}", 1))
    commands.append(("EXPIRE", key(team_id), CELL_AUDITS_TTL_S))
    return commands


async def record(
    client: aioredis.Redis, team_id: int, cell: str, agreed: bool, entry_key: str
) -> bool:
    """Count one audit of a hit the entry gave (or of the entry, turned down by the bound)
    in its team's cell, unless the entry was counted before; whether it was counted."""
    counted = COUNTED_PREFIX + entry_key.rpartition(":")[2]  # the entry's sha256
    if not await client.set(counted, 1, nx=True, ex=CELL_AUDITS_TTL_S):
        return False
    try:
        async with client.pipeline(transaction=True) as pipe:
            for command in record_commands(team_id, cell, agreed):
                pipe.execute_command(*command)
            await pipe.execute()
    except BaseException:
        await _forget_marker(client, counted)  # not counted: a later audit may count it
        raise
    _read.pop(team_id, None)
    return True


async def _forget_marker(client: aioredis.Redis, marker: str) -> None:
    try:
        await client.delete(marker)
    except Exception:  # Redis is failing already: the caller reports the first failure
        return


def _text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)
