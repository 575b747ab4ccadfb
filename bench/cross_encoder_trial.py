"""Would a cross-encoder fine-tuned here meet issue 19's targets? The measuring half of
`manage.py cross_encoder_trial` (the training half: bench/cross_encoder_torch.py).

A trial, not the served cache: nothing here is called by a lookup. It answers two questions
on the same data sets and halves as `manage.py cache_precision`:

- **Is the evidence there?** recall at precision 0.97 among the pairs verification accepts
  at or above the floor cosine, with the best cut-off of the cross-encoder's score chosen
  on each set's own labels: a ceiling, not a rule.
- **Would an honest bound keep it?** A false-hit table whose cells are verification's word
  relation by the cross-encoder's score band, measured the way caching/evidence.py's was
  (before it rated questions apart) but only on pairs the scoring model never trained
  on: STS-B dev (the models trained on STS-B train), and each development question pair
  scored by the model of the other fold (the development question pairs are split in two
  by intent, and a model trained on each half); then the bound's precision and recall on
  every set, the held-out halves scored by the model trained on all the development
  pairs.
"""

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from bench.calibration import BoundScore, score_rule
from bench.semantic_evaluation import Pair
from caching.evidence import FLOOR, Evidence
from caching.verify.verdict import verify

SCORE_BANDS = (0.99, 0.98, 0.95, 0.90, 0.80, 0.70, 0.50, 0.0)  # by their lower edge
TARGET_PRECISION = 0.97


@dataclass(frozen=True)
class Scored:
    pair: Pair
    relation: str | None  # verification's word relation; None: never served (rejected, or
    # under the floor cosine)
    score: float  # the cross-encoder's, 0 to 1

    @property
    def cell(self) -> str:
        band = next(edge for edge in SCORE_BANDS if self.score >= edge)
        return f"{self.relation} {band:.2f}"


def scored(
    pairs: Sequence[Pair], cosines: npt.NDArray[np.floating], scores: npt.NDArray[np.floating]
) -> list[Scored]:
    rows = []
    for pair, cosine, score in zip(pairs, cosines, scores, strict=True):
        relation = None
        if cosine >= FLOOR and verify(pair.b, pair.a).accepted:
            relation = Evidence.of(pair.b, pair.a, float(cosine)).relation
        rows.append(Scored(pair, relation, float(score)))
    return rows


def recall_at_precision(rows: Sequence[Scored], precision: float = TARGET_PRECISION) -> float:
    """The largest recall of any cut-off on the score, among served pairs, whose hits are
    right at least `precision` of the time (0.0 when none is)."""
    positives = sum(row.pair.same_meaning for row in rows)
    candidates = sorted((row for row in rows if row.relation is not None), key=lambda r: -r.score)
    best = right = 0
    for taken, row in enumerate(candidates, start=1):
        right += row.pair.same_meaning
        if right / taken >= precision:
            best = max(best, right)
    return best / positives if positives else 0.0


def measure_cells(rows: Iterable[Scored]) -> dict[str, tuple[int, int]]:
    """(false hits, pairs) per cell of the served pairs."""
    cells: dict[str, tuple[int, int]] = {}
    for row in rows:
        if row.relation is None:
            continue
        false, seen = cells.get(row.cell, (0, 0))
        cells[row.cell] = (false + (not row.pair.same_meaning), seen + 1)
    return cells


def rate(cells: dict[str, tuple[int, int]], cell: str) -> float:
    """Smoothed as caching/evidence.py's table is (Jeffreys); a cell never seen: 0.5."""
    false, seen = cells.get(cell, (0, 0))
    return (false + 0.5) / (seen + 1)


def at_bound(rows: Sequence[Scored], cells: dict[str, tuple[int, int]], bound: float) -> BoundScore:
    hit = [row.relation is not None and rate(cells, row.cell) <= bound for row in rows]
    return score_rule(f"bound {bound:.1%}", [row.pair for row in rows], hit)
