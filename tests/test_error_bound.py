"""Issue 19: the semantic cache's error bound (caching/evidence.py), through the real
store and lookup: the real int8 MiniLM, a real Redis 8 vector set per question."""

import asyncio

import numpy as np
import pytest
from django.conf import settings

from bench import calibration
from bench.question_pairs import generated_pairs
from caching import eviction, semantic
from caching.evidence import Evidence, FalseHitTable, asks, content_words, false_hit_table
from caching.exact import CachedReply
from inference.embeddings import OnnxMiniLM
from tests.semantic_slots import probed_slot

# |cosine here - recorded|: ONNX Runtime's int8 kernels differ slightly from CPU to CPU
# (a few pairs in 8,000 crossed a band edge between an AVX-512 machine and an AVX2 one).
# Recorded on an AMD EPYC (AVX2, no VNNI), the third group of generated pairs appended on
# 2026-12-07 from an Intel Xeon (AVX-512 VNNI), the fresh and extra groups from an AMD EPYC
# (AVX2) by a third session that day; an Intel Xeon with AVX-512 VNNI, the same
# prepared model byte for byte, is off by 0.0101 at the 99th percentile and 0.021 at most
# (the earlier 0.01 failed there). The float32 model is off by 0.076 at the 99th
# percentile, so these still tell models apart.
TOLERANCE_P99 = 0.02
TOLERANCE_MAX = 0.05
REPLY = CachedReply(content="cached", finish_reason="stop", prompt_tokens=5, completion_tokens=1)


@pytest.fixture(scope="module")
def minilm() -> OnnxMiniLM:
    return OnnxMiniLM(settings.EMBEDDING_MODEL_DIR)


@pytest.mark.live
@pytest.mark.parametrize("bound", [0.02, 0.05])
def test_the_bound_holds_on_a_stream_of_questions_with_known_truth(redis_url, minilm, bound):
    """The generated pairs' held-out half, never measured into the table: each first
    question is cached, then its pair asks. Among the hits, the share that are false stays
    within the bound, and the bound still lets some true paraphrases through."""
    pairs = generated_pairs("held-out")
    firsts = minilm.embed_batch([p.a for p in pairs])
    seconds = minilm.embed_batch([p.b for p in pairs])

    async def stream() -> list[bool]:
        budget = eviction.Budget("semantic:19", 100_000_000)
        served = []
        for index, pair in enumerate(pairs):
            context = f"{index:064d}"
            await semantic.store(
                await probed_slot(context, pair.a, firsts[index]), REPLY, budget, 600, 1
            )
            found = await semantic.lookup(
                await probed_slot(context, pair.b, seconds[index]), 0.5, False, bound=bound
            )
            match = found.match
            if match is not None:
                served.append(pair.same_meaning)
        return served

    served = asyncio.run(stream())
    false_hits = served.count(False)
    assert served.count(True) >= 1
    assert false_hits <= bound * len(served), f"{false_hits} false of {len(served)} hits"


@pytest.mark.unit
def test_a_cell_with_no_false_hit_in_few_pairs_is_not_promised_as_zero():
    table = FalseHitTable({"same-order 0.95": (0, 65), "asking reordered 0.95": (11, 24)}, "test")
    assert table.probability(Evidence("same-order", 0.95)) == pytest.approx(0.5 / 66)
    assert table.probability(Evidence("reordered", 0.95, asking=True)) == pytest.approx(11.5 / 25)
    assert table.probability(Evidence("reordered", 0.95)) == 0.5  # never seen: a coin
    assert table.probability(Evidence("one-swap", 0.70)) == 0.5


@pytest.mark.unit
def test_questions_and_statements_are_rated_apart_but_the_same_words_in_order_are_not():
    table = FalseHitTable(
        {"asking reworded 0.90": (2, 118), "stating reworded 0.90": (28, 138)}, "test"
    )
    question = Evidence.of("How do I cancel my plan?", "Steps to terminate a subscription?", 0.91)
    statement = Evidence.of("I cancelled my plan", "My subscription was terminated", 0.91)
    assert (question.cell, statement.cell) == ("asking reworded 0.90", "stating reworded 0.90")
    assert table.probability(question) == pytest.approx(2.5 / 119)
    assert table.probability(statement) == pytest.approx(28.5 / 139)
    # a question and a statement: the statements' cell
    mixed = Evidence.of("How do I cancel my plan?", "I cancelled my plan last week", 0.91)
    assert mixed.cell.startswith("stating ")
    # the same content words in order: one cell, asked or stated
    assert Evidence.of("What is the capital of France?", "capital of France", 0.96).cell == (
        "same-order 0.95"
    )


@pytest.mark.unit
@pytest.mark.parametrize(
    ("text", "asking"),
    [
        ("What's the capital of France?", True),
        ("capital of France?", True),
        ("Convert 5 miles to kilometres", True),
        ("how do i reset my password", True),
        ("Explain recursion like I'm five.", True),
        ("A man is slicing a tomato.", False),
        ("The capital of France is Paris", False),
        ("I cancelled my plan", False),
    ],
)
def test_a_text_asks_when_it_is_a_question_or_a_request(text, asking):
    assert asks(text) is asking


@pytest.mark.unit
@pytest.mark.parametrize(
    ("query", "candidate", "relation"),
    [
        ("What's the capital of France?", "what is the capital of france", "same-order"),
        ("can dogs eat cat food", "can cats eat dog food", "reordered"),
        ("How do I reset my password?", "How do I reset my router?", "one-swap"),
        ("Best pizza in Rome", "Best pizza in Rome for children", "one-sided"),
        ("How do I cancel my plan?", "Steps to terminate a subscription", "reworded"),
        ("When did the war end?", "Why did the war end?", "one-swap"),  # not stop words
        (
            "Could you tell me what the capital of Canada is?",
            "What is the capital of Canada?",
            "reframed",
        ),
        ('Translate "library" into Spanish.', 'What is "library" in Spanish?', "reframed"),
        # a word alone is no frame: a modal, "how" or a pronoun changes what is asked
        ("Can dogs eat grapes?", "Do dogs eat grapes?", "one-sided"),
        ("How did the Roman Empire fall?", "Did the Roman Empire fall?", "one-sided"),
        ("What is my credit score?", "What is a credit score?", "one-sided"),
        ("Can I cancel my order?", "Will I cancel my order?", "one-swap"),
        # one short phrase changed inside the same sentence: a slot's near-miss
        (
            "How much can a checked suitcase weigh on an Air Canada flight?",
            "How much can a cabin bag weigh on an Air Canada flight?",
            "phrase-swap",
        ),
        (
            "How long should I rest between squat sets for maximum strength?",
            "How long should I rest between squat sets for muscular endurance?",
            "phrase-swap",
        ),
        # the frame changed, not a phrase inside it: a rewording
        (
            "How should I treat a bee sting?",
            "What's the right first aid for a bee sting?",
            "reworded",
        ),
        # a phrase longer than PHRASE_WORDS, or too little sentence around it: reworded
        (
            "Which settings for a snowy landscape in bright midday summer sunlight?",
            "Which settings for a snowy landscape in low light?",
            "reworded",
        ),
        ("Cheap flights to Lisbon", "Inexpensive airfare Lisbon", "reworded"),
    ],
)
def test_evidence_names_how_the_content_words_relate(query, candidate, relation):
    assert Evidence.of(query, candidate, 0.96).relation == relation


@pytest.mark.unit
def test_the_shipped_table_is_what_the_development_pairs_measure_today():
    """Verification, the evidence cells and the data set together decide the table: a
    change to any of them must come with a new table (calibrate_semantic_cache). Measured
    with the cosines it was made with, which the next test ties to the served model."""
    measured = calibration.measure_development(calibration.recorded_cosines())
    shipped = false_hit_table()
    assert shipped.cells == measured.cells and shipped.fit_on == measured.fit_on
    assert "held" not in shipped.fit_on and "test" not in shipped.fit_on


@pytest.mark.unit
def test_each_development_question_set_left_out_of_the_table_stays_within_2_and_5_percent():
    """The bound on question families its table has not seen, from development data alone:
    each development question set scored by a table measured on all the others, and each
    served some. At 2% this failed (1 false hit in 16 on the extra group) while a phrase
    swapped inside one sentence counted as a rewording; at 3% it still fails (the third
    group, 4.5%: docs/benchmarks.md)."""
    bounds = [0.02, 0.05]
    scores = calibration.leave_one_group_out(calibration.recorded_cosines(), bounds)
    assert len(scores) == 5  # the adversarial pairs and four generated groups
    for name, rows in scores.items():
        for bound, row in zip(bounds, rows, strict=True):
            assert row.false_hit_rate <= bound, f"{name} at {bound:.0%}: {row}"
        assert rows[-1].true_hits > 0, name


@pytest.mark.live
def test_the_recorded_cosines_are_the_served_models_on_this_cpu(minilm):
    """Within the int8 kernels' differences from CPU to CPU; another model, another
    quantisation or another pooling moves them by far more."""
    recorded = calibration.recorded_cosines()
    here = calibration.development_cosines(minilm)
    assert recorded.shape == here.shape
    differences = np.abs(here - recorded)
    assert float(np.quantile(differences, 0.99)) < TOLERANCE_P99
    assert float(differences.max()) < TOLERANCE_MAX


@pytest.mark.unit
def test_content_words_drop_stop_words_and_endings_but_keep_pronouns_and_modals():
    assert content_words("The cakes are baking") == content_words("the cake is baked")
    assert content_words("Can I get a refund from you?") == ["can", "i", "get", "refund", "you"]


@pytest.mark.unit
def test_a_language_name_keeps_its_plus_signs_or_sharp():
    """C, C++ and C# are three languages: "call C from C++" and "call C++ from C" are not the
    same words in the same order (they were, as "c", until a blind group's traffic showed it)."""
    assert content_words("call C function from C++") == ["call", "c", "function", "c++"]
    assert content_words("Is C# like C?") == ["c#", "lik", "c"]  # (endings cut)
    relation = Evidence.of("call C++ function from C", "call C function from C++", 0.97).relation
    assert relation == "reordered"
