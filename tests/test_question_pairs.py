"""The generated question pairs (bench/question_pairs.py): deterministic, split by intent."""

import pytest

from bench.question_pair_data import INTENTS
from bench.question_pairs import (
    BLIND,
    EXTRA,
    FRESH,
    GROUPS,
    HALVES,
    HELD_OUT_INTENTS,
    NEAR_MISS_KINDS,
    PAIRS_PER_INTENT,
    PARAPHRASE,
    SEALED,
    TRAINING,
    UNSEEN,
    generated_families,
    generated_pairs,
    intents_of,
)
from bench.semantic_evaluation import Pair

pytestmark = pytest.mark.unit


def sentences(pairs: list[Pair]) -> set[str]:
    return {pair.a for pair in pairs} | {pair.b for pair in pairs}


@pytest.mark.parametrize("half", GROUPS)
def test_every_call_returns_the_same_pairs(half):
    assert generated_pairs(half) == generated_pairs(half)


def test_the_halves_share_no_intent_and_no_sentence():
    dev_intents = {intent.name for intent in intents_of("dev")}
    held_out_intents = {intent.name for intent in intents_of("held-out")}
    assert not dev_intents & held_out_intents
    assert held_out_intents == HELD_OUT_INTENTS
    assert dev_intents | held_out_intents == {intent.name for intent in INTENTS}
    assert not sentences(generated_pairs("dev")) & sentences(generated_pairs("held-out"))


def test_the_training_intents_share_no_intent_sentence_or_template_with_either_half():
    training = generated_pairs(TRAINING)
    templates = {t for intent in intents_of(TRAINING) for t in intent.templates}
    for half in HALVES:
        assert not {i.name for i in intents_of(half)} & {i.name for i in intents_of(TRAINING)}
        assert not sentences(generated_pairs(half)) & sentences(training)
        assert not {t for intent in intents_of(half) for t in intent.templates} & templates


@pytest.mark.parametrize("later", [FRESH, BLIND, EXTRA, SEALED, UNSEEN])
def test_a_later_group_shares_no_intent_sentence_or_template_with_any_other(later):
    """Each group written after the halves is new text: no intent, template or sentence of
    any other group, held out or not."""
    pairs = generated_pairs(later)
    templates = {t for intent in intents_of(later) for t in intent.templates}
    for group in (g for g in GROUPS if g != later):
        assert not {i.name for i in intents_of(group)} & {i.name for i in intents_of(later)}
        assert not sentences(generated_pairs(group)) & sentences(pairs)
        assert not {t for intent in intents_of(group) for t in intent.templates} & templates


def test_the_halves_share_no_template():
    dev_templates = {t for intent in intents_of("dev") for t in intent.templates}
    held_out_templates = {t for intent in intents_of("held-out") for t in intent.templates}
    assert not dev_templates & held_out_templates


@pytest.mark.parametrize("half", GROUPS)
def test_each_half_holds_positives_and_every_near_miss_kind(half):
    pairs = generated_pairs(half)
    positives = [pair for pair in pairs if pair.same_meaning]
    assert {pair.kind for pair in positives} == {PARAPHRASE}
    assert {pair.kind for pair in pairs if not pair.same_meaning} == set(NEAR_MISS_KINDS)
    assert 600 <= len(pairs) <= PAIRS_PER_INTENT * len(intents_of(half))
    assert 0.35 <= len(positives) / len(pairs) <= 0.55


@pytest.mark.parametrize("half", GROUPS)
def test_every_positive_pairs_two_different_texts(half):
    positives = [pair for pair in generated_pairs(half) if pair.same_meaning]
    assert positives
    assert all(pair.a != pair.b for pair in positives)


@pytest.mark.parametrize("half", GROUPS)
def test_no_pair_repeats_or_pairs_a_question_with_itself(half):
    pairs = generated_pairs(half)
    assert all(pair.a != pair.b for pair in pairs)
    assert len({frozenset((pair.a, pair.b)) for pair in pairs}) == len(pairs)


@pytest.mark.parametrize("half", ["", "test", "heldout", "DEV"])
def test_an_unknown_half_is_a_value_error(half):
    with pytest.raises(ValueError, match="unknown half"):
        generated_pairs(half)


@pytest.mark.parametrize("half", GROUPS)
def test_the_families_of_a_half_are_its_pairs_one_intent_each(half):
    families = generated_families(half)
    assert [pair for family in families for pair in family] == generated_pairs(half)
    assert len(families) == len(intents_of(half))
    # No sentence of one intent's pairs appears in another's: a split by family is clean.
    for index, family in enumerate(families):
        others = [pair for other in families[index + 1 :] for pair in other]
        assert not sentences(family) & sentences(others)
