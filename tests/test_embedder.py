"""The semantic cache's embedder (inference/embeddings.py) with the real int8 MiniLM."""

import asyncio
from pathlib import Path

import numpy as np
import pytest
from django.conf import settings

from inference.embeddings import OnnxMiniLM, Vector

QUESTION = "Cancel my subscription"
OTHERS = [
    "Don't cancel my subscription, I meant the other one I signed up for last spring",
    "hello",
    "What is the capital of France?",
]


@pytest.fixture(scope="module")
def embedder() -> OnnxMiniLM:
    return OnnxMiniLM(Path(settings.EMBEDDING_MODEL_DIR))


@pytest.mark.unit
def test_a_question_gets_the_same_vector_whatever_is_asked_beside_it(embedder):
    # The int8 model quantizes activations over its whole input: run as one batch, a
    # question's vector moved with its neighbours (cosine 0.977 to 0.99 to itself alone).
    alone = embedder.embed_batch([QUESTION])[0]
    for neighbours in (OTHERS, OTHERS[:1], [QUESTION] * 3 + OTHERS):
        beside = embedder.embed_batch([*neighbours, QUESTION])[-1]
        assert np.array_equal(alone, beside)


@pytest.mark.unit
def test_concurrent_questions_get_the_vectors_they_get_alone(embedder):
    async def concurrently() -> list[Vector]:
        return list(await asyncio.gather(*(embedder.embed(t) for t in [QUESTION, *OTHERS])))

    vectors = asyncio.run(concurrently())
    for text, vector in zip([QUESTION, *OTHERS], vectors, strict=True):
        assert np.array_equal(vector, embedder.embed_batch([text])[0])
        assert abs(float(np.linalg.norm(vector)) - 1.0) < 1e-5
