"""Probe vectors (inference/probe_embeddings.py), the semantic cache's probe floors and
MiniLM's vectors kept for candidates (caching/semantic.py, caching/semantic_scores.py),
with the real probe table and the real int8 MiniLM."""

import asyncio
import shutil
from pathlib import Path

import numpy as np
import pytest
from django.conf import settings

from caching import semantic, semantic_scores
from caching.evidence import FLOOR
from inference.embeddings import MAX_POOLED_TOKENS, EmbedderUnavailable, OnnxMiniLM
from inference.probe_embeddings import TABLE_FILE, ProbeEmbedder

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def probe() -> ProbeEmbedder:
    return ProbeEmbedder(settings.EMBEDDING_MODEL_DIR)


def cosine(probe: ProbeEmbedder, first: str, second: str) -> float:
    a, b = probe.vector(first), probe.vector(second)
    assert a is not None and b is not None
    return float(a @ b)


def test_a_probe_is_unit_length_and_the_same_every_time(probe):
    vector = probe.vector("How do I reset my password?")
    assert vector is not None and vector.dtype == np.float32 and vector.shape == (128,)
    assert float(np.linalg.norm(vector)) == pytest.approx(1.0, abs=1e-5)
    assert np.array_equal(vector, probe.vector("How do I reset my password?"))


def test_a_paraphrase_is_nearer_than_another_question(probe):
    question = "How do I reset my password?"
    paraphrase = cosine(probe, question, "how can i reset my password")
    assert paraphrase > cosine(probe, question, "What is the capital of France?") + 0.2
    assert paraphrase >= semantic.probe_floor(0.92)


def test_long_questions_that_share_their_first_256_tokens_get_different_probes(probe):
    shared = "Tell me about the history of the river and the towns along it. " * 30
    first = probe.vector(shared + "Which town is oldest?")
    second = probe.vector(shared + "How do I cook rice without a rice cooker at home?")
    assert first is not None and second is not None
    assert not np.array_equal(first, second)


def test_a_text_past_what_minilm_reads_whole_has_no_probe(probe):
    assert probe.vector("word " * (MAX_POOLED_TOKENS + 10)) is None
    assert probe.vector("word " * (MAX_POOLED_TOKENS - 10)) is not None


def test_a_missing_or_foreign_table_is_an_unavailable_embedder(tmp_path: Path):
    with pytest.raises(EmbedderUnavailable, match="make worker"):
        ProbeEmbedder(tmp_path)
    shutil.copy(settings.EMBEDDING_MODEL_DIR / "tokenizer.json", tmp_path / "tokenizer.json")
    np.save(tmp_path / TABLE_FILE, np.zeros((10, 128), dtype=np.float32))
    with pytest.raises(EmbedderUnavailable, match="vocabulary"):
        ProbeEmbedder(tmp_path)


def test_the_probe_floor_rises_with_minilms_and_is_off_under_what_was_measured():
    assert semantic.probe_floor(FLOOR) == 0.55
    assert semantic.probe_floor(0.92) == 0.70
    assert semantic.probe_floor(0.95) == 0.70  # nothing measured above: the 0.92 one
    assert semantic.probe_floor(0.85) == 0.60
    assert semantic.probe_floor(0.5) < -0.99  # a threshold under 0.70: no floor


def test_a_candidates_kept_vector_is_used_and_a_corrupt_one_is_made_again(monkeypatch):
    minilm = OnnxMiniLM(settings.EMBEDDING_MODEL_DIR)
    question = "What is the capital of France?"
    real = minilm.embed_whole(question)
    assert real is not None
    monkeypatch.setattr(semantic_scores, "_candidate_vectors", {})

    kept = {"question": question, "vector": semantic_scores.encode(real)}
    read = asyncio.run(semantic_scores.candidate_vector("e1", kept))
    assert read is not None and np.array_equal(read, real)
    assert semantic_scores._candidate_vectors == {}  # read from the entry, not embedded

    corrupt = {"question": question, "vector": "not base64!"}
    made = asyncio.run(semantic_scores.candidate_vector("e2", corrupt))
    assert made is not None and float(made @ real) > 0.999
    assert list(semantic_scores._candidate_vectors) == ["e2"]


def test_the_candidates_remembered_are_capped(monkeypatch):
    monkeypatch.setattr(semantic_scores, "_candidate_features", {})
    monkeypatch.setattr(semantic_scores, "CANDIDATE_FEATURES", 3)
    for n in range(5):
        semantic_scores.candidate_features(f"e{n}", f"question {n}")
    assert list(semantic_scores._candidate_features) == ["e2", "e3", "e4"]
    assert semantic_scores.candidate_features("e4", "question 4").seq == ["question", "=4"]
