"""The semantic cache's embedder (inference/embeddings.py) with the real int8 MiniLM."""

import asyncio
from pathlib import Path

import numpy as np
import pytest
from django.conf import settings

from inference.embeddings import MAX_POOLED_TOKENS, OnnxMiniLM, TextTooLong, Vector

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


BACKGROUND = (
    "Our team runs a small bakery in the old town. Every morning we bake bread, rolls and "
    "pastries, and in the afternoon we prepare cakes for orders placed online. The oven is "
    "twenty years old and the staff rotate between the counter and the kitchen. "
) * 6  # about 330 tokens: past the model's 256-token window


@pytest.mark.unit
def test_long_questions_that_share_their_first_window_get_different_vectors(embedder):
    """Cut at 256 tokens, the two would be one vector; read whole, the rest tells them apart."""
    staffing = BACKGROUND + "How should we schedule the staff over the holiday weekend?"
    pricing = BACKGROUND + (
        "Which price should we charge for a three-tier wedding cake with fresh flowers, "
        "delivered sixty kilometres away, compared with our usual birthday cakes?"
    )
    assert np.array_equal(embedder.embed_batch([staffing])[0], embedder.embed_batch([pricing])[0])

    whole = [embedder.embed_whole(staffing), embedder.embed_whole(pricing)]
    assert whole[0] is not None and whole[1] is not None
    assert float(whole[0] @ whole[1]) < 0.99
    assert abs(float(np.linalg.norm(whole[0])) - 1.0) < 1e-5
    assert float(whole[0] @ whole[1]) < float(
        whole[0] @ embedder.embed_whole(staffing.replace("holiday", "Easter"))
    )


@pytest.mark.unit
def test_a_question_within_one_window_is_embedded_whole_as_before(embedder):
    for text in [QUESTION, *OTHERS]:
        assert np.array_equal(embedder.embed_whole(text), embedder.embed_batch([text])[0])


@pytest.mark.unit
def test_a_text_past_the_pooled_limit_is_refused_not_cut(embedder):
    dense = "请根据下面的长篇背景资料回答最后的问题并详细说明理由" * 90  # over 1,016 tokens
    assert embedder.embed_whole(dense) is None
    with pytest.raises(TextTooLong):
        asyncio.run(embedder.embed(dense))


@pytest.mark.unit
def test_the_pooled_limit_is_four_whole_windows(embedder):
    assert MAX_POOLED_TOKENS == 4 * 254
    fits = "hello " * MAX_POOLED_TOKENS  # one token each
    assert embedder.embed_whole(fits) is not None
    assert embedder.embed_whole(fits + "hello") is None
