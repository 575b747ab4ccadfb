"""Semantic cache slots as the request path makes them: probed, with MiniLM's vector when
a test already has one (a lookup then scores without embedding the question again)."""

from caching import semantic
from caching.semantic_keys import SemanticSlot
from inference.embeddings import Vector


async def probed_slot(context: str, question: str, vector: Vector | None = None) -> SemanticSlot:
    slot = await semantic.probed(SemanticSlot.of(context, question, vector=vector))
    assert slot is not None, "the probe table is prepared by `make worker`"
    return slot
