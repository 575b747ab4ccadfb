"""How likely a semantic candidate is to be a false hit: the evidence behind an error bound.

A bare cosine threshold promises nothing a team can reason about: 0.92 is right on one
kind of traffic and wrong on a third of another's near-misses. A team that sets
`max_false_hit_rate` (say 2%) gets this instead: each candidate that verification accepts
falls in one cell of a small table, by

- how its content words (lower case, stop words out, endings cut) relate to the
  question's: the same in the same order (only stop words, case, punctuation or endings
  differ), the same reordered (swapped roles: "can dogs eat cat food" / "can cats eat dog
  food"), reframed (only a phrase that frames a request differs: "could you tell me",
  "I want to know"), one swapped for another, a short phrase swapped for another in the
  same sentence ("pack a checked suitcase" / "pack a cabin bag": the one-word swap's
  near-miss, written with more words), some only on one side (a detail added or dropped),
  or reworded (words only on each side);
- its cosine band;
- whether both texts ask (a question or a request: "...?", "How do I...", "Convert 5
  miles to km"), or either is a statement. The two are measured apart because they fail
  differently: STS-B's statements (news, captions, forum posts) that reword each other
  at cosine 0.90 are often only related ("Two birds flying towards water feeder" / "Two
  birds flying near bird feeders"), while reworded questions at that cosine mostly ask
  the same thing; one table for both gave every question a rate set mostly by
  statements. Pairs whose content words are the same in the same order share one cell
  whatever they are: nothing is left for the two kinds of text to differ on.

and the cell's false-hit rate, measured on development pairs only (STS-B train and dev,
the adversarial pairs, and 100 intents of generated question pairs:
`manage.py calibrate_semantic_cache`) and smoothed (Jeffreys: (false + 0.5) /
(pairs + 1), so a cell with 0 false hits in 30 pairs says 1.6%, not 0%), is the
candidate's false-hit probability. The candidate answers when that is at most the bound,
so the false-hit rate among hits stays at most the bound wherever traffic resembles the
development pairs (held-out sets: docs/benchmarks.md; question families unlike them can
sit above it, as three held-out groups did before they, or the phrase swap, were measured
in). A team's own audits of
its hits in a cell move the cell's rate for that team (caching/cell_audits.py), so traffic
unlike the development pairs is rated by what it turns out to be. An entry a team reported
as a false hit never answers another question again (caching/semantic.py).

Histogram binning rather than a fitted curve: the development sets disagree on every
smooth feature (a changed content word is a near-miss in question traffic and a paraphrase
in STS-B), and a table says exactly what it knows and from how many pairs.
Pure, a few microseconds per candidate; the table loads once per process.
"""

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from caching.cell_audits import NO_AUDITS, CellAudits

MODEL_FILE = Path(__file__).with_name("false_hit_table.json")
# Candidates below this cosine are never served, whatever the bound: the model was fit
# on pairs above it only, and below it a hit is rarely right.
FLOOR = 0.70

_WORD = re.compile(r"[^\W_]+(?:\+\+|#)?", re.UNICODE)  # C, C++ and C# are three words
# Words that rarely decide the answer. Not among them: "how", "why", "when", "where" and
# "who" ("When did it end?" / "Why did it end?"), personal pronouns ("How do I get a refund
# from you?" / "How do you get a refund from me?") and modal verbs ("Can I take it?" /
# "Should I take it?").
_STOP_WORDS = """
a an the of to in on at for from by with about as is are was were be been being do does did
have has had it its this that these those what which whom whose there here and or but if so
than then please tell know just also some any s t d ll re ve m
"""
_STOP = frozenset(_STOP_WORDS.split())
_SUFFIXES = ("ing", "ed", "ly", "s")


def content_words(text: str) -> list[str]:
    """Lower-cased words that carry the question, in order, crudely stemmed ("cakes" ==
    "cake"); the pieces of contractions ("what's", "don't") are stop words (negation is
    verification's)."""
    words = []
    for word in _WORD.findall(text.lower()):
        if word in _STOP:
            continue
        for suffix in _SUFFIXES:
            if len(word) > len(suffix) + 2 and word.endswith(suffix):
                word = word[: -len(suffix)]
                break
        if len(word) > 3 and word.endswith("e"):  # bake, baked, baking, bakes: "bak"
            word = word[:-1]
        words.append(word)
    return words


BANDS = (0.95, 0.90, 0.85, FLOOR)  # cosine bands, by their lower edge

# A text asks when it ends with a question mark or opens with one of these: question
# words, the verbs that open a yes/no question, and the imperatives of a request.
_ASKING_WORDS = """
what whats how why when where who whom whose which
can could do does did is are was were will would shall should may might am has have
give tell show list explain describe convert translate find suggest recommend name
write make help compare calculate define summarize summarise
"""
_ASKING_OPENERS = frozenset(_ASKING_WORDS.split())
_LEAD_INS = frozenset(["please", "hey", "hi", "hello", "ok", "okay", "so"])  # and list numbers
_CLOSERS = " \t\r\n\"')]*\u201d\u2019"  # after a question mark: 'is it "x?"', "(why?)"


def asks(text: str) -> bool:
    """A question or a request, rather than a statement. A heuristic with known misses both
    ways: a request opening with "I need" reads as a statement (fewer hits, never a wrong
    one), and a headline opening with a question word ("When markets fall, ...") as a
    question; the table's rates are measured with the same heuristic, such pairs included."""
    if text.rstrip(_CLOSERS).endswith("?"):
        return True
    for word in _WORD.findall(text[:200].lower()):
        if word not in _LEAD_INS and not word.isdigit():
            return word in _ASKING_OPENERS
    return False


# Phrases that ask for what the rest of the question names, and nothing more: "Could you
# tell me the capital of Canada?" / "What is the capital of Canada?", "Translate 'library'
# into Spanish" / "What's 'library' in Spanish?". Phrases, not words: a modal ("Can dogs
# eat grapes?" / "Do dogs eat grapes?"), "how" ("How did Rome fall?" / "Did Rome fall?")
# or a pronoun ("my credit score" / "a credit score") alone changes what is asked.
_FRAME_PHRASE = re.compile(
    r"\b(?:(?:can|could|would|will) you (?:please )?)?"
    r"(?:tell|give|show|find|explain|describe|walk) me(?: through)?\b"
    r"|\b(?:can|could|would|will) you (?:please )?(?:explain|describe|convert|translate)\b"
    r"|\bi(?:'d| would) like to know\b|\bi (?:want|need) to know\b"
    r"|\b(?:convert|translate|into)\b"
)


def _unframed(text: str) -> list[str]:
    return content_words(_FRAME_PHRASE.sub(" ", text.lower()))


# A phrase swap: the two texts are one sentence with one short phrase changed, "How long
# should I rest between sets for {muscle growth / muscular endurance}?". Generated
# near-misses that change a slot of several words land here; true rewordings rarely keep
# that much of the sentence and change only a phrase inside it. Counted as "reworded"
# until 2026-12-07 (a third session), where these near-misses sat at cosine 0.90 to 0.95
# among true rewordings and made that cell's rate a promise only for some families.
PHRASE_WORDS = 3  # the longest phrase, in content words, on either side
FRAME_WORDS = 2  # the fewest content words the two share around it


def swaps_a_phrase(mine: list[str], theirs: list[str]) -> bool:
    """The content words are the same before and after one phrase on each side (of at
    most PHRASE_WORDS, sharing no word), with at least FRAME_WORDS around it."""
    shortest = min(len(mine), len(theirs))
    before = 0
    while before < shortest and mine[before] == theirs[before]:
        before += 1
    after = 0
    while after < shortest - before and mine[-1 - after] == theirs[-1 - after]:
        after += 1
    phrase, other = mine[before : len(mine) - after], theirs[before : len(theirs) - after]
    return (
        0 < len(phrase) <= PHRASE_WORDS
        and 0 < len(other) <= PHRASE_WORDS
        and not set(phrase) & set(other)
        and before + after >= FRAME_WORDS
    )


@dataclass(frozen=True)
class Evidence:
    relation: str  # same-order, reordered, reframed, one-swap, phrase-swap, one-sided, reworded
    band: float  # the lower edge of the cosine's band
    asking: bool = False  # both texts ask (see asks())

    @classmethod
    def of(cls, query: str, candidate: str, cosine: float) -> "Evidence":
        mine, theirs = content_words(query), content_words(candidate)
        only_mine, only_theirs = set(mine) - set(theirs), set(theirs) - set(mine)
        if not only_mine and not only_theirs:
            relation = "same-order" if mine == theirs else "reordered"
        elif _unframed(query) == _unframed(candidate):
            relation = "reframed"
        elif len(only_mine) == 1 and len(only_theirs) == 1:
            relation = "one-swap"
        elif not only_mine or not only_theirs:
            relation = "one-sided"
        elif swaps_a_phrase(mine, theirs):
            relation = "phrase-swap"
        else:
            relation = "reworded"
        band = next((edge for edge in BANDS if cosine >= edge), 0.0)
        return cls(relation, band, asks(query) and asks(candidate))

    @property
    def cell(self) -> str:
        if self.relation == "same-order":
            return f"same-order {self.band:.2f}"
        kind = "asking" if self.asking else "stating"
        return f"{kind} {self.relation} {self.band:.2f}"


@dataclass(frozen=True)
class FalseHitTable:
    """Per cell, (false hits, pairs) among verified development pairs."""

    cells: dict[str, tuple[int, int]]
    fit_on: str  # what it was measured on, for the record

    def probability(self, evidence: Evidence) -> float:
        return self.rate(evidence.cell)

    def rate(self, cell: str) -> float:
        """The cell's smoothed false-hit rate (a cell never seen: 0.5)."""
        false, pairs = self.cells.get(cell, (0, 0))
        return (false + 0.5) / (pairs + 1)

    def encode(self) -> str:
        cells = {cell: list(counts) for cell, counts in sorted(self.cells.items())}
        return json.dumps({"fit_on": self.fit_on, "cells": cells}, indent=1) + "\n"


@cache
def false_hit_table() -> FalseHitTable:
    data = json.loads(MODEL_FILE.read_text(encoding="utf-8"))
    cells = {str(cell): (int(f), int(n)) for cell, (f, n) in data["cells"].items()}
    return FalseHitTable(cells, str(data["fit_on"]))


# How many pairs' worth of evidence the table's rate counts for against what audits find:
# 20 audits of an entry that agreed halve its rate; 20 audits of a team's hits in a cell
# weigh as much as the table's rate for that cell.
PRIOR_WEIGHT = 20


def evidence_of(query: str, candidate: str, cosine: float) -> Evidence | None:
    """The candidate's evidence; None below the floor cosine (never served under a bound)."""
    return None if cosine < FLOOR else Evidence.of(query, candidate, cosine)


def probability_in_cell(
    cell: str, confirmations: int = 0, audited: CellAudits = NO_AUDITS
) -> float:
    """How likely a hit in this cell is false for this team and entry.

    The cell's rate in the table is the prior, worth PRIOR_WEIGHT pairs. The team's own
    audits of its hits in this cell (caching/cell_audits.py) are added to it: after 20
    audits of which 4 found a false hit, a 3.5% cell is rated (0.7 + 4) / 40 = 12% for
    that team. Then the entry's own audits that agreed with a fresh answer each count as
    one more pair without a false hit, up to PRIOR_WEIGHT of them: at most halved, since
    agreements on some questions say little about every other one (an audit that disagreed
    takes the entry out of service instead: caching/semantic.py). An audit that agreed is
    counted in both, on the entry and in its team's cell: its entry's rate is the lower
    for it, bounded by that halving."""
    prior = false_hit_table().rate(cell)
    audits = max(audited.audited, 0)
    false = min(max(audited.false, 0), audits)
    rate = (prior * PRIOR_WEIGHT + false) / (PRIOR_WEIGHT + audits)
    counted = min(max(confirmations, 0), PRIOR_WEIGHT)
    return rate * PRIOR_WEIGHT / (PRIOR_WEIGHT + counted)


def scored(
    query: str,
    candidate: str,
    cosine: float,
    confirmations: int = 0,
    audited: Mapping[str, CellAudits] | None = None,
) -> tuple[float, str | None]:
    """How likely serving the candidate's reply for the query is a false hit (its cell's
    rate for this team and entry: probability_in_cell), and the cell; (1.0, None) below
    the floor cosine."""
    found = evidence_of(query, candidate, cosine)
    if found is None:
        return 1.0, None
    cell_audits = audited.get(found.cell, NO_AUDITS) if audited is not None else NO_AUDITS
    return probability_in_cell(found.cell, confirmations, cell_audits), found.cell


def false_hit_probability(
    query: str,
    candidate: str,
    cosine: float,
    confirmations: int = 0,
    audited: Mapping[str, CellAudits] | None = None,
) -> float:
    return scored(query, candidate, cosine, confirmations, audited)[0]
