"""The built-in embedding model (all-MiniLM-L6-v2) served as a model: count, then embed.

The model is the one the semantic cache already runs in this process
(inference/embeddings.py, loaded once by `loaded_embedder()`). Token counts come from the
same tokenizer file, read here without truncation, so an input longer than the model reads
is refused (billing and quotas count what the model would see) rather than embedded by its
beginning.

Each input is embedded on its own, not in a padded batch: the int8 model quantizes its
activations over the whole batch, so a text's vector moves with whatever shares its batch
(cosine 0.977 to 0.99 against the same text alone, measured on these inputs), and an API
must give the same vector for the same text every time. On CPU this costs nothing (2.8 ms
an input alone, 3.3 ms in batches of 32). The inputs run in a worker thread, a chunk at a
time, one chunk per process at a time, so API requests share one core fairly and leave
the other to the semantic cache's own batches and the event loop.
"""

import asyncio
import threading
import weakref
from collections.abc import Sequence

from django.conf import settings
from tokenizers import Tokenizer

from inference.embeddings import (
    MAX_TOKENS,
    EmbedderUnavailable,
    OnnxMiniLM,
    TextTooLong,
    Vector,
    loaded_embedder,
)

__all__ = [
    "DIMENSIONS",
    "MAX_TOKENS",
    "EmbedderUnavailable",
    "TextTooLong",
    "count_tokens",
    "embed_texts",
]

DIMENSIONS = OnnxMiniLM.dimensions  # it cannot make shorter vectors (not a Matryoshka model)
# Inputs per turn of the process's embedding thread (about 50 ms of one core).
CHUNK = 16
# Tokenizing more characters than this at once leaves the event loop (about a millisecond).
INLINE_CHARS = 8_192

_tokenizer: Tokenizer | None = None
_tokenizer_lock = threading.Lock()
_locks: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock]" = (
    weakref.WeakKeyDictionary()
)


def _counting_tokenizer() -> Tokenizer:
    global _tokenizer
    if _tokenizer is None:
        with _tokenizer_lock:
            if _tokenizer is None:
                path = settings.EMBEDDING_MODEL_DIR / "tokenizer.json"
                try:
                    tokenizer = Tokenizer.from_file(str(path))
                except Exception as exc:
                    raise EmbedderUnavailable(f"no embedding tokenizer at {path}: {exc}") from exc
                # The file pads and truncates to 128; a count needs neither.
                tokenizer.no_padding()
                tokenizer.no_truncation()
                _tokenizer = tokenizer
    return _tokenizer


def _count(texts: Sequence[str]) -> list[int]:
    """Tokens per text as the model reads them, [CLS] and [SEP] included."""
    return [len(encoding.ids) for encoding in _counting_tokenizer().encode_batch(list(texts))]


async def count_tokens(texts: Sequence[str]) -> list[int]:
    if sum(len(text) for text in texts) <= INLINE_CHARS:
        return _count(texts)
    return await asyncio.to_thread(_count, texts)


async def embed_texts(texts: Sequence[str]) -> list[Vector]:
    """Unit-length float32 vectors, in order, each the text's vector alone."""
    embedder = await loaded_embedder()
    if not isinstance(embedder, OnnxMiniLM):  # another Embedder: only its embed() exists
        return [await embedder.embed(text) for text in texts]
    lock = _lock()
    vectors: list[Vector] = []
    for start in range(0, len(texts), CHUNK):
        async with lock:  # FIFO: concurrent requests take turns, a chunk each
            vectors += await asyncio.to_thread(_one_by_one, embedder, texts[start : start + CHUNK])
    return vectors


def _one_by_one(embedder: OnnxMiniLM, texts: Sequence[str]) -> list[Vector]:
    return [embedder.embed_batch([text])[0] for text in texts]


def _lock() -> asyncio.Lock:
    loop = asyncio.get_running_loop()
    lock = _locks.get(loop)
    if lock is None:
        lock = _locks[loop] = asyncio.Lock()
    return lock
