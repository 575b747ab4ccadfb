"""A lookup made right after a reply waits for that reply's cache writes only where they
write what it looks up, and asks them to go now (caching/pending_stores.py)."""

import asyncio

import pytest

from caching import pending_stores


@pytest.mark.unit
def test_a_lookup_waits_for_the_writes_of_its_keys_until_queued_and_for_no_other():
    async def scenario() -> tuple[list[str], bool, bool, bool]:
        wanted: list[str] = []
        store = pending_stores.register("exact:a", "set:context")
        store.when_wanted = lambda: wanted.append("now")
        await pending_stores.wait_for_stores_of("exact:b", "set:other")  # at once
        elsewhere = list(wanted)
        same_context = asyncio.ensure_future(
            pending_stores.wait_for_stores_of("exact:c", "set:context")
        )
        await asyncio.sleep(0.01)
        waited = not same_context.done() and wanted == ["now"]
        store.in_batch()
        await same_context
        store.done()
        after = asyncio.ensure_future(pending_stores.wait_for_stores_of("exact:a"))
        await asyncio.sleep(0)
        return elsewhere, waited, same_context.done(), after.done()

    assert asyncio.run(scenario()) == ([], True, True, True)
