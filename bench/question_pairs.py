"""Generated, labelled question pairs for measuring the semantic cache, in groups of intents.

A semantic cache answers a question with the cached reply of an earlier question that means
the same. These pairs measure how often it would be right. Each pair comes from one intent
(bench/question_pair_data.py: a question family such as "the capital of {country}", written
in several genuinely different wordings, with slots and fillers):

- a positive (same_meaning=True, kind "paraphrase") is two different wordings of one intent
  with the same slot values;
- a near-miss (same_meaning=False) changes exactly one thing that changes the answer, and its
  kind names it: "entities" (a proper name), "nouns" (a lower-case noun), "numbers",
  "dates", "negation" (a not/without added or removed), "roles" (two slot values swapped),
  "antonyms" (largest/smallest) or "scope" (a qualifier that narrows or widens the
  question). About half of the near-misses also change the wording, so a near-miss is not
  always a one-word edit of the same sentence.

Why split by intent: a threshold or verifier tuned on the dev half must be judged on
questions it has never seen the like of. The split is fixed here, in code, before anything
was measured: every intent belongs to exactly one half, so no intent, wording or near-miss
pattern of the held-out half appears in the dev half. A third group, TRAINING
(bench/question_pair_training_data.py, written later), is in neither half: more intents for
a second-stage model to learn from and be calibrated on, away from the held-out topics, and
since 2026-12-07 development pairs of the semantic cache's false-hit table too
(bench/calibration.py: the bound failed on them while they were unseen). Four more groups
were held out, each scored once when it was new: FRESH (bench/question_pair_fresh_data.py),
BLIND (bench/question_pair_blind_data.py, written after FRESH broke the bound), SEALED
(bench/question_pair_sealed_data.py, written with EXTRA) and UNSEEN
(bench/question_pair_unseen_data.py, written after SEALED had been scored, to judge the
rules chosen after that). FRESH has been development data since then, with EXTRA
(bench/question_pair_extra_data.py, 30 more intents by another writer): more question
families for the table.

Every group was written from language knowledge alone: no embedding model, cache or
verifier was run on it while it was written, and nothing in it was tuned to any model's
scores. The output is deterministic (one fixed seed per intent): the same pairs on every
call.
"""

import random
import re
from string import Formatter

from bench.question_pair_blind_data import BLIND_INTENTS
from bench.question_pair_data import INTENTS, Intent, Slot
from bench.question_pair_extra_data import EXTRA_INTENTS
from bench.question_pair_fresh_data import FRESH_INTENTS
from bench.question_pair_sealed_data import SEALED_INTENTS
from bench.question_pair_training_data import TRAINING_INTENTS
from bench.question_pair_unseen_data import UNSEEN_INTENTS
from bench.semantic_evaluation import Pair

SEED = 20_240_917
HALVES = ("dev", "held-out")
TRAINING = "training"  # bench/question_pair_training_data.py: a second stage's, neither half
FRESH = "fresh"  # bench/question_pair_fresh_data.py: held out once, development since
BLIND = "blind"  # bench/question_pair_blind_data.py: held out, written after FRESH was seen
EXTRA = "extra"  # bench/question_pair_extra_data.py: development, 30 intents by another writer
SEALED = "sealed"  # bench/question_pair_sealed_data.py: held out, written beside EXTRA
UNSEEN = "unseen"  # bench/question_pair_unseen_data.py: held out, written after SEALED was seen
GROUPS = (*HALVES, TRAINING, FRESH, BLIND, EXTRA, SEALED, UNSEEN)
_GROUP_INTENTS = {
    TRAINING: TRAINING_INTENTS,
    FRESH: FRESH_INTENTS,
    BLIND: BLIND_INTENTS,
    EXTRA: EXTRA_INTENTS,
    SEALED: SEALED_INTENTS,
    UNSEEN: UNSEEN_INTENTS,
}
PAIRS_PER_INTENT = 40
POSITIVE_SHARE = 0.45
REWORDED_NEAR_MISS_SHARE = 0.5  # near-misses whose second question uses another wording
ATTEMPTS_PER_PAIR = 60
PARAPHRASE = "paraphrase"
SLOT_KINDS = ("entities", "nouns", "numbers", "dates", "negation", "antonyms", "scope")
ROLES = "roles"
NEAR_MISS_KINDS = (*SLOT_KINDS, ROLES)

DEV_INTENTS = frozenset(
    {
        "capital_city",
        "length_conversion",
        "recipe_substitution",
        "subscription_change",
        "language_speed",
        "cheapest_flight",
        "tablets_per_day",
        "time_zone",
        "translate_word",
        "debug_error",
        "tax_deadline",
        "password_reset",
        "month_to_visit",
        "roasting_time",
        "city_population",
        "install_software",
        "sort_collection",
        "visa_for_trip",
        "weekday_of_date",
        "pet_food_safety",
    }
)
HELD_OUT_INTENTS = frozenset(
    {
        "superlative_place",
        "currency_conversion",
        "drug_with_food",
        "visa_free_countries",
        "recipe_without",
        "train_times",
        "legal_age",
        "toggle_setting",
        "type_conversion",
        "public_holidays",
        "calories_burned",
        "mortgage_payment",
        "watering_plants",
        "cooking_measures",
        "food_around_run",
        "cup_final_result",
        "packing_list",
        "daily_nutrient",
        "package_version",
        "word_relation",
    }
)

SlotValues = dict[str, str]


def generated_pairs(half: str) -> list[Pair]:
    """The labelled pairs of one half, "dev" or "held-out", or of another group of GROUPS:
    the same list on every call."""
    return [pair for family in generated_families(half) for pair in family]


def generated_families(half: str) -> list[list[Pair]]:
    """generated_pairs(half), one list per intent: what a split within a half must keep
    together (errors come in families: a near-miss pattern learnt from one intent's pairs
    is seen again in its other pairs)."""
    seen: set[tuple[str, str]] = set()
    return [_pairs_for(intent, seen) for intent in intents_of(half)]


def intents_of(half: str) -> list[Intent]:
    if half not in GROUPS:
        raise ValueError(f"unknown half {half!r}: expected one of {GROUPS}")
    _check_split()
    if half in _GROUP_INTENTS:
        return list(_GROUP_INTENTS[half])
    names = DEV_INTENTS if half == "dev" else HELD_OUT_INTENTS
    return [intent for intent in INTENTS if intent.name in names]


def _check_split() -> None:
    every = (*INTENTS, *(intent for group in _GROUP_INTENTS.values() for intent in group))
    named = [intent.name for intent in every]
    if len(set(named)) != len(named):
        raise ValueError("two intents share a name")
    named = [intent.name for intent in INTENTS]
    if DEV_INTENTS & HELD_OUT_INTENTS or set(named) != DEV_INTENTS | HELD_OUT_INTENTS:
        raise ValueError("every intent must belong to exactly one half")


def _check_intent(intent: Intent) -> None:
    """Refuse an intent whose templates and slots do not fit together."""
    slot_names = {slot.name for slot in intent.slots}
    for template in intent.templates:
        if _placeholders(template) != slot_names:
            raise ValueError(f"{intent.name}: {template!r} must name exactly {slot_names}")
    if len(set(intent.templates)) < 2:
        raise ValueError(f"{intent.name}: a paraphrase needs two different templates")
    for slot in intent.slots:
        if slot.kind not in SLOT_KINDS or len(set(slot.values)) < 2:
            raise ValueError(f"{intent.name}.{slot.name}: bad kind or fewer than two values")
    if intent.roles is not None:
        first, second = (_slot(intent, name) for name in intent.roles)
        if first.values != second.values:
            raise ValueError(f"{intent.name}: swapped slots must share one pool of values")


def _placeholders(template: str) -> set[str]:
    return {name for _, name, _, _ in Formatter().parse(template) if name is not None}


def _slot(intent: Intent, name: str) -> Slot:
    return next(slot for slot in intent.slots if slot.name == name)


def traffic(half: str, per_intent: int) -> list[Pair]:
    """A longer stream from one group's question families: per_intent pairs of each of its
    intents (fewer where its slots run out), drawn with another seed than the group's own
    pairs, none twice. What a team whose questions come from those families would send
    over time, for replaying what its audits teach (bench/calibration.py)."""
    seen: set[tuple[str, str]] = set()
    intents = intents_of(half)
    return [pair for i in intents for pair in _pairs_for(i, seen, per_intent, "traffic")]


def _pairs_for(
    intent: Intent, seen: set[tuple[str, str]], count: int = PAIRS_PER_INTENT, salt: str = ""
) -> list[Pair]:
    """`count` pairs of one intent, POSITIVE_SHARE of them positives, none seen."""
    _check_intent(intent)
    rng = random.Random(f"{SEED}:{salt}{intent.name}")
    positives_wanted = round(count * POSITIVE_SHARE)
    wanted = [True] * positives_wanted + [False] * (count - positives_wanted)
    rng.shuffle(wanted)
    pairs: list[Pair] = []
    for positive in wanted:
        pair = _fresh_pair(intent, rng, positive, seen)
        if pair is not None:
            pairs.append(pair)
    return pairs


def _fresh_pair(
    intent: Intent, rng: random.Random, positive: bool, seen: set[tuple[str, str]]
) -> Pair | None:
    """A pair of the wanted label that is not yet in `seen` (in either order), or None."""
    for _ in range(ATTEMPTS_PER_PAIR):
        pair = _positive(intent, rng) if positive else _near_miss(intent, rng)
        if pair is None or pair.a == pair.b:
            continue
        key = (min(pair.a, pair.b), max(pair.a, pair.b))
        if key not in seen:
            seen.add(key)
            return pair
    return None


def _positive(intent: Intent, rng: random.Random) -> Pair:
    values = _sampled_values(intent, rng)
    first, second = rng.sample(sorted(set(intent.templates)), 2)
    return Pair(_render(first, values), _render(second, values), True, PARAPHRASE)


def _near_miss(intent: Intent, rng: random.Random) -> Pair | None:
    values = _sampled_values(intent, rng)
    kind = rng.choice(_near_miss_kinds(intent))
    edited = _edited_values(intent, values, kind, rng)
    if edited is None:
        return None
    first = rng.choice(intent.templates)
    second = first
    if rng.random() < REWORDED_NEAR_MISS_SHARE:
        second = rng.choice([t for t in intent.templates if t != first])
    return Pair(_render(first, values), _render(second, edited), False, kind)


def _near_miss_kinds(intent: Intent) -> list[str]:
    """The kinds of edit this intent allows, each once, in a fixed order."""
    kinds = [kind for kind in SLOT_KINDS if any(slot.kind == kind for slot in intent.slots)]
    return [*kinds, ROLES] if intent.roles is not None else kinds


def _sampled_values(intent: Intent, rng: random.Random) -> SlotValues:
    """One value per slot; the two slots of `roles` always get different values."""
    values = {slot.name: rng.choice(slot.values) for slot in intent.slots}
    if intent.roles is not None:
        first, second = intent.roles
        pool = _slot(intent, second).values
        values[second] = rng.choice([value for value in pool if value != values[first]])
    return values


def _edited_values(
    intent: Intent, values: SlotValues, kind: str, rng: random.Random
) -> SlotValues | None:
    """`values` with exactly one meaning-changing edit of `kind`, or None if none fits."""
    edited = dict(values)
    if kind == ROLES:
        if intent.roles is None:
            return None
        first, second = intent.roles
        edited[first], edited[second] = values[second], values[first]
        return edited
    slot = rng.choice([slot for slot in intent.slots if slot.kind == kind])
    taken = {values[name] for name in _partners(intent, slot.name)}
    choices = [value for value in slot.values if value not in taken]
    if not choices:
        return None
    edited[slot.name] = rng.choice(choices)
    return edited


def _partners(intent: Intent, name: str) -> tuple[str, ...]:
    """The slot itself and, for a slot of `roles`, the other one: its value must differ."""
    if intent.roles is not None and name in intent.roles:
        return intent.roles
    return (name,)


def _render(template: str, values: SlotValues) -> str:
    """The template filled in, with the spaces an empty value leaves behind tidied away."""
    text = template.format(**values)
    text = re.sub(r"\s+", " ", text).strip()
    return re.sub(r" ([?.,:;])", r"\1", text)
