"""Second opinion on a semantic cache match: reject the near-misses embeddings confuse.

A sentence embedding (all-MiniLM-L6-v2 here) pools meaning over the whole sentence, so one
small word that flips the answer barely moves the vector: "Cancel my subscription" and
"Don't cancel my subscription" score 0.967. The same goes for a changed number, date or
name, an opposite ("increase"/"decrease") or swapped roles ("USD to EUR"/"EUR to USD").
A cached answer to one is a wrong answer to the other, so a candidate above the cosine
threshold must also pass `verify`, which rejects the pair when the two texts differ in:

- negation: the number of negators (not, never, without, nobody, n't...);
- numbers: values ("5" == "five", "twice" == "two times", "two dozen" == 24) and units
  (kg vs lb, tablespoon vs teaspoon);
- dates: months, weekdays, years, times (5pm == 17:00), today/tomorrow, next/last week;
- entities: words capitalised mid-sentence or acronyms in either text, compared in lower
  case, so "France" matches "france" but not "Spain";
- antonyms: a listed opposite, or an un-/dis- prefix, on one side only;
- roles: a word after from/to/than/by on one side bound differently on the other ("from
  Paris to London" vs "from London to Paris"), or names/numbers in swapped order not
  joined by and/or/vs ("Alice owes Bob" vs "Bob owes Alice").

It does not catch changed lower-case nouns ("ibuprofen" vs "paracetamol", an all-lower-case
"france" vs "spain"), role swaps without a direction word or name ("can dogs eat cat food"
vs "can cats eat dog food"), opposites not in its list ("zoom in" vs "zoom out") or
symbols ("2 + 2" vs "2 - 2"). It also turns down some true paraphrases ("Go" vs "Golang",
"keep it" vs "without deleting it"): a false rejection costs a cache miss, a false
acceptance a wrong answer. Pure and stateless: nothing is cached between calls.
"""

import itertools
import re
import unicodedata
from dataclasses import dataclass


@dataclass(frozen=True)
class Verdict:
    accepted: bool
    reason: str  # "ok" or the failed check: negation, numbers, dates, entities, roles, antonyms


_OK = Verdict(True, "ok")
_MONTH_NAMES = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
]
_MONTHS = (
    {m: i for i, m in enumerate(_MONTH_NAMES, 1)}
    | {m[:3]: i for i, m in enumerate(_MONTH_NAMES, 1)}
    | {"sept": 9}
)
# Also ordinary words, so months only when capitalised ("May" not first: "May I...").
_CAPITALISED_MONTHS = frozenset({"may", "march", "sept"} | {m[:3] for m in _MONTH_NAMES})
_WEEKDAYS = [d + "day" for d in ("mon", "tues", "wednes", "thurs", "fri", "satur", "sun")]
_DATE_WORDS = (
    {
        w: w
        for w in [
            "today",
            "tonight",
            "tomorrow",
            "yesterday",
            "weekend",
            "morning",
            "afternoon",
            "evening",
            "night",
            "spring",
            "summer",
            "autumn",
            "winter",
            *_WEEKDAYS,
        ]
    }
    | {w + "s": w for w in [*_WEEKDAYS, "weekend", "morning", "evening"]}
    | {s + "time": s for s in ("spring", "summer", "winter")}
    | {"noon": "12:00", "midnight": "0:00"}
)
_SPANS = {"week", "weeks", "month", "months", "year", "years", "quarter"}  # after next/last
_RELATIVE = {
    "next": "next",
    "coming": "next",
    "last": "last",
    "past": "last",
    "previous": "last",
    "this": "",
}  # "this week" is "the week"
# Times and digit dates; "June 3" and "3rd of June" are joined at token level.
_CLOCK = re.compile(
    r"\b(?=[\dQq])(?:(?P<h>\d{1,2})(?::(?P<mi>\d\d))?\s*(?P<ap>[aApP])\.?[mM]\b\.?"
    r"|(?P<h24>\d{1,2}):(?P<mi24>\d\d)\b|(?P<ymd>\d{1,4}[/-]\d{1,2}[/-]\d{1,4})\b"
    # A year unless a lower-case word follows: "in 2018" is a year, "2000 meters" is not.
    r"|(?<![.,$])(?P<y>(?:19|20)\d\d)(?![\w.,%]|\s+(?!(?:and|or|to|vs)\b)[a-z])"
    r"|[Qq](?P<q>[1-4])\b)"
)
# ordinal | number | word | sentence end (a capital after it is no sign of a name)
_TOKEN = re.compile(
    r"(\d+)(?:st|nd|rd|th)\b|(\d+(?:,\d{3})*(?:\.\d+)?)"
    r"|([^\W\d_]+(?:'[^\W\d_]+)*)|([.!?:;\n])"
)
_NEGATORS = {
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
_NOT_NAMES = _NEGATORS | {"i", "i'm", "i'll", "i've", "i'd", "ok"}  # "I do NOT want"
_CARDINAL = {
    w: float(i)
    for i, w in enumerate(
        [
            "zero",
            "one",
            "two",
            "three",
            "four",
            "five",
            "six",
            "seven",
            "eight",
            "nine",
            "ten",
            "eleven",
            "twelve",
            "thirteen",
            "fourteen",
            "fifteen",
            "sixteen",
            "seventeen",
            "eighteen",
            "nineteen",
        ]
    )
} | {
    w: float(i * 10)
    for i, w in enumerate(
        ["twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"], 2
    )
}
_TIMES = {"hundred": 100.0, "dozen": 12.0}  # multiply what came before: "two dozen" = 24
_SCALE = {"thousand": 1e3, "million": 1e6, "billion": 1e9, "trillion": 1e12}
_NUMBER_WORDS = _CARDINAL.keys() | _TIMES.keys() | _SCALE.keys()
_ALONE = {
    "half": "=0.5",
    "quarter": "=0.25",
    "quarters": "=0.25",
    "twice": "=2",
    "double": "=2",
    "triple": "=3",
    "thrice": "=3",
    "single": "=1",
} | {
    w: f"#{i}"
    for i, w in enumerate(
        [
            "first",
            "second",
            "third",
            "fourth",
            "fifth",
            "sixth",
            "seventh",
            "eighth",
            "ninth",
            "tenth",
        ],
        1,
    )
}
# Units change the answer (20 kg vs 20 lb). These count anywhere; _AFTER_NUMBER words are
# too common for that and count only right after a number ("5 points", "two sentences").
_UNIT = {
    w: canon
    for canon, words in {
        "kg": "kg kgs kilo kilos kilogram kilograms",
        "g": "gram grams",
        "lb": "lb lbs pound pounds",
        "oz": "oz ounce ounces",
        "l": "liter liters litre litres",
        "cup": "cup cups",
        "ml": "ml milliliter milliliters millilitre millilitres",
        "pint": "pint pints",
        "tbsp": "tbsp tablespoon tablespoons",
        "tsp": "tsp teaspoon teaspoons",
        "gb": "gb gigabyte",
        "gallon": "gallon gallons",
        "km": "km kilometer kilometers kilometre kilometres",
        "mile": "mile miles",
        "m": "meter meters metre metres",
        "cm": "cm centimeter centimeters",
        "ft": "ft feet",
        "inch": "inch inches",
        "px": "px pixel pixels",
        "mb": "mb megabyte",
        "kcal": "kcal calorie calories",
    }.items()
    for w in words.split()
}
_AFTER_NUMBER = {
    w + s: w
    for w in [
        "point",
        "pt",
        "sentence",
        "paragraph",
        "page",
        "word",
        "minute",
        "hour",
        "day",
        "week",
        "month",
        "year",
    ]
    for s in ("", "s")
}
_ANTONYMS = (  # base forms; _inflect adds -s, -ed, -ing, -er, -est
    "increase/decrease reduce",
    "raise/lower",
    "more/less fewer",
    "most/least",
    "max maximum maximise maximize/min minimum minimise minimize",
    "buy bought purchase/sell sold",
    "enable/disable",
    "add append insert/remove delete",
    "create/delete destroy",
    "start begin/stop end finish",
    "open/close shut",
    "include/exclude",
    "before/after",
    "above/below",
    "up/down",
    "on/off",
    "import/export",
    "upload/download",
    "upgrade/downgrade",
    "ascending asc/descending desc",
    "old/new",
    "early/late",
    "fast quick/slow",
    "cheap inexpensive/expensive",
    "gain win/lose lost",
    "encrypt/decrypt",
    "encode/decode",
    "compress/decompress",
    "accept approve/decline reject refuse",
    "allow permit/deny block forbid",
    "pass succeed success/fail failure",
    "true/false",
    "positive/negative",
    "high/low",
    "big large/small little",
    "long tall/short",
    "hot warm/cold",
    "light/dark",
    "good/bad",
    "better/worse",
    "best/worst",
    "easy/hard difficult",
    "love/hate",
    "show/hide",
    "push/pull",
    "send/receive",
    "deposit/withdraw",
    "credit/debit",
    "profit/loss",
    "public/private",
    "internal/external",
    "sync synchronous/async asynchronous",
    "connect/disconnect",
    "valid/invalid",
    "correct/incorrect",
    "possible/impossible",
    "male men/female women",
    "north/south",
    "east/west",
    "remember/forget",
    "add plus/subtract minus",
    "hire/fire",
    "input/output",
)
_DIRECTION = {
    "from": "from",
    "to": "to",
    "into": "to",
    "onto": "to",
    "towards": "to",
    "toward": "to",
    "than": "than",
    "by": "by",
    "over": "over",
}
_FILLER = {
    "the",
    "a",
    "an",
    "my",
    "your",
    "his",
    "her",
    "its",
    "our",
    "their",
    "this",
    "that",
    "these",
    "those",
    "some",
}
_SYMMETRIC = {"and", "or", "vs", "versus", "v", "nor", "between", "plus", "times"}


def _inflect(word: str) -> set[str]:
    """Regular forms of a base word: stop -> stops, stopped, stopping; easy -> easier."""
    if len(word) < 3:
        return {word}
    stem = word[:-1] if word.endswith("e") else word
    if re.fullmatch(r"[^aeiou]*[aeiou][bdgmnprt]", word):  # stop -> stopp-, big -> bigg-
        stem = word + word[-1]
    forms = {word, word + "s", word + "es", stem + "ed", stem + "ing", stem + "er", stem + "est"}
    if word.endswith("y"):
        forms |= {word[:-1] + "ier", word[:-1] + "iest", word[:-1] + "ies"}
    return forms


_OPPOSITE_OF: dict[str, list[tuple[int, int]]] = {}  # word -> [(pair number, side 1 or 2)]
for _number, _pair in enumerate(_ANTONYMS):
    for _bit, _side in enumerate(_pair.split("/"), 1):
        for _form in {f for w in _side.split() for f in _inflect(w)}:
            _OPPOSITE_OF.setdefault(_form, []).append((_number, _bit))


@dataclass(frozen=True)
class _Features:
    seq: list[str]  # lower-case words; numbers as "=value", ordinals as "#n"; dates removed
    caps: set[str]  # likely names
    dates: set[str]
    negations: int
    units: set[str]


def _clock_value(m: re.Match[str]) -> str:
    """One string per time or digit date: 5pm and 17:00 are both "17:00"."""
    if m["h"]:
        return f"{int(m['h']) % 12 + (12 if m['ap'] in 'pP' else 0)}:{m['mi'] or '00'}"
    if m["h24"]:
        return f"{int(m['h24'])}:{m['mi24']}"
    return m["ymd"] or m["y"] or "q" + m["q"]


def _is_day(word: str) -> bool:  # "3" or "#3" (3rd): a day of the month next to a month
    return word.lstrip("#").isdigit() and 1 <= int(word.lstrip("#")) <= 31


def _analyze(text: str) -> _Features:
    text = unicodedata.normalize("NFKC", text).replace("\u2019", "'").replace("\u2018", "'")
    dates: set[str] = set()

    def blank(m: re.Match[str]) -> str:  # out of the text, so "5pm" is not the number 5
        dates.add(_clock_value(m))
        return " "

    words, caps = _scan(_CLOCK.sub(blank, text), dates)
    seq = _collapse_numbers(words)
    units = {_UNIT[w] for w in seq if w in _UNIT}
    units |= {
        _AFTER_NUMBER[w]
        for prev, w in itertools.pairwise(seq)
        if w in _AFTER_NUMBER and prev[0] in "=#"
    }
    negations = sum(1 for w in seq if w in _NEGATORS or w.endswith("n't"))
    return _Features(seq, caps, dates, negations, units)


def _scan(text: str, dates: set[str]) -> tuple[list[str], set[str]]:
    """The lower-case words less the dates (added to `dates`), and the likely names: words
    capitalised mid-sentence, and acronyms (SQL, macOS) anywhere."""
    words: list[str] = []
    caps: set[str] = set()
    start, month, inner, inner_caps = True, "", 0, 0  # month: one just seen, for "June 3"
    for ordinal, number, raw, stop in _TOKEN.findall(text):
        if stop or ordinal or number:
            if month and _is_day(ordinal or number):
                dates.discard(month)
                dates.add(f"{month}d{int(ordinal or number)}")
            elif not stop:
                words.append(f"#{ordinal}" if ordinal else number.replace(",", ""))
            start, month = bool(stop), ""
            continue
        raw = raw.removesuffix("'s")
        low = raw.lower()
        date = _take_date(raw, low, start, words)
        if date is not None:
            dates.add(date)
            start, month = False, date if date[0] == "m" and "d" not in date else ""
            continue
        words.append(low)
        inner += not start
        if raw[0].isupper() and low not in _NOT_NAMES and low not in _CARDINAL:
            inner_caps += not start
            if not start or any(c.isupper() for c in raw[1:]):
                caps.add(low)
        start, month = False, ""
    if inner >= 4 and inner_caps >= 0.75 * inner:
        caps = set()  # Title Case Or SHOUTING: here capitals say nothing about names
    return words, caps


def _take_date(raw: str, low: str, start: bool, words: list[str]) -> str | None:
    """The date `low` names, or None; words before it that belong to it ("next", "3rd of")
    are taken off `words`."""
    date = _DATE_WORDS.get(low)
    if low in _MONTHS and (
        low not in _CAPITALISED_MONTHS or (raw[0].isupper() and not (start and low == "may"))
    ):
        date = f"m{_MONTHS[low]}"
    relative = words[-1] if words and words[-1] in _RELATIVE else None
    if date is None and relative is not None and low in _SPANS:
        date = low.rstrip("s")  # "week" alone is a word, "next week" a date
    if date is None:
        return None
    if relative is not None:  # "next week", "last Monday", "this weekend"
        return f"{_RELATIVE[words.pop()]} {date}".lstrip()
    if date[0] == "m":  # "3 June", "3rd of June"
        k = 2 if words[-1:] == ["of"] else 1
        if len(words) >= k and _is_day(words[-k]):
            date = f"{date}d{int(words[-k].lstrip('#'))}"
            del words[-k:]
    return date


def _number_word(words: list[str], j: int, first: bool) -> bool:
    """Whether words[j] continues a number: "twenty five", "five hundred and two"."""
    w, prev = words[j], words[j - 1] if j else ""
    if w in _TIMES or w in _SCALE:
        return True
    if w == "and":  # only between a scale and a number: "hundred and five", not "2 and 3"
        following = words[j + 1] if j + 1 < len(words) else ""
        return (prev in _TIMES or prev in _SCALE) and following in _CARDINAL
    if prev == "and" and j >= 2:
        prev = words[j - 2]
    if w not in _CARDINAL:
        return first and w[0].isdigit()
    return (
        first
        or prev in _TIMES
        or prev in _SCALE
        or (_CARDINAL.get(prev, 0) >= 20 and _CARDINAL[w] < 10)
    )


def _collapse_numbers(words: list[str]) -> list[str]:
    """Each run of number words or digits becomes one "=value" ("two dozen" -> "=24").
    "one" alone stays a word: it mostly means "a" ("sort by one key")."""
    out: list[str] = []
    i = 0
    while i < len(words):
        j, total, current = i, 0.0, 0.0
        if words[i] in _NUMBER_WORDS or words[i][0].isdigit():
            while j < len(words) and _number_word(words, j, j == i):
                w = words[j]
                if w in _TIMES:
                    current = (current or 1.0) * _TIMES[w]
                elif w in _SCALE:
                    total, current = total + (current or 1.0) * _SCALE[w], 0.0
                elif w != "and":
                    current += _CARDINAL[w] if w in _CARDINAL else float(w)
                j += 1
        if j == i or (j == i + 1 and words[i] == "one"):
            out.append(_ALONE.get(words[i], words[i]))
            j = i + 1
        else:
            out.append(f"={total + current:.10g}")
        i = j
    return out


def _opposed(q: set[str], c: set[str]) -> bool:
    """One side has a word whose listed opposite is on the other side only."""
    sides: list[dict[int, int]] = [{}, {}]  # pair number -> sides present (bits)
    for words, found in zip((q, c), sides, strict=True):
        for w in words:
            for number, bit in _OPPOSITE_OF.get(w, ()):
                found[number] = found.get(number, 0) | bit
    if any(sides[0][n] ^ sides[1][n] == 3 for n in sides[0].keys() & sides[1].keys()):
        return True
    for x, y in ((q, c), (c, q)):  # lock/unlock, like/dislike: a prefix on one side only
        for w in x - y:
            for prefix in ("un", "dis"):
                stem = w[len(prefix) :]
                if w.startswith(prefix) and len(stem) >= 4 and stem in y and stem not in x:
                    return True
    return False


def _bindings(seq: list[str]) -> dict[str, set[str]]:
    """The word each direction word points at: "from my laptop to the server" ->
    {laptop: {from}, server: {to}}."""
    bound: dict[str, set[str]] = {}
    for i, w in enumerate(seq):
        if w in _DIRECTION:
            head = next((h for h in seq[i + 1 : i + 4] if h not in _FILLER), None)
            if head is not None:
                bound.setdefault(head, set()).add(_DIRECTION[w])
    return bound


def _reversed(q: list[str], c: list[str], x: str, y: str) -> bool:
    return (q.index(x) < q.index(y)) != (c.index(x) < c.index(y))


def _symmetric(seq: list[str], x: str, y: str, anchors: set[str]) -> bool:
    """x and y joined by "and", "vs", "between"...: their order carries no role."""
    lo, hi = sorted((seq.index(x), seq.index(y)))
    return all(w in _SYMMETRIC for w in seq[lo + 1 : hi] if w not in anchors and w not in _FILLER)


def _swapped(q: list[str], c: list[str], anchors: set[str]) -> bool:
    bq, bc = _bindings(q), _bindings(c)
    if any(not bq[w] & bc[w] for w in bq.keys() & bc.keys()):
        return True  # "from Paris" on one side, "to Paris" on the other
    for direction in {d for ds in bq.values() for d in ds}:  # "X to Y" vs "Y to X"
        only_q = [w for w, ds in bq.items() if direction in ds and direction not in bc.get(w, ())]
        only_c = [w for w, ds in bc.items() if direction in ds and direction not in bq.get(w, ())]
        if any(x in c and y in q and _reversed(q, c, x, y) for x in only_q for y in only_c):
            return True
    # names and numbers in the opposite order and not joined symmetrically: "Alice owes Bob"
    shared = sorted(a for a in anchors if a in q and a in c)
    return any(
        _reversed(q, c, x, y)
        and not _symmetric(q, x, y, anchors)
        and not _symmetric(c, x, y, anchors)
        for i, x in enumerate(shared)
        for y in shared[i + 1 :]
    )


def verify(query: str, candidate: str) -> Verdict:
    """Accept `candidate` (an earlier question whose answer is cached) for `query` only if
    the two agree on negation, numbers, dates, names, opposites and roles."""
    q, c = _analyze(query), _analyze(candidate)
    if q.negations != c.negations:
        return Verdict(False, "negation")
    numbers = {w for w in q.seq if w[0] in "=#"}
    # units only when both name some: a unit on one side is often the answer's ("how many
    # liters of water a day" asks what "how much water a day" does)
    if numbers != {w for w in c.seq if w[0] in "=#"} or (
        q.units and c.units and q.units != c.units
    ):
        return Verdict(False, "numbers")
    if q.dates != c.dates:
        return Verdict(False, "dates")
    names = q.caps | c.caps  # capitalised on either side: "France" matches "france"
    entities = {w for w in q.seq if w in names}
    if entities != {w for w in c.seq if w in names}:
        return Verdict(False, "entities")
    if _opposed(set(q.seq), set(c.seq)):
        return Verdict(False, "antonyms")
    if _swapped(q.seq, c.seq, entities | numbers):
        return Verdict(False, "roles")
    return _OK
