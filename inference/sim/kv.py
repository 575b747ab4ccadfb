"""KV-cache blocks as vLLM's prefix caching keeps them: computed prompt blocks are shared.

A full prompt block, once computed, is known by its chained hash. Every running request
whose prompt starts with it uses that one copy (a reference count), so a hundred requests
under one 2,000-token system prompt hold it once, not a hundred times. When no running
request holds a computed block any more it stays in memory, evictable, until room is
needed (least recently freed first, a prompt's tail before its head). Everything else a
request holds is its own: the partial last prompt block, its output, and prompt blocks it
computed while an identical copy already existed (vLLM keeps such duplicates too).
"""

from collections import OrderedDict
from collections.abc import Sequence


class KVBlocks:
    def __init__(self, total: int) -> None:
        self.total = total
        self.shared: dict[int, int] = {}  # computed block in use -> requests holding it
        self.evictable: OrderedDict[int, None] = OrderedDict()  # computed, unheld; LRU first
        self.private = 0  # blocks each held by one request only

    def in_use(self) -> int:
        return len(self.shared) + self.private

    def cached_prefix(self, hashes: Sequence[int]) -> int:
        """How many leading blocks are computed already (held by someone or evictable)."""
        for count, block in enumerate(hashes):
            if block not in self.shared and block not in self.evictable:
                return count
        return len(hashes)

    def admit(self, hits: Sequence[int], private: int) -> bool:
        """Take the cached blocks `hits` and `private` new ones, if memory allows."""
        new = private + sum(1 for block in hits if block not in self.shared)
        if new > self.total - self.in_use():
            return False
        for block in hits:
            self.evictable.pop(block, None)
            self.shared[block] = self.shared.get(block, 0) + 1
        self.private += private
        self._evict()
        return True

    def share(self, hashes: Sequence[int], held: list[int]) -> int:
        """A prompt is computed: its own full blocks become shareable unless a copy exists.
        Appends what it now shares to `held`; returns how many stopped being private."""
        converted = 0
        for block in hashes[len(held) :]:
            if block in self.shared or block in self.evictable:
                continue
            self.shared[block] = 1
            held.append(block)
            converted += 1
        self.private -= converted
        return converted

    def release(self, held: Sequence[int], private: int) -> None:
        """A request ends: its private blocks are free, its shared ones stay cached."""
        self.private -= private
        for block in reversed(held):  # the prompt's head freed last, so evicted last
            self.shared[block] -= 1
            if self.shared[block] == 0:
                del self.shared[block]
                self.evictable[block] = None
                self.evictable.move_to_end(block)
        self._evict()

    def _evict(self) -> None:
        while self.evictable and self.in_use() + len(self.evictable) > self.total:
            self.evictable.popitem(last=False)
