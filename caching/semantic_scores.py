"""What a semantic lookup knows of its candidates: their text analyzed for verification,
and MiniLM's vectors for the few that verification accepted.

The semantic cache finds candidates by their probe vectors (inference/probe_embeddings.py)
and verifies them first; only a candidate that passes is scored, by the cosine between
MiniLM's vectors of the question and of the candidate, which is what the thresholds, the
false-hit table and the error bound were measured on. A question's MiniLM vector is made
when it is first needed: a lookup that scores a candidate embeds its question once, and
the entry stored for it keeps that vector ("vector", base64 float32). A candidate stored
without one (its own lookup never scored anything) is embedded when first scored, and
kept per process (CANDIDATE_VECTORS at most, keyed by entry id: the team is in it, so no
team's lookups are faster for another team's questions). A candidate's analysis for
verify() (caching/verify/features.py, about 15 us) is kept the same way: in a busy context
the same entries are the nearest candidates of lookup after lookup.
"""

import base64
import binascii
import contextlib
import logging
from collections.abc import Mapping
from typing import Any, TypeVar

import numpy as np

from caching import evidence
from caching.cell_audits import CellAudits
from caching.verify.features import Features, analyze
from foundation import metrics
from inference.embeddings import EmbedderUnavailable, TextTooLong, Vector, loaded_embedder

logger = logging.getLogger(__name__)
T = TypeVar("T")
CANDIDATE_VECTORS = 4096  # about 1.6 KB each
CANDIDATE_FEATURES = 4096  # about as much each as the question's text
_candidate_vectors: dict[str, Vector] = {}
_candidate_features: dict[str, Features] = {}


async def question_vector(question: str) -> Vector | None:
    """MiniLM's vector for a question; None when the model is unavailable (logged when it
    failed to load) or the question is longer than it reads whole (counted)."""
    try:
        return await (await loaded_embedder()).embed(question)
    except EmbedderUnavailable:
        return None
    except TextTooLong:
        # Past the 1,016 tokens MiniLM reads whole (the probe's own limit is the same, so
        # only a stored candidate can get here): cut short, it would match any text that
        # starts alike.
        metrics.labelled(metrics.semantic_skips, "too_long").inc()
        return None


async def candidate_vector(element: str, entry: dict[str, Any]) -> Vector | None:
    """A stored candidate's MiniLM vector: the one its entry keeps, else one made now."""
    kept = entry.get("vector")
    if isinstance(kept, str):
        with contextlib.suppress(ValueError):
            return decode(kept)
    known = _candidate_vectors.get(element)
    if known is not None:
        return known
    vector = await question_vector(str(entry["question"]))
    if vector is not None:
        _remember(_candidate_vectors, CANDIDATE_VECTORS, element, vector)
    return vector


def candidate_features(element: str, question: str) -> Features:
    """A stored candidate's text as verify() compares it, analyzed once per process; a
    question's own too, when its slot is made (caching/semantic_keys.py): the same entry
    id once it is stored."""
    known = _candidate_features.pop(element, None)
    if known is None:
        known = analyze(question)
    _remember(_candidate_features, CANDIDATE_FEATURES, element, known)  # newest again
    return known


def _remember(memory: dict[str, T], most: int, element: str, value: T) -> None:
    """Keep the value; past `most`, forget the one kept or used longest ago (the dicts are
    shared by every thread of the process: a race only forgets one more than it should)."""
    if len(memory) >= most:
        with contextlib.suppress(StopIteration, KeyError, RuntimeError):
            del memory[next(iter(memory))]
    memory[element] = value


def encode(vector: Vector) -> str:
    return base64.b64encode(vector.astype(np.float32).tobytes()).decode("ascii")


def decode(text: str) -> Vector:
    """binascii's strict mode: base64's validate=True checks the text with a regex first,
    which cost more than the rest of scoring a candidate (profiled)."""
    vector: Vector = np.frombuffer(binascii.a2b_base64(text, strict_mode=True), dtype=np.float32)
    if vector.size == 0:
        raise ValueError("an empty vector")
    return vector


def cosine(first: Vector, second: Vector) -> float:
    """Both are unit length (MiniLM's vectors are normalised); another length is no match."""
    if first.shape != second.shape:
        return -1.0
    return float(np.dot(first, second))


def false_hit_probability(
    question: str,
    candidate: str,
    similarity: float,
    confirmed: Any,
    audited: Mapping[str, CellAudits] | None = None,
) -> tuple[float, str | None]:
    """The candidate's false-hit probability for this team and entry, and its evidence
    cell (None below the floor cosine, where the probability is 1.0); 1.0 (never served
    under a bound) when the false-hit table cannot be read, logged: lookups under a
    threshold go on unharmed."""
    global _table_unreadable
    try:
        confirmations = int(confirmed or 0)
        return evidence.scored(question, candidate, similarity, confirmations, audited)
    except (OSError, ValueError, KeyError, TypeError):
        if not _table_unreadable:  # once per process, not once per lookup
            logger.exception("semantic cache: the false-hit table is unreadable")
        _table_unreadable = True
        return 1.0, None


_table_unreadable = False
