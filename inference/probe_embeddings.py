"""Probe vectors: a static embedding for finding a question's semantic-cache candidates.

Why a second embedding: MiniLM costs about 3 ms of CPU per question on these machines, on
the gateway's own core, and most semantic lookups find no candidate that could answer (the
candidates differ in a number, a name or a negation, which verification rejects). Paying
the model for every lookup made a temperature-0 miss cost 8 ms (docs/benchmarks.md, issue
21). A probe vector costs about 30 us: the question's tokens (MiniLM's own vocabulary),
each looked up in a table, summed and scaled to unit length (the mean's direction). The
semantic cache searches by probe, verifies the nearest candidates, and runs MiniLM only on
a question that has a candidate verification accepted; MiniLM's cosine alone decides a
hit (caching/semantic.py), so the precision tables and the error bound are MiniLM's as
before.

The table is distilled from MiniLM when the model is prepared
(inference/prepare_embedder.py): each vocabulary token run alone through the float32 model
([CLS] token [SEP], mean of the states), centred, reduced to PROBE_DIMENSIONS by PCA, and
weighted by the token's rank in the vocabulary (frequent words, the low ids, count less),
the recipe of static embedding models such as Model2Vec. Its retrieval against MiniLM's is
measured in docs/benchmarks.md.

A probe reads the whole text (no 256-token window), so two long questions that share their
beginning still differ.
"""

import asyncio
import logging
import threading
from pathlib import Path

import numpy as np
import numpy.typing as npt
from django.conf import settings
from tokenizers import Tokenizer

from inference.embeddings import MAX_POOLED_TOKENS, EmbedderUnavailable, Vector

logger = logging.getLogger(__name__)
TABLE_FILE = "probe.npy"
PROBE_DIMENSIONS = 128


class ProbeEmbedder:
    """Text in, a unit-length float32 probe vector out (None past MAX_POOLED_TOKENS tokens,
    which MiniLM could not score). Synchronous and pure: cheap enough for the event loop."""

    def __init__(self, model_dir: Path) -> None:
        table_path, tokenizer_path = model_dir / TABLE_FILE, model_dir / "tokenizer.json"
        if not table_path.exists() or not tokenizer_path.exists():
            raise EmbedderUnavailable(f"no probe table in {model_dir}; run `make worker`")
        table: npt.NDArray[np.float32] = np.load(table_path).astype(np.float32)
        tokenizer = Tokenizer.from_file(str(tokenizer_path))
        tokenizer.no_truncation()
        tokenizer.no_padding()
        if table.ndim != 2 or table.shape[0] != tokenizer.get_vocab_size():
            raise EmbedderUnavailable(f"{table_path} does not match the tokenizer's vocabulary")
        unknown = tokenizer.token_to_id("[UNK]")
        self._table = table
        self._tokenizer = tokenizer
        self._unknown = [0 if unknown is None else int(unknown)]
        self.dimensions = int(table.shape[1])

    def vector(self, text: str) -> Vector | None:
        ids = self._tokenizer.encode(text, add_special_tokens=False).ids
        if len(ids) > MAX_POOLED_TOKENS:
            return None
        # The sum, not the mean: made unit length anyway (a third less time than mean and
        # linalg.norm, measured: this runs for every question the semantic cache keeps).
        pooled = np.add.reduce(self._table[ids or self._unknown], axis=0)
        unit: Vector = pooled * np.float32(1.0 / max(float(np.sqrt(pooled @ pooled)), 1e-12))
        return unit


_probe: ProbeEmbedder | None = None
_load_error: EmbedderUnavailable | None = None
_load_lock = threading.Lock()


def probe_embedder() -> ProbeEmbedder:
    """The process's probe embedder, loaded once (a few MB, tens of ms); raises
    EmbedderUnavailable, every time, if it cannot be."""
    global _probe, _load_error
    if _probe is None and _load_error is None:
        with _load_lock:
            if _probe is None and _load_error is None:
                try:
                    _probe = ProbeEmbedder(settings.EMBEDDING_MODEL_DIR)
                except EmbedderUnavailable as exc:
                    _load_error = exc
                except Exception as exc:  # a corrupt file: say so, keep serving without it
                    _load_error = EmbedderUnavailable(f"probe table failed to load: {exc}")
                if _load_error is not None:
                    logger.error("semantic cache off in this process: %s", _load_error)
    if _load_error is not None:
        raise _load_error
    assert _probe is not None
    return _probe


async def loaded_probe_embedder() -> ProbeEmbedder:
    """probe_embedder() for async code: the first call loads the table in a thread, so
    the event loop keeps serving meanwhile."""
    if _probe is not None:
        return _probe
    return await asyncio.to_thread(probe_embedder)
