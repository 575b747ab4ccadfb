"""Second opinion on a semantic cache match: reject the near-misses embeddings confuse.

A sentence embedding (all-MiniLM-L6-v2 here) pools meaning over the whole sentence, so one
small word that flips the answer barely moves the vector: "Cancel my subscription" and
"Don't cancel my subscription" score 0.967. The same goes for a changed number, date or
name, an opposite ("increase"/"decrease") or swapped roles ("USD to EUR"/"EUR to USD").
A cached answer to one is a wrong answer to the other, so a candidate above the cosine
threshold must also pass `verify`, which rejects the pair when the two texts differ in:

- negation: the number of negators (not, never, without, nobody, n't...);
- numbers: values ("5" == "five", "twice" == "two times", "two dozen" == 24), units
  (kg vs lb, tablespoon vs teaspoon) and which unit a number is in ("5 miles in km" vs
  "5 km in miles");
- dates: months, weekdays, years, times (5pm == 17:00), today/tomorrow, next/last week;
- entities: words capitalised mid-sentence or acronyms in either text, compared in lower
  case, so "France" matches "france" but not "Spain";
- antonyms: a listed opposite, or an un-/dis- prefix, on one side only, or a verb's
  opposite particles ("zoom in" vs "zoom out");
- roles: a word after from/to/than/by on one side bound differently on the other ("from
  Paris to London" vs "from London to Paris"), or names and numbers in swapped order not
  joined by and/or/vs ("Alice owes Bob" vs "Bob owes Alice"; a year and a name excepted).

It does not catch changed lower-case nouns ("ibuprofen" vs "paracetamol", an all-lower-case
"france" vs "spain"), role swaps without a direction word or name ("can dogs eat cat food"
vs "can cats eat dog food"), opposites not in its list ("legal" vs "illegal", "synonym"
vs "antonym", "greater than" vs "less than") or
symbols ("2 + 2" vs "2 - 2"). It also turns down some true paraphrases ("Go" vs "Golang",
"keep it" vs "without deleting it"): a false rejection costs a cache miss, a false
acceptance a wrong answer. Pure and stateless: nothing is cached between calls.
"""

from dataclasses import dataclass

from caching.verify.antonyms import opposed, particles_opposed
from caching.verify.features import Features, analyze
from caching.verify.roles import swapped


@dataclass(frozen=True)
class Verdict:
    accepted: bool
    reason: str  # "ok" or the failed check: negation, numbers, dates, entities, roles, antonyms


_OK = Verdict(True, "ok")
# Names and numbers compared pairwise for swapped roles; past this, a candidate is turned
# down (counted by reason) rather than spending the event loop on a pair check per pair.
MAX_ANCHORS = 32


def verify(query: str, candidate: str) -> Verdict:
    """Accept `candidate` (an earlier question whose answer is cached) for `query` only if
    the two agree on negation, numbers, dates, names, opposites and roles."""
    return verify_analyzed(analyze(query), analyze(candidate))


def verify_analyzed(q: Features, c: Features) -> Verdict:
    """verify() for texts already analyzed: a lookup checks up to 16 candidates against one
    question, and analyzing the two texts is most of each check's cost."""
    if q.negations != c.negations:
        return Verdict(False, "negation")
    # Numbers, dates and negations must be equal, each text's own: the semantic cache
    # partitions its vector sets by them (caching/semantic_keys.py, partition()).
    numbers = q.numbers
    # units only when both name some: a unit on one side is often the answer's ("how many
    # liters of water a day" asks what "how much water a day" does)
    if numbers != c.numbers or (q.units and c.units and q.units != c.units):
        return Verdict(False, "numbers")
    # the same units, bound to the number differently: "5 miles in km" / "5 km in miles"
    # (a conversion asked the other way round)
    if any(q.measures[n] != c.measures[n] for n in q.measures.keys() & c.measures.keys()):
        return Verdict(False, "numbers")
    if q.dates != c.dates:
        return Verdict(False, "dates")
    names = q.caps | c.caps  # capitalised on either side: "France" matches "france"
    entities = {w for w in q.seq if w in names}
    if entities != {w for w in c.seq if w in names}:
        return Verdict(False, "entities")
    if opposed(set(q.seq), set(c.seq)) or particles_opposed(q.seq, c.seq):
        return Verdict(False, "antonyms")
    if len(entities | numbers) > MAX_ANCHORS:
        return Verdict(False, "too_many_anchors")  # a list, not a question: not worth a check
    if swapped(q.seq, c.seq, entities | numbers):
        return Verdict(False, "roles")
    return _OK
