"""Sentence embeddings for the semantic cache: all-MiniLM-L6-v2 on ONNX Runtime, batched.

Why ONNX Runtime in the gateway process: with int8 weights (inference/prepare_embedder.py)
one short question embeds in about 1.5 ms on one core (torch takes about 10 ms and GBs of
install), with no network hop to a separate service.
Concurrent queries go through the MicroBatcher with at most one batch running: an idle
gateway embeds a lone query at once, a busy one hands every query that arrived meanwhile
to one thread (each still run through the model alone: see embed_batch). ONNX Runtime
releases the GIL, so the event loop keeps serving.
"""

import asyncio
import logging
import threading
import time
import weakref
from abc import ABC, abstractmethod
from pathlib import Path

import numpy as np
import numpy.typing as npt
import onnxruntime
from django.conf import settings
from tokenizers import Tokenizer

from inference.batcher import MicroBatcher

logger = logging.getLogger(__name__)
Vector = npt.NDArray[np.float32]
MAX_TOKENS = 256  # what all-MiniLM-L6-v2 was trained on; longer text is truncated
# embed() reads a longer text whole, window by window (254 tokens each, with [CLS] and
# [SEP]), up to this many tokens: 4 windows, each about 12 to 25 ms of one core on the
# embedding thread every lookup of the process shares (a long question holds the lookups
# queued behind it that long; several arriving together queue one after another). Past
# it, TextTooLong.
MAX_POOLED_TOKENS = 4 * (MAX_TOKENS - 2)


class EmbedderUnavailable(Exception):
    """The embedding model is not prepared or failed to load; semantic caching is off."""


class TextTooLong(ValueError):
    """The text is longer than the model reads: its vector would stand for its beginning
    only, and two texts that start alike would look identical."""


class Embedder(ABC):
    """One extension point: text in, a unit-length float32 vector out, standing for the
    whole text (a text longer than the model's window is read window by window and
    pooled); TextTooLong when the embedder would see only part of it."""

    dimensions: int

    @abstractmethod
    async def embed(self, text: str) -> Vector: ...


class OnnxMiniLM(Embedder):
    dimensions = 384

    def __init__(
        self, model_dir: Path, max_batch_size: int = 32, model_file: str = "model.onnx"
    ) -> None:
        if not (model_dir / ".prepared").exists() or not (model_dir / model_file).exists():
            raise EmbedderUnavailable(f"no embedding model in {model_dir}; run `make worker`")
        options = onnxruntime.SessionOptions()
        # One thread per batch: the other core keeps serving requests meanwhile.
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        self._session = onnxruntime.InferenceSession(
            str(model_dir / model_file), options, providers=["CPUExecutionProvider"]
        )
        self._tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        self._tokenizer.enable_truncation(MAX_TOKENS)
        self._tokenizer.no_padding()  # one text per model run; the file pads to 128
        # The same vocabulary without truncation or special tokens: embed() cuts a long
        # text into windows itself, each framed by [CLS] ... [SEP] as the model expects.
        self._whole_tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        self._whole_tokenizer.no_truncation()
        self._whole_tokenizer.no_padding()
        self._frame = (self._token_id("[CLS]"), self._token_id("[SEP]"))
        self.max_batch_size = max_batch_size
        self._batchers: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, MicroBatcher[str, Vector | None]
        ] = weakref.WeakKeyDictionary()

    def embed_batch(self, texts: list[str]) -> list[Vector]:
        """Mean of the token states over the real tokens, then unit length (as
        sentence-transformers' pooling and Normalize modules do for this model). Texts
        past MAX_TOKENS are embedded by their first window, as sentence-transformers does
        (the embeddings API refuses them first; embed() reads them whole).

        One model run per text, never one per batch: the int8 model quantizes its
        activations over the whole input, so a text run beside others gets a different
        vector (cosine 0.977 to 0.99 to itself alone, measured), as far from itself as a
        paraphrase is from a near-miss. Run alone, a text always gets the same vector,
        whatever else was asked at the same moment; on this model and CPU a batch of 32
        saved nothing per text (docs/benchmarks.md, "Micro-batcher")."""
        encoded = self._tokenizer.encode_batch(texts)
        return [_unit(self._states(e.ids).mean(axis=0)) for e in encoded]

    def embed_whole(self, text: str) -> Vector | None:
        """The text's vector read whole: cut into windows of at most MAX_TOKENS (with
        [CLS] and [SEP]), each run alone, then the mean of every window's token states,
        unit length. A text that fits one window gets exactly embed_batch's vector; two
        long texts that share their first window differ by the rest. None past
        MAX_POOLED_TOKENS."""
        ids = self._whole_tokenizer.encode(text, add_special_tokens=False).ids
        if len(ids) > MAX_POOLED_TOKENS:
            return None
        width = MAX_TOKENS - 2
        first, last = self._frame
        windows = [ids[start : start + width] for start in range(0, max(len(ids), 1), width)]
        states = np.concatenate([self._states([first, *w, last]) for w in windows])
        return _unit(states.mean(axis=0))

    def _token_id(self, token: str) -> int:
        found = self._whole_tokenizer.token_to_id(token)
        if found is None:
            raise EmbedderUnavailable(f"the tokenizer has no {token} token")
        return int(found)

    def _states(self, token_ids: list[int]) -> npt.NDArray[np.float32]:
        """The model's last hidden states for one text (no padding), one row per token."""
        ids = np.array([token_ids], dtype=np.int64)
        mask = np.ones_like(ids)
        states = self._session.run(
            None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        )[0]
        rows: npt.NDArray[np.float32] = states[0]
        return rows

    async def embed(self, text: str) -> Vector:
        loop = asyncio.get_running_loop()
        batcher = self._batchers.get(loop)
        if batcher is None:
            batcher = MicroBatcher(
                self._run_batch, self.max_batch_size, max_wait_ms=0, max_in_flight=1
            )
            self._batchers[loop] = batcher
        vector = await batcher.submit(text)
        if vector is None:
            raise TextTooLong(
                f"longer than the {MAX_POOLED_TOKENS} tokens the embedding model reads whole"
            )
        return vector

    async def _run_batch(self, texts: list[str]) -> list[Vector | None]:
        return await asyncio.to_thread(lambda: [self.embed_whole(text) for text in texts])


def _unit(pooled: npt.NDArray[np.float32]) -> Vector:
    vector: Vector = (pooled / max(float(np.linalg.norm(pooled)), 1e-12)).astype(np.float32)
    return vector


_embedder: Embedder | None = None
_load_error: EmbedderUnavailable | None = None
_load_lock = threading.Lock()


def embedder() -> Embedder:
    """The process's embedder, loaded once (about half a second); raises
    EmbedderUnavailable, every time, if it cannot be."""
    global _embedder, _load_error
    if _embedder is None and _load_error is None:
        with _load_lock:
            if _embedder is None and _load_error is None:
                _embedder, _load_error = _load()
    if _load_error is not None:
        raise _load_error
    assert _embedder is not None
    return _embedder


async def loaded_embedder() -> Embedder:
    """embedder() for async code: the first call loads the model in a thread, so the event
    loop keeps serving other requests meanwhile (loading takes a few hundred ms)."""
    if _embedder is not None:
        return _embedder
    return await asyncio.to_thread(embedder)


def _load() -> tuple[Embedder | None, EmbedderUnavailable | None]:
    started = time.monotonic()
    try:
        loaded = OnnxMiniLM(settings.EMBEDDING_MODEL_DIR)
    except EmbedderUnavailable as exc:
        logger.error("semantic cache off in this process: %s", exc)
        return None, exc
    except Exception as exc:  # a corrupt model file: say so, keep serving without it
        logger.exception("semantic cache off in this process: embedding model failed to load")
        return None, EmbedderUnavailable(f"embedding model failed to load: {exc}")
    loaded.embed_batch(["warm up"])
    logger.info("embedding model loaded in %.2f s", time.monotonic() - started)
    return loaded, None
