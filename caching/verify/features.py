"""A text as verify() compares it: lower-case words, likely names, dates, negations, units,
and which unit each number is in.

Every check works on these features rather than on the raw text, so the tokenising (dates
out first, numbers collapsed to values, capitals read as names only mid-sentence) happens
once per text and in one place.
"""

import itertools
import re
import unicodedata
from dataclasses import dataclass

from caching.verify.dates import CLOCK, clock_value, is_day, take_date
from caching.verify.negation import NEGATORS, count_negations
from caching.verify.quantities import AFTER_NUMBER, CARDINAL, UNIT, collapse_numbers

# ordinal | number | word | sentence end (a capital after it is no sign of a name). A word
# keeps a "++" or "#" right after it: C, C++ and C# are three languages (and C# a key).
_TOKEN = re.compile(
    r"(\d+)(?:st|nd|rd|th)\b|(\d+(?:,\d{3})*(?:\.\d+)?)"
    r"|([^\W\d_]+(?:'[^\W\d_]+)*(?:\+\+|#)?)|([.!?:;\n])"
)
_NOT_NAMES = NEGATORS | {"i", "i'm", "i'll", "i've", "i'd", "ok"}  # "I do NOT want"


@dataclass(frozen=True)
class Features:
    seq: list[str]  # lower-case words; numbers as "=value", ordinals as "#n"; dates removed
    caps: set[str]  # likely names
    dates: set[str]
    negations: int
    units: set[str]
    # each number's units, named right after it: "5 miles in km" -> {"=5": {"mile"}}
    measures: dict[str, set[str]]

    @property
    def numbers(self) -> set[str]:
        """Its numbers ("=5") and ordinals ("#3")."""
        return {w for w in self.seq if w[0] in "=#"}


def analyze(text: str) -> Features:
    """The features of one text (see Features)."""
    text = unicodedata.normalize("NFKC", text).replace("\u2019", "'").replace("\u2018", "'")
    dates: set[str] = set()

    def blank(m: re.Match[str]) -> str:  # out of the text, so "5pm" is not the number 5
        dates.add(clock_value(m))
        return " "

    words, caps = _scan(CLOCK.sub(blank, text), dates)
    seq = collapse_numbers(words)
    units = {UNIT[w] for w in seq if w in UNIT}
    measures: dict[str, set[str]] = {}
    for prev, w in itertools.pairwise(seq):
        unit = UNIT.get(w) or AFTER_NUMBER.get(w)
        if unit is not None and prev[0] in "=#":
            measures.setdefault(prev, set()).add(unit)
            units.add(unit)
    return Features(seq, caps, dates, count_negations(seq), units, measures)


def _scan(text: str, dates: set[str]) -> tuple[list[str], set[str]]:
    """The lower-case words less the dates (added to `dates`), and the likely names: words
    capitalised mid-sentence, and acronyms (SQL, macOS) anywhere."""
    words: list[str] = []
    caps: set[str] = set()
    start, month, inner, inner_caps = True, "", 0, 0  # month: one just seen, for "June 3"
    for ordinal, number, raw, stop in _TOKEN.findall(text):
        if stop or ordinal or number:
            if month and is_day(ordinal or number):
                dates.discard(month)
                dates.add(f"{month}d{int(ordinal or number)}")
            elif not stop:
                words.append(f"#{ordinal}" if ordinal else number.replace(",", ""))
            start, month = bool(stop), ""
            continue
        raw = raw.removesuffix("'s")
        low = raw.lower()
        date = take_date(raw, low, start, words)
        if date is not None:
            dates.add(date)
            start, month = False, date if date[0] == "m" and "d" not in date else ""
            continue
        words.append(low)
        inner += not start
        if raw[0].isupper() and low not in _NOT_NAMES and low not in CARDINAL:
            inner_caps += not start
            if not start or any(c.isupper() for c in raw[1:]) or low.endswith(("++", "#")):
                caps.add(low)  # a sentence's first word only if it cannot be a plain word
        start, month = False, ""
    if inner >= 4 and inner_caps >= 0.75 * inner:
        caps = set()  # Title Case Or SHOUTING: here capitals say nothing about names
    return words, caps
