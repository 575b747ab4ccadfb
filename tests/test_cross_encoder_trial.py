"""The cross-encoder trial's measuring half (bench/cross_encoder_trial.py): what it calls a
ceiling and a bound must mean what the docs say of its figures."""

import numpy as np
import pytest

from bench.cross_encoder_trial import (
    Scored,
    at_bound,
    measure_cells,
    rate,
    recall_at_precision,
    scored,
)
from bench.semantic_evaluation import Pair

pytestmark = pytest.mark.unit


def row(same: bool, score: float, relation: str | None = "reworded") -> Scored:
    return Scored(Pair("q", "q2", same, "test"), relation, score)


def test_the_ceiling_is_the_largest_recall_any_cut_off_keeps_at_the_precision():
    # By score: right, right, wrong, right, right, then a positive never served.
    rows = [row(True, 0.99), row(True, 0.98), row(False, 0.97), row(True, 0.96), row(True, 0.5)]
    rows.append(row(True, 0.99, relation=None))
    assert recall_at_precision(rows, precision=1.0) == pytest.approx(2 / 5)
    assert recall_at_precision(rows, precision=0.75) == pytest.approx(4 / 5)
    assert recall_at_precision([row(False, 0.9), row(True, 0.8)], precision=0.97) == 0.0


def test_cells_count_served_pairs_by_relation_and_score_band():
    rows = [row(True, 0.96), row(False, 0.955), row(True, 0.91), row(False, 0.2, relation=None)]
    assert measure_cells(rows) == {"reworded 0.95": (1, 2), "reworded 0.90": (0, 1)}


def test_a_bound_serves_only_cells_whose_smoothed_rate_is_within_it():
    cells = {"reworded 0.95": (0, 99), "reworded 0.90": (3, 30)}  # 0.5% and 11.3%
    assert rate(cells, "reworded 0.95") == pytest.approx(0.005)
    rows = [row(True, 0.97), row(False, 0.96), row(True, 0.92), row(True, 0.99, relation=None)]
    at_one = at_bound(rows, cells, 0.01)
    assert (at_one.true_hits, at_one.false_hits, at_one.missed) == (1, 1, 2)
    assert at_bound(rows, {}, 0.05).true_hits == 0  # a cell never measured says 50%


def test_a_pair_is_served_only_if_verification_accepts_it_above_the_floor():
    pairs = [
        Pair("What is the capital of France?", "What's the capital of France?", True, "t"),
        Pair("Is it safe to eat eggs?", "Is it not safe to eat eggs?", False, "t"),
        Pair("What is the capital of France?", "What's the capital of France?", True, "t"),
    ]
    rows = scored(pairs, np.array([0.97, 0.97, 0.5]), np.array([0.9, 0.9, 0.9]))
    assert rows[0].relation == "same-order"
    assert rows[1].relation is None  # negation: verification rejects it
    assert rows[2].relation is None  # under the floor cosine
