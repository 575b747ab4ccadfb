"""A verified question's vector set is its context's set for its anchors (numbers, dates,
negations: caching/semantic_keys.py partition()). This is only sound if verification can
never accept a candidate from another set: checked here over every labelled pair."""

from functools import cache

import pytest

from bench import calibration
from caching.semantic_keys import SET_PREFIX, SemanticSlot, partition
from caching.verify.features import analyze
from caching.verify.verdict import verify

pytestmark = pytest.mark.unit


data_sets = cache(calibration.data_sets)  # read once for the module, not once a test


def part(question: str) -> str:
    return partition(analyze(question))


@pytest.mark.parametrize("name", list(data_sets()))
def test_verification_never_accepts_a_question_of_another_partition(name):
    pairs = data_sets()[name]
    accepted = [p for p in pairs if verify(p.b, p.a).accepted]
    split = [p for p in pairs if part(p.a) != part(p.b)]

    assert accepted and split  # both kinds occur in every set
    assert not [p for p in accepted if part(p.a) != part(p.b)]


def test_questions_without_anchors_stay_in_their_contexts_own_set():
    assert part("What is the capital of France?") == ""
    slot = SemanticSlot.of("ctx", "What is the capital of France?")
    assert slot.set_key == SET_PREFIX + "ctx"


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("Summarize ticket 4411 in one line.", "Summarize ticket 4412 in one line."),
        ("Cancel my subscription.", "Don't cancel my subscription."),
        ("What is on my calendar on Monday?", "What is on my calendar on Tuesday?"),
        ("Who won the 3rd race?", "Who won the 4th race?"),
    ],
)
def test_a_changed_number_date_or_negation_is_another_set(first, second):
    assert part(first) != part(second)
    assert SemanticSlot.of("ctx", first).set_key != SemanticSlot.of("ctx", second).set_key


def test_the_same_anchors_in_other_words_share_a_set():
    first = SemanticSlot.of("ctx", "How many days are in five weeks?")
    second = SemanticSlot.of("ctx", "5 weeks is how many days?")
    assert first.set_key == second.set_key != SET_PREFIX + "ctx"
    assert first.features is not None and first.features.numbers == {"=5"}


def test_without_verification_every_question_shares_the_contexts_set():
    for question in ("Summarize ticket 4411.", "Summarize ticket 4412.", "Don't stop."):
        slot = SemanticSlot.of("ctx", question, verified=False)
        assert slot.set_key == SET_PREFIX + "ctx" and slot.features is None
