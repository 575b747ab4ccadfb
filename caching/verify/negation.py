"""Negators: "Cancel my subscription" and "Don't cancel my subscription" embed alike.

verify() compares how many of these words each text has, so a "not" on one side only
turns the pair down while "no, not that" against "not that, no" still matches.
"""

from collections.abc import Iterable

NEGATORS = {
    "not",
    "no",
    "never",
    "none",
    "nobody",
    "nothing",
    "nowhere",
    "neither",
    "nor",
    "without",
    "cannot",
    "dont",
    "doesnt",
    "didnt",
    "isnt",
    "arent",
    "wasnt",
    "werent",
    "cant",
    "couldnt",
    "wouldnt",
    "shouldnt",
    "wont",
    "hasnt",
    "havent",
    "hadnt",
    "aint",
    "mustnt",
    "neednt",
}  # and any word ending in n't


def count_negations(words: Iterable[str]) -> int:
    """How many of the lower-case words negate: a listed negator or any word in n't."""
    return sum(1 for w in words if w in NEGATORS or w.endswith("n't"))
