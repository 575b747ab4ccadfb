"""Issue 19: a team's audits, counted per evidence cell (caching/cell_audits.py), move that
cell's false-hit rate for that team: the bound follows the team's own traffic where the
development pairs misrate it, and never another team's."""

import asyncio
import random
import time

import pytest

from caching import cell_audits, eviction, semantic
from caching.cell_audits import NO_AUDITS, CellAudits
from caching.evidence import (
    PRIOR_WEIGHT,
    false_hit_probability,
    false_hit_table,
    probability_in_cell,
)
from caching.exact import CachedReply
from foundation.redis_clients import async_cache_redis
from tests.semantic_slots import probed_slot

ORIGINAL = "What is the capital of France?"
PARAPHRASE = "What's the capital of France?"
REPLY = CachedReply(content="Paris.", finish_reason="stop", prompt_tokens=5, completion_tokens=1)
SERVED = "asking reworded 0.90"  # the table serves it at a 5% bound
REFUSED = "asking reworded 0.85"  # and not this one


@pytest.mark.unit
def test_a_teams_audits_are_added_to_the_tables_rate_worth_prior_weight_pairs():
    prior = false_hit_table().rate(SERVED)
    assert probability_in_cell(SERVED) == pytest.approx(prior)
    found_false = probability_in_cell(SERVED, 0, CellAudits(20, 4))
    assert found_false == pytest.approx((prior * PRIOR_WEIGHT + 4) / (PRIOR_WEIGHT + 20))
    assert prior < 0.05 < found_false
    found_right = probability_in_cell(REFUSED, 0, CellAudits(200, 2))
    assert found_right < 0.05 < probability_in_cell(REFUSED)
    # the entry's own agreeing audits still halve it at most
    assert probability_in_cell(SERVED, 10 * PRIOR_WEIGHT, CellAudits(20, 4)) == found_false / 2


def replayed(cell: str, truth: float, audit_rate: float, bound: float = 0.05) -> list[bool]:
    """A team's candidates in one cell, a share `truth` of them false hits: served while the
    cell's rate for the team is within the bound, each audited with chance audit_rate (a
    hit, or a candidate the bound turned down, compared with the fresh reply). Whether each
    hit of the second half of the stream was false."""
    draw = random.Random(19)
    audited, late = NO_AUDITS, []
    for step in range(4000):
        false = draw.random() < truth
        if probability_in_cell(cell, 0, audited) <= bound and step >= 2000:
            late.append(false)
        if draw.random() < audit_rate:
            audited = CellAudits(audited.audited + 1, audited.false + false)
    return late


@pytest.mark.unit
def test_audits_keep_the_bound_where_a_teams_traffic_is_worse_than_the_table_says():
    without = replayed(SERVED, truth=0.15, audit_rate=0.0)
    assert without.count(True) > 0.10 * len(without)  # the table alone: 15% false hits
    with_audits = replayed(SERVED, truth=0.15, audit_rate=0.1)
    assert len(with_audits) < len(without) / 2  # the cell closed for most of the stream
    assert with_audits.count(True) <= 0.05 * max(len(with_audits), 1)


@pytest.mark.unit
def test_audits_open_a_cell_where_a_teams_traffic_is_better_than_the_table_says():
    assert replayed(REFUSED, truth=0.01, audit_rate=0.0) == []  # never served by the table
    opened = replayed(REFUSED, truth=0.01, audit_rate=0.1)
    assert len(opened) > 1000
    assert opened.count(True) <= 0.05 * len(opened)


@pytest.mark.unit
def test_the_hash_is_read_whatever_the_protocol_and_odd_fields_are_ignored():
    fields = {b"same-order 0.95|audited": b"7", b"same-order 0.95|false": b"9", b"junk": b"1"}
    expected = {"same-order 0.95": CellAudits(7, 7)}  # never more false than audited
    assert cell_audits.parse(fields) == expected
    assert cell_audits.parse([k for pair in fields.items() for k in pair]) == expected
    assert cell_audits.parse({}) == {}
    # what this version never writes is ignored, not an error that fails the lookup
    assert cell_audits.parse({"x|audited": "-3", "y|audited": "many", "z|false": "1"}) == {
        "z": CellAudits(0, 0)
    }
    assert cell_audits.parse(["odd", "length", "list"]) == {}
    assert cell_audits.parse({b"a|audited": "\u00b2", b"\xff|audited": b"3"}) == {
        "\ufffd": CellAudits(3, 0)  # a superscript is no count; bytes never fail the lookup
    }


def full_record() -> list[str]:
    fields = []
    for cell in false_hit_table().cells:
        fields += [f"{cell}|audited", "20", f"{cell}|false", "1"]
    return fields


@pytest.mark.unit
def test_a_lookup_parses_only_the_cells_it_asks_about(monkeypatch):
    parsed: list[object] = []
    real = cell_audits._count

    def counting(value: object) -> int | None:
        parsed.append(value)
        return real(value)

    monkeypatch.setattr(cell_audits, "_count", counting)
    record = cell_audits.parse(full_record())
    assert record  # truthiness reads no cell
    rate = false_hit_probability(ORIGINAL, PARAPHRASE, 0.97, 0, record)
    assert rate == probability_in_cell("same-order 0.95", 0, CellAudits(20, 1))
    assert len(parsed) == 2  # the candidate's cell: its two fields, of 70


@pytest.mark.unit
def test_a_teams_record_is_read_again_after_a_second_and_the_oldest_is_forgotten(monkeypatch):
    now = [1000.0]
    monkeypatch.setattr(time, "monotonic", lambda: now[0])
    monkeypatch.setattr(cell_audits, "TEAMS_KEPT", 2)
    cell_audits.clear_local()
    first = cell_audits.read(1, full_record())
    assert cell_audits.recently_read(1) is first
    now[0] += cell_audits.READ_EVERY_S + 0.1
    assert cell_audits.recently_read(1) is None  # stale: the lookup reads the hash again
    cell_audits.read(2, [])
    cell_audits.read(1, [])  # read again: now the newest
    cell_audits.read(3, [])  # one too many: team 2, read longest ago, goes
    assert cell_audits.recently_read(2) is None
    assert cell_audits.recently_read(1) is not None and cell_audits.recently_read(3) is not None
    cell_audits.clear_local()


@pytest.mark.live
def test_a_cell_the_teams_audits_found_wrong_stops_serving_that_team_and_no_other(redis_url):
    contexts = {1: "1" * 64, 2: "2" * 64}

    async def run() -> None:
        for team, context in contexts.items():
            budget = eviction.Budget(f"semantic:{team}", 100_000_000)
            await semantic.store(await probed_slot(context, ORIGINAL), REPLY, budget, 600, 1)

        async def ask(team: int) -> semantic.Lookup:
            slot = await probed_slot(contexts[team], PARAPHRASE)
            return await semantic.lookup(slot, 0.5, False, team_id=team, bound=0.02)

        first = await ask(1)
        assert first.match is not None and first.match.cell == "same-order 0.95"
        client, cell = async_cache_redis(), first.match.cell
        other = "sluice:cache:sem:entry:" + "f" * 64  # another entry of the cell, found wrong
        assert await cell_audits.record(client, 1, cell, False, other)
        assert not await cell_audits.record(client, 1, cell, False, other)  # once an entry
        record = cell_audits.parse(await client.hgetall(cell_audits.key(1)))
        assert record == {cell: CellAudits(1, 1)}  # (0.14 + 1) / 21: 5.4%, over 2%

        again = await ask(1)
        assert again.match is None
        assert again.turned_down is not None
        assert again.turned_down.entry_key == first.match.entry_key
        assert again.turned_down.cell == first.match.cell
        other_team = await ask(2)
        assert other_team.match is not None and other_team.match.question == ORIGINAL

    asyncio.run(run())
