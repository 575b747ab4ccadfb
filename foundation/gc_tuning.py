"""Python's garbage collector, tuned for a server process that holds a large, settled heap.

Measured under load (docs/benchmarks.md, "Ninth round"): with CPython's defaults a gateway
process spent about a third of its time in the collector at c=64. Objects that outlive a
request's few milliseconds (those of the 64 requests in flight) reach the oldest
generation, and every full collection then walks the whole heap (Django, the app, the
tokenizers' and models' Python objects: some 140,000 objects, about 100 ms a collection,
one every second or so). Two changes, as Instagram's and others' servers do:
- freeze what start-up built (`gc.freeze()`): modules, settings, URL patterns and the like
  live for the process; collections stop walking them;
- collect the youngest generation after THRESHOLD allocations instead of 700, so most of
  a request's short-lived objects are freed by reference counting before any collection
  sees them, and far fewer reach the oldest generation.
Reference cycles are still collected, only less often; memory held by cyclic garbage
grows by at most about THRESHOLD objects between collections.
"""

import gc
import logging

logger = logging.getLogger(__name__)


def tune_for_serving(gen0_threshold: int) -> None:
    """Call once, at the end of start-up (after the app and its imports are built)."""
    gc.collect()  # what start-up left as garbage is freed, not frozen
    gc.freeze()
    _, gen1, gen2 = gc.get_threshold()
    gc.set_threshold(gen0_threshold, gen1, gen2)
    logger.info(
        "garbage collector: %d start-up objects frozen, youngest generation collected "
        "every %d allocations",
        gc.get_freeze_count(),
        gen0_threshold,
    )
