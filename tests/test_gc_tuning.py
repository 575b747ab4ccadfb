"""A serving process freezes its start-up heap and collects its youngest generation less
often (foundation/gc_tuning.py)."""

import gc
import weakref
from collections.abc import Iterator

import pytest

from foundation.gc_tuning import tune_for_serving


@pytest.fixture
def restored_collector() -> Iterator[None]:
    threshold = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*threshold)


@pytest.mark.unit
def test_tuning_freezes_the_existing_heap_and_raises_the_youngest_threshold(restored_collector):
    gc.unfreeze()
    survivor: list[list[int]] = [[] for _ in range(1000)]  # objects that exist at tuning time
    _, gen1, gen2 = gc.get_threshold()
    tune_for_serving(12_345)
    assert gc.get_threshold() == (12_345, gen1, gen2)
    assert gc.get_freeze_count() >= len(survivor)


@pytest.mark.unit
def test_cycles_made_after_tuning_are_still_collected(restored_collector):
    tune_for_serving(50_000)

    class Node:
        pass

    node = Node()
    node.itself = node  # type: ignore[attr-defined]
    alive = weakref.ref(node)
    del node
    gc.collect()
    assert alive() is None
